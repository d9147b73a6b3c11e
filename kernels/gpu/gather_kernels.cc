// GatherV2, ResourceGather and UnsortedSegmentSum on the GPU (launchers:
// gather_gpu.cu).
// int32 indices live in host memory: they are checked there (an index out
// of range is InvalidArgument naming it and its position, as on the CPU) and
// copied to the device with the work. int64 indices live on the device and
// are not read by the host: an index out of range gives a zero row (gather)
// or is dropped (segment sum), as TensorFlow's GPU kernels do. A recorded
// step (runtime/recorded_partition.h) reads indices on the device only, so
// replayed steps behave as with int64 indices.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "kernels/gpu/gather_gpu.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/resource_mgr.h"

namespace strata {
namespace gpu {
namespace {

// One int32 (host) or int64 (device, copied synchronously) value.
absl::StatusOr<int64_t> HostScalar(const OpKernelContext& ctx, const Tensor& t, const char* what) {
  Tensor host = t;
  if (!OnHost(ctx, t.dtype())) {
    host = Tensor(t.dtype(), t.shape());
    STRATA_RETURN_IF_ERROR(CopyDeviceToHostSync(ctx, t, &host));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> v, IntTensorValues(host, what));
  if (v.size() != 1) return absl::InvalidArgumentError(absl::StrCat(what, " must be one value, got ", v.size()));
  return v[0];
}

// `idx` in device memory: itself (int64), or a checked copy of the host
// int32 tensor, each value in [0, limit).
absl::StatusOr<Tensor> DeviceIndices(OpKernelContext& ctx, const Tensor& idx, int64_t limit, const char* what) {
  if (!OnHost(ctx, idx.dtype())) return idx;
  const int32_t* v = idx.data<int32_t>();
  for (int64_t i = 0; i < idx.NumElements(); ++i) {
    if (v[i] < 0 || v[i] >= limit) {
      return absl::InvalidArgumentError(absl::StrCat(what, "[", i, "] = ", v[i], " is not in [0, ", limit, ")"));
    }
  }
  Tensor dev;
  STRATA_RETURN_IF_ERROR(AllocateDeviceTemp(ctx, idx.dtype(), idx.shape(), &dev));
  STRATA_RETURN_IF_ERROR(CopyHostToDevice(ctx, idx, &dev));
  return dev;
}

// Only batch_dims 0 is supported (as on the CPU).
void RequireNoBatchDims(OpKernelConstruction& c, const char* op) {
  int64_t batch_dims = 0;
  STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("batch_dims", &batch_dims));
  if (batch_dims != 0) {
    c.SetStatus(absl::InvalidArgumentError(
        absl::StrCat(op, " batch_dims ", batch_dims, " is not supported")));
  }
}

class GatherV2Op : public OpKernel {
 public:
  explicit GatherV2Op(OpKernelConstruction& c) : OpKernel(c) { RequireNoBatchDims(c, "GatherV2"); }
  // An int64 axis is read from the device synchronously.
  bool IsCaptureSafe() const override { return input_type(2) == DT_INT32; }
  bool ReadsHostInputOnDevice(int i) const override { return i == 1; }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& params = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(int64_t axis, HostScalar(ctx, ctx.input(2), "GatherV2 axis"));
    STRATA_ASSIGN_OR_RETURN(const GatherPlan p, PlanGather(params.shape(), indices.shape(), axis));
    const int64_t outer = p.outer, inner = p.inner, n = p.n;
    const TensorShape& full = p.out;
    STRATA_ASSIGN_OR_RETURN(Tensor idx, DeviceIndices(ctx, indices, n, "GatherV2 indices"));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, full, &out));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
    return CudaStatus(LaunchGather(params.raw_data(), idx.raw_data(), idx.dtype() == DT_INT64, out->raw_data(),
                                   outer, n, indices.NumElements(),
                                   inner * static_cast<int64_t>(DataTypeSize(params.dtype())), s),
                      "GatherV2");
  }
};

// GatherV2 along axis 0 of a variable's value. The rows are copied by work
// enqueued under the variable's reader lock on the device's one stream, so
// an update (enqueued later on that stream, or on a copy of the buffer while
// a read holds it) comes after: the output is a snapshot, as on the CPU.
class ResourceGatherOp : public OpKernel {
 public:
  explicit ResourceGatherOp(OpKernelConstruction& c) : OpKernel(c) {
    RequireNoBatchDims(c, "ResourceGather");
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupResource<Var>(ctx, 0));
    STRATA_RETURN_IF_ERROR(var->CheckDtype(output_type(0), "ResourceGather"));
    const Tensor& indices = ctx.input(1);
    ReaderMutexLock l(var->mu());
    STRATA_RETURN_IF_ERROR(var->CheckInitialized());
    const Tensor& params = var->value();
    if (params.dims() < 1) {
      return absl::InvalidArgumentError(
          "ResourceGather: the variable is a scalar; it has no rows to gather");
    }
    STRATA_ASSIGN_OR_RETURN(const GatherPlan p, PlanGather(params.shape(), indices.shape(), 0));
    STRATA_ASSIGN_OR_RETURN(Tensor idx, DeviceIndices(ctx, indices, p.n, "ResourceGather indices"));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, p.out, &out));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
    return CudaStatus(LaunchGather(params.raw_data(), idx.raw_data(), idx.dtype() == DT_INT64,
                                   out->raw_data(), p.outer, p.n, indices.NumElements(),
                                   p.inner * static_cast<int64_t>(DataTypeSize(params.dtype())), s),
                      "ResourceGather");
  }
};

class UnsortedSegmentSumOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  // An int64 num_segments is read from the device synchronously.
  bool IsCaptureSafe() const override { return input_type(2) == DT_INT32; }
  bool ReadsHostInputOnDevice(int i) const override { return i == 1; }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& data = ctx.input(0);
    const Tensor& ids = ctx.input(1);
    STRATA_ASSIGN_OR_RETURN(int64_t segments,
                            HostScalar(ctx, ctx.input(2), "UnsortedSegmentSum num_segments"));
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_shape, SegmentSumOutputShape(data.shape(), ids.shape(), segments));
    STRATA_ASSIGN_OR_RETURN(TensorShape full, out_shape.AsTensorShape());
    STRATA_ASSIGN_OR_RETURN(Tensor dev_ids, DeviceIndices(ctx, ids, segments, "UnsortedSegmentSum segment_ids"));
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(data.dtype()));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, full, &out));
    const int64_t rows = ids.NumElements();
    const int64_t inner = rows == 0 ? 0 : data.NumElements() / rows;
    STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
    return CudaStatus(LaunchUnsortedSegmentSum(t, data.raw_data(), dev_ids.raw_data(), dev_ids.dtype() == DT_INT64,
                                               out->raw_data(), rows, inner, segments, s),
                      "UnsortedSegmentSum");
  }
};

#define REGISTER_GATHER(T)                                                                            \
  STRATA_REGISTER_KERNEL(KernelBuilder("GatherV2").Device(kDeviceGpu).TypeConstraint("Tparams", T), \
                         GatherV2Op)
REGISTER_GATHER(DT_FLOAT);
REGISTER_GATHER(DT_DOUBLE);
REGISTER_GATHER(DT_HALF);
REGISTER_GATHER(DT_BFLOAT16);
REGISTER_GATHER(DT_INT64);
REGISTER_GATHER(DT_BOOL);
#undef REGISTER_GATHER

#define REGISTER_RESOURCE_GATHER(T)                                                  \
  STRATA_REGISTER_KERNEL(                                                            \
      KernelBuilder("ResourceGather").Device(kDeviceGpu).TypeConstraint("dtype", T), \
      ResourceGatherOp)
REGISTER_RESOURCE_GATHER(DT_FLOAT);
REGISTER_RESOURCE_GATHER(DT_DOUBLE);
REGISTER_RESOURCE_GATHER(DT_HALF);
REGISTER_RESOURCE_GATHER(DT_BFLOAT16);
REGISTER_RESOURCE_GATHER(DT_INT64);
#undef REGISTER_RESOURCE_GATHER

#define REGISTER_SEGMENT_SUM(T)                                                                     \
  STRATA_REGISTER_KERNEL(KernelBuilder("UnsortedSegmentSum").Device(kDeviceGpu).TypeConstraint("T", T), \
                         UnsortedSegmentSumOp)
REGISTER_SEGMENT_SUM(DT_FLOAT);
REGISTER_SEGMENT_SUM(DT_DOUBLE);
REGISTER_SEGMENT_SUM(DT_HALF);
REGISTER_SEGMENT_SUM(DT_BFLOAT16);
#undef REGISTER_SEGMENT_SUM

}  // namespace
}  // namespace gpu
}  // namespace strata
