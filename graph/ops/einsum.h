// Einsum, TensorFlow's op: Einsum(inputs: N * T; attr equation) -> T.
//
//   // Keras MultiHeadAttention's scores: [b, s, h, d] x [b, t, h, d] -> [b, h, t, s].
//   Output scores = ops::Einsum(s, {key, query}, "aecd,abcd->acbe");
//   // EinsumDense over any leading dims.
//   Output y = ops::Einsum(s, {x, kernel}, "...b,bc->...c");
//
// Supported: one or two operands; labels a-z and A-Z; at most one "..." per
// term (broadcast across operands, right-aligned, as numpy's); an explicit
// output ("->") or the implicit one (labels used once, sorted, after the
// ellipsis). A label in both operands and not in the output is contracted,
// one in a single operand and not in the output is summed (so are the
// ellipsis dims when the output has no "..."). Not supported
// (InvalidArgument naming the equation): a label twice in one term
// (diagonals), more than two operands.
//
// Thread-safety: registration is static; ParseEinsum is pure.
#ifndef STRATA_GRAPH_OPS_EINSUM_H_
#define STRATA_GRAPH_OPS_EINSUM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/scope.h"
#include "graph/tensor_shape.h"

namespace strata {

// The equation's terms, the output made explicit.
struct EinsumTerms {
  std::vector<std::string> inputs;
  std::string output;
};
absl::StatusOr<EinsumTerms> SplitEinsum(const std::string& equation, int num_inputs);

// The equation over operands of the given ranks, labels as ids: letters are
// 0..51, ellipsis dims 52.. right-aligned (an operand's last ellipsis dim has
// the same id as every other's).
struct EinsumSpec {
  std::vector<std::vector<int>> inputs;
  std::vector<int> output;
  int num_labels = 0;
};
absl::StatusOr<EinsumSpec> ParseEinsum(const std::string& equation, absl::Span<const int> input_ranks);

// The size of each label (-1 unknown) and the output's shape. Letter labels
// must agree across operands; ellipsis dims broadcast (1 against n).
absl::StatusOr<PartialTensorShape> EinsumOutputShape(const std::string& equation, const EinsumSpec& spec,
                                                     absl::Span<const PartialTensorShape> inputs,
                                                     std::vector<int64_t>* label_sizes = nullptr);

namespace ops {
Output Einsum(const Scope& scope, const OutputList& inputs, const std::string& equation);
}  // namespace ops

}  // namespace strata

#endif  // STRATA_GRAPH_OPS_EINSUM_H_
