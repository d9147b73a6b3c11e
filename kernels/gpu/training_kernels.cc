// GPU kernels for ResourceApplyGradientDescent, -Momentum and -Adam (float,
// double; launchers in training_gpu.cu). As on the CPU: variables are locked
// exclusively in address order, checked against the gradient's shape and
// made exclusively theirs (copy-on-write) before the in-place update. The
// scalar hyperparameters stay in device memory and are read by the kernel.
#include <algorithm>
#include <memory>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/gpu/training_gpu.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/resource_mgr.h"

namespace strata {
namespace gpu {
namespace {

absl::Status CheckScalar(const OpKernelContext& ctx, int i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.dims() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not a scalar: shape ", t.shape().DebugString()));
  }
  return absl::OkStatus();
}

// Inputs [0, n) are variables: looked up, locked in address order, checked
// against `grad` and prepared for an in-place update.
class LockedVars {
 public:
  ~LockedVars() {
    for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) (*it)->mu()->Unlock();
  }
  absl::Status Init(OpKernelContext& ctx, int n, const Tensor& grad, const char* grad_name)
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (int i = 0; i < n; ++i) {
      STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> v, LookupResource<Var>(ctx, i));
      STRATA_RETURN_IF_ERROR(v->CheckDtype(grad.dtype(), ctx.op_kernel().type_string().c_str()));
      vars_.push_back(std::move(v));
    }
    absl::InlinedVector<Var*, 3> order;
    for (auto& v : vars_) order.push_back(v.get());
    std::sort(order.begin(), order.end());
    order.erase(std::unique(order.begin(), order.end()), order.end());
    for (Var* v : order) {
      v->mu()->Lock();
      locked_.push_back(v);
    }
    for (auto& v : vars_) {
      STRATA_RETURN_IF_ERROR(v->CheckInitialized());
      if (v->value().shape() != grad.shape()) {
        return absl::InvalidArgumentError(absl::StrCat(v->DebugString(), " has shape ",
                                                       v->value().shape().DebugString(), " but ", grad_name,
                                                       " has shape ", grad.shape().DebugString()));
      }
      STRATA_RETURN_IF_ERROR(PrepareVarForUpdate(ctx, *v));
    }
    return absl::OkStatus();
  }
  void* data(int i) ABSL_NO_THREAD_SAFETY_ANALYSIS { return vars_[i]->mutable_value()->raw_data(); }

 private:
  absl::InlinedVector<std::shared_ptr<Var>, 3> vars_;
  absl::InlinedVector<Var*, 3> locked_;
};

class ApplyGradientDescentOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit ApplyGradientDescentOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_RETURN_IF_ERROR(CheckScalar(ctx, 1, "alpha"));
    const Tensor& delta = ctx.input(2);
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(delta.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
    LockedVars vars;
    STRATA_RETURN_IF_ERROR(vars.Init(ctx, 1, delta, "delta"));
    return CudaStatus(LaunchApplyGradientDescent(t, vars.data(0), ctx.input(1).raw_data(), delta.raw_data(),
                                                 delta.NumElements(), s),
                      "ResourceApplyGradientDescent");
  }
};

class ApplyMomentumOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit ApplyMomentumOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("use_nesterov", &use_nesterov_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_RETURN_IF_ERROR(CheckScalar(ctx, 2, "lr"));
    STRATA_RETURN_IF_ERROR(CheckScalar(ctx, 4, "momentum"));
    const Tensor& grad = ctx.input(3);
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(grad.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
    LockedVars vars;
    STRATA_RETURN_IF_ERROR(vars.Init(ctx, 2, grad, "grad"));
    return CudaStatus(LaunchApplyMomentum(t, vars.data(0), vars.data(1), ctx.input(2).raw_data(), grad.raw_data(),
                                          ctx.input(4).raw_data(), grad.NumElements(), use_nesterov_, s),
                      "ResourceApplyMomentum");
  }

 private:
  bool use_nesterov_ = false;
};

class ApplyAdamOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit ApplyAdamOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("use_nesterov", &use_nesterov_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const char* names[] = {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"};
    for (int i = 0; i < 6; ++i) STRATA_RETURN_IF_ERROR(CheckScalar(ctx, 3 + i, names[i]));
    const Tensor& grad = ctx.input(9);
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(grad.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
    LockedVars vars;
    STRATA_RETURN_IF_ERROR(vars.Init(ctx, 3, grad, "grad"));
    return CudaStatus(
        LaunchApplyAdam(t, vars.data(0), vars.data(1), vars.data(2), ctx.input(3).raw_data(), ctx.input(4).raw_data(),
                        ctx.input(5).raw_data(), ctx.input(6).raw_data(), ctx.input(7).raw_data(),
                        ctx.input(8).raw_data(), grad.raw_data(), grad.NumElements(), use_nesterov_, s),
        "ResourceApplyAdam");
  }

 private:
  bool use_nesterov_ = false;
};

#define REGISTER_APPLY(dt)                                                                                  \
  STRATA_REGISTER_KERNEL(                                                                                   \
      KernelBuilder("ResourceApplyGradientDescent").Device(kDeviceGpu).TypeConstraint("T", dt),             \
      ApplyGradientDescentOp);                                                                              \
  STRATA_REGISTER_KERNEL(KernelBuilder("ResourceApplyMomentum").Device(kDeviceGpu).TypeConstraint("T", dt), \
                         ApplyMomentumOp);                                                                  \
  STRATA_REGISTER_KERNEL(KernelBuilder("ResourceApplyAdam").Device(kDeviceGpu).TypeConstraint("T", dt),     \
                         ApplyAdamOp)
REGISTER_APPLY(DT_FLOAT);
REGISTER_APPLY(DT_DOUBLE);
#undef REGISTER_APPLY

}  // namespace
}  // namespace gpu
}  // namespace strata
