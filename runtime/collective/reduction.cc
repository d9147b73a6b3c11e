#include "runtime/collective/reduction.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"

namespace strata {

namespace {

// Plain loops over __restrict pointers: the compiler vectorizes them, and a
// chunk is merged exactly once per peer, so memory bandwidth bounds them.
template <typename T, typename F>
void Merge(T* __restrict acc, const T* __restrict in, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) acc[i] = f(acc[i], in[i]);
}

template <typename T>
void MergeTyped(MergeOp op, T* acc, const T* in, int64_t n) {
  switch (op) {
    case MergeOp::kAdd: return Merge(acc, in, n, [](T a, T b) { return a + b; });
    case MergeOp::kMul: return Merge(acc, in, n, [](T a, T b) { return a * b; });
    case MergeOp::kMin: return Merge(acc, in, n, [](T a, T b) { return std::min(a, b); });
    case MergeOp::kMax: return Merge(acc, in, n, [](T a, T b) { return std::max(a, b); });
  }
}

template <typename T>
void DivideTyped(T* acc, int64_t n, int64_t divisor) {
  const T d = static_cast<T>(divisor);
  for (int64_t i = 0; i < n; ++i) acc[i] /= d;
}

// out[i] = f(a[i], b[i]): the first merge writes the block without reading it.
template <typename T, typename F>
void Merge2(T* __restrict out, const T* __restrict a, const T* __restrict b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

template <typename T, typename F>
void ReduceBlocks(F f, bool div, const T* const* in, int k, int64_t begin, int64_t end, T* out,
                  int64_t divisor) {
  // 8 KiB of output per block: it stays in L1 across the k merges, so memory
  // sees each input once and the output once.
  constexpr int64_t kBlock = 8192 / sizeof(T);
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t n = std::min(kBlock, end - b);
    T* o = out + b;
    if (k == 1) {
      std::copy(in[0] + b, in[0] + b + n, o);
    } else {
      Merge2(o, in[0] + b, in[1] + b, n, f);
      for (int j = 2; j < k; ++j) Merge(o, in[j] + b, n, f);
    }
    if (div) DivideTyped(o, n, divisor);
  }
}

template <typename T>
void ReduceInputsTyped(MergeOp op, bool div, const void* const* inputs, int k, int64_t begin,
                       int64_t end, void* out, int64_t divisor) {
  // Up to 64 inputs on the stack; more (never in one process) on the heap.
  const T* stack[64];
  std::vector<const T*> heap;
  const T** in = stack;
  if (k > 64) {
    heap.resize(k);
    in = heap.data();
  }
  for (int j = 0; j < k; ++j) in[j] = static_cast<const T*>(inputs[j]);
  T* o = static_cast<T*>(out);
  switch (op) {
    case MergeOp::kAdd: return ReduceBlocks(std::plus<T>(), div, in, k, begin, end, o, divisor);
    case MergeOp::kMul: return ReduceBlocks(std::multiplies<T>(), div, in, k, begin, end, o, divisor);
    case MergeOp::kMin:
      return ReduceBlocks([](T a, T b) { return std::min(a, b); }, div, in, k, begin, end, o, divisor);
    case MergeOp::kMax:
      return ReduceBlocks([](T a, T b) { return std::max(a, b); }, div, in, k, begin, end, o, divisor);
  }
}

}  // namespace

void ReduceInputs(MergeOp op, FinalOp final_op, DataType dtype, const void* const* inputs,
                  int num_inputs, int64_t begin, int64_t end, void* out, int64_t divisor) {
  if (begin >= end || num_inputs < 1) return;
  const bool div = final_op == FinalOp::kDiv;
  switch (dtype) {
    case DT_FLOAT: return ReduceInputsTyped<float>(op, div, inputs, num_inputs, begin, end, out, divisor);
    case DT_DOUBLE: return ReduceInputsTyped<double>(op, div, inputs, num_inputs, begin, end, out, divisor);
    case DT_INT32: return ReduceInputsTyped<int32_t>(op, div, inputs, num_inputs, begin, end, out, divisor);
    case DT_INT64: return ReduceInputsTyped<int64_t>(op, div, inputs, num_inputs, begin, end, out, divisor);
    default: return;  // excluded by CheckReducible
  }
}

absl::Status CheckReducible(DataType dtype) {
  switch (dtype) {
    case DT_FLOAT:
    case DT_DOUBLE:
    case DT_INT32:
    case DT_INT64:
      return absl::OkStatus();
    default:
      return absl::UnimplementedError(absl::StrCat(
          "collective reduction of ", DataTypeString(dtype),
          " is not supported on CPU (supported: float, double, int32, int64)"));
  }
}

void MergeInto(MergeOp op, DataType dtype, void* acc, const void* in, int64_t n) {
  switch (dtype) {
    case DT_FLOAT: return MergeTyped(op, static_cast<float*>(acc), static_cast<const float*>(in), n);
    case DT_DOUBLE: return MergeTyped(op, static_cast<double*>(acc), static_cast<const double*>(in), n);
    case DT_INT32: return MergeTyped(op, static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), n);
    case DT_INT64: return MergeTyped(op, static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), n);
    default: return;  // excluded by CheckReducible
  }
}

void DivideBy(DataType dtype, void* acc, int64_t n, int64_t divisor) {
  switch (dtype) {
    case DT_FLOAT: return DivideTyped(static_cast<float*>(acc), n, divisor);
    case DT_DOUBLE: return DivideTyped(static_cast<double*>(acc), n, divisor);
    case DT_INT32: return DivideTyped(static_cast<int32_t*>(acc), n, divisor);
    case DT_INT64: return DivideTyped(static_cast<int64_t*>(acc), n, divisor);
    default: return;
  }
}

}  // namespace strata
