#include "train/variable.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/state_ops.h"

namespace strata {
namespace train {

namespace {

std::vector<VariableCreator>& CreatorStack() {
  thread_local std::vector<VariableCreator> stack;
  return stack;
}

// The graph's variables. Graph (a core type) has no slot for library state,
// so collections live here, keyed by the graph's address and tied to it by a
// weak_ptr: an entry whose graph has died is dropped (and never mistaken for
// a new graph that reuses the address).
struct Collection {
  std::weak_ptr<Graph> graph;
  std::vector<std::unique_ptr<Variable>> variables;
};

struct Collections {
  Mutex mu;
  absl::flat_hash_map<const Graph*, Collection> by_graph ABSL_GUARDED_BY(mu);
};

Collections& AllCollections() {
  static Collections* c = new Collections;  // never destroyed: used until exit
  return *c;
}

// The live collection of `scope`'s graph (made if absent); the caller holds mu.
Collection& CollectionFor(Collections& all, const Scope& scope)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(all.mu) {
  for (auto it = all.by_graph.begin(); it != all.by_graph.end();) {
    if (it->second.graph.expired()) {
      all.by_graph.erase(it++);
    } else {
      ++it;
    }
  }
  Collection& c = all.by_graph[scope.graph()];
  if (c.graph.expired()) c.graph = scope.graph_as_shared_ptr();
  return c;
}

absl::StatusOr<std::unique_ptr<Variable>> CreateWithStack(const std::vector<VariableCreator>& stack,
                                                          int top, const Scope& scope,
                                                          const VariableArgs& args) {
  if (top < 0) return DefaultVariableCreator(scope, args);
  VariableCreatorFn next = [&stack, top](const Scope& s, const VariableArgs& a) {
    return CreateWithStack(stack, top - 1, s, a);
  };
  return stack[top](scope, args, next);
}

}  // namespace

Variable::Variable(std::string name, Output handle, DataType dtype, TensorShape shape,
                   Node* initializer, std::string device, bool trainable)
    : name_(std::move(name)),
      handle_(handle),
      dtype_(dtype),
      shape_(std::move(shape)),
      initializer_(initializer),
      device_(std::move(device)),
      trainable_(trainable) {}

Output Variable::Read(const Scope& scope) const {
  return ops::ReadVariableOp(OnDevice(scope), handle_, dtype_);
}

Node* Variable::Assign(const Scope& scope, Output value) const {
  return ops::AssignVariableOp(OnDevice(scope), handle_, value);
}

Node* Variable::AssignAdd(const Scope& scope, Output value) const {
  return ops::AssignAddVariableOp(OnDevice(scope), handle_, value);
}

Node* Variable::AssignSub(const Scope& scope, Output value) const {
  return ops::AssignSubVariableOp(OnDevice(scope), handle_, value);
}

VariableCreatorScope::VariableCreatorScope(VariableCreator creator) {
  CreatorStack().push_back(std::move(creator));
}

VariableCreatorScope::~VariableCreatorScope() { CreatorStack().pop_back(); }

absl::StatusOr<std::unique_ptr<Variable>> DefaultVariableCreator(const Scope& scope,
                                                                 const VariableArgs& args) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (args.name.empty()) return absl::InvalidArgumentError("a variable needs a name");
  if (!args.initializer) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable '", args.name, "' has no initializer"));
  }
  // Creation ignores the caller's control dependencies (TensorFlow's
  // init_scope): a variable made inside a training step must not wait for it.
  const Scope base = scope.WithNoControlDependencies();
  const Scope named = base.WithOpName(args.name);
  const std::string full_name = named.GetUniqueNameForOp("");
  Output handle = ops::VarHandleOp(named, args.dtype, PartialTensorShape(args.shape),
                                   ops::VarHandleAttrs().SharedName(full_name));
  const Scope sub = base.NewSubScope(args.name);
  Output value = args.initializer(sub.NewSubScope("Initializer"), args.shape, args.dtype);
  STRATA_RETURN_IF_ERROR(scope.status());
  if (!value.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("variable '", full_name, "': the initializer made no value"));
  }
  if (value.type() != args.dtype || !value.shape().IsCompatibleWith(args.shape)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variable '", full_name, "' is ", DataTypeString(args.dtype), " ",
        args.shape.DebugString(), " but its initializer makes ", DataTypeString(value.type()),
        " ", value.shape().DebugString()));
  }
  Node* assign = ops::AssignVariableOp(sub.WithOpName("Assign"), handle, value);
  STRATA_RETURN_IF_ERROR(scope.status());
  return std::make_unique<Variable>(full_name, handle, args.dtype, args.shape, assign,
                                    scope.device(), args.trainable);
}

Variable* CreateVariable(const Scope& scope, const VariableArgs& args) {
  if (!scope.ok()) return nullptr;
  // A copy: a creator may install creators of its own while it runs.
  const std::vector<VariableCreator> stack = CreatorStack();
  auto var = CreateWithStack(stack, static_cast<int>(stack.size()) - 1, scope, args);
  if (!var.ok() || *var == nullptr) {
    scope.UpdateStatus(var.ok() ? absl::InternalError(absl::StrCat(
                                      "a variable creator returned nothing for '", args.name, "'"))
                                : AnnotateStatus(var.status(), absl::StrCat("creating variable '",
                                                                            args.name, "': ")));
    return nullptr;
  }
  Collections& all = AllCollections();
  MutexLock l(&all.mu);
  Collection& c = CollectionFor(all, scope);
  c.variables.push_back(*std::move(var));
  return c.variables.back().get();
}

Variable* CreateVariable(const Scope& scope, const std::string& name, const TensorShape& shape,
                         DataType dtype, const Initializer& initializer, bool trainable) {
  VariableArgs args;
  args.name = name;
  args.shape = shape;
  args.dtype = dtype;
  args.initializer = initializer;
  args.trainable = trainable;
  return CreateVariable(scope, args);
}

std::vector<Variable*> GlobalVariables(const Scope& scope) {
  Collections& all = AllCollections();
  MutexLock l(&all.mu);
  std::vector<Variable*> out;
  for (const auto& v : CollectionFor(all, scope).variables) out.push_back(v.get());
  return out;
}

std::vector<Variable*> TrainableVariables(const Scope& scope) {
  std::vector<Variable*> out;
  for (Variable* v : GlobalVariables(scope)) {
    if (v->trainable()) out.push_back(v);
  }
  return out;
}

Node* GlobalVariablesInitializer(const Scope& scope) {
  NodeBuilder b(scope.WithNoControlDependencies(), "NoOp", "init");
  for (Variable* v : GlobalVariables(scope)) {
    if (v->initializer() != nullptr) b.ControlInput(v->initializer());
  }
  return b.Finalize();
}

}  // namespace train
}  // namespace strata
