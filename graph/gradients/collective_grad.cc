// Gradients of the collective op family (graph/ops/collective_ops.h).
//
// A sum all-reduce y = Σ_k x_k (every participant gets the same y, then
// divided by the group size for final_op Div) gives participant r's input
// the gradient Σ_k dL/dy_k (divided likewise): the same all-reduce of the
// output gradients. The participants meet under the backward instance key
// each reserved when the forward collective was made, so the key is the
// same on every participant. Only a collective made with that key is
// differentiable; others are InvalidArgument naming the node, rather than a
// gradient that would silently leave out the other participants.
#include <string>

#include "absl/strings/str_cat.h"
#include "graph/gradients/grad_registry.h"
#include "graph/ops/collective_ops.h"
#include "graph/ops/core_ops.h"

namespace strata {
namespace {

absl::Status CollectiveReduceGrad(const Scope& s, const Node& op, const OutputList& g, OutputList* out) {
  std::string merge_op, final_op, hint;
  float timeout = 0;
  int64_t backward_key = -1;
  const AttrMap& a = op.attrs();
  if (!GetAttr(a, "merge_op", &merge_op).ok() || !GetAttr(a, "final_op", &final_op).ok() ||
      !GetAttr(a, "communication_hint", &hint).ok() || !GetAttr(a, "timeout_seconds", &timeout).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("CollectiveReduceV2 '", op.name(), "' lacks its attrs"));
  }
  if (merge_op != "Add") {
    return absl::InvalidArgumentError(absl::StrCat("CollectiveReduceV2 '", op.name(), "' (merge_op ", merge_op,
                                                   "): only a sum all-reduce is differentiable"));
  }
  if (!GetAttr(a, ops::kBackwardInstanceKeyAttr, &backward_key).ok() || backward_key < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CollectiveReduceV2 '", op.name(),
        "' has no backward instance key, so its gradient cannot meet the other participants': make it with "
        "ops::CollectiveAttrs().BackwardInstanceKey(k), the same k on every participant (a strategy's "
        "replicas: train::CurrentReplica().all_reduce_sum)"));
  }
  NodeBuilder b(s, "CollectiveReduceV2");
  b.Input(g[0])
      .Input(OpInput(op, 1))
      .Input(OpInput(op, 2))
      .Input(ops::Const(s, static_cast<int32_t>(backward_key)))
      .Input(OutputList{})
      .Attr("merge_op", MakeAttr(merge_op))
      .Attr("final_op", MakeAttr(final_op))
      .Attr("communication_hint", MakeAttr(hint))
      .Attr("timeout_seconds", MakeAttr(timeout));
  Node* n = b.Finalize();
  out->push_back(n == nullptr ? Output() : Output(n, 0));
  for (int i = 1; i < op.num_inputs(); ++i) out->push_back(Output());
  return s.status();
}

STRATA_REGISTER_GRADIENT("CollectiveReduceV2", CollectiveReduceGrad);
STRATA_NO_GRADIENT("CollectiveGatherV2");
STRATA_NO_GRADIENT("CollectiveReduceScatterV2");
STRATA_NO_GRADIENT("CollectiveBcastSendV2");
STRATA_NO_GRADIENT("CollectiveBcastRecvV2");

}  // namespace
}  // namespace strata
