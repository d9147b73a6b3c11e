// GPU kernels for Sum, Mean, Max, Min, ArgMax and BiasAddGrad (launchers in
// reduce_gpu.cu). Axes come from host memory (int32 lives there on GPU
// devices); int64 axes are read back from the device with a synchronous copy.
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/gpu/reduce_gpu.h"
#include "kernels/conv_geometry.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace gpu {
namespace {

// The values of an index tensor (int32 on the host, or int64 on either side).
absl::StatusOr<std::vector<int64_t>> IndexValues(const OpKernelContext& ctx, const Tensor& t) {
  std::vector<int64_t> v(t.NumElements());
  if (t.dtype() == DT_INT32) {
    for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = t.data<int32_t>()[i];
    return v;
  }
  if (t.dtype() != DT_INT64) {
    return absl::InvalidArgumentError(absl::StrCat("index tensor must be int32 or int64, got ",
                                                   DataTypeString(t.dtype())));
  }
  Tensor host(DT_INT64, t.shape());
  if (OnHost(ctx, DT_INT64)) {
    host = t;
  } else {
    STRATA_RETURN_IF_ERROR(CopyDeviceToHostSync(ctx, t, &host));
  }
  for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = host.data<int64_t>()[i];
  return v;
}

// Groups adjacent dims with the same fate (size-1 dims dropped) and gives each
// group its stride in the input.
absl::Status MakeReduceShape(const TensorShape& in, const std::vector<bool>& reduce, ReduceShape* s) {
  std::vector<int64_t> sizes;
  std::vector<bool> fate;
  for (int d = 0; d < in.dims(); ++d) {
    if (in.dim_size(d) == 1) continue;
    if (!sizes.empty() && fate.back() == reduce[d]) {
      sizes.back() *= in.dim_size(d);
    } else {
      sizes.push_back(in.dim_size(d));
      fate.push_back(reduce[d]);
    }
  }
  int64_t stride = 1;
  std::vector<int64_t> strides(sizes.size());
  for (int g = static_cast<int>(sizes.size()) - 1; g >= 0; --g) {
    strides[g] = stride;
    stride *= sizes[g];
  }
  s->kept_rank = s->reduced_rank = 0;
  s->num_outputs = s->num_reduced = 1;
  for (size_t g = 0; g < sizes.size(); ++g) {
    int& rank = fate[g] ? s->reduced_rank : s->kept_rank;
    if (rank == kMaxDims) {
      return absl::InvalidArgumentError(absl::StrCat("reduction of ", in.DebugString(),
                                                     " has too many alternating axis groups for the GPU"));
    }
    (fate[g] ? s->reduced_dims : s->kept_dims)[rank] = sizes[g];
    (fate[g] ? s->reduced_strides : s->kept_strides)[rank] = strides[g];
    (fate[g] ? s->num_reduced : s->num_outputs) *= sizes[g];
    ++rank;
  }
  // Zero-size dims dropped as size 1 would hide an empty set: count them.
  for (int d = 0; d < in.dims(); ++d) {
    if (in.dim_size(d) == 0) (reduce[d] ? s->num_reduced : s->num_outputs) = 0;
  }
  return absl::OkStatus();
}

template <ReduceFn kFn>
class ReductionOp : public OpKernel {
 public:
  // Int64 axes are copied to the host synchronously.
  bool IsCaptureSafe() const override { return input_type(1) == DT_INT32; }
  explicit ReductionOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("keep_dims", &keep_dims_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, IndexValues(ctx, ctx.input(1)));
    const int rank = in.dims();
    std::vector<bool> reduce(rank, false);
    for (int64_t a : axes) {
      if (a < -rank || a >= rank) {
        return absl::InvalidArgumentError(
            absl::StrCat("Invalid reduction dimension ", a, " for input with ", rank, " dimensions"));
      }
      reduce[a < 0 ? a + rank : a] = true;
    }
    DimVector out_dims;
    bool any_reduced = false;
    for (int d = 0; d < rank; ++d) {
      if (reduce[d]) {
        if (keep_dims_) out_dims.push_back(1);
        any_reduced |= in.dim_size(d) != 1;
      } else {
        out_dims.push_back(in.dim_size(d));
      }
    }
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(out_dims));
    if (!any_reduced && in.NumElements() > 0) {
      STRATA_ASSIGN_OR_RETURN(Tensor same, in.Reshaped(out_shape));
      ctx.set_output(0, std::move(same));
      return absl::OkStatus();
    }
    ReduceShape s;
    STRATA_RETURN_IF_ERROR(MakeReduceShape(in.shape(), reduce, &s));
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(in.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    return CudaStatus(LaunchReduce(kFn, t, in.raw_data(), out->raw_data(), s, stream), type_string().c_str());
  }

 private:
  bool keep_dims_ = false;
};

class ArgMaxOp : public OpKernel {
 public:
  explicit ArgMaxOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (ctx.input(1).NumElements() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("dimension must be a scalar, but has shape ",
                                                     ctx.input(1).shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> dim, IndexValues(ctx, ctx.input(1)));
    const int rank = in.dims();
    int64_t axis = dim[0];
    if (rank == 0 || axis < -rank || axis >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("Expected dimension in the range [", -rank, ", ", rank, "), but got ", axis));
    }
    if (axis < 0) axis += rank;
    if (in.dim_size(axis) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Reduction axis ", axis, " is empty in shape ", in.shape().DebugString()));
    }
    DimVector out_dims;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < rank; ++d) {
      if (d == axis) continue;
      out_dims.push_back(in.dim_size(d));
      (d < axis ? outer : inner) *= in.dim_size(d);
    }
    ReduceShape s;
    s.kept_rank = 2;
    s.kept_dims[0] = outer;
    s.kept_dims[1] = inner;
    s.kept_strides[0] = in.dim_size(axis) * inner;
    s.kept_strides[1] = 1;
    s.reduced_rank = 1;
    s.reduced_dims[0] = in.dim_size(axis);
    s.reduced_strides[0] = inner;
    s.num_outputs = outer * inner;
    s.num_reduced = in.dim_size(axis);
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(in.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    const DataType out_type = output_type(0);
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(out_dims));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, 0, out_shape, &out));
    if (!OnHost(ctx, out_type)) {
      return CudaStatus(LaunchArgMax(t, in.raw_data(), out->raw_data(), out_type == DT_INT64, s, stream),
                        "ArgMax");
    }
    Tensor dev;
    STRATA_RETURN_IF_ERROR(AllocateDeviceTemp(ctx, out_type, out_shape, &dev));
    STRATA_RETURN_IF_ERROR(
        CudaStatus(LaunchArgMax(t, in.raw_data(), dev.raw_data(), out_type == DT_INT64, s, stream), "ArgMax"));
    return CopyDeviceToHostSync(ctx, dev, out);
  }
};

class BiasAddGradOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit BiasAddGradOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, GetBiasDataFormat(c, &nchw_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const int min_rank = nchw_ ? 3 : 2;
    if (g.dims() < min_rank) {
      return absl::InvalidArgumentError(absl::StrCat("BiasAddGrad: out_backprop must have rank >= ", min_rank,
                                                     ", got ", g.shape().DebugString()));
    }
    const int cdim = nchw_ ? 1 : g.dims() - 1;
    std::vector<bool> reduce(g.dims(), true);
    reduce[cdim] = false;
    ReduceShape s;
    STRATA_RETURN_IF_ERROR(MakeReduceShape(g.shape(), reduce, &s));
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(g.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{g.dim_size(cdim)}, &out));
    return CudaStatus(LaunchReduce(ReduceFn::kSum, t, g.raw_data(), out->raw_data(), s, stream),
                      "BiasAddGrad");
  }

 private:
  bool nchw_ = false;
};

#define REGISTER_REDUCTIONS(dt)                                                                    \
  STRATA_REGISTER_KERNEL(KernelBuilder("Sum").Device(kDeviceGpu).TypeConstraint("T", dt),         \
                         ReductionOp<ReduceFn::kSum>);                                             \
  STRATA_REGISTER_KERNEL(KernelBuilder("Mean").Device(kDeviceGpu).TypeConstraint("T", dt),        \
                         ReductionOp<ReduceFn::kMean>);                                            \
  STRATA_REGISTER_KERNEL(KernelBuilder("Max").Device(kDeviceGpu).TypeConstraint("T", dt),         \
                         ReductionOp<ReduceFn::kMax>);                                             \
  STRATA_REGISTER_KERNEL(KernelBuilder("Min").Device(kDeviceGpu).TypeConstraint("T", dt),         \
                         ReductionOp<ReduceFn::kMin>);                                             \
  STRATA_REGISTER_KERNEL(KernelBuilder("Prod").Device(kDeviceGpu).TypeConstraint("T", dt),        \
                         ReductionOp<ReduceFn::kProd>);                                            \
  STRATA_REGISTER_KERNEL(KernelBuilder("ArgMax").Device(kDeviceGpu).TypeConstraint("T", dt),      \
                         ArgMaxOp);                                                                \
  STRATA_REGISTER_KERNEL(KernelBuilder("BiasAddGrad").Device(kDeviceGpu).TypeConstraint("T", dt), \
                         BiasAddGradOp)

REGISTER_REDUCTIONS(DT_FLOAT);
REGISTER_REDUCTIONS(DT_DOUBLE);
REGISTER_REDUCTIONS(DT_HALF);
REGISTER_REDUCTIONS(DT_BFLOAT16);
#undef REGISTER_REDUCTIONS

}  // namespace
}  // namespace gpu
}  // namespace strata
