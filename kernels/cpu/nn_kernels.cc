// CPU kernels for the elementwise activations (Relu, Sigmoid, Tanh), their
// gradients, BiasAdd and BiasAddGrad. They are cheap: each reuses an input
// buffer when nobody else holds it, and small tensors never touch the pool.
// Softmax, convolution and pooling live in their own files.

#include <type_traits>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/nn_ops.h"
#include "kernels/cpu/cwise.h"
#include "kernels/cpu/nn_kernel_helpers.h"
#include "kernels/eigen_views.h"
#include "kernels/conv_geometry.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

using nn_internal::AssignMaybeParallel;

// ---- Unary activations -----------------------------------------------------

struct ReluFn {
  template <typename In>
  static auto Apply(const In& x) {
    using T = typename In::Scalar;
    return x.cwiseMax(T(0));
  }
};
struct SigmoidFn {
  template <typename In>
  static auto Apply(const In& x) {
    return x.sigmoid();
  }
};
struct TanhFn {
  template <typename In>
  static auto Apply(const In& x) {
    return x.tanh();
  }
};

template <typename T, typename Fn>
class UnaryActivationOp : public OpKernel {
 public:
  explicit UnaryActivationOp(OpKernelConstruction& c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor* y;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, x.shape(), &y));
    AssignMaybeParallel(ctx, x.NumElements(), Flat<T>(*y), Fn::Apply(Flat<T>(x)));
    return absl::OkStatus();
  }
};

// ---- Gradients of the activations: (a, b) -> z, same shapes ---------------

struct SigmoidGradFn {  // a = y, b = dy
  template <typename A, typename B>
  static auto Apply(const A& y, const B& dy) {
    using T = typename A::Scalar;
    return dy * y * (y.constant(T(1)) - y);
  }
};
struct TanhGradFn {  // a = y, b = dy
  template <typename A, typename B>
  static auto Apply(const A& y, const B& dy) {
    using T = typename A::Scalar;
    return dy * (y.constant(T(1)) - y * y);
  }
};

template <typename T, typename Fn>
class ActivationGradOp : public OpKernel {
 public:
  explicit ActivationGradOp(OpKernelConstruction& c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.shape() != b.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(type_string(),
                                                     ": inputs must have the same shape, got ",
                                                     a.shape().DebugString(), " and ",
                                                     b.shape().DebugString()));
    }
    Tensor* z;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0, 1}, 0, a.shape(), &z));
    // The output may share a buffer with an input: every coefficient is read
    // before it is written, so evaluating in place is safe.
    AssignMaybeParallel(ctx, a.NumElements(), Flat<T>(*z), Fn::Apply(Flat<T>(a), Flat<T>(b)));
    return absl::OkStatus();
  }
};

// ReluGrad as a plain loop rather than an Eigen select: Eigen's tensor select
// of a comparison is not vectorized and compiles to a branch per element,
// which mispredicts on ReLU's random masks (~3 ns an element, a third of an
// overhead-bound MLP training step); this loop compiles to compare + blend.
// Reading g[i] before the comparison keeps the load unconditional, so the
// compiler may if-convert; `z` may alias `g` or `f` (in place) since each
// element is read before it is written.
template <typename T>
void ReluGradRange(const T* g, const T* f, T* z, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const T gi = g[i];
    z[i] = f[i] > T(0) ? gi : T(0);
  }
}

template <typename T>
class ReluGradOp : public OpKernel {
 public:
  explicit ReluGradOp(OpKernelConstruction& c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Tensor& f = ctx.input(1);
    if (g.shape() != f.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(type_string(),
                                                     ": inputs must have the same shape, got ",
                                                     g.shape().DebugString(), " and ",
                                                     f.shape().DebugString()));
    }
    Tensor* z;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0, 1}, 0, g.shape(), &z));
    const T* gp = g.data<T>();
    const T* fp = f.data<T>();
    T* zp = z->data<T>();
    nn_internal::ParallelForRows(ctx, g.NumElements(), 1, [gp, fp, zp](int64_t b, int64_t e) {
      ReluGradRange(gp, fp, zp, b, e);
    });
    return absl::OkStatus();
  }
};

// ---- BiasAdd / BiasAddGrad -------------------------------------------------

// The value seen as [outer, channels, inner]: NHWC has inner 1, NCHW has
// outer = batch and inner = the spatial dims.
struct BiasLayout {
  int64_t outer = 1, channels = 1, inner = 1;
};
BiasLayout GetBiasLayout(const TensorShape& s, bool nchw) {
  BiasLayout l;
  const int channel_dim = nchw ? 1 : s.dims() - 1;
  for (int d = 0; d < s.dims(); ++d) {
    if (d < channel_dim) l.outer *= s.dim_size(d);
    if (d == channel_dim) l.channels = s.dim_size(d);
    if (d > channel_dim) l.inner *= s.dim_size(d);
  }
  return l;
}

template <typename T>
class BiasAddOp : public OpKernel {
 public:
  explicit BiasAddOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, GetBiasDataFormat(c, &nchw_));
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& value = ctx.input(0);
    const Tensor& bias = ctx.input(1);
    if (value.dims() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "BiasAdd: value must be at least 2-D, got shape ", value.shape().DebugString()));
    }
    if (bias.dims() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("BiasAdd: bias must be 1-D, got shape ", bias.shape().DebugString()));
    }
    const BiasLayout l = GetBiasLayout(value.shape(), nchw_);
    if (bias.dim_size(0) != l.channels) {
      return absl::InvalidArgumentError(absl::StrCat(
          "BiasAdd: bias length ", bias.dim_size(0), " must equal the ",
          nchw_ ? "channel dim (1)" : "last dim", " of value, ", l.channels, "; value ",
          value.shape().DebugString(), ", bias ", bias.shape().DebugString()));
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, value.shape(), &out));
    if (value.NumElements() == 0) return absl::OkStatus();
    const Eigen::DSizes<Eigen::DenseIndex, 3> dims(l.outer, l.channels, l.inner);
    ConstTensorMapT<T, 3> v(value.data<T>(), dims);
    TensorMapT<T, 3> o(out->data<T>(), dims);
    ConstTensorMapT<T, 3> b(bias.data<T>(), Eigen::DSizes<Eigen::DenseIndex, 3>(1, l.channels, 1));
    const Eigen::array<Eigen::DenseIndex, 3> bcast = {l.outer, 1, l.inner};
    AssignMaybeParallel(ctx, value.NumElements(), o, v + b.broadcast(bcast));
    return absl::OkStatus();
  }

 private:
  bool nchw_ = false;
};

template <typename T>
class BiasAddGradOp : public OpKernel {
 public:
  explicit BiasAddGradOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, GetBiasDataFormat(c, &nchw_));
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    if (g.dims() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "BiasAddGrad: out_backprop must be at least 2-D, got shape ", g.shape().DebugString()));
    }
    const BiasLayout l = GetBiasLayout(g.shape(), nchw_);
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{l.channels}, &out));
    TensorMapT<T, 1> o = Flat<T>(*out);
    if (g.NumElements() == 0) {
      o.setZero();
      return absl::OkStatus();
    }
    ConstTensorMapT<T, 3> v(g.data<T>(),
                            Eigen::DSizes<Eigen::DenseIndex, 3>(l.outer, l.channels, l.inner));
    const Eigen::array<Eigen::DenseIndex, 2> reduce = {0, 2};
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (l.inner == 1) {  // NHWC, or [batch, units]: column sums
        cwise::ColumnSum(ctx, g.data<T>(), l.outer, l.channels, o.data());
        return absl::OkStatus();
      }
    }
    if constexpr (std::is_same_v<T, Eigen::bfloat16> || std::is_same_v<T, Eigen::half>) {
      // Summed in float (as the GPU kernel does), rounded once.
      AssignMaybeParallel(ctx, g.NumElements(), o, v.template cast<float>().sum(reduce).template cast<T>());
    } else {
      AssignMaybeParallel(ctx, g.NumElements(), o, v.sum(reduce));
    }
    return absl::OkStatus();
  }

 private:
  bool nchw_ = false;
};

// ---- Registrations ---------------------------------------------------------

#define REGISTER_UNARY(OP, FN, T)                                                          \
  STRATA_REGISTER_KERNEL(KernelBuilder(OP).Device(kDeviceCpu).TypeConstraint<T>("T"), \
                         UnaryActivationOp<T, FN>)
#define REGISTER_GRAD(OP, FN, T)                                                           \
  STRATA_REGISTER_KERNEL(KernelBuilder(OP).Device(kDeviceCpu).TypeConstraint<T>("T"), \
                         ActivationGradOp<T, FN>)

REGISTER_UNARY("Relu", ReluFn, float);
REGISTER_UNARY("Relu", ReluFn, double);
REGISTER_UNARY("Relu", ReluFn, int32_t);
REGISTER_UNARY("Relu", ReluFn, int64_t);
REGISTER_UNARY("Sigmoid", SigmoidFn, float);
REGISTER_UNARY("Sigmoid", SigmoidFn, double);
REGISTER_UNARY("Tanh", TanhFn, float);
REGISTER_UNARY("Tanh", TanhFn, double);
STRATA_REGISTER_KERNEL(KernelBuilder("ReluGrad").Device(kDeviceCpu).TypeConstraint<float>("T"),
                       ReluGradOp<float>);
STRATA_REGISTER_KERNEL(KernelBuilder("ReluGrad").Device(kDeviceCpu).TypeConstraint<double>("T"),
                       ReluGradOp<double>);
REGISTER_GRAD("SigmoidGrad", SigmoidGradFn, float);
REGISTER_GRAD("SigmoidGrad", SigmoidGradFn, double);
REGISTER_GRAD("TanhGrad", TanhGradFn, float);
REGISTER_GRAD("TanhGrad", TanhGradFn, double);

#undef REGISTER_UNARY
#undef REGISTER_GRAD

// bfloat16 and half (mixed precision): elementwise in float, rounded once.
#define REGISTER_LOW_PRECISION(T, DT)                                                               \
  STRATA_REGISTER_KERNEL(KernelBuilder("Relu").Device(kDeviceCpu).TypeConstraint("T", DT),        \
                         UnaryActivationOp<T, ReluFn>);                                             \
  STRATA_REGISTER_KERNEL(KernelBuilder("ReluGrad").Device(kDeviceCpu).TypeConstraint("T", DT),    \
                         ReluGradOp<T>);                                                            \
  STRATA_REGISTER_KERNEL(KernelBuilder("BiasAdd").Device(kDeviceCpu).TypeConstraint("T", DT),     \
                         BiasAddOp<T>);                                                             \
  STRATA_REGISTER_KERNEL(KernelBuilder("BiasAddGrad").Device(kDeviceCpu).TypeConstraint("T", DT), \
                         BiasAddGradOp<T>)
REGISTER_LOW_PRECISION(Eigen::bfloat16, DT_BFLOAT16);
REGISTER_LOW_PRECISION(Eigen::half, DT_HALF);
#undef REGISTER_LOW_PRECISION

STRATA_REGISTER_KERNEL(KernelBuilder("BiasAdd").Device(kDeviceCpu).TypeConstraint<float>("T"),
                       BiasAddOp<float>);
STRATA_REGISTER_KERNEL(KernelBuilder("BiasAdd").Device(kDeviceCpu).TypeConstraint<double>("T"),
                       BiasAddOp<double>);
STRATA_REGISTER_KERNEL(KernelBuilder("BiasAdd").Device(kDeviceCpu).TypeConstraint<int32_t>("T"),
                       BiasAddOp<int32_t>);
STRATA_REGISTER_KERNEL(KernelBuilder("BiasAdd").Device(kDeviceCpu).TypeConstraint<int64_t>("T"),
                       BiasAddOp<int64_t>);
STRATA_REGISTER_KERNEL(
    KernelBuilder("BiasAddGrad").Device(kDeviceCpu).TypeConstraint<float>("T"),
    BiasAddGradOp<float>);
STRATA_REGISTER_KERNEL(
    KernelBuilder("BiasAddGrad").Device(kDeviceCpu).TypeConstraint<double>("T"),
    BiasAddGradOp<double>);

}  // namespace
}  // namespace strata
