// OpKernel: how one op computes on one device type. The executor makes one
// kernel per node when a partition is planned and calls Compute once per step.
//
//   class ReluOp : public OpKernel {
//    public:
//     explicit ReluOp(OpKernelConstruction& c) : OpKernel(c) {}
//     absl::Status Compute(OpKernelContext& ctx) override {
//       const Tensor& x = ctx.input(0);
//       Tensor* y;
//       STRATA_RETURN_IF_ERROR(ctx.forward_input_or_allocate_output({0}, 0, x.shape(), &y));
//       ...
//       return absl::OkStatus();
//     }
//   };
//   STRATA_REGISTER_KERNEL(KernelBuilder("Relu").Device(kDeviceCpu).TypeConstraint<float>("T"), ReluOp);
//
// Errors returned by Compute abort the step; the executor prefixes the node's
// name. Constructors report bad attrs through OpKernelConstruction::SetStatus
// (STRATA_KERNEL_REQUIRES_OK).
//
// Thread-safety: Compute may run concurrently for different steps; kernels keep
// per-step state in the context, not in members (or guard it).
#ifndef STRATA_KERNELS_OP_KERNEL_H_
#define STRATA_KERNELS_OP_KERNEL_H_

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/attr_value.h"
#include "graph/op_registry.h"
#include "graph/tensor.h"
#include "kernels/device_base.h"
#include "proto/node_def.pb.h"

namespace strata {

class CallFrame;
class CancellationManager;
class CollectiveExecutor;
class OpKernelContext;
class Rendezvous;

class OpKernelConstruction {
 public:
  OpKernelConstruction(DeviceBase* device, const ::tensorflow::NodeDef& def, const OpDef& op,
                       const std::vector<DataType>& input_types,
                       const std::vector<DataType>& output_types)
      : device_(device), def_(def), op_(op), input_types_(input_types), output_types_(output_types) {}

  DeviceBase* device() const { return device_; }
  const ::tensorflow::NodeDef& def() const { return def_; }
  const OpDef& op_def() const { return op_; }
  const std::vector<DataType>& input_types() const { return input_types_; }
  const std::vector<DataType>& output_types() const { return output_types_; }

  template <typename T>
  absl::Status GetAttr(const std::string& name, T* v) const {
    return ::strata::GetAttr(def_.attr(), name, v);
  }
  // Records a construction failure (the first one is kept).
  void SetStatus(const absl::Status& s) {
    if (status_.ok()) status_ = s;
  }
  const absl::Status& status() const { return status_; }

 private:
  DeviceBase* const device_;
  const ::tensorflow::NodeDef& def_;
  const OpDef& op_;
  const std::vector<DataType>& input_types_;
  const std::vector<DataType>& output_types_;
  absl::Status status_;
};

// In a kernel constructor: record the error and return.
#define STRATA_KERNEL_REQUIRES_OK(construction, expr) \
  do {                                                \
    ::absl::Status strata_s_ = (expr);                \
    if (!strata_s_.ok()) {                            \
      (construction).SetStatus(strata_s_);            \
      return;                                         \
    }                                                 \
  } while (0)

class OpKernel {
 public:
  explicit OpKernel(OpKernelConstruction& c);
  virtual ~OpKernel() = default;
  OpKernel(const OpKernel&) = delete;
  OpKernel& operator=(const OpKernel&) = delete;

  virtual absl::Status Compute(OpKernelContext& ctx) = 0;
  // Expensive kernels are handed to the inter-op pool; cheap ones run inline
  // on the thread that made them ready (no scheduling cost).
  virtual bool IsExpensive() const { return false; }
  virtual bool IsAsync() const { return false; }
  // Whole-step capture (a GPU partition recorded once as a CUDA graph and
  // replayed each step: runtime/step_graph.h). True where all this kernel
  // does to a step is work it enqueues on its device's stream, so a
  // recording of one run, replayed, does it again on that step's values:
  // no host synchronisation, no host-side state, no copy from memory the
  // recording does not own. Host-memory inputs (int32 shapes, axes) it may
  // read on the host while recorded; a replay then reuses those values, so
  // the session records a partition only where they are the same each step
  // (or ReadsHostInputOnDevice says the kernel does not read them there).
  virtual bool IsCaptureSafe() const { return false; }
  // True where the kernel reads host-memory input `i` on the device only,
  // through a copy it enqueues (labels of a loss), so a replay sees that
  // step's value.
  virtual bool ReadsHostInputOnDevice(int /*i*/) const { return false; }

  const std::string& name() const { return name_; }
  const std::string& type_string() const { return type_; }
  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType input_type(int i) const { return input_types_[i]; }
  DataType output_type(int i) const { return output_types_[i]; }

 private:
  const std::string name_, type_;
  const std::vector<DataType> input_types_, output_types_;
};

// A kernel that finishes later (Recv, collectives). The context stays alive
// until `done` is called; `done` must be called exactly once.
class AsyncOpKernel : public OpKernel {
 public:
  using DoneCallback = std::function<void(absl::Status)>;
  explicit AsyncOpKernel(OpKernelConstruction& c) : OpKernel(c) {}
  virtual void ComputeAsync(OpKernelContext& ctx, DoneCallback done) = 0;
  // Runs ComputeAsync and waits for it.
  absl::Status Compute(OpKernelContext& ctx) final;
  bool IsAsync() const final { return true; }
};

class OpKernelContext {
 public:
  // What the executor hands a kernel for one invocation. Pointers are owned by
  // the executor and stay valid until the kernel is done.
  struct Params {
    const OpKernel* op_kernel = nullptr;
    DeviceBase* device = nullptr;
    // num_inputs entries; the kernel may move out of (forward) an input whose
    // buffer nobody else holds.
    Tensor* inputs = nullptr;
    int64_t step_id = 0;
    Rendezvous* rendezvous = nullptr;
    CallFrame* call_frame = nullptr;
    CancellationManager* cancellation = nullptr;
    CollectiveExecutor* collective_executor = nullptr;
  };

  explicit OpKernelContext(const Params& p)
      : p_(p), outputs_(p.op_kernel->num_outputs()) {}

  const OpKernel& op_kernel() const { return *p_.op_kernel; }
  DeviceBase* device() const { return p_.device; }
  const Params& params() const { return p_; }
  Allocator* allocator() const { return p_.device->allocator(); }
  const Eigen::ThreadPoolDevice& eigen_cpu_device() const { return *p_.device->eigen_cpu_device(); }

  int num_inputs() const { return p_.op_kernel->num_inputs(); }
  const Tensor& input(int i) const { return p_.inputs[i]; }
  // Input i for a kernel that hands it on to be written into: moved out of
  // the context when nobody else holds its buffer (the result's
  // RefCountIsOne() then says so), else a reference shared with its holders.
  // input(i) is empty afterwards in the first case.
  Tensor forward_input(int i);
  int num_outputs() const { return static_cast<int>(outputs_.size()); }

  // A fresh output tensor; ResourceExhausted naming the node if memory is short.
  absl::Status allocate_output(int i, const TensorShape& shape, Tensor** out);
  // Reuses the buffer of the first candidate input that nobody else holds and
  // that has the output's dtype and element count; else allocates.
  absl::Status forward_input_or_allocate_output(std::initializer_list<int> candidates, int output,
                                                const TensorShape& shape, Tensor** out);
  // A temporary (not an output), from the device's allocator.
  absl::Status allocate_temp(DataType dtype, const TensorShape& shape, Tensor* out);
  // Sets an output to an existing tensor (e.g. an input passed through).
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  Tensor* mutable_output(int i) { return &outputs_[i]; }
  absl::InlinedVector<Tensor, 2>& outputs() { return outputs_; }

  // InvalidArgument prefixed with nothing: the executor names the node.
  static absl::Status InvalidArgument(const std::string& msg) { return absl::InvalidArgumentError(msg); }

 private:
  const Params p_;
  absl::InlinedVector<Tensor, 2> outputs_;
};

}  // namespace strata

#endif  // STRATA_KERNELS_OP_KERNEL_H_
