#include "train/models.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/gradients/gradients.h"

namespace strata {
namespace train {

Layer* Sequential::Add(std::unique_ptr<Layer> layer) {
  layers_.push_back(std::move(layer));
  return layers_.back().get();
}

absl::StatusOr<Output> Sequential::Build(const Scope& scope, Output input) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (layers_.empty()) return absl::InvalidArgumentError("Sequential: the model has no layers");
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
  for (auto& layer : layers_) {
    STRATA_ASSIGN_OR_RETURN(h, layer->Apply(scope, h));
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
                                                         int64_t seed) {
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
  model->Add<MaxPool2D>(2);
  conv.filters = 32;
  model->Add<Conv2D>(conv);
  model->Add<Flatten>();
  model->Add<Dense>(64, Activation::kRelu);
  model->Add<Dense>(num_classes, Activation::kNone);
  return model;
}

absl::StatusOr<Node*> Minimize(const Scope& scope, Output loss,
                               const std::vector<VariableRead>& reads, Optimizer* optimizer) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (!loss.ok()) return absl::InvalidArgumentError("Minimize: the loss is a null Output");
  if (optimizer == nullptr) return absl::InvalidArgumentError("Minimize: no optimizer");
  OutputList values;
  std::vector<Variable*> vars;
  for (const VariableRead& r : reads) {
    if (r.variable == nullptr || !r.variable->trainable()) continue;
    values.push_back(r.value);
    vars.push_back(r.variable);
  }
  if (values.empty()) return absl::InvalidArgumentError("Minimize: no trainable variable was read");
  OutputList grads;
  STRATA_RETURN_IF_ERROR(AddSymbolicGradients(scope, {loss}, values, &grads));
  std::vector<GradAndVar> pairs;
  for (size_t i = 0; i < vars.size(); ++i) pairs.push_back({grads[i], vars[i]});
  Node* train_op = optimizer->ApplyGradients(scope, pairs);
  STRATA_RETURN_IF_ERROR(scope.status());
  if (train_op == nullptr) return absl::InternalError("Minimize: the optimizer made no train op");
  return train_op;
}

}  // namespace train
}  // namespace strata
