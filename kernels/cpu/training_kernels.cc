// CPU kernels of the optimizer family (graph/ops/training_ops.h): in-place
// updates of resource variables, run every step over every parameter.
//
// Each kernel locks its variables (always exclusively; use_locking is
// accepted for compatibility, and a lock per update is cheap next to the
// update), makes their buffers exclusively theirs (copy-on-write: a copy
// only if a reader still holds one) and updates them in one pass per
// element block: blocks of kBlock elements keep var, slots and grad in L1/L2
// between the few Eigen array statements of a formula, and blocks are spread
// over the device's intra-op pool when the tensor is large.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/training_ops.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/resource_mgr.h"

namespace strata {
namespace {

// Below this many elements an update runs on the calling thread (the pool's
// hand-off costs more than the work).
constexpr int64_t kInlineElements = 16384;
// Elements per inner block: 4 arrays of 2048 floats fit in L1+L2 comfortably.
constexpr int64_t kBlock = 2048;

template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using UnalignedArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

// Runs fn(begin, end) over [0, n) in blocks of at most kBlock, on the pool
// when n is large. `cycles_per_element` sizes the shards.
template <typename Fn>
void ForBlocks(const Eigen::ThreadPoolDevice& d, int64_t n, double bytes_per_element,
               double cycles_per_element, const Fn& fn) {
  auto run = [&fn](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b += kBlock) fn(b, std::min(end, b + kBlock));
  };
  if (n < kInlineElements) {
    run(0, n);
    return;
  }
  d.parallelFor(n, Eigen::TensorOpCost(bytes_per_element, bytes_per_element, cycles_per_element),
                [&run](Eigen::Index begin, Eigen::Index end) { run(begin, end); });
}

// The value of scalar input `i`; InvalidArgument naming it otherwise.
template <typename T>
absl::StatusOr<T> ScalarInput(OpKernelContext& ctx, int i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.dims() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is not a scalar: shape ", t.shape().DebugString()));
  }
  return *t.data<T>();
}

// Exclusive locks on distinct variables, taken in address order so that two
// kernels sharing variables cannot deadlock.
class VarLocks {
 public:
  explicit VarLocks(absl::InlinedVector<Var*, 3> vars) : vars_(std::move(vars)) {
    std::sort(vars_.begin(), vars_.end());
    vars_.erase(std::unique(vars_.begin(), vars_.end()), vars_.end());
    for (Var* v : vars_) v->mu()->Lock();
  }
  ~VarLocks() {
    for (auto it = vars_.rbegin(); it != vars_.rend(); ++it) (*it)->mu()->Unlock();
  }
  VarLocks(const VarLocks&) = delete;
  VarLocks& operator=(const VarLocks&) = delete;

 private:
  absl::InlinedVector<Var*, 3> vars_;
};

// Looks up the variables of inputs [0, n), locks them and makes each ready
// for an in-place update of dtype T with the shape of `grad` (named
// `grad_name` in errors).
template <typename T>
class LockedVars {
 public:
  absl::Status Init(OpKernelContext& ctx, int n, const Tensor& grad, const char* grad_name) {
    absl::InlinedVector<Var*, 3> raw;
    for (int i = 0; i < n; ++i) {
      STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> v, LookupResource<Var>(ctx, i));
      STRATA_RETURN_IF_ERROR(v->CheckDtype(DataTypeToEnum<T>::value, ctx.op_kernel().type_string().c_str()));
      raw.push_back(v.get());
      vars_.push_back(std::move(v));
    }
    locks_ = std::make_unique<VarLocks>(raw);
    for (auto& v : vars_) {
      // The lock is held (locks_); the analysis cannot see through VarLocks.
      STRATA_RETURN_IF_ERROR(CheckAndPrepare(*v, grad, grad_name, ctx.allocator()));
    }
    return absl::OkStatus();
  }
  T* data(int i) { return Mutable(*vars_[i])->template data<T>(); }

 private:
  static absl::Status CheckAndPrepare(Var& v, const Tensor& grad, const char* grad_name,
                                      Allocator* alloc) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    STRATA_RETURN_IF_ERROR(v.CheckInitialized());
    if (v.value().shape() != grad.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(
          v.DebugString(), " has shape ", v.value().shape().DebugString(), " but ", grad_name,
          " has shape ", grad.shape().DebugString()));
    }
    return v.PrepareForUpdate(alloc);
  }
  static Tensor* Mutable(Var& v) ABSL_NO_THREAD_SAFETY_ANALYSIS { return v.mutable_value(); }

  absl::InlinedVector<std::shared_ptr<Var>, 3> vars_;
  std::unique_ptr<VarLocks> locks_;  // released before vars_ (declared after)
};

// var -= alpha * delta
template <typename T>
class ApplyGradientDescentOp : public OpKernel {
 public:
  explicit ApplyGradientDescentOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(const T alpha, ScalarInput<T>(ctx, 1, "alpha"));
    const Tensor& delta = ctx.input(2);
    LockedVars<T> vars;
    STRATA_RETURN_IF_ERROR(vars.Init(ctx, 1, delta, "delta"));
    T* var = vars.data(0);
    const T* g = delta.data<T>();
    ForBlocks(ctx.eigen_cpu_device(), delta.NumElements(), 3 * sizeof(T), 2,
              [&](int64_t b, int64_t e) {
                UnalignedArrayMap<T> v(var + b, e - b);
                ConstArrayMap<T> d(g + b, e - b);
                v -= d * alpha;
              });
    return absl::OkStatus();
  }
};

// accum = accum * momentum + grad; var -= lr * accum (or Nesterov's step).
template <typename T>
class ApplyMomentumOp : public OpKernel {
 public:
  explicit ApplyMomentumOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("use_nesterov", &use_nesterov_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(const T lr, ScalarInput<T>(ctx, 2, "lr"));
    STRATA_ASSIGN_OR_RETURN(const T momentum, ScalarInput<T>(ctx, 4, "momentum"));
    const Tensor& grad = ctx.input(3);
    LockedVars<T> vars;
    STRATA_RETURN_IF_ERROR(vars.Init(ctx, 2, grad, "grad"));
    T* var = vars.data(0);
    T* accum = vars.data(1);
    const T* g = grad.data<T>();
    const bool nesterov = use_nesterov_;
    ForBlocks(ctx.eigen_cpu_device(), grad.NumElements(), 5 * sizeof(T), 5,
              [&](int64_t b, int64_t e) {
                UnalignedArrayMap<T> v(var + b, e - b), a(accum + b, e - b);
                ConstArrayMap<T> gr(g + b, e - b);
                a = a * momentum + gr;
                if (nesterov) {
                  v -= gr * lr + a * momentum * lr;
                } else {
                  v -= a * lr;
                }
              });
    return absl::OkStatus();
  }

 private:
  bool use_nesterov_ = false;
};

// TensorFlow's ApplyAdam: epsilon outside the square root, the bias
// corrections folded into the step size.
template <typename T>
class ApplyAdamOp : public OpKernel {
 public:
  explicit ApplyAdamOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("use_nesterov", &use_nesterov_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(const T beta1_power, ScalarInput<T>(ctx, 3, "beta1_power"));
    STRATA_ASSIGN_OR_RETURN(const T beta2_power, ScalarInput<T>(ctx, 4, "beta2_power"));
    STRATA_ASSIGN_OR_RETURN(const T lr, ScalarInput<T>(ctx, 5, "lr"));
    STRATA_ASSIGN_OR_RETURN(const T beta1, ScalarInput<T>(ctx, 6, "beta1"));
    STRATA_ASSIGN_OR_RETURN(const T beta2, ScalarInput<T>(ctx, 7, "beta2"));
    STRATA_ASSIGN_OR_RETURN(const T epsilon, ScalarInput<T>(ctx, 8, "epsilon"));
    const Tensor& grad = ctx.input(9);
    LockedVars<T> vars;
    STRATA_RETURN_IF_ERROR(vars.Init(ctx, 3, grad, "grad"));
    T* var = vars.data(0);
    T* m = vars.data(1);
    T* v = vars.data(2);
    const T* g = grad.data<T>();
    const T alpha = lr * Eigen::numext::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
    const T one_minus_beta1 = T(1) - beta1;
    const T one_minus_beta2 = T(1) - beta2;
    const bool nesterov = use_nesterov_;
    ForBlocks(ctx.eigen_cpu_device(), grad.NumElements(), 7 * sizeof(T), 20,
              [&](int64_t b, int64_t e) {
                UnalignedArrayMap<T> x(var + b, e - b), mm(m + b, e - b), vv(v + b, e - b);
                ConstArrayMap<T> gr(g + b, e - b);
                mm += (gr - mm) * one_minus_beta1;
                vv += (gr.square() - vv) * one_minus_beta2;
                if (nesterov) {
                  x -= ((gr * one_minus_beta1 + beta1 * mm) * alpha) / (vv.sqrt() + epsilon);
                } else {
                  x -= (mm * alpha) / (vv.sqrt() + epsilon);
                }
              });
    return absl::OkStatus();
  }

 private:
  bool use_nesterov_ = false;
};

#define STRATA_REGISTER_APPLY(T)                                                              \
  STRATA_REGISTER_KERNEL(                                                                     \
      KernelBuilder("ResourceApplyGradientDescent").Device(kDeviceCpu).TypeConstraint<T>("T"), \
      ApplyGradientDescentOp<T>);                                                             \
  STRATA_REGISTER_KERNEL(                                                                     \
      KernelBuilder("ResourceApplyMomentum").Device(kDeviceCpu).TypeConstraint<T>("T"),       \
      ApplyMomentumOp<T>);                                                                    \
  STRATA_REGISTER_KERNEL(                                                                     \
      KernelBuilder("ResourceApplyAdam").Device(kDeviceCpu).TypeConstraint<T>("T"),           \
      ApplyAdamOp<T>)

STRATA_REGISTER_APPLY(float);
STRATA_REGISTER_APPLY(double);

#undef STRATA_REGISTER_APPLY

}  // namespace
}  // namespace strata
