// GPU kernels of the elementwise family: unary math, broadcasting binary math
// (NumPy rules, collapsed by cwise::BCast), Equal and Cast. Launchers are in
// cwise_gpu.cu (Relu, ReluGrad and BiasAdd, of the nn family, use them from
// nn_kernels.cc).
//
// int32 tensors live in host memory on GPU devices, so the int32 binary ops
// (shape arithmetic) compute on the host; Equal on int32 computes on the host
// and copies its bool result to the device.
#include <functional>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/math_ops.h"
#include "kernels/cpu/cwise.h"
#include "kernels/gpu/cwise_gpu.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/gpu/unary_op.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace gpu {
namespace {

// The collapsed broadcast of x and y as strides per operand.
absl::StatusOr<StridedShape> ToStrided(const cwise::BCast& b) {
  StridedShape s;
  if (b.rank() > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast of rank ", b.rank(), " after collapsing exceeds the GPU limit ", kMaxDims));
  }
  s.rank = b.rank();
  int64_t xs = 1, ys = 1;
  for (int d = s.rank - 1; d >= 0; --d) {
    s.dims[d] = b.result()[d];
    s.x_strides[d] = b.x_reshape()[d] == 1 ? 0 : xs;
    s.y_strides[d] = b.y_reshape()[d] == 1 ? 0 : ys;
    xs *= b.x_reshape()[d];
    ys *= b.y_reshape()[d];
  }
  return s;
}

// z = fn(x, y) for int32 host tensors through the same strided walk.
int32_t HostBinary(BinaryFn fn, int32_t x, int32_t y) {
  switch (fn) {
    case BinaryFn::kAdd: return static_cast<int32_t>(static_cast<uint32_t>(x) + static_cast<uint32_t>(y));
    case BinaryFn::kSub: return static_cast<int32_t>(static_cast<uint32_t>(x) - static_cast<uint32_t>(y));
    case BinaryFn::kMul: return static_cast<int32_t>(static_cast<uint32_t>(x) * static_cast<uint32_t>(y));
    case BinaryFn::kSquaredDifference: {
      const uint32_t d = static_cast<uint32_t>(x) - static_cast<uint32_t>(y);
      return static_cast<int32_t>(d * d);
    }
    case BinaryFn::kMax: return x > y ? x : y;
    case BinaryFn::kMin: return x < y ? x : y;
    case BinaryFn::kEqual: return x == y;
    case BinaryFn::kNotEqual: return x != y;
    case BinaryFn::kLess: return x < y;
    case BinaryFn::kLessEqual: return x <= y;
    case BinaryFn::kGreater: return x > y;
    case BinaryFn::kGreaterEqual: return x >= y;
    default: return 0;
  }
}

void HostStridedWalk(const StridedShape& s, int64_t n, const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = i, xo = 0, yo = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      const int64_t c = r % s.dims[d];
      r /= s.dims[d];
      xo += c * s.x_strides[d];
      yo += c * s.y_strides[d];
    }
    fn(i, xo, yo);
  }
}

template <BinaryFn kFn>
class BinaryOp : public OpKernel {
 public:
  static constexpr bool kCompare = IsComparison(kFn);
  // Equal and NotEqual take incompatible_shape_error (TensorFlow's).
  static constexpr bool kEquality = kFn == BinaryFn::kEqual || kFn == BinaryFn::kNotEqual;
  // A comparison on int32 computes on the host and copies a pageable result.
  bool IsCaptureSafe() const override { return !(kCompare && input_type(0) == DT_INT32); }
  explicit BinaryOp(OpKernelConstruction& c) : OpKernel(c) {
    if (kEquality) STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("incompatible_shape_error", &strict_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& y = ctx.input(1);
    cwise::BCast b(x.shape(), y.shape());
    if (!b.ok()) {
      if (kEquality && !strict_) return ShapesDiffer(ctx);
      return b.status();
    }
    STRATA_ASSIGN_OR_RETURN(const StridedShape s, ToStrided(b));
    const int64_t n = b.output_shape().num_elements();
    if (x.dtype() == DT_INT32 && OnHost(ctx, DT_INT32)) return ComputeOnHost(ctx, x, y, b, s, n);
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(x.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* z;
    if (kCompare) {
      STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, b.output_shape(), &z));
    } else {
      STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0, 1}, 0, b.output_shape(), &z));
    }
    return CudaStatus(LaunchBinary(kFn, t, x.raw_data(), y.raw_data(), z->raw_data(), s, n, stream),
                      type_string().c_str());
  }

 private:
  // Shapes that do not broadcast, without incompatible_shape_error: a
  // scalar false for Equal, true for NotEqual.
  absl::Status ShapesDiffer(OpKernelContext& ctx) {
    Tensor* z;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape(), &z));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    return CudaStatus(cudaMemsetAsync(z->raw_data(), kFn == BinaryFn::kNotEqual ? 1 : 0, 1, stream),
                      type_string().c_str());
  }

  absl::Status ComputeOnHost(OpKernelContext& ctx, const Tensor& x, const Tensor& y, const cwise::BCast& b,
                             const StridedShape& s, int64_t n) {
    const int32_t* xp = x.data<int32_t>();
    const int32_t* yp = y.data<int32_t>();
    if (kCompare) {
      Tensor host(DT_BOOL, b.output_shape());
      bool* zp = host.data<bool>();
      HostStridedWalk(s, n, [&](int64_t i, int64_t xo, int64_t yo) { zp[i] = HostBinary(kFn, xp[xo], yp[yo]) != 0; });
      Tensor* z;
      STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, 0, b.output_shape(), &z));
      if (OnHost(ctx, DT_BOOL)) {
        std::memcpy(z->raw_data(), host.raw_data(), host.TotalBytes());
        return absl::OkStatus();
      }
      return CopyHostToDevice(ctx, host, z);
    }
    Tensor* z;
    STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, 0, b.output_shape(), &z));
    int32_t* zp = z->data<int32_t>();
    HostStridedWalk(s, n, [&](int64_t i, int64_t xo, int64_t yo) { zp[i] = HostBinary(kFn, xp[xo], yp[yo]); });
    return absl::OkStatus();
  }

  bool strict_ = true;
};

// Cast between any two GPU dtypes; int32 (host memory) is staged through a
// device temporary (and a synchronous copy back when int32 is the result).
class CastOp : public OpKernel {
 public:
  // To int32 waits for the device; from int32 copies the host value to the
  // device, so it may change from step to step.
  bool IsCaptureSafe() const override { return output_type(0) != DT_INT32; }
  bool ReadsHostInputOnDevice(int) const override { return input_type(0) != output_type(0); }
  explicit CastOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const DataType src = input_type(0), dst = output_type(0);
    if (src == dst) {
      ctx.set_output(0, x);
      return absl::OkStatus();
    }
    STRATA_ASSIGN_OR_RETURN(const ElemType s, ToElemType(src));
    STRATA_ASSIGN_OR_RETURN(const ElemType d, ToElemType(dst));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    const int64_t n = x.NumElements();
    Tensor dev_in = x;
    if (OnHost(ctx, src)) {
      STRATA_RETURN_IF_ERROR(AllocateDeviceTemp(ctx, src, x.shape(), &dev_in));
      STRATA_RETURN_IF_ERROR(CopyHostToDevice(ctx, x, &dev_in));
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, 0, x.shape(), &out));
    if (!OnHost(ctx, dst)) {
      return CudaStatus(LaunchCast(s, d, dev_in.raw_data(), out->raw_data(), n, stream), "Cast");
    }
    Tensor dev_out;
    STRATA_RETURN_IF_ERROR(AllocateDeviceTemp(ctx, dst, x.shape(), &dev_out));
    STRATA_RETURN_IF_ERROR(CudaStatus(LaunchCast(s, d, dev_in.raw_data(), dev_out.raw_data(), n, stream), "Cast"));
    return CopyDeviceToHostSync(ctx, dev_out, out);
  }
};

// Cumsum and Cumprod; the axis is int32 (host memory).
template <bool kProd>
class CumulativeOp : public OpKernel {
 public:
  explicit CumulativeOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("exclusive", &exclusive_));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("reverse", &reverse_));
  }
  bool IsCaptureSafe() const override { return input_type(1) == DT_INT32; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const char* name = kProd ? "Cumprod" : "Cumsum";
    const Tensor& x = ctx.input(0);
    const Tensor& axis_t = ctx.input(1);
    if (axis_t.dims() != 0 || axis_t.dtype() != DT_INT32) {
      return absl::InvalidArgumentError(absl::StrCat(name, " axis must be an int32 scalar (in host memory), got ",
                                                     DataTypeString(axis_t.dtype()), " ",
                                                     axis_t.shape().DebugString()));
    }
    if (x.dims() == 0) return absl::InvalidArgumentError(absl::StrCat(name, " of a scalar (x needs rank >= 1)"));
    const int64_t a = *axis_t.data<int32_t>();
    if (a < -x.dims() || a >= x.dims()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " axis ", a, " is out of range [", -x.dims(), ", ",
                                                     x.dims(), ") for rank ", x.dims()));
    }
    const int axis = static_cast<int>(a < 0 ? a + x.dims() : a);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= x.dim_size(i);
    for (int i = axis + 1; i < x.dims(); ++i) inner *= x.dim_size(i);
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(x.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, x.shape(), &out));
    return CudaStatus(LaunchCumulative(t, x.raw_data(), out->raw_data(), outer, x.dim_size(axis), inner, exclusive_,
                                       reverse_, kProd, stream),
                      name);
  }

 private:
  bool exclusive_ = false, reverse_ = false;
};

// ClipByValue: min(max(t, clip_value_min), clip_value_max), each bound a
// scalar or of t's shape (as on the CPU): two strided launches, the second
// in place.
class ClipByValueOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsCaptureSafe() const override { return true; }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& t = ctx.input(0);
    const Tensor& lo = ctx.input(1);
    const Tensor& hi = ctx.input(2);
    STRATA_RETURN_IF_ERROR(CheckClipByValueBounds(t.shape(), lo.shape(), hi.shape()));
    STRATA_ASSIGN_OR_RETURN(const ElemType type, ToElemType(t.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, t.shape(), &out));
    const int64_t n = t.NumElements();
    if (n == 0) return absl::OkStatus();
    StridedShape s;
    s.rank = 1;
    s.dims[0] = n;
    s.x_strides[0] = 1;
    s.y_strides[0] = lo.dims() == 0 ? 0 : 1;
    STRATA_RETURN_IF_ERROR(CudaStatus(LaunchBinary(BinaryFn::kMax, type, t.raw_data(),
                                                   lo.raw_data(), out->raw_data(), s, n, stream),
                                      "ClipByValue"));
    s.y_strides[0] = hi.dims() == 0 ? 0 : 1;
    return CudaStatus(LaunchBinary(BinaryFn::kMin, type, out->raw_data(), hi.raw_data(),
                                   out->raw_data(), s, n, stream),
                      "ClipByValue");
  }
};

#define REGISTER_GPU(op, dt, ...) \
  STRATA_REGISTER_KERNEL(KernelBuilder(op).Device(kDeviceGpu).TypeConstraint("T", dt), __VA_ARGS__)

#define REGISTER_ARITH(dt)                                  \
  REGISTER_GPU("Add", dt, BinaryOp<BinaryFn::kAdd>);        \
  REGISTER_GPU("AddV2", dt, BinaryOp<BinaryFn::kAdd>);      \
  REGISTER_GPU("Sub", dt, BinaryOp<BinaryFn::kSub>);        \
  REGISTER_GPU("SquaredDifference", dt, BinaryOp<BinaryFn::kSquaredDifference>); \
  REGISTER_GPU("Mul", dt, BinaryOp<BinaryFn::kMul>);        \
  REGISTER_GPU("Maximum", dt, BinaryOp<BinaryFn::kMax>);    \
  REGISTER_GPU("Minimum", dt, BinaryOp<BinaryFn::kMin>);    \
  REGISTER_GPU("Equal", dt, BinaryOp<BinaryFn::kEqual>);             \
  REGISTER_GPU("NotEqual", dt, BinaryOp<BinaryFn::kNotEqual>);       \
  REGISTER_GPU("Less", dt, BinaryOp<BinaryFn::kLess>);               \
  REGISTER_GPU("LessEqual", dt, BinaryOp<BinaryFn::kLessEqual>);     \
  REGISTER_GPU("Greater", dt, BinaryOp<BinaryFn::kGreater>);         \
  REGISTER_GPU("GreaterEqual", dt, BinaryOp<BinaryFn::kGreaterEqual>)

#define REGISTER_FLOATING(dt)                               \
  REGISTER_ARITH(dt);                                       \
  REGISTER_GPU("RealDiv", dt, BinaryOp<BinaryFn::kDiv>);    \
  REGISTER_GPU("Pow", dt, BinaryOp<BinaryFn::kPow>);        \
  REGISTER_GPU("Neg", dt, UnaryOp<UnaryFn::kNeg>);          \
  REGISTER_GPU("Square", dt, UnaryOp<UnaryFn::kSquare>);    \
  REGISTER_GPU("Sqrt", dt, UnaryOp<UnaryFn::kSqrt>);        \
  REGISTER_GPU("Rsqrt", dt, UnaryOp<UnaryFn::kRsqrt>);      \
  REGISTER_GPU("Exp", dt, UnaryOp<UnaryFn::kExp>);          \
  REGISTER_GPU("Log", dt, UnaryOp<UnaryFn::kLog>);          \
  REGISTER_GPU("Sigmoid", dt, UnaryOp<UnaryFn::kSigmoid>);  \
  REGISTER_GPU("Tanh", dt, UnaryOp<UnaryFn::kTanh>);        \
  REGISTER_GPU("Floor", dt, UnaryOp<UnaryFn::kFloor>);      \
  REGISTER_GPU("Erf", dt, UnaryOp<UnaryFn::kErf>);          \
  REGISTER_GPU("Erfc", dt, UnaryOp<UnaryFn::kErfc>)

REGISTER_FLOATING(DT_FLOAT);
REGISTER_FLOATING(DT_DOUBLE);
REGISTER_FLOATING(DT_HALF);
REGISTER_FLOATING(DT_BFLOAT16);
REGISTER_ARITH(DT_INT64);
REGISTER_GPU("Neg", DT_INT64, UnaryOp<UnaryFn::kNeg>);
REGISTER_GPU("Square", DT_INT64, UnaryOp<UnaryFn::kSquare>);
REGISTER_ARITH(DT_INT32);  // host memory: computed on the host
REGISTER_GPU("ClipByValue", DT_FLOAT, ClipByValueOp);
REGISTER_GPU("ClipByValue", DT_DOUBLE, ClipByValueOp);
REGISTER_GPU("ClipByValue", DT_HALF, ClipByValueOp);
REGISTER_GPU("ClipByValue", DT_BFLOAT16, ClipByValueOp);
REGISTER_GPU("ClipByValue", DT_INT64, ClipByValueOp);
// Cumsum and Cumprod for device-memory types only (int32 ones run on the CPU).
#define REGISTER_CUMULATIVE(dt)                        \
  REGISTER_GPU("Cumsum", dt, CumulativeOp<false>); \
  REGISTER_GPU("Cumprod", dt, CumulativeOp<true>)
REGISTER_CUMULATIVE(DT_FLOAT);
REGISTER_CUMULATIVE(DT_DOUBLE);
REGISTER_CUMULATIVE(DT_HALF);
REGISTER_CUMULATIVE(DT_BFLOAT16);
REGISTER_CUMULATIVE(DT_INT64);
#undef REGISTER_CUMULATIVE
REGISTER_GPU("Equal", DT_BOOL, BinaryOp<BinaryFn::kEqual>);
REGISTER_GPU("NotEqual", DT_BOOL, BinaryOp<BinaryFn::kNotEqual>);

#undef REGISTER_FLOATING
#undef REGISTER_ARITH
#undef REGISTER_GPU

STRATA_REGISTER_KERNEL(KernelBuilder("Cast").Device(kDeviceGpu), CastOp);

}  // namespace
}  // namespace gpu
}  // namespace strata
