// TransformerLm: a decoder-only transformer language model built from the
// sequence layers (train/sequence_layers.h): token and position
// embeddings, `blocks` pre-norm causal blocks (h + MHA(LN(h)), then
// h + FF(LN(h)) with FF = Dense(4 width, ReLU), Dense(width); with
// `dropout` > 0 a Dropout of that rate on each branch before its addition,
// as GPT's residual dropout, active in the training phase only), a final
// LayerNormalization and Dense logits. ids [batch, seq] int32 -> logits
// [batch, seq, vocab]. examples/char_lm.cc trains one; tools/bench/lm_bench
// times one against PyTorch.
//
//   train::TransformerLm lm({.vocab = 96, .seq = 64, .width = 128, .heads = 4, .blocks = 2});
//   STRATA_ASSIGN_OR_RETURN(Output logits, lm.Build(root, ids));
//   ... train::Minimize(root, loss, lm.reads(), &adam) ...
//
// Weights: tokens/embeddings, positions/embeddings, block<i>/{ln1,ln2}/
// {gamma,beta}, block<i>/attention/{query,key,value,output}/{kernel,bias},
// block<i>/{ff1,ff2}/{kernel,bias}, final_norm/{gamma,beta},
// logits/{kernel,bias}; seeds from options.seed.
//
// Errors: the layers' (InvalidArgument naming the layer). Thread-safety
// and ownership: as a Sequential (train/models.h).
#ifndef STRATA_TRAIN_TRANSFORMER_LM_H_
#define STRATA_TRAIN_TRANSFORMER_LM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "train/layers.h"

namespace strata {
namespace train {

class TransformerLm {
 public:
  struct Options {
    int64_t vocab = 0;
    int64_t seq = 0;
    int64_t width = 64;
    int64_t heads = 4;
    int64_t blocks = 2;
    int64_t seed = 1;
    double dropout = 0;  // residual dropout rate (train/phase_layers.h)
  };
  explicit TransformerLm(const Options& options);

  // May be called again (another replica, an evaluation): the same weights.
  absl::StatusOr<Output> Build(const Scope& scope, Output ids);

  // The model in parts, e.g. for pipeline stages (strategy/pipeline.h):
  // the embeddings (ids -> h [batch, seq, width]), blocks [begin, end) of h
  // (InvalidArgument naming a range outside [0, blocks]), and the head (the
  // final norm and the logits). Build is Head(Blocks(Embed(ids), 0, blocks)).
  absl::StatusOr<Output> Embed(const Scope& scope, Output ids);
  absl::StatusOr<Output> Blocks(const Scope& scope, Output h, int64_t begin, int64_t end);
  absl::StatusOr<Output> Head(const Scope& scope, Output h);
  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }

  std::vector<Variable*> variables() const;
  // The reads of the latest Build: what Minimize needs.
  std::vector<VariableRead> reads() const;

 private:
  const Options options_;
  std::vector<std::unique_ptr<Layer>> layers_;  // every layer, in order
  Layer* tokens_ = nullptr;
  Layer* positions_ = nullptr;
  struct Block {
    Layer* ln1;
    Layer* attention;
    Layer* ln2;
    Layer* ff1;
    Layer* ff2;
    Layer* attention_dropout;  // nullptr without dropout
    Layer* ff_dropout;
  };
  std::vector<Block> blocks_;
  Layer* final_norm_ = nullptr;
  Layer* logits_ = nullptr;
};

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_TRANSFORMER_LM_H_
