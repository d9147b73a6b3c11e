// CallFrame: how a step's feeds reach _Arg nodes and _Retval nodes hand back
// fetches. The session rewrites feeds and fetches into these nodes, so a
// partition's executor needs no special cases for them.
//
// Thread-safety: GetArg may be called concurrently; SetRetval concurrently for
// distinct indices. Ownership: the caller of Executor::Run owns the frame.
#ifndef STRATA_KERNELS_CALL_FRAME_H_
#define STRATA_KERNELS_CALL_FRAME_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "graph/tensor.h"

namespace strata {

class CallFrame {
 public:
  virtual ~CallFrame() = default;
  virtual absl::Status GetArg(int index, Tensor* value) const = 0;
  virtual absl::Status SetRetval(int index, const Tensor& value) = 0;
};

// Feeds and fetches held in vectors.
class VectorCallFrame : public CallFrame {
 public:
  VectorCallFrame(std::vector<Tensor> args, int num_retvals)
      : args_(std::move(args)), retvals_(num_retvals) {}
  absl::Status GetArg(int index, Tensor* value) const override {
    if (index < 0 || index >= static_cast<int>(args_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no argument ", index, " in the call frame"));
    }
    *value = args_[index];
    return absl::OkStatus();
  }
  absl::Status SetRetval(int index, const Tensor& value) override {
    if (index < 0 || index >= static_cast<int>(retvals_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("no return value ", index, " in the call frame"));
    }
    retvals_[index] = value;
    return absl::OkStatus();
  }
  std::vector<Tensor>& retvals() { return retvals_; }

 private:
  std::vector<Tensor> args_;
  std::vector<Tensor> retvals_;
};

}  // namespace strata

#endif  // STRATA_KERNELS_CALL_FRAME_H_
