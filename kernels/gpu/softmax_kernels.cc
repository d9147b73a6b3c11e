// GPU kernels for Softmax, LogSoftmax and SparseSoftmaxCrossEntropyWithLogits
// (launchers in reduce_gpu.cu). int32 labels live in host memory on GPU
// devices: they are range-checked there (a bad label is InvalidArgument, as
// on the CPU) and copied to the device; int64 labels are already on the
// device, where a bad one gives NaN in its row instead.
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/gpu/reduce_gpu.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace gpu {
namespace {

template <bool kLog>
class SoftmaxOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  explicit SoftmaxOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& logits = ctx.input(0);
    if (logits.dims() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(type_string(), ": logits must have rank >= 1, got shape ",
                                                     logits.shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(logits.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, logits.shape(), &out));
    const int64_t cols = logits.dim_size(logits.dims() - 1);
    const int64_t rows = cols == 0 ? 0 : logits.NumElements() / cols;
    return CudaStatus(LaunchSoftmax(t, logits.raw_data(), out->raw_data(), rows, cols, kLog, stream),
                      type_string().c_str());
  }
};

class SparseSoftmaxXentOp : public OpKernel {
 public:
  bool IsCaptureSafe() const override { return true; }
  // Host labels are checked on the host (eagerly run steps) and copied to
  // the device, where an out-of-range label gives a NaN row: a replayed step
  // reads them there only.
  bool ReadsHostInputOnDevice(int i) const override { return i == 1; }
  explicit SparseSoftmaxXentOp(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& features = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    if (features.dims() != 2 || labels.dims() != 1 || labels.dim_size(0) != features.dim_size(0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SparseSoftmaxCrossEntropyWithLogits: features must be [batch, classes] and labels "
          "[batch], got features ",
          features.shape().DebugString(), " and labels ", labels.shape().DebugString()));
    }
    const int64_t batch = features.dim_size(0), classes = features.dim_size(1);
    Tensor dev_labels = labels;
    if (OnHost(ctx, labels.dtype())) {
      for (int64_t r = 0; r < batch; ++r) {
        const int64_t l = labels.dtype() == DT_INT32 ? labels.data<int32_t>()[r] : labels.data<int64_t>()[r];
        if (l < 0 || l >= classes) {
          return absl::InvalidArgumentError(absl::StrCat(
              "SparseSoftmaxCrossEntropyWithLogits: label value ", l, " in row ", r,
              " is outside the valid range of classes [0, ", classes, ")"));
        }
      }
      STRATA_RETURN_IF_ERROR(AllocateDeviceTemp(ctx, labels.dtype(), labels.shape(), &dev_labels));
      STRATA_RETURN_IF_ERROR(CopyHostToDevice(ctx, labels, &dev_labels));
    }
    STRATA_ASSIGN_OR_RETURN(const ElemType t, ToElemType(features.dtype()));
    STRATA_ASSIGN_OR_RETURN(cudaStream_t stream, Stream(ctx));
    Tensor *loss, *backprop;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{batch}, &loss));
    STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 1, features.shape(), &backprop));
    return CudaStatus(LaunchSparseXent(t, features.raw_data(), dev_labels.raw_data(), labels.dtype() == DT_INT64,
                                       loss->raw_data(), backprop->raw_data(), batch, classes, stream),
                      "SparseSoftmaxCrossEntropyWithLogits");
  }
};

#define REGISTER_SOFTMAX(dt)                                                                       \
  STRATA_REGISTER_KERNEL(KernelBuilder("Softmax").Device(kDeviceGpu).TypeConstraint("T", dt),     \
                         SoftmaxOp<false>);                                                        \
  STRATA_REGISTER_KERNEL(KernelBuilder("LogSoftmax").Device(kDeviceGpu).TypeConstraint("T", dt),  \
                         SoftmaxOp<true>)
REGISTER_SOFTMAX(DT_FLOAT);
REGISTER_SOFTMAX(DT_DOUBLE);
REGISTER_SOFTMAX(DT_HALF);
REGISTER_SOFTMAX(DT_BFLOAT16);
#undef REGISTER_SOFTMAX

#define REGISTER_XENT(dt, label)                                          \
  STRATA_REGISTER_KERNEL(KernelBuilder("SparseSoftmaxCrossEntropyWithLogits") \
                             .Device(kDeviceGpu)                          \
                             .TypeConstraint("T", dt)                     \
                             .TypeConstraint("Tlabels", label),           \
                         SparseSoftmaxXentOp)
REGISTER_XENT(DT_FLOAT, DT_INT32);
REGISTER_XENT(DT_FLOAT, DT_INT64);
REGISTER_XENT(DT_DOUBLE, DT_INT32);
REGISTER_XENT(DT_DOUBLE, DT_INT64);
#undef REGISTER_XENT

}  // namespace
}  // namespace gpu
}  // namespace strata
