#include "kernels/op_kernel.h"

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/status.h"

namespace strata {

OpKernel::OpKernel(OpKernelConstruction& c)
    : name_(c.def().name()),
      type_(c.def().op()),
      input_types_(c.input_types()),
      output_types_(c.output_types()) {}

absl::Status AsyncOpKernel::Compute(OpKernelContext& ctx) {
  Notification n;
  absl::Status status;
  ComputeAsync(ctx, [&](absl::Status s) {
    status = std::move(s);
    n.Notify();
  });
  n.WaitForNotification();
  return status;
}

namespace {

// Where a tensor of `dtype` made on `device` goes: the device allocator, or
// on a GPU the host allocator for dtypes that live in host memory (shapes,
// indices: kernels/device_base.h LivesInHostMemory). CPU devices pay one
// virtual call.
Allocator* AllocatorFor(const DeviceBase* device, DataType dtype) {
  if (device->gpu_context() == nullptr) return device->allocator();
  return LivesInHostMemory(kDeviceGpu, dtype) ? device->host_allocator() : device->allocator();
}

}  // namespace

absl::Status OpKernelContext::allocate_output(int i, const TensorShape& shape, Tensor** out) {
  auto t = Tensor::Allocate(AllocatorFor(p_.device, p_.op_kernel->output_type(i)),
                            p_.op_kernel->output_type(i), shape);
  if (!t.ok()) return AnnotateStatus(t.status(), absl::StrCat("output ", i, ": "));
  outputs_[i] = *std::move(t);
  *out = &outputs_[i];
  return absl::OkStatus();
}

absl::Status OpKernelContext::forward_input_or_allocate_output(
    std::initializer_list<int> candidates, int output, const TensorShape& shape, Tensor** out) {
  const DataType dt = p_.op_kernel->output_type(output);
  Allocator* const want = AllocatorFor(p_.device, dt);
  for (int i : candidates) {
    Tensor& in = p_.inputs[i];
    if (in.dtype() == dt && in.NumElements() == shape.num_elements() && in.RefCountIsOne() &&
        in.allocator() == want) {
      auto reshaped = in.Reshaped(shape);
      if (!reshaped.ok()) continue;
      outputs_[output] = *std::move(reshaped);
      *out = &outputs_[output];
      return absl::OkStatus();
    }
  }
  return allocate_output(output, shape, out);
}

Tensor OpKernelContext::forward_input(int i) {
  Tensor& in = p_.inputs[i];
  if (in.IsInitialized() && in.RefCountIsOne()) return std::move(in);
  return in;
}

absl::Status OpKernelContext::allocate_temp(DataType dtype, const TensorShape& shape, Tensor* out) {
  // Temporaries are a kernel's scratch: device memory whatever the dtype.
  auto t = Tensor::Allocate(allocator(), dtype, shape);
  if (!t.ok()) return AnnotateStatus(t.status(), "temporary: ");
  *out = *std::move(t);
  return absl::OkStatus();
}

}  // namespace strata
