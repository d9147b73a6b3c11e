#include "graph/shape_inference.h"

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {

InferenceContext::InferenceContext(const ::tensorflow::NodeDef& node, const OpDef& op,
                                   std::vector<DataType> input_types,
                                   std::vector<PartialTensorShape> input_shapes,
                                   std::vector<const AttrValue*> input_values, int num_outputs)
    : node_(node),
      op_(op),
      input_types_(std::move(input_types)),
      inputs_(std::move(input_shapes)),
      input_values_(std::move(input_values)),
      parsed_values_(input_values_.size()),
      outputs_(num_outputs) {}

const Tensor* InferenceContext::input_tensor(int i) const {
  if (input_values_[i] == nullptr || !input_values_[i]->has_tensor()) return nullptr;
  if (!parsed_values_[i].has_value()) {
    auto t = Tensor::FromProto(input_values_[i]->tensor());
    parsed_values_[i] = t.ok() ? *std::move(t) : Tensor();
  }
  return parsed_values_[i]->IsInitialized() ? &*parsed_values_[i] : nullptr;
}

absl::Status InferenceContext::Error(const std::string& msg) const {
  return absl::InvalidArgumentError(absl::StrCat("node '", node_.name(), "' (op ", op_.name, "): ", msg));
}

absl::Status InferenceContext::Annotate(const absl::Status& s) const {
  return AnnotateStatus(s, absl::StrCat("node '", node_.name(), "' (op ", op_.name, "): "));
}

absl::Status InferenceContext::WithRank(int i, int rank, PartialTensorShape* out) const {
  const PartialTensorShape& s = inputs_[i];
  if (s.unknown_rank()) {
    *out = PartialTensorShape(DimVector(rank, -1));
    return absl::OkStatus();
  }
  if (s.dims() != rank) {
    return Error(absl::StrCat("input ", i, " must have rank ", rank, " but has shape ", s.DebugString()));
  }
  *out = s;
  return absl::OkStatus();
}

absl::Status InferenceContext::WithRankAtLeast(int i, int rank, PartialTensorShape* out) const {
  const PartialTensorShape& s = inputs_[i];
  if (!s.unknown_rank() && s.dims() < rank) {
    return Error(absl::StrCat("input ", i, " must have rank at least ", rank, " but has shape ",
                              s.DebugString()));
  }
  *out = s;
  return absl::OkStatus();
}

absl::Status InferenceContext::MergeDim(int64_t a, int64_t b, int64_t* out,
                                        const std::string& what) const {
  if (a >= 0 && b >= 0 && a != b) {
    return Error(absl::StrCat(what, ": dimensions ", a, " and ", b, " do not match"));
  }
  *out = a >= 0 ? a : b;
  return absl::OkStatus();
}

absl::StatusOr<PartialTensorShape> BroadcastShapes(const PartialTensorShape& a,
                                                   const PartialTensorShape& b) {
  if (a.unknown_rank() || b.unknown_rank()) return PartialTensorShape::UnknownRank();
  const int rank = std::max(a.dims(), b.dims());
  DimVector out(rank);
  for (int i = 0; i < rank; ++i) {
    const int ia = a.dims() - rank + i, ib = b.dims() - rank + i;
    const int64_t da = ia >= 0 ? a.dim_size(ia) : 1;
    const int64_t db = ib >= 0 ? b.dim_size(ib) : 1;
    if (da == 1) {
      out[i] = db;
    } else if (db == 1) {
      out[i] = da;
    } else if (da < 0 || db < 0) {
      out[i] = da >= 0 ? da : db;  // the unknown one must be 1 or equal
    } else if (da == db) {
      out[i] = da;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("shapes ", a.DebugString(), " and ",
                                                     b.DebugString(), " are not broadcastable"));
    }
  }
  return PartialTensorShape(out);
}

absl::Status UnchangedShape(InferenceContext& c) {
  c.set_output(0, c.input(0));
  return absl::OkStatus();
}

absl::Status ScalarShape(InferenceContext& c) {
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, PartialTensorShape(DimVector{}));
  return absl::OkStatus();
}

absl::Status UnknownShape(InferenceContext& c) {
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, PartialTensorShape::UnknownRank());
  return absl::OkStatus();
}

absl::Status BroadcastBinaryOpShape(InferenceContext& c) {
  auto s = BroadcastShapes(c.input(0), c.input(1));
  if (!s.ok()) return c.Annotate(s.status());
  c.set_output(0, *s);
  return absl::OkStatus();
}

}  // namespace strata
