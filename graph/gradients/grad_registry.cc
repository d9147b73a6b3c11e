#include "graph/gradients/grad_registry.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"

namespace strata {

GradientRegistry* GradientRegistry::Global() {
  static GradientRegistry* r = new GradientRegistry;
  return r;
}

absl::Status GradientRegistry::Register(const std::string& op, GradFunc fn) {
  if (fn == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("null gradient function for op ", op, " (use STRATA_NO_GRADIENT)"));
  }
  if (!ops_.emplace(op, std::move(fn)).second) {
    return absl::AlreadyExistsError(absl::StrCat("gradient of op ", op, " registered twice"));
  }
  return absl::OkStatus();
}

absl::Status GradientRegistry::RegisterNoGradient(const std::string& op) {
  if (!ops_.emplace(op, GradFunc()).second) {
    return absl::AlreadyExistsError(absl::StrCat("gradient of op ", op, " registered twice"));
  }
  return absl::OkStatus();
}

GradientRegistry::Kind GradientRegistry::Lookup(const std::string& op, GradFunc* fn) const {
  auto it = ops_.find(op);
  if (it == ops_.end()) return Kind::kUnknown;
  if (it->second == nullptr) return Kind::kNoGradient;
  *fn = it->second;
  return Kind::kDifferentiable;
}

std::vector<std::string> GradientRegistry::DifferentiableOps() const {
  std::vector<std::string> out;
  for (const auto& kv : ops_) {
    if (kv.second != nullptr) out.push_back(kv.first);
  }
  return out;
}

std::vector<std::string> GradientRegistry::NonDifferentiableOps() const {
  std::vector<std::string> out;
  for (const auto& kv : ops_) {
    if (kv.second == nullptr) out.push_back(kv.first);
  }
  return out;
}

Output OpInput(const Node& op, int i) {
  const Edge* e = op.input_edge(i);
  return e == nullptr ? Output() : Output(e->src, e->src_output);
}

Output OpOutput(const Node& op, int i) { return Output(const_cast<Node*>(&op), i); }

namespace grad_registration {

// A duplicate registration is our own bug, found at static initialization:
// abort with the message, as op registration does.
static void DieIfError(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "gradient registration failed: %s\n", s.ToString().c_str());
    std::abort();
  }
}

Registrar::Registrar(const char* op, GradFunc fn) {
  DieIfError(GradientRegistry::Global()->Register(op, std::move(fn)));
}

Registrar::Registrar(const char* op) {
  DieIfError(GradientRegistry::Global()->RegisterNoGradient(op));
}

}  // namespace grad_registration
}  // namespace strata
