#include "kernels/collective.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/mutex.h"

namespace strata {

absl::StatusOr<MergeOp> ParseMergeOp(const std::string& s) {
  if (s == "Add") return MergeOp::kAdd;
  if (s == "Mul") return MergeOp::kMul;
  if (s == "Min") return MergeOp::kMin;
  if (s == "Max") return MergeOp::kMax;
  return absl::InvalidArgumentError(
      absl::StrCat("merge_op is '", s, "', expected one of Add, Mul, Min, Max"));
}

absl::StatusOr<FinalOp> ParseFinalOp(const std::string& s) {
  if (s == "Id") return FinalOp::kId;
  if (s == "Div") return FinalOp::kDiv;
  return absl::InvalidArgumentError(absl::StrCat("final_op is '", s, "', expected Id or Div"));
}

const char* CollectiveTypeName(CollectiveType t) {
  switch (t) {
    case CollectiveType::kAllReduce: return "all-reduce";
    case CollectiveType::kAllGather: return "all-gather";
    case CollectiveType::kBroadcastSend: return "broadcast-send";
    case CollectiveType::kBroadcastRecv: return "broadcast-recv";
  }
  return "unknown collective";
}

const char* MergeOpName(MergeOp op) {
  switch (op) {
    case MergeOp::kAdd: return "Add";
    case MergeOp::kMul: return "Mul";
    case MergeOp::kMin: return "Min";
    case MergeOp::kMax: return "Max";
  }
  return "unknown merge op";
}

absl::StatusOr<Tensor> CollectiveExecutor::Execute(const CollectiveParams& params, Tensor input,
                                                   Allocator* allocator,
                                                   CancellationManager* cancellation) {
  Notification done;
  absl::Status status;
  Tensor output;
  ExecuteAsync(params, std::move(input), allocator, cancellation,
               [&](absl::Status s, Tensor out) {
                 status = std::move(s);
                 output = std::move(out);
                 done.Notify();
               });
  done.WaitForNotification();
  if (!status.ok()) return status;
  return output;
}

}  // namespace strata
