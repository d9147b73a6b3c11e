#include "train/transformer_lm.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/math_ops.h"
#include "train/phase_layers.h"
#include "train/sequence_layers.h"

namespace strata {
namespace train {

TransformerLm::TransformerLm(const Options& o) : options_(o) {
  auto add = [this](Layer* l) { return layers_.emplace_back(l).get(); };
  tokens_ = add(new Embedding(o.vocab, o.width, o.seed, "tokens"));
  positions_ = add(new PositionEmbedding(o.seq, o.width, o.seed + 1, "positions"));
  for (int64_t b = 0; b < o.blocks; ++b) {
    const std::string n = absl::StrCat("block", b);
    const int64_t seed = o.seed + 10 * (b + 1);
    const int64_t key_dim = o.heads > 0 ? o.width / o.heads : 0;
    Block block;
    block.ln1 = add(new LayerNormalization(1e-3, n + "/ln1"));
    block.attention = add(new MultiHeadAttention({o.heads, key_dim, /*causal=*/true}, seed, n + "/attention"));
    block.ln2 = add(new LayerNormalization(1e-3, n + "/ln2"));
    block.ff1 = add(new Dense(4 * o.width, Activation::kRelu, seed + 1, n + "/ff1"));
    block.ff2 = add(new Dense(o.width, Activation::kNone, seed + 2, n + "/ff2"));
    block.attention_dropout = o.dropout > 0 ? add(new Dropout(o.dropout, seed + 3, n + "/attention_dropout")) : nullptr;
    block.ff_dropout = o.dropout > 0 ? add(new Dropout(o.dropout, seed + 4, n + "/ff_dropout")) : nullptr;
    blocks_.push_back(block);
  }
  final_norm_ = add(new LayerNormalization(1e-3, "final_norm"));
  logits_ = add(new Dense(o.vocab, Activation::kNone, o.seed + 2, "logits"));
}

absl::StatusOr<Output> TransformerLm::Build(const Scope& s, Output ids) {
  STRATA_ASSIGN_OR_RETURN(Output h, Embed(s, ids));
  STRATA_ASSIGN_OR_RETURN(h, Blocks(s, h, 0, num_blocks()));
  return Head(s, h);
}

absl::StatusOr<Output> TransformerLm::Embed(const Scope& s, Output ids) {
  STRATA_ASSIGN_OR_RETURN(Output h, tokens_->Apply(s, ids));
  return positions_->Apply(s, h);
}

absl::StatusOr<Output> TransformerLm::Blocks(const Scope& s, Output h, int64_t begin, int64_t end) {
  if (begin < 0 || begin > end || end > num_blocks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TransformerLm: blocks [", begin, ", ", end, ") of ", num_blocks()));
  }
  for (int64_t i = begin; i < end; ++i) {
    const Block& b = blocks_[i];
    STRATA_ASSIGN_OR_RETURN(Output n1, b.ln1->Apply(s, h));
    STRATA_ASSIGN_OR_RETURN(Output a, b.attention->Apply(s, n1));
    if (b.attention_dropout != nullptr) {
      STRATA_ASSIGN_OR_RETURN(a, b.attention_dropout->Apply(s, a));
    }
    h = ops::AddV2(s, h, a);
    STRATA_ASSIGN_OR_RETURN(Output n2, b.ln2->Apply(s, h));
    STRATA_ASSIGN_OR_RETURN(Output f1, b.ff1->Apply(s, n2));
    STRATA_ASSIGN_OR_RETURN(Output f2, b.ff2->Apply(s, f1));
    if (b.ff_dropout != nullptr) {
      STRATA_ASSIGN_OR_RETURN(f2, b.ff_dropout->Apply(s, f2));
    }
    h = ops::AddV2(s, h, f2);
  }
  return h;
}

absl::StatusOr<Output> TransformerLm::Head(const Scope& s, Output h) {
  STRATA_ASSIGN_OR_RETURN(h, final_norm_->Apply(s, h));
  return logits_->Apply(s, h);
}

std::vector<Variable*> TransformerLm::variables() const {
  std::vector<Variable*> out;
  for (const auto& l : layers_) out.insert(out.end(), l->variables().begin(), l->variables().end());
  return out;
}

std::vector<VariableRead> TransformerLm::reads() const {
  std::vector<VariableRead> out;
  for (const auto& l : layers_) out.insert(out.end(), l->reads().begin(), l->reads().end());
  return out;
}

}  // namespace train
}  // namespace strata
