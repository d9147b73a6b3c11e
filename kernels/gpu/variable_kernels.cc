// GPU kernels of the resource-variable family. Handles (DT_RESOURCE) live in
// host memory and the Var in the device's ResourceMgr, as on the CPU; the
// value lives where its dtype lives on a GPU device (device memory, or host
// memory for int32). Copy-on-write as in kernels/cpu/variable_kernels.cc,
// with device copies enqueued on the stream, so a ReadVariableOp's snapshot
// is never changed by later writes.
#include "kernels/variable_kernels.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/gpu/cwise_gpu.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/resource_mgr.h"

namespace strata {
namespace gpu {
namespace {

class AssignVariableOp : public OpKernel {
 public:
  explicit AssignVariableOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("validate_shape", &validate_shape_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupResource<Var>(ctx, 0));
    Tensor value = std::move(ctx.params().inputs[1]);
    const bool host = OnHost(ctx, value.dtype());
    Allocator* want = host ? ctx.device()->host_allocator() : ctx.allocator();
    if (value.allocator() != want && value.TotalBytes() > 0) {
      // Keep the variable's memory in its own device's allocator (and stats).
      auto copy = Tensor::Allocate(want, value.dtype(), value.shape());
      if (!copy.ok()) return AnnotateStatus(copy.status(), "AssignVariableOp copy: ");
      if (host) {
        std::memcpy(copy->raw_data(), value.raw_data(), value.TotalBytes());
      } else {
        STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
        STRATA_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(copy->raw_data(), value.raw_data(), value.TotalBytes(),
                                                          cudaMemcpyDefault, s),
                                          "AssignVariableOp copy"));
      }
      value = *std::move(copy);
    }
    MutexLock l(var->mu());
    STRATA_RETURN_IF_ERROR(var->CheckAssignable(value, validate_shape_));
    var->set_value(std::move(value));
    return absl::OkStatus();
  }

 private:
  bool validate_shape_ = false;
};

template <bool kAdd>
class AssignUpdateVariableOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return input_type(1) != DT_INT32; }
  explicit AssignUpdateVariableOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupResource<Var>(ctx, 0));
    const Tensor& delta = ctx.input(1);
    MutexLock l(var->mu());
    STRATA_RETURN_IF_ERROR(var->CheckInitialized());
    STRATA_RETURN_IF_ERROR(var->CheckAssignable(delta, /*require_current_shape=*/true));
    STRATA_RETURN_IF_ERROR(PrepareVarForUpdate(ctx, *var));
    Tensor* v = var->mutable_value();
    const int64_t n = delta.NumElements();
    if (OnHost(ctx, delta.dtype())) {
      if (delta.dtype() != DT_INT32) {
        return absl::InvalidArgumentError(absl::StrCat("no GPU AssignAdd for ", DataTypeString(delta.dtype())));
      }
      int32_t* vp = v->data<int32_t>();
      const int32_t* dp = delta.data<int32_t>();
      // Wrapping arithmetic, as the CPU's Eigen int32 add compiles to.
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t a = static_cast<uint32_t>(vp[i]), b = static_cast<uint32_t>(dp[i]);
        vp[i] = static_cast<int32_t>(kAdd ? a + b : a - b);
      }
      return absl::OkStatus();
    }
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(delta.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
    StridedShape sh;
    sh.rank = 1;
    sh.dims[0] = n;
    sh.x_strides[0] = sh.y_strides[0] = 1;
    return CudaStatus(LaunchBinary(kAdd ? BinaryFn::kAdd : BinaryFn::kSub, t, v->raw_data(), delta.raw_data(),
                                   v->raw_data(), sh, n, s),
                      type_string().c_str());
  }
};

class VarIsInitializedOp : public OpKernel {
 public:
  explicit VarIsInitializedOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    Tensor* out;
    STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, 0, TensorShape(), &out));
    STRATA_ASSIGN_OR_RETURN(const bool initialized, VariableIsInitialized(ctx));
    if (OnHost(ctx, DT_BOOL)) {
      *out->data<bool>() = initialized;
      return absl::OkStatus();
    }
    STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
    return CudaStatus(cudaMemsetAsync(out->raw_data(), initialized ? 1 : 0, 1, s), "VarIsInitializedOp");
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("VarHandleOp").Device(kDeviceGpu), VarHandleOp);
STRATA_REGISTER_KERNEL(KernelBuilder("ReadVariableOp").Device(kDeviceGpu), ReadVariableOp);
STRATA_REGISTER_KERNEL(KernelBuilder("AssignVariableOp").Device(kDeviceGpu), AssignVariableOp);
STRATA_REGISTER_KERNEL(KernelBuilder("VarIsInitializedOp").Device(kDeviceGpu), VarIsInitializedOp);
STRATA_REGISTER_KERNEL(KernelBuilder("DestroyResourceOp").Device(kDeviceGpu), DestroyResourceOp);

#define REGISTER_UPDATE(dt)                                                                               \
  STRATA_REGISTER_KERNEL(KernelBuilder("AssignAddVariableOp").Device(kDeviceGpu).TypeConstraint("dtype", dt), \
                         AssignUpdateVariableOp<true>);                                                   \
  STRATA_REGISTER_KERNEL(KernelBuilder("AssignSubVariableOp").Device(kDeviceGpu).TypeConstraint("dtype", dt), \
                         AssignUpdateVariableOp<false>)
REGISTER_UPDATE(DT_FLOAT);
REGISTER_UPDATE(DT_DOUBLE);
REGISTER_UPDATE(DT_HALF);
REGISTER_UPDATE(DT_BFLOAT16);
REGISTER_UPDATE(DT_INT64);
REGISTER_UPDATE(DT_INT32);
#undef REGISTER_UPDATE

}  // namespace
}  // namespace gpu
}  // namespace strata
