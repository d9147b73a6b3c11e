// Helpers private to the nn CPU kernels (nn_kernels.cc, softmax_kernels.cc,
// conv_kernels.cc, pooling_kernels.cc): when to use the intra-op pool, and
// unaligned Eigen views for sub-ranges of a buffer.
//
//   // Small tensors run inline: handing ~1K floats to a pool costs more than
//   // computing them.
//   AssignMaybeParallel(ctx, n, Flat<float>(*out), Flat<float>(in).tanh());
//   ParallelForRows(ctx, rows, /*cost_per_row=*/cols, [&](int64_t b, int64_t e) { ... });
//
// Thread-safety: stateless functions; the callbacks given to ParallelForRows
// run concurrently on disjoint ranges and must not write shared state.
#ifndef STRATA_KERNELS_CPU_NN_KERNEL_HELPERS_H_
#define STRATA_KERNELS_CPU_NN_KERNEL_HELPERS_H_

#include <cstdint>
#include <functional>

#include "kernels/eigen_views.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace nn_internal {

// Below this many elements a cheap kernel runs on the calling thread.
inline constexpr int64_t kParallelThreshold = 32 * 1024;

// `lhs = rhs`, on the device's pool only when `num_elements` is large.
template <typename Lhs, typename Rhs>
void AssignMaybeParallel(const OpKernelContext& ctx, int64_t num_elements, Lhs lhs,
                         const Rhs& rhs) {
  if (num_elements < kParallelThreshold) {
    lhs = rhs;
  } else {
    lhs.device(ctx.eigen_cpu_device()) = rhs;
  }
}

// Calls fn(begin, end) over [0, n) in shards. `cost_per_unit` is the rough
// number of elements one unit touches; the whole range runs inline when the
// total is below kParallelThreshold.
inline void ParallelForRows(const OpKernelContext& ctx, int64_t n, int64_t cost_per_unit,
                            const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (n == 1 || n * cost_per_unit < kParallelThreshold) {
    fn(0, n);
    return;
  }
  // Eigen's cost model: bytes in, bytes out, cycles; a few cycles per element.
  const double bytes = static_cast<double>(cost_per_unit) * 4;
  ctx.eigen_cpu_device().parallelFor(
      n, Eigen::TensorOpCost(bytes, bytes, 4.0 * static_cast<double>(cost_per_unit)),
      [&fn](Eigen::Index b, Eigen::Index e) { fn(b, e); });
}

// Row-major matrix views that do not assume alignment (sub-ranges of a
// tensor's buffer start anywhere).
template <typename T>
using MatrixMap =
    Eigen::TensorMap<Eigen::Tensor<T, 2, Eigen::RowMajor, Eigen::DenseIndex>, Eigen::Unaligned>;
template <typename T>
using ConstMatrixMap = Eigen::TensorMap<Eigen::Tensor<const T, 2, Eigen::RowMajor, Eigen::DenseIndex>,
                                        Eigen::Unaligned>;

}  // namespace nn_internal
}  // namespace strata

#endif  // STRATA_KERNELS_CPU_NN_KERNEL_HELPERS_H_
