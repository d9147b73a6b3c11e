#include "graph/ops/einsum.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/shape_inference.h"

namespace strata {

namespace {

constexpr int kEllipsisBase = 52;

bool IsLabel(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
int LabelId(char c) { return c >= 'a' ? c - 'a' : 26 + (c - 'A'); }

absl::Status Bad(const std::string& equation, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("Einsum equation '", equation, "': ", why));
}

// Checks one term: letters and at most one "...", no repeated letter.
absl::Status CheckTerm(const std::string& equation, const std::string& term, const std::string& what) {
  const size_t dots = term.find("...");
  if (dots != std::string::npos && term.find('.', dots + 3) != std::string::npos) {
    return Bad(equation, absl::StrCat(what, " '", term, "' has more than one ellipsis"));
  }
  bool seen[kEllipsisBase] = {};
  for (size_t i = 0; i < term.size(); ++i) {
    if (dots != std::string::npos && i >= dots && i < dots + 3) continue;
    const char c = term[i];
    if (!IsLabel(c)) return Bad(equation, absl::StrCat(what, " '", term, "' has '", std::string(1, c), "', not a letter"));
    if (seen[LabelId(c)]) {
      return Bad(equation, absl::StrCat(what, " '", term, "' repeats label '", std::string(1, c),
                                        "' (diagonals and traces are not supported)"));
    }
    seen[LabelId(c)] = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EinsumTerms> SplitEinsum(const std::string& equation, int num_inputs) {
  EinsumTerms t;
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  t.inputs = absl::StrSplit(lhs, ',');
  if (t.inputs.size() != static_cast<size_t>(num_inputs)) {
    return Bad(equation, absl::StrCat("has ", t.inputs.size(), " input terms for ", num_inputs, " inputs"));
  }
  if (num_inputs < 1 || num_inputs > 2) return Bad(equation, "only one or two operands are supported");
  for (size_t i = 0; i < t.inputs.size(); ++i) {
    STRATA_RETURN_IF_ERROR(CheckTerm(equation, t.inputs[i], absl::StrCat("input ", i)));
  }
  if (arrow != std::string::npos) {
    t.output = equation.substr(arrow + 2);
    STRATA_RETURN_IF_ERROR(CheckTerm(equation, t.output, "output"));
    for (char c : t.output) {
      if (IsLabel(c) && lhs.find(c) == std::string::npos) {
        return Bad(equation, absl::StrCat("output label '", std::string(1, c), "' is in no input"));
      }
    }
    return t;
  }
  // Implicit output: the ellipsis, then the labels used once, sorted.
  int count[kEllipsisBase] = {};
  for (char c : lhs) {
    if (IsLabel(c)) ++count[LabelId(c)];
  }
  std::string once;
  for (char c : lhs) {
    if (IsLabel(c) && count[LabelId(c)] == 1) once.push_back(c);
  }
  std::sort(once.begin(), once.end());
  t.output = (lhs.find("...") != std::string::npos ? "..." : "") + once;
  return t;
}

absl::StatusOr<EinsumSpec> ParseEinsum(const std::string& equation, absl::Span<const int> input_ranks) {
  STRATA_ASSIGN_OR_RETURN(EinsumTerms t, SplitEinsum(equation, static_cast<int>(input_ranks.size())));
  std::vector<int> ellipsis_dims(t.inputs.size(), 0);
  int max_ellipsis = 0;
  for (size_t i = 0; i < t.inputs.size(); ++i) {
    const std::string& term = t.inputs[i];
    const bool has = term.find("...") != std::string::npos;
    const int named = static_cast<int>(term.size()) - (has ? 3 : 0);
    const int rank = input_ranks[i];
    if (rank < named || (!has && rank != named)) {
      return Bad(equation, absl::StrCat("input ", i, " '", term, "' names ", named, " dims of a rank-", rank, " operand"));
    }
    ellipsis_dims[i] = rank - named;
    max_ellipsis = std::max(max_ellipsis, ellipsis_dims[i]);
  }
  auto ids = [&](const std::string& term, int ell) {
    std::vector<int> v;
    for (size_t k = 0; k < term.size(); ++k) {
      if (term[k] == '.') {
        for (int j = 0; j < ell; ++j) v.push_back(kEllipsisBase + max_ellipsis - ell + j);
        k += 2;
      } else {
        v.push_back(LabelId(term[k]));
      }
    }
    return v;
  };
  EinsumSpec spec;
  for (size_t i = 0; i < t.inputs.size(); ++i) spec.inputs.push_back(ids(t.inputs[i], ellipsis_dims[i]));
  spec.output = ids(t.output, max_ellipsis);
  spec.num_labels = kEllipsisBase + max_ellipsis;
  return spec;
}

absl::StatusOr<PartialTensorShape> EinsumOutputShape(const std::string& equation, const EinsumSpec& spec,
                                                     absl::Span<const PartialTensorShape> inputs,
                                                     std::vector<int64_t>* label_sizes) {
  std::vector<int64_t> size(static_cast<size_t>(spec.num_labels), -2);  // -2: not seen
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    for (size_t k = 0; k < spec.inputs[i].size(); ++k) {
      const int id = spec.inputs[i][k];
      const int64_t d = inputs[i].dim_size(static_cast<int>(k));
      int64_t& s = size[static_cast<size_t>(id)];
      const bool ellipsis = id >= kEllipsisBase;
      if (s == -2) {
        s = d;
      } else if (d == -1) {
        if (ellipsis && s == 1) s = -1;  // the unknown one may be larger
      } else if (s == -1) {
        if (!ellipsis || d != 1) s = d;
      } else if (d != s) {
        if (!ellipsis || (d != 1 && s != 1)) {
          return Bad(equation, absl::StrCat("input ", i, " ", inputs[i].DebugString(), " has ", d,
                                            " for a dim another operand has as ", s));
        }
        s = std::max(s, d);
      }
    }
  }
  DimVector out;
  for (int id : spec.output) out.push_back(size[static_cast<size_t>(id)] == -2 ? 1 : size[static_cast<size_t>(id)]);
  if (label_sizes != nullptr) {
    for (int64_t& s : size) s = s == -2 ? 1 : s;
    *label_sizes = size;
  }
  return PartialTensorShape(out);
}

namespace {

absl::Status EinsumShapeFn(InferenceContext& c) {
  std::string equation;
  STRATA_RETURN_IF_ERROR(c.GetAttr("equation", &equation));
  std::vector<int> ranks;
  std::vector<PartialTensorShape> shapes;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (c.input(i).unknown_rank()) {
      // The terms can still be checked; the output's rank is known without
      // an ellipsis.
      absl::StatusOr<EinsumTerms> t = SplitEinsum(equation, c.num_inputs());
      if (!t.ok()) return c.Annotate(t.status());
      c.set_output(0, t->output.find("...") != std::string::npos
                          ? PartialTensorShape::UnknownRank()
                          : PartialTensorShape(DimVector(t->output.size(), -1)));
      return absl::OkStatus();
    }
    ranks.push_back(c.input(i).dims());
    shapes.push_back(c.input(i));
  }
  absl::StatusOr<EinsumSpec> spec = ParseEinsum(equation, ranks);
  if (!spec.ok()) return c.Annotate(spec.status());
  absl::StatusOr<PartialTensorShape> out = EinsumOutputShape(equation, *spec, shapes);
  if (!out.ok()) return c.Annotate(out.status());
  c.set_output(0, *out);
  return absl::OkStatus();
}

}  // namespace

STRATA_REGISTER_OP("Einsum")
    .Input("inputs: N * T")
    .Output("output: T")
    .Attr("equation: string")
    .Attr("N: int >= 1")
    .Attr("T: type")
    .SetShapeFn(EinsumShapeFn);

namespace ops {

Output Einsum(const Scope& scope, const OutputList& inputs, const std::string& equation) {
  Node* n = NodeBuilder(scope, "Einsum").Input(inputs).Attr("equation", equation).Finalize();
  return n == nullptr ? Output() : Output(n, 0);
}

}  // namespace ops
}  // namespace strata
