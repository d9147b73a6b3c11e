#include "train/models.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/gradients/gradients.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "train/phase_layers.h"
#include "train/policy.h"

namespace strata {
namespace train {

Layer* Sequential::Add(std::unique_ptr<Layer> layer) {
  layers_.push_back(std::move(layer));
  return layers_.back().get();
}

absl::StatusOr<Output> Sequential::Build(const Scope& scope, Output input) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (layers_.empty()) return absl::InvalidArgumentError("Sequential: the model has no layers");
  return BuildLayers(scope, input, 0, static_cast<int>(layers_.size()));
}

absl::StatusOr<Output> Sequential::BuildLayers(const Scope& scope, Output input, int begin, int end) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (begin < 0 || end > static_cast<int>(layers_.size()) || begin >= end) {
    return absl::InvalidArgumentError(absl::StrCat("Sequential: layers [", begin, ", ", end,
                                                   ") are not a non-empty span of the model's ",
                                                   layers_.size()));
  }
  // Keras's naming: the first unnamed layer of a kind gets the kind, later
  // ones "<kind>_<n>"; explicit names are left alone.
  absl::flat_hash_map<std::string, int> uses;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = *layers_[i];
    const std::string kind = l.kind();
    const int n = uses[kind]++;
    l.SetNameIfEmpty(n == 0 ? kind : absl::StrCat(kind, "_", n));
    l.SetSeedIfUnset(seed_ + static_cast<int64_t>(i));
  }
  Output h = input;
  for (int i = begin; i < end; ++i) {
    STRATA_ASSIGN_OR_RETURN(h, layers_[i]->Apply(scope, h));
  }
  return h;
}

std::vector<Variable*> Sequential::variables() const {
  std::vector<Variable*> out;
  for (const auto& l : layers_) out.insert(out.end(), l->variables().begin(), l->variables().end());
  return out;
}

std::vector<Variable*> Sequential::trainable_variables() const {
  std::vector<Variable*> out;
  for (Variable* v : variables()) {
    if (v->trainable()) out.push_back(v);
  }
  return out;
}

std::vector<VariableRead> Sequential::reads() const {
  std::vector<VariableRead> out;
  for (const auto& l : layers_) out.insert(out.end(), l->reads().begin(), l->reads().end());
  return out;
}

int64_t Sequential::num_parameters() const {
  int64_t n = 0;
  for (Variable* v : variables()) n += v->shape().num_elements();
  return n;
}

absl::StatusOr<std::unique_ptr<Sequential>> MakeMlp(const std::vector<int64_t>& hidden,
                                                    int64_t num_classes, int64_t seed) {
  for (int64_t h : hidden) {
    if (h < 1) return absl::InvalidArgumentError(absl::StrCat("MLP: hidden size ", h, " is < 1"));
  }
  if (num_classes < 2) {
    return absl::InvalidArgumentError(absl::StrCat("MLP: num_classes is ", num_classes, ", need >= 2"));
  }
  auto model = std::make_unique<Sequential>(seed);
  for (int64_t h : hidden) model->Add<Dense>(h, Activation::kRelu);
  model->Add<Dense>(num_classes, Activation::kNone);
  return model;
}

absl::StatusOr<std::unique_ptr<Sequential>> MakeSmallCnn(int64_t rows, int64_t cols,
                                                         int64_t channels, int64_t num_classes,
                                                         int64_t seed, const SmallCnnOptions& options) {
  if (rows < 2 || cols < 2 || channels < 1) {
    return absl::InvalidArgumentError(absl::StrCat("CNN: images must be at least 2x2x1, got ", rows,
                                                   "x", cols, "x", channels));
  }
  if (num_classes < 2) {
    return absl::InvalidArgumentError(absl::StrCat("CNN: num_classes is ", num_classes, ", need >= 2"));
  }
  auto model = std::make_unique<Sequential>(seed);
  model->Add<Reshape>(std::vector<int64_t>{rows, cols, channels});
  Conv2D::Options conv;
  conv.filters = 16;
  model->Add<Conv2D>(conv);
  if (options.batch_norm) model->Add<BatchNormalization>();
  model->Add<MaxPool2D>(2);
  conv.filters = 32;
  model->Add<Conv2D>(conv);
  if (options.batch_norm) model->Add<BatchNormalization>();
  model->Add<Flatten>();
  model->Add<Dense>(64, Activation::kRelu);
  if (options.dropout > 0) model->Add<Dropout>(options.dropout);
  model->Add<Dense>(num_classes, Activation::kNone);
  return model;
}

namespace {

// The variable handle a ReadVariableOp reads, or nullptr for anything else.
Node* ReadHandle(const Node* n) {
  if (n == nullptr || !n->IsOp("ReadVariableOp")) return nullptr;
  const Edge* e = n->input_edge(0);
  return e == nullptr ? nullptr : e->src;
}

// The nodes `loss` depends on through data edges (the gradient's paths).
absl::flat_hash_set<const Node*> DataAncestors(const Node* loss) {
  absl::flat_hash_set<const Node*> seen = {loss};
  std::vector<const Node*> stack = {loss};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge* e : n->in_edges()) {
      if (!e->IsControlEdge() && seen.insert(e->src).second) stack.push_back(e->src);
    }
  }
  return seen;
}

}  // namespace

absl::StatusOr<Node*> Minimize(const Scope& scope, Output loss,
                               const std::vector<VariableRead>& reads, Optimizer* optimizer) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (!loss.ok()) return absl::InvalidArgumentError("Minimize: the loss is a null Output");
  if (optimizer == nullptr) return absl::InvalidArgumentError("Minimize: no optimizer");
  const absl::flat_hash_set<const Node*> ancestors = DataAncestors(loss.node());
  // One entry per variable copy (handle) being minimized, in `reads` order:
  // every read of it the loss depends on, not only the one in `reads`.
  struct Target {
    Variable* variable;
    std::vector<Output> values;
    Output indices;  // a sparse read's rows
  };
  std::vector<Target> targets;
  absl::flat_hash_map<const Node*, size_t> target_of;  // by handle
  // The partitions of partitioned variables read whole: their reads are in
  // the concatenation being minimized.
  absl::flat_hash_set<const Node*> covered;
  for (const VariableRead& r : reads) {
    if (r.variable == nullptr || !r.variable->trainable() || !r.value.ok()) continue;
    Node* handle = ReadHandle(r.value.node());
    if (handle == nullptr) {  // not a plain read: its value is all there is
      targets.push_back({r.variable, {r.value}, r.indices});
      for (int p = 0; p < r.variable->num_partitions() && r.variable->num_partitions() > 1; ++p) {
        covered.insert(r.variable->partition(p)->handle().node());
      }
      continue;
    }
    if (target_of.contains(handle)) continue;
    target_of[handle] = targets.size();
    Target t{r.variable, {}};
    for (const Edge* e : handle->out_edges()) {
      if (!e->IsControlEdge() && ReadHandle(e->dst) == handle && ancestors.contains(e->dst)) {
        t.values.push_back(Output(e->dst, 0));
      }
    }
    // The loss does not reach it: a zero gradient through the given read.
    if (t.values.empty()) t.values.push_back(r.value);
    targets.push_back(std::move(t));
  }
  if (targets.empty()) return absl::InvalidArgumentError("Minimize: no trainable variable was read");
  // A trainable variable the loss reads but that is not being minimized
  // would silently get no update: refuse, naming the read.
  absl::flat_hash_map<const Node*, const Variable*> trainable;  // by handle, every copy
  for (Variable* v : TrainableVariables(scope)) {
    for (int i = 0; i < v->num_replicas(); ++i) {
      const Variable* copy = v->replica(i);
      if (copy != nullptr && copy->handle().ok()) trainable[copy->handle().node()] = v;
    }
    for (int p = 0; p < v->num_partitions() && v->num_partitions() > 1; ++p) {
      trainable[v->partition(p)->handle().node()] = v;
    }
  }
  for (const Node* n : ancestors) {
    Node* handle = ReadHandle(n);
    if (handle == nullptr || target_of.contains(handle) || covered.contains(handle)) continue;
    auto it = trainable.find(handle);
    if (it == trainable.end()) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "Minimize: the loss depends on '", n->name(), "', a read of trainable variable '",
        it->second->name(), "', which is not among the variables being minimized (pass its read "
        "in `reads`, or make the variable non-trainable)"));
  }
  OutputList values;
  for (const Target& t : targets) values.insert(values.end(), t.values.begin(), t.values.end());
  // Mixed float16 needs loss scaling (as Keras's compile wraps the
  // optimizer in a LossScaleOptimizer under that policy).
  if (GlobalPolicy().compute_dtype == DT_HALF && !optimizer->loss_scaling()) {
    optimizer->set_loss_scale(LossScaleOptions());
  }
  Output objective = optimizer->ScaleLoss(scope, loss);
  STRATA_RETURN_IF_ERROR(scope.status());
  OutputList grads;
  STRATA_RETURN_IF_ERROR(AddSymbolicGradients(scope, {objective}, values, &grads));
  std::vector<GradAndVar> pairs;
  std::vector<SparseGradient> sparse;
  size_t next = 0;
  for (const Target& t : targets) {
    OutputList mine(grads.begin() + next, grads.begin() + next + t.values.size());
    next += t.values.size();
    Output g = mine.size() == 1 ? mine[0] : ops::AddN(scope, mine);
    if (!t.indices.ok() || !g.ok()) {
      pairs.push_back({g, t.variable});
      continue;
    }
    // Rows [n] + the row shape, at indices [n].
    std::vector<int64_t> dims = {-1};
    for (int d = 1; d < t.variable->shape().dims(); ++d)
      dims.push_back(t.variable->shape().dim_size(d));
    sparse.push_back({ops::Reshape(scope, g, ops::Const<int64_t>(scope, dims)),
                      ops::Reshape(scope, t.indices, ops::Const<int64_t>(scope, {-1})),
                      t.variable});
  }
  Node* train_op = optimizer->ApplyGradients(scope, pairs, sparse);
  STRATA_RETURN_IF_ERROR(scope.status());
  if (train_op == nullptr) return absl::InternalError("Minimize: the optimizer made no train op");
  return train_op;
}

absl::StatusOr<Node*> Minimize(const Scope& scope, Output loss, Optimizer* optimizer) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (!loss.ok()) return absl::InvalidArgumentError("Minimize: the loss is a null Output");
  const absl::flat_hash_set<const Node*> ancestors = DataAncestors(loss.node());
  // The first read the loss depends on of each trainable variable, in the
  // order the variables were made (the same on every replica and run).
  absl::flat_hash_map<const Node*, Output> first_read;  // by handle
  // Row gathers (embedding lookups into partitions: sparse reads), by handle.
  absl::flat_hash_map<const Node*, std::vector<const Node*>> gathers;
  for (const Node* n : ancestors) {
    if (n->IsOp("ResourceGather") && n->input_edge(0) != nullptr && n->input_edge(1) != nullptr) {
      gathers[n->input_edge(0)->src].push_back(n);
    }
    Node* handle = ReadHandle(n);
    if (handle == nullptr) continue;
    auto it = first_read.find(handle);
    if (it == first_read.end() || it->second.node()->id() > n->id()) {
      first_read[handle] = Output(const_cast<Node*>(n), 0);
    }
  }
  std::vector<VariableRead> reads;
  for (Variable* v : TrainableVariables(scope)) {
    for (int i = 0; i < v->num_replicas(); ++i) {
      const Variable* copy = v->replica(i);
      if (copy == nullptr || !copy->handle().ok()) continue;
      auto it = first_read.find(copy->handle().node());
      if (it != first_read.end()) reads.push_back({v, it->second});
    }
    for (int p = 0; p < v->num_partitions() && v->num_partitions() > 1; ++p) {
      Variable* part = v->partition(p);
      auto it = first_read.find(part->handle().node());
      if (it != first_read.end()) reads.push_back({part, it->second});
      std::vector<const Node*> mine = gathers[part->handle().node()];
      std::sort(mine.begin(), mine.end(),
                [](const Node* a, const Node* b) { return a->id() < b->id(); });
      for (const Node* g : mine) {
        const Edge* ids = g->input_edge(1);
        reads.push_back({part, Output(const_cast<Node*>(g), 0), Output(ids->src, ids->src_output)});
      }
    }
  }
  if (reads.empty()) return absl::InvalidArgumentError("Minimize: the loss reads no trainable variable");
  return Minimize(scope, loss, reads, optimizer);
}

}  // namespace train
}  // namespace strata
