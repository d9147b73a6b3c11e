#include "strategy/mirrored_variable.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "strategy/replica_context.h"

namespace strata {
namespace distribute {

MirroredVariable::MirroredVariable(const Strategy* strategy,
                                   std::vector<std::unique_ptr<train::Variable>> components,
                                   Node* initializer, int64_t creation_index)
    : train::Variable(components[0]->name(), components[0]->handle(), components[0]->dtype(),
                      components[0]->shape(), initializer, components[0]->device(),
                      components[0]->trainable()),
      strategy_(strategy),
      components_(std::move(components)),
      creation_index_(creation_index) {}

int MirroredVariable::LocalComponent(const Scope& scope) const {
  const ReplicaContext* ctx = ReplicaContext::Current();
  if (ctx == nullptr) return 0;
  if (ctx->strategy() != strategy_) {
    scope.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "mirrored variable '", name(), "' is used inside the Run of a strategy other than the "
        "one that made it")));
    return -1;
  }
  return ctx->replica_id();
}

Output MirroredVariable::Read(const Scope& scope) const {
  const int r = LocalComponent(scope);
  return r < 0 ? Output() : components_[r]->Read(scope);
}

Node* MirroredVariable::Write(const Scope& scope, Output value, WriteKind kind) const {
  auto write = [&](const train::Variable& c, const Scope& s) -> Node* {
    switch (kind) {
      case WriteKind::kAssign:
        return c.Assign(s, value);
      case WriteKind::kAdd:
        return c.AssignAdd(s, value);
      case WriteKind::kSub:
        return c.AssignSub(s, value);
    }
    return nullptr;
  };
  if (ReplicaContext::Current() != nullptr) {
    const int r = LocalComponent(scope);
    return r < 0 ? nullptr : write(*components_[r], scope);
  }
  // Cross-replica: every copy gets the value, so they stay equal. Each write
  // gets a sub-scope of its own (the scope may carry an exact op name).
  std::vector<Node*> writes;
  for (size_t r = 0; r < components_.size(); ++r) {
    Node* w = write(*components_[r], scope.NewSubScope(absl::StrCat("replica_", r)));
    if (w == nullptr) return nullptr;
    writes.push_back(w);
  }
  NodeBuilder b(scope, "NoOp", "mirrored_write");
  for (Node* w : writes) b.ControlInput(w);
  return b.Finalize();
}

Node* MirroredVariable::Assign(const Scope& scope, Output value) const {
  return Write(scope, value, WriteKind::kAssign);
}

Node* MirroredVariable::AssignAdd(const Scope& scope, Output value) const {
  return Write(scope, value, WriteKind::kAdd);
}

Node* MirroredVariable::AssignSub(const Scope& scope, Output value) const {
  return Write(scope, value, WriteKind::kSub);
}

}  // namespace distribute
}  // namespace strata
