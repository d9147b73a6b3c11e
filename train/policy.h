// Dtype policies (mixed precision), as Keras's mixed_precision.Policy: a
// layer keeps its variables in the policy's variable dtype (float32) and
// computes in its compute dtype. Under "mixed_bfloat16" a Dense layer casts
// its input and its weights to bfloat16, so its MatMul, BiasAdd and
// activation run in bfloat16 (on a GPU, cuBLAS multiplies bfloat16 with
// float32 accumulation; the CPU kernels convert to float32 and round once),
// and the gradients flow back through the casts to the float32 variables,
// which the optimizer updates in float32. Losses compute in float32 whatever
// their input's dtype.
//
//   train::SetGlobalPolicy(*train::PolicyFromName("mixed_bfloat16"));
//   train::Dense hidden(128, train::Activation::kRelu);   // takes the global policy
//   train::Dense logits(10);
//   logits.set_dtype_policy(*train::PolicyFromName("float32"));  // one layer in float32
//
// Policies: "float32" (the default), "mixed_bfloat16" and "mixed_float16".
// float16 gradients underflow without loss scaling, so under mixed_float16
// train::Minimize turns on the optimizer's dynamic loss scaling
// (train/optimizers.h LossScaleOptions), as Keras's compile does. Layers
// without low-precision kernels (Conv2D, MaxPool2D) refuse a mixed policy
// when applied, naming themselves; give them float32.
//
// Thread-safety: the global policy may be set and read from any thread (a
// layer reads it once, when it is made). Ownership: values.
#ifndef STRATA_TRAIN_POLICY_H_
#define STRATA_TRAIN_POLICY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/types.h"

namespace strata {
namespace train {

struct Policy {
  std::string name = "float32";
  DataType compute_dtype = DT_FLOAT;
  DataType variable_dtype = DT_FLOAT;
  bool mixed() const { return compute_dtype != variable_dtype; }
};

// InvalidArgument naming the policies Strata has for any other name.
absl::StatusOr<Policy> PolicyFromName(absl::string_view name);

// The policy of layers made from now on; "float32" until set.
void SetGlobalPolicy(const Policy& policy);
Policy GlobalPolicy();

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_POLICY_H_
