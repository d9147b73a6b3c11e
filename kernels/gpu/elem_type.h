// Element types and small shape descriptors shared by the GPU launchers (.cu,
// compiled by nvcc, which sees no Strata headers) and their OpKernel glue
// (.cc). Plain C++ only: this header is included on both sides.
//
//   LaunchUnary(UnaryFn::kExp, ElemType::kFloat, x, y, n, stream);
//
// Thread-safety and ownership: plain values.
#ifndef STRATA_KERNELS_GPU_ELEM_TYPE_H_
#define STRATA_KERNELS_GPU_ELEM_TYPE_H_

#include <cstdint>

namespace strata {
namespace gpu {

// The dtypes GPU kernels handle. kHalf is IEEE fp16 (__half), kBFloat16 is
// __nv_bfloat16; both are 2-byte patterns in a Tensor.
enum class ElemType : int { kFloat, kDouble, kHalf, kBFloat16, kInt32, kInt64, kBool };

// Broadcast ranks beyond this are rejected (after collapsing, training graphs
// need at most 4).
inline constexpr int kMaxDims = 8;

// An N-d strided view of an operand over a collapsed output shape: element
// at output coordinates c is at offset sum(c[i] * strides[i]); a broadcast
// dim has stride 0.
struct StridedShape {
  int rank = 1;
  int64_t dims[kMaxDims] = {0};
  int64_t x_strides[kMaxDims] = {0};
  int64_t y_strides[kMaxDims] = {0};
};

}  // namespace gpu
}  // namespace strata

#endif  // STRATA_KERNELS_GPU_ELEM_TYPE_H_
