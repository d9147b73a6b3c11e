// CPU kernels for Sum, Mean, Max, Min, Prod and ArgMax.
//
// A reduction over any set of axes is brought to a few shapes Eigen reduces
// fast: size-1 dims are dropped and adjacent dims with the same fate (kept or
// reduced) are merged, giving alternating groups. Then the last reduced group
// is reduced as [outer, r, inner] -> [outer, inner], which drops to a full
// reduction, a row reduction ([outer, r], contiguous) or a column reduction
// ([r, inner], vectorised over inner) when outer or inner is 1; repeating
// until no reduced group is left handles patterns like [R, K, R, K]. Mean is a
// Sum divided by the count afterwards, so integer means of empty sets give 0
// (as TensorFlow does) instead of dividing by zero.

#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/math_ops.h"
#include "kernels/cpu/cwise.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

enum class Reduce { kSum, kMean, kMax, kMin, kProd };

// Reads an int16/int32/int64 index tensor.
std::vector<int64_t> IndexValues(const Tensor& t) {
  std::vector<int64_t> v(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    switch (t.dtype()) {
      case DT_INT16: v[i] = t.data<int16_t>()[i]; break;
      case DT_INT32: v[i] = t.data<int32_t>()[i]; break;
      default: v[i] = t.data<int64_t>()[i]; break;
    }
  }
  return v;
}

template <typename T, Reduce K>
struct Reducer {
  template <typename In, typename Dims>
  static auto Apply(const In& in, const Dims& dims) {
    if constexpr (K == Reduce::kMax) {
      return in.maximum(dims);
    } else if constexpr (K == Reduce::kMin) {
      return in.minimum(dims);
    } else if constexpr (K == Reduce::kProd) {
      return in.prod(dims);
    } else {
      return in.sum(dims);
    }
  }
};

// dst[o, i] = reduce_j src[o, j, i].
template <typename T, Reduce K>
void Reduce3(const OpKernelContext& ctx, const T* src, int64_t outer, int64_t r, int64_t inner,
             T* dst) {
  using R = Reducer<T, K>;
  const int64_t n = outer * r * inner;
  if constexpr (K == Reduce::kSum) {
    if (outer == 1 && inner > 1) {
      // [r, inner] -> [inner]: rows added in order (Eigen's reduction over
      // the outer dim measured several times slower).
      cwise::ColumnSum(ctx, src, r, inner, dst);
      return;
    }
  }
  using Idx = Eigen::DenseIndex;
  if (outer == 1 && inner == 1) {
    ConstTensorMapT<T, 1> in(src, r);
    TensorMapT<T, 0> out(dst);
    cwise::Assign(ctx, n, out, R::Apply(in, Eigen::array<Idx, 1>{0}));
  } else if (inner == 1) {
    ConstTensorMapT<T, 2> in(src, outer, r);
    TensorMapT<T, 1> out(dst, outer);
    cwise::Assign(ctx, n, out, R::Apply(in, Eigen::array<Idx, 1>{1}));
  } else if (outer == 1) {
    ConstTensorMapT<T, 2> in(src, r, inner);
    TensorMapT<T, 1> out(dst, inner);
    cwise::Assign(ctx, n, out, R::Apply(in, Eigen::array<Idx, 1>{0}));
  } else {
    ConstTensorMapT<T, 3> in(src, outer, r, inner);
    TensorMapT<T, 2> out(dst, outer, inner);
    cwise::Assign(ctx, n, out, R::Apply(in, Eigen::array<Idx, 1>{1}));
  }
}

template <typename T, Reduce K>
class ReductionKernel : public OpKernel {
 public:
  explicit ReductionKernel(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("keep_dims", &keep_dims_));
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Tensor& axes = ctx.input(1);
    if (axes.dims() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reduction_indices must be a scalar or vector, but has shape ", axes.shape().DebugString()));
    }
    const int rank = in.dims();
    absl::InlinedVector<bool, 8> reduce(rank, false);
    for (int64_t a : IndexValues(axes)) {
      if (a < -rank || a >= rank) {
        return absl::InvalidArgumentError(absl::StrCat("Invalid reduction dimension ", a,
                                                       " for input with ", rank, " dimensions"));
      }
      reduce[a < 0 ? a + rank : a] = true;
    }
    DimVector out_dims;
    // Groups of adjacent dims with the same fate; size-1 dims are skipped.
    DimVector group_size;
    absl::InlinedVector<bool, 8> group_reduced;
    int64_t count = 1;  // elements reduced into each output element
    for (int d = 0; d < rank; ++d) {
      const int64_t s = in.dim_size(d);
      if (reduce[d]) {
        count *= s;
        if (keep_dims_) out_dims.push_back(1);
      } else {
        out_dims.push_back(s);
      }
      if (s == 1) continue;
      if (!group_size.empty() && group_reduced.back() == reduce[d]) {
        group_size.back() *= s;
      } else {
        group_size.push_back(s);
        group_reduced.push_back(reduce[d]);
      }
    }
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(out_dims));
    int num_reduced = 0;
    for (bool r : group_reduced) num_reduced += r;
    if (num_reduced == 0 && in.NumElements() > 0) {
      // Nothing to reduce (only size-1 or no axes): the input, reshaped.
      STRATA_ASSIGN_OR_RETURN(Tensor same, in.Reshaped(out_shape));
      ctx.set_output(0, std::move(same));
      return absl::OkStatus();
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    if (out_shape.num_elements() == 0) return absl::OkStatus();
    constexpr Reduce kPass = K == Reduce::kMean ? Reduce::kSum : K;
    if (in.NumElements() == 0) {
      // Reducing an empty set: the reducer's identity (TensorFlow's values).
      T init = K == Reduce::kProd ? 1 : 0;
      if constexpr (K == Reduce::kMax) init = Eigen::NumTraits<T>::lowest();
      if constexpr (K == Reduce::kMin) init = Eigen::NumTraits<T>::highest();
      if constexpr (K == Reduce::kMean && !std::is_integral_v<T>) {
        init = std::numeric_limits<T>::quiet_NaN();
      }
      Flat<T>(*out).setConstant(init);
      return absl::OkStatus();
    }
    const T* src = in.data<T>();
    Tensor temp;  // holds an intermediate result between passes
    while (num_reduced > 0) {
      int g = static_cast<int>(group_size.size()) - 1;
      while (!group_reduced[g]) --g;
      int64_t outer = 1, inner = 1;
      for (int i = 0; i < g; ++i) outer *= group_size[i];
      for (int i = g + 1; i < static_cast<int>(group_size.size()); ++i) inner *= group_size[i];
      T* dst;
      Tensor next;
      if (--num_reduced == 0) {
        dst = out->data<T>();
      } else {
        STRATA_RETURN_IF_ERROR(
            ctx.allocate_temp(DataTypeToEnum<T>::value, TensorShape{outer * inner}, &next));
        dst = next.data<T>();
      }
      Reduce3<T, kPass>(ctx, src, outer, group_size[g], inner, dst);
      group_size.erase(group_size.begin() + g);
      group_reduced.erase(group_reduced.begin() + g);
      temp = std::move(next);
      src = temp.IsInitialized() ? temp.data<T>() : src;
    }
    if constexpr (K == Reduce::kMean) {
      if (count > 0) {
        auto o = Flat<T>(*out);
        cwise::Assign(ctx, o.size(), o, o / static_cast<T>(count));
      }
    }
    return absl::OkStatus();
  }

 private:
  bool keep_dims_ = false;
};

template <typename T, typename Tout>
class ArgMaxKernel : public OpKernel {
 public:
  explicit ArgMaxKernel(OpKernelConstruction& c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Tensor& dim_t = ctx.input(1);
    if (dim_t.NumElements() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("dimension must be a scalar, but has shape ",
                                                     dim_t.shape().DebugString()));
    }
    const int rank = in.dims();
    int64_t axis = IndexValues(dim_t)[0];
    if (rank == 0 || axis < -rank || axis >= rank) {
      return absl::InvalidArgumentError(absl::StrCat("Expected dimension in the range [", -rank,
                                                     ", ", rank, "), but got ", axis));
    }
    if (axis < 0) axis += rank;
    if (in.dim_size(axis) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("Reduction axis ", axis,
                                                     " is empty in shape ",
                                                     in.shape().DebugString()));
    }
    DimVector out_dims;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < rank; ++d) {
      if (d == axis) continue;
      out_dims.push_back(in.dim_size(d));
      (d < axis ? outer : inner) *= in.dim_size(d);
    }
    const int64_t len = in.dim_size(axis);
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape::FromDims(out_dims).value(), &out));
    const T* x = in.data<T>();
    Tout* y = out->data<Tout>();
    // One outer slice at a time: scan the reduced dim with the inner dim as
    // the contiguous inner loop. Ties keep the first index.
    auto work = [&](Eigen::Index begin, Eigen::Index end) {
      std::vector<T> best(inner);
      for (Eigen::Index o = begin; o < end; ++o) {
        const T* base = x + o * len * inner;
        Tout* idx = y + o * inner;
        for (int64_t i = 0; i < inner; ++i) {
          best[i] = base[i];
          idx[i] = 0;
        }
        for (int64_t j = 1; j < len; ++j) {
          const T* row = base + j * inner;
          for (int64_t i = 0; i < inner; ++i) {
            if (row[i] > best[i]) {
              best[i] = row[i];
              idx[i] = static_cast<Tout>(j);
            }
          }
        }
      }
    };
    const int64_t n = in.NumElements();
    if (n < cwise::kParallelMinElements) {
      work(0, outer);
    } else {
      ctx.eigen_cpu_device().parallelFor(
          outer, Eigen::TensorOpCost(len * inner * sizeof(T), inner * sizeof(Tout), len * inner),
          work);
    }
    return absl::OkStatus();
  }
};

#define REGISTER_REDUCTIONS(T)                                                          \
  STRATA_REGISTER_KERNEL(KernelBuilder("Sum").Device(kDeviceCpu).TypeConstraint<T>("T"), \
                         ReductionKernel<T, Reduce::kSum>);                             \
  STRATA_REGISTER_KERNEL(KernelBuilder("Mean").Device(kDeviceCpu).TypeConstraint<T>("T"), \
                         ReductionKernel<T, Reduce::kMean>);                            \
  STRATA_REGISTER_KERNEL(KernelBuilder("Max").Device(kDeviceCpu).TypeConstraint<T>("T"), \
                         ReductionKernel<T, Reduce::kMax>);                             \
  STRATA_REGISTER_KERNEL(KernelBuilder("Min").Device(kDeviceCpu).TypeConstraint<T>("T"), \
                         ReductionKernel<T, Reduce::kMin>);                             \
  STRATA_REGISTER_KERNEL(KernelBuilder("Prod").Device(kDeviceCpu).TypeConstraint<T>("T"), \
                         ReductionKernel<T, Reduce::kProd>);                            \
  STRATA_REGISTER_KERNEL(KernelBuilder("ArgMax")                                        \
                             .Device(kDeviceCpu)                                        \
                             .TypeConstraint<T>("T")                                    \
                             .TypeConstraint<int64_t>("output_type"),                   \
                         ArgMaxKernel<T, int64_t>);                                     \
  STRATA_REGISTER_KERNEL(KernelBuilder("ArgMax")                                        \
                             .Device(kDeviceCpu)                                        \
                             .TypeConstraint<T>("T")                                    \
                             .TypeConstraint<int32_t>("output_type"),                   \
                         ArgMaxKernel<T, int32_t>)

REGISTER_REDUCTIONS(float);
REGISTER_REDUCTIONS(double);
REGISTER_REDUCTIONS(int32_t);
REGISTER_REDUCTIONS(int64_t);

}  // namespace
}  // namespace strata
