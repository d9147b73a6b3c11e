// bfloat16 and half kernels (mixed precision, train/policy.h) for the ops
// whose CPU kernels exist for float only in spirit: convolutions and
// pooling. Each runs the op's float kernel: the inputs of the narrow dtype
// are widened to float, the float kernel computes (accumulating in float),
// and its outputs of that dtype are rounded once, as the other narrow CPU
// kernels do (MatMul, BiasAdd, the activations).
#include <memory>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/attr_value.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

template <typename T, DataType kLow>
class ViaFloatKernel : public OpKernel {
 public:
  explicit ViaFloatKernel(OpKernelConstruction& c)
      : OpKernel(c), def_(c.def()), in_types_(c.input_types()), out_types_(c.output_types()) {
    const DataType low = kLow;
    (*def_.mutable_attr())["T"] = MakeAttr(DT_FLOAT);
    for (DataType& t : in_types_) t = t == low ? DT_FLOAT : t;
    for (DataType& t : out_types_) t = t == low ? DT_FLOAT : t;
    absl::StatusOr<std::unique_ptr<OpKernel>> inner =
        CreateOpKernel(c.device(), def_, c.op_def(), in_types_, out_types_);
    if (!inner.ok()) {
      c.SetStatus(inner.status());
      return;
    }
    if ((*inner)->IsAsync()) {
      c.SetStatus(absl::InternalError("the float kernel is asynchronous"));
      return;
    }
    inner_ = *std::move(inner);
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const DataType low = kLow;
    std::vector<Tensor> inputs(ctx.num_inputs());
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& in = ctx.input(i);
      if (in.dtype() != low) {
        inputs[i] = in;
        continue;
      }
      STRATA_RETURN_IF_ERROR(ctx.allocate_temp(DT_FLOAT, in.shape(), &inputs[i]));
      const int64_t n = in.NumElements();
      Eigen::Map<Eigen::ArrayXf>(inputs[i].data<float>(), n) =
          Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(in.data<T>(), n)
              .template cast<float>();
    }
    OpKernelContext::Params p = ctx.params();
    p.op_kernel = inner_.get();
    p.inputs = inputs.data();
    OpKernelContext inner(p);
    STRATA_RETURN_IF_ERROR(inner_->Compute(inner));
    for (int o = 0; o < ctx.num_outputs(); ++o) {
      Tensor& out = inner.outputs()[o];
      if (output_type(o) != low) {
        ctx.set_output(o, std::move(out));
        continue;
      }
      Tensor* narrow = nullptr;
      STRATA_RETURN_IF_ERROR(ctx.allocate_output(o, out.shape(), &narrow));
      const int64_t n = out.NumElements();
      Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(narrow->data<T>(), n) =
          Eigen::Map<const Eigen::ArrayXf>(out.data<float>(), n).template cast<T>();
    }
    return absl::OkStatus();
  }

 private:
  ::tensorflow::NodeDef def_;
  std::vector<DataType> in_types_, out_types_;
  std::unique_ptr<OpKernel> inner_;
};

using ViaFloatBfloat16 = ViaFloatKernel<Eigen::bfloat16, DT_BFLOAT16>;
using ViaFloatHalf = ViaFloatKernel<Eigen::half, DT_HALF>;

#define REGISTER_VIA_FLOAT(OP)                                                                  \
  STRATA_REGISTER_KERNEL(KernelBuilder(OP).Device(kDeviceCpu).TypeConstraint("T", DT_BFLOAT16), \
                         ViaFloatBfloat16);                                                     \
  STRATA_REGISTER_KERNEL(KernelBuilder(OP).Device(kDeviceCpu).TypeConstraint("T", DT_HALF),     \
                         ViaFloatHalf)
REGISTER_VIA_FLOAT("Conv2D");
REGISTER_VIA_FLOAT("Conv2DBackpropInput");
REGISTER_VIA_FLOAT("Conv2DBackpropFilter");
REGISTER_VIA_FLOAT("MaxPool");
REGISTER_VIA_FLOAT("MaxPoolGrad");
REGISTER_VIA_FLOAT("AvgPool");
REGISTER_VIA_FLOAT("AvgPoolGrad");
#undef REGISTER_VIA_FLOAT

}  // namespace
}  // namespace strata
