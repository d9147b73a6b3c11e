// GatherV2 copies rows in the widest unit the row size allows (8, 4, 2 or
// 1 bytes), one thread per unit, a grid-stride loop; UnsortedSegmentSum
// zeroes the output and adds each element in with atomicAdd.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/gpu/gather_gpu.h"

namespace strata {
namespace gpu {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 8 ? b : 65535 * 8);
}

template <typename Index>
__device__ __forceinline__ int64_t IndexAt(const void* idx, int64_t i) {
  return static_cast<int64_t>(static_cast<const Index*>(idx)[i]);
}

template <typename Unit, typename Index>
__global__ void GatherKernel(const Unit* params, const void* idx, Unit* out, int64_t outer, int64_t n,
                             int64_t m, int64_t units) {
  const int64_t total = outer * m * units;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t u = k % units;
    const int64_t i = (k / units) % m;
    const int64_t o = k / (units * m);
    const int64_t j = IndexAt<Index>(idx, i);
    out[k] = (j >= 0 && j < n) ? params[(o * n + j) * units + u] : Unit(0);
  }
}

template <typename Unit>
cudaError_t Gather(const void* params, const void* idx, bool int64, void* out, int64_t outer, int64_t n,
                   int64_t m, int64_t units, cudaStream_t s) {
  const int64_t total = outer * m * units;
  if (total == 0) return cudaSuccess;
  if (int64) {
    GatherKernel<Unit, int64_t><<<Blocks(total), kThreads, 0, s>>>(static_cast<const Unit*>(params), idx,
                                                                    static_cast<Unit*>(out), outer, n, m, units);
  } else {
    GatherKernel<Unit, int32_t><<<Blocks(total), kThreads, 0, s>>>(static_cast<const Unit*>(params), idx,
                                                                    static_cast<Unit*>(out), outer, n, m, units);
  }
  return cudaGetLastError();
}

template <typename T, typename Index>
__global__ void SegmentSumKernel(const T* data, const void* ids, T* out, int64_t rows, int64_t inner,
                                 int64_t segments) {
  const int64_t total = rows * inner;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = k / inner;
    const int64_t seg = IndexAt<Index>(ids, r);
    if (seg >= 0 && seg < segments) atomicAdd(out + seg * inner + (k - r * inner), data[k]);
  }
}

template <typename T>
cudaError_t SegmentSum(const void* data, const void* ids, bool int64, void* out, int64_t rows, int64_t inner,
                       int64_t segments, cudaStream_t s) {
  cudaError_t e = cudaMemsetAsync(out, 0, static_cast<size_t>(segments * inner) * sizeof(T), s);
  if (e != cudaSuccess || rows * inner == 0) return e;
  const int64_t total = rows * inner;
  if (int64) {
    SegmentSumKernel<T, int64_t><<<Blocks(total), kThreads, 0, s>>>(static_cast<const T*>(data), ids,
                                                                     static_cast<T*>(out), rows, inner, segments);
  } else {
    SegmentSumKernel<T, int32_t><<<Blocks(total), kThreads, 0, s>>>(static_cast<const T*>(data), ids,
                                                                     static_cast<T*>(out), rows, inner, segments);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGather(const void* params, const void* indices, bool indices_int64, void* out,
                         int64_t outer, int64_t n, int64_t m, int64_t row_bytes, cudaStream_t s) {
  if (row_bytes % 8 == 0) return Gather<uint64_t>(params, indices, indices_int64, out, outer, n, m, row_bytes / 8, s);
  if (row_bytes % 4 == 0) return Gather<uint32_t>(params, indices, indices_int64, out, outer, n, m, row_bytes / 4, s);
  if (row_bytes % 2 == 0) return Gather<uint16_t>(params, indices, indices_int64, out, outer, n, m, row_bytes / 2, s);
  return Gather<uint8_t>(params, indices, indices_int64, out, outer, n, m, row_bytes, s);
}

cudaError_t LaunchUnsortedSegmentSum(ElemType t, const void* data, const void* ids, bool ids_int64, void* out,
                                     int64_t rows, int64_t inner, int64_t segments, cudaStream_t s) {
  switch (t) {
    case ElemType::kFloat: return SegmentSum<float>(data, ids, ids_int64, out, rows, inner, segments, s);
    case ElemType::kDouble: return SegmentSum<double>(data, ids, ids_int64, out, rows, inner, segments, s);
    case ElemType::kHalf: return SegmentSum<__half>(data, ids, ids_int64, out, rows, inner, segments, s);
    case ElemType::kBFloat16:
      return SegmentSum<__nv_bfloat16>(data, ids, ids_int64, out, rows, inner, segments, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace gpu
}  // namespace strata
