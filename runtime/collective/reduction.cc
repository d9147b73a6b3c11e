#include "runtime/collective/reduction.h"

#include <algorithm>

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

}  // namespace

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
