// The collective op family: TensorFlow's V2 collectives, with TensorFlow's
// names, inputs and attrs, so that graphs written by tf.distribute import
// unchanged. Each op node is one participant: the group_size nodes (one per
// device) with the same group_key and instance_key meet at run time and
// exchange their tensors through the session's CollectiveExecutor
// (kernels/collective.h).
//
//   CollectiveReduceV2    all-reduce: every participant gets merge_op over the
//                         inputs (Add/Mul/Min/Max), then final_op (Id, or Div
//                         by group_size).
//   CollectiveGatherV2    all-gather: the inputs concatenated along dim 0 in
//                         rank order (ranks: the devices' names sorted).
//   CollectiveReduceScatterV2
//                         reduce-scatter: merge_op over the inputs, then
//                         final_op, as CollectiveReduceV2, cut along dim 0
//                         into group_size equal blocks (dim 0 must divide):
//                         rank r gets block r.
//   CollectiveBcastSendV2 broadcast from this participant (output = input).
//   CollectiveBcastRecvV2 receives the broadcast, of dtype T and the given shape.
//
//   Scope root = Scope::NewRootScope();
//   for (int r = 0; r < 4; ++r) {
//     Scope d = root.WithDevice(absl::StrCat("/device:CPU:", r));
//     Output x = ops::Const(d, float(r));
//     Output sum = ops::CollectiveReduce(d, x, /*group_size=*/4, /*group_key=*/1,
//                                        /*instance_key=*/1,
//                                        CollectiveAttrs().MergeOp("Add").FinalOp("Div"));
//   }
//
// A sum all-reduce (merge_op Add, final_op Id or Div) is differentiable when
// it was made with a backward instance key (the "_backward_instance_key"
// attr, CollectiveAttrs::BackwardInstanceKey): its gradient is the same
// all-reduce of the output's gradient under that key
// (graph/gradients/collective_grad.cc), so the participants that reserved
// the same backward key meet again in the backward pass.
//
// group_size, group_key and instance_key are int32 scalar inputs, as in
// TensorFlow; the builders make them Const nodes. The ops are stateful (never
// folded, deduplicated or pruned as duplicates).
//
// Thread-safety and ownership: as for Scope (graph/scope.h).
#ifndef STRATA_GRAPH_OPS_COLLECTIVE_OPS_H_
#define STRATA_GRAPH_OPS_COLLECTIVE_OPS_H_

#include <string>

#include "graph/scope.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {
namespace ops {

// The attr naming a differentiable CollectiveReduceV2's backward key.
inline constexpr char kBackwardInstanceKeyAttr[] = "_backward_instance_key";

// Optional attrs of the collective builders (TensorFlow's defaults).
struct CollectiveAttrs {
  CollectiveAttrs& MergeOp(std::string v) { merge_op_ = std::move(v); return *this; }
  CollectiveAttrs& FinalOp(std::string v) { final_op_ = std::move(v); return *this; }
  CollectiveAttrs& TimeoutSeconds(float v) { timeout_seconds_ = v; return *this; }
  CollectiveAttrs& CommunicationHint(std::string v) { communication_hint_ = std::move(v); return *this; }
  // CollectiveReduce only: the instance key of its gradient's all-reduce.
  CollectiveAttrs& BackwardInstanceKey(int v) { backward_instance_key_ = v; return *this; }

  std::string merge_op_ = "Add";   // CollectiveReduce(Scatter) only: Add, Mul, Min, Max
  std::string final_op_ = "Id";    // CollectiveReduce(Scatter) only: Id, Div
  int backward_instance_key_ = -1;  // none: not differentiable
  float timeout_seconds_ = 0;      // 0: the session's default
  std::string communication_hint_ = "auto";  // auto, ring, reduce_to_one (local), nccl
};

Output CollectiveReduce(const Scope& s, Output input, int group_size, int group_key,
                        int instance_key, const CollectiveAttrs& attrs = {});
Output CollectiveGather(const Scope& s, Output input, int group_size, int group_key,
                        int instance_key, const CollectiveAttrs& attrs = {});
Output CollectiveReduceScatter(const Scope& s, Output input, int group_size, int group_key,
                               int instance_key, const CollectiveAttrs& attrs = {});
Output CollectiveBcastSend(const Scope& s, Output input, int group_size, int group_key,
                           int instance_key, const CollectiveAttrs& attrs = {});
Output CollectiveBcastRecv(const Scope& s, DataType dtype, const TensorShape& shape,
                           int group_size, int group_key, int instance_key,
                           const CollectiveAttrs& attrs = {});

}  // namespace ops
}  // namespace strata

#endif  // STRATA_GRAPH_OPS_COLLECTIVE_OPS_H_
