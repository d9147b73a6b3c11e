// Layers: the building blocks of model code, in the spirit of Keras. A layer
// turns one Output into another with builder ops; layers with weights make
// them (through the variable-creator hook, train/variable.h) the first time
// they are applied and read them on every application, so one layer object
// can be applied several times (e.g. once per replica) and always means the
// same weights.
//
//   Scope root = Scope::NewRootScope();
//   Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 64}));
//   Dense hidden("dense", 128, Activation::kRelu, /*seed=*/1);
//   Dense out("dense_1", 10, Activation::kNone, /*seed=*/2);
//   absl::StatusOr<Output> h = hidden.Apply(root, x);           // [?, 128]
//   absl::StatusOr<Output> logits = out.Apply(root, *h);        // [?, 10]
//   hidden.variables();   // "dense/kernel" [64,128], "dense/bias" [128]
//   hidden.reads();       // the ReadVariableOp outputs of the last Apply
//
// Weights: kernels are Glorot-uniform with the layer's seed (bias zero), so a
// model built twice with the same seeds starts from the same values.
// Variables are named "<layer name>/kernel" and "<layer name>/bias" under the
// scope of the first Apply; ops of an application go under a sub-scope named
// after the layer.
//
// Shapes: Dense takes [batch, features]; Conv2D and MaxPool2D take NHWC
// [batch, rows, cols, channels]; the dims a layer's weights depend on
// (features, channels) must be known when it is first applied. Errors
// (unknown dims, a second Apply with other input dims, bad arguments such as
// zero units) are InvalidArgument naming the layer; the scope's error is
// returned if it already failed.
//
// Thread-safety: build with one thread (as for Scope). Ownership: a layer's
// Variables belong to the graph's collection (they live as long as the root
// Scope); the layer must outlive its use in model code only.
#ifndef STRATA_TRAIN_LAYERS_H_
#define STRATA_TRAIN_LAYERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "train/initializers.h"
#include "train/policy.h"
#include "train/variable.h"

namespace strata {
namespace train {

// kGelu: x Φ(x) = 0.5 x (1 + erf(x / sqrt 2)) (Keras's gelu); kGeluTanh:
// its tanh approximation 0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³))).
enum class Activation { kNone, kRelu, kGelu, kGeluTanh };

// A variable together with the value a model read from it in one
// application: gradients are taken with respect to `value`. A sparse read
// (an embedding lookup into a partitioned table) read only rows `indices`
// ([n], int32 or int64) of the variable: `value` holds them ([n] + the
// variable's shape[1:]) and the variable gets a train::SparseGradient.
struct VariableRead {
  Variable* variable = nullptr;
  Output value;
  Output indices;
};

class Layer {
 public:
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // "dense", "conv2d_1", ...: the weights' and the ops' name prefix.
  const std::string& name() const { return name_; }
  // The base name a container uses to name an unnamed layer ("dense").
  virtual std::string kind() const = 0;

  // Applies the layer to `input`; creates the weights on the first call.
  // InvalidArgument naming the layer if it was built in another graph (its
  // weights are that graph's nodes).
  absl::StatusOr<Output> Apply(const Scope& scope, Output input);

  // The layer's weights, in creation order (empty before the first Apply).
  const std::vector<Variable*>& variables() const { return variables_; }
  // The reads of the weights made by the latest Apply, in the same order.
  const std::vector<VariableRead>& reads() const { return reads_; }

  // What the layer applies to: float features by default; an index layer
  // (Embedding) takes int32 or int64 ids.
  virtual bool TakesIndices() const { return false; }

  // The dtype policy (train/policy.h): the global policy when the layer was
  // made, or the one set here; the next Apply uses it. Under a mixed policy
  // Apply casts a float input and the float weights it reads to the compute dtype
  // (the variables stay float32; their gradients flow back through the
  // casts).
  const Policy& dtype_policy() const { return policy_; }
  void set_dtype_policy(Policy policy) { policy_ = std::move(policy); }

  // Sets the name and the seed before the first Apply (a container names
  // and seeds layers that were given none). Ignored after the first Apply.
  void SetNameIfEmpty(const std::string& name);
  void SetSeedIfUnset(int64_t seed);
  std::optional<int64_t> seed() const { return seed_; }

 protected:
  Layer(std::string name, std::optional<int64_t> seed) : name_(std::move(name)), seed_(seed) {}

  // Whether Apply casts a float input to the compute dtype (Flatten and
  // Reshape keep the input's).
  virtual bool CastsInput() const { return true; }
  // Whether Apply casts the weights it reads (Embedding casts the rows it
  // looks up instead of its whole table).
  virtual bool CastsWeights() const { return true; }
  // False for layers whose ops have no bfloat16 kernels: they refuse a mixed
  // policy, naming themselves.
  virtual bool ComputesInLowPrecision() const { return true; }

  // Makes the weights for `input` (called once, before the first Call).
  // `scope` is the scope to create variables in (its prefix is the layer's).
  virtual absl::Status Build(const Scope& scope, const PartialTensorShape& input) {
    return absl::OkStatus();
  }
  // Adds the layer's ops; `weights` holds one read per variable, in
  // creation order. `scope` is the application's sub-scope.
  virtual absl::StatusOr<Output> Call(const Scope& scope, Output input,
                                      const std::vector<Output>& weights) = 0;
  // For a layer whose weights include a partitioned variable: adds the
  // layer's ops reading only what it needs, recording each read in `reads`
  // (Embedding gathers rows from the partitions). The default returns
  // nullopt: Call then gets whole reads (a partitioned variable's Read
  // concatenates its partitions).
  virtual absl::StatusOr<std::optional<Output>> CallPartitioned(const Scope& scope, Output input,
                                                                std::vector<VariableRead>* reads) {
    return std::nullopt;
  }

  // For Build: a float weight "<name>/<weight>" (nullptr with the scope's
  // error on failure). Glorot-uniform with the layer's seed if `glorot`,
  // zeros otherwise.
  Variable* AddWeight(const Scope& scope, const std::string& weight, const TensorShape& shape,
                      bool glorot);
  Variable* AddWeight(const Scope& scope, const std::string& weight, const TensorShape& shape,
                      Initializer init);
  // State that is not trained (moving averages, counters), of any dtype:
  // read and checkpointed like the weights, left alone by Minimize.
  Variable* AddState(const Scope& scope, const std::string& weight, const TensorShape& shape, DataType dtype,
                     Initializer init);
  absl::Status Error(const std::string& message) const;

 private:
  std::string name_;
  std::optional<int64_t> seed_;
  Policy policy_ = GlobalPolicy();
  bool built_ = false;
  PartialTensorShape built_shape_;
  const Graph* built_graph_ = nullptr;  // where its weights live
  std::vector<Variable*> variables_;
  std::vector<VariableRead> reads_;
};

// y = activation(x W + b): W [features, units], b [units], over the last
// axis of x ([batch, features], or [batch, d1, ..., features] with d1...
// known).
class Dense : public Layer {
 public:
  Dense(int64_t units, Activation activation = Activation::kNone,
        std::optional<int64_t> seed = std::nullopt, std::string name = "")
      : Layer(std::move(name), seed), units_(units), activation_(activation) {}
  Dense(std::string name, int64_t units, Activation activation, std::optional<int64_t> seed)
      : Dense(units, activation, seed, std::move(name)) {}
  std::string kind() const override { return "dense"; }
  int64_t units() const { return units_; }

 protected:
  absl::Status Build(const Scope& scope, const PartialTensorShape& input) override;
  absl::StatusOr<Output> Call(const Scope& scope, Output input,
                              const std::vector<Output>& weights) override;

 private:
  const int64_t units_;
  const Activation activation_;
};

// y = E[ids]: E [vocabulary, dim] (Glorot-uniform), ids int32 or int64 of
// any shape, y of shape ids.shape + [dim] (GatherV2). Its gradient adds the
// rows back at their ids (UnsortedSegmentSum): an embedding lookup. A
// partitioned table (e.g. a large one over parameter servers) is never read
// whole: each id's row is gathered where its partition lives and the
// gradient goes back as rows to the partitions that own them
// (EmbeddingLookup).
class Embedding : public Layer {
 public:
  Embedding(int64_t vocabulary, int64_t dim, std::optional<int64_t> seed = std::nullopt, std::string name = "")
      : Layer(std::move(name), seed), vocabulary_(vocabulary), dim_(dim) {}
  std::string kind() const override { return "embedding"; }
  bool TakesIndices() const override { return true; }
  // The table's initializer, before the first Apply (default:
  // Glorot-uniform with the layer's seed; Keras's Embedding draws
  // RandomUniform(-0.05, 0.05), which suits a table of many rows better).
  void set_initializer(Initializer init) { initializer_ = std::move(init); }

 protected:
  bool CastsWeights() const override { return false; }
  absl::Status Build(const Scope& scope, const PartialTensorShape& input) override;
  absl::StatusOr<Output> Call(const Scope& scope, Output input, const std::vector<Output>& weights) override;
  absl::StatusOr<std::optional<Output>> CallPartitioned(const Scope& scope, Output input,
                                                        std::vector<VariableRead>* reads) override;

 private:
  const int64_t vocabulary_;
  const int64_t dim_;
  Initializer initializer_;
};

// y = the mean of E[ids[b, :]] for each b: ids [batch, bag] (int32 or
// int64), y [batch, dim]; PyTorch's EmbeddingBag (mode "mean"): a bag of
// categorical features (hashed ids, a user's items) pooled into one vector.
// Partitioned tables as for Embedding.
class EmbeddingBag : public Embedding {
 public:
  using Embedding::Embedding;
  std::string kind() const override { return "embedding_bag"; }

 protected:
  absl::Status Build(const Scope& scope, const PartialTensorShape& input) override;
  absl::StatusOr<Output> Call(const Scope& scope, Output input,
                              const std::vector<Output>& weights) override;
  absl::StatusOr<std::optional<Output>> CallPartitioned(const Scope& scope, Output input,
                                                        std::vector<VariableRead>* reads) override;
};

// The rows `ids` (int32 or int64, any shape) of `table` ([rows] + row
// shape): ids.shape + the row shape. A plain table is read whole and
// gathered (one dense read in `reads`); a partitioned one
// (train/partitioned_variable.h) is split by the partitions' row ranges
// (DynamicPartition), each partition's rows gathered on its device
// (ResourceGather: only the rows travel) and put back in the ids' order
// (DynamicStitch), one sparse read per partition in `reads`. An id outside
// [0, rows) fails when run, in the gather of the partition it fell to
// ("lookup/gather_part_<p>", with its index within that partition).
Output EmbeddingLookup(const Scope& scope, Variable* table, Output ids,
                       std::vector<VariableRead>* reads);

enum class PaddingMode { kSame, kValid };

// y = activation(conv2d(x, K) + b), NHWC: K [k, k, channels, filters].
class Conv2D : public Layer {
 public:
  struct Options {
    int64_t filters = 1;
    int64_t kernel_size = 3;
    int64_t stride = 1;
    PaddingMode padding = PaddingMode::kSame;
    Activation activation = Activation::kRelu;
  };
  explicit Conv2D(const Options& options, std::optional<int64_t> seed = std::nullopt,
                  std::string name = "")
      : Layer(std::move(name), seed), options_(options) {}
  std::string kind() const override { return "conv2d"; }

 protected:
  absl::Status Build(const Scope& scope, const PartialTensorShape& input) override;
  absl::StatusOr<Output> Call(const Scope& scope, Output input,
                              const std::vector<Output>& weights) override;

 private:
  const Options options_;
};

// Max over pool_size x pool_size windows, NHWC; stride 0 means pool_size.
class MaxPool2D : public Layer {
 public:
  explicit MaxPool2D(int64_t pool_size = 2, int64_t stride = 0,
                     PaddingMode padding = PaddingMode::kValid, std::string name = "")
      : Layer(std::move(name), std::nullopt),
        pool_size_(pool_size),
        stride_(stride == 0 ? pool_size : stride),
        padding_(padding) {}
  std::string kind() const override { return "max_pooling2d"; }

 protected:
  absl::StatusOr<Output> Call(const Scope& scope, Output input,
                              const std::vector<Output>& weights) override;

 private:
  const int64_t pool_size_;
  const int64_t stride_;
  const PaddingMode padding_;
};

// [batch, d1, d2, ...] -> [batch, d1 * d2 * ...]; the dims after the batch
// must be known.
class Flatten : public Layer {
 public:
  explicit Flatten(std::string name = "") : Layer(std::move(name), std::nullopt) {}
  std::string kind() const override { return "flatten"; }

 protected:
  bool CastsInput() const override { return false; }
  absl::StatusOr<Output> Call(const Scope& scope, Output input,
                              const std::vector<Output>& weights) override;
};

// [batch, ...] -> [batch, target...] (e.g. [batch, 64] -> [batch, 8, 8, 1]);
// the input's element count per example must be known and match.
class Reshape : public Layer {
 public:
  explicit Reshape(std::vector<int64_t> target, std::string name = "")
      : Layer(std::move(name), std::nullopt), target_(std::move(target)) {}
  std::string kind() const override { return "reshape"; }

 protected:
  bool CastsInput() const override { return false; }
  absl::StatusOr<Output> Call(const Scope& scope, Output input,
                              const std::vector<Output>& weights) override;

 private:
  const std::vector<int64_t> target_;
};

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_LAYERS_H_
