// Variables for training: a C++ handle on a resource variable (a VarHandleOp,
// its initializer and the ops that read and write it), made through a stack
// of creator hooks so that a distribution strategy can change what "make a
// variable" means (e.g. one mirrored component per device) without model
// code changing.
//
//   Scope root = Scope::NewRootScope();
//   Variable* w = CreateVariable(root, "dense/kernel", TensorShape{784, 10}, DT_FLOAT,
//                                GlorotUniform(/*seed=*/1));
//   Output y = ops::MatMul(root, x, w->Read(root));
//   Node* init = GlobalVariablesInitializer(root);   // run once ("init")
//   Node* bump = w->AssignAdd(root, delta);
//   if (!root.ok()) return root.status();
//
// Creation goes through the creators installed on this thread, innermost
// first; each gets the scope, the arguments and `next` (the creator below
// it), and may call `next` zero or more times (with other scopes, devices or
// names), wrap its result or make something else. The bottom of the stack
// is DefaultVariableCreator: one VarHandleOp on the scope's device, named
// `name` under the scope's prefix, with shared_name = that node name, and an
// AssignVariableOp "<name>/Assign" of the initializer's value.
//
//   VariableCreatorScope mirrored([&](const Scope& s, const VariableArgs& a,
//                                     const VariableCreatorFn& next) { ... });
//
// Every variable CreateVariable returns is recorded in its graph's collection
// (GlobalVariables / TrainableVariables), in creation order, so a trainer or
// a checkpoint finds them.
//
// Errors follow the builder's convention: they are recorded in the scope and
// CreateVariable returns nullptr; Read/Assign return a null Output / nullptr.
//
// Thread-safety: the creator stack is per thread (install creators on the
// thread that builds the graph). The collections may be used from many
// threads; building one graph is single-threaded, as for Scope.
// Ownership: a graph's collection owns its Variables; pointers stay valid as
// long as the graph (the root Scope) lives.
#ifndef STRATA_TRAIN_VARIABLE_H_
#define STRATA_TRAIN_VARIABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {
namespace train {

// Makes a variable's initial value: an Output of `dtype` and `shape`, built
// in `scope` (train/initializers.h has the usual ones); any callable
// (scope, shape, dtype) -> Output converts to one. An initializer may also
// know how to make only rows [row_offset, row_offset + rows[0]) of a
// variable of shape `full` without making the whole (a partition of a
// partitioned variable, on its own device): the ones of initializers.h do
// (seeded random ones give exactly the whole's rows, Glorot's bound from
// the whole's fans). Rows() of one that does not calls it with the
// partition's shape.
class Initializer {
 public:
  using Fn = std::function<Output(const Scope& scope, const TensorShape& shape, DataType dtype)>;
  using RowsFn = std::function<Output(const Scope& scope, const TensorShape& full,
                                      int64_t row_offset, const TensorShape& rows, DataType dtype)>;
  Initializer() = default;
  template <typename F, typename = std::enable_if_t<std::is_convertible_v<F, Fn> &&
                                                    !std::is_same_v<std::decay_t<F>, Initializer>>>
  Initializer(F fn) : fn_(std::move(fn)) {}  // NOLINT: any callable converts, as to a std::function
  Initializer(Fn fn, RowsFn rows) : fn_(std::move(fn)), rows_(std::move(rows)) {}

  explicit operator bool() const { return static_cast<bool>(fn_); }
  Output operator()(const Scope& scope, const TensorShape& shape, DataType dtype) const {
    return fn_(scope, shape, dtype);
  }
  Output Rows(const Scope& scope, const TensorShape& full, int64_t row_offset,
              const TensorShape& rows, DataType dtype) const {
    return rows_ ? rows_(scope, full, row_offset, rows, dtype) : fn_(scope, rows, dtype);
  }

 private:
  Fn fn_;
  RowsFn rows_;
};

struct VariableArgs {
  std::string name;  // relative to the scope's prefix
  TensorShape shape;
  DataType dtype = DT_FLOAT;
  Initializer initializer;
  bool trainable = true;
};

// What a sharded variable's copies hold (ZeRO, strategy/sharded_update.h):
// the logical tensors `names` (of `shapes`), flattened and concatenated in
// that order, zero-padded to num_blocks * block elements and cut into
// num_blocks blocks of `block` elements; block b lives in copy
// component_of_block[b] of this process, or in another process's copy
// (-1). A checkpoint saves the logical tensors, not the copies, so it is
// the same as an unsharded run's. `saved` false: scratch that a checkpoint
// leaves out. When other processes hold blocks, `gather_processes` makes
// (in `scope`) the all-gather over the processes of each one's blocks in
// order, which every process must run together.
struct ShardedContents {
  std::vector<std::string> names;
  std::vector<TensorShape> shapes;
  int64_t block = 0;
  std::vector<int> component_of_block;
  bool saved = true;
  std::function<Output(const Scope& scope, Output local_blocks)> gather_processes;
};

class Variable {
 public:
  Variable(std::string name, Output handle, DataType dtype, TensorShape shape, Node* initializer,
           std::string device, bool trainable);
  virtual ~Variable() = default;
  Variable(const Variable&) = delete;
  Variable& operator=(const Variable&) = delete;

  // The VarHandleOp's node name ("dense/kernel").
  const std::string& name() const { return name_; }
  Output handle() const { return handle_; }
  DataType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  // The op that assigns the initial value (run it, or the group of all of
  // them, GlobalVariablesInitializer, once).
  Node* initializer() const { return initializer_; }
  // The device requested for the variable ("" if none: placement decides,
  // and every op on the handle follows the VarHandleOp).
  const std::string& device() const { return device_; }
  bool trainable() const { return trainable_; }

  // A ReadVariableOp in `scope` (its name prefix and control dependencies),
  // on the variable's device. Virtual so that wrappers (mirrored variables)
  // can pick a component.
  virtual Output Read(const Scope& scope) const;
  // AssignVariableOp / AssignAddVariableOp / AssignSubVariableOp of `value`
  // (same dtype; a shape the variable's shape rules out fails when run).
  virtual Node* Assign(const Scope& scope, Output value) const;
  virtual Node* AssignAdd(const Scope& scope, Output value) const;
  virtual Node* AssignSub(const Scope& scope, Output value) const;

  // Per-replica copies, for strategies (no casts to their variable types):
  // a distributed variable keeps one copy per replica of the strategy that
  // made it (distributed_by()); a plain variable is its own only copy and
  // has no such owner.
  virtual int num_replicas() const { return 1; }
  // Copy `replica` (0 <= replica < num_replicas()); copy 0 is the variable
  // itself as far as handle, name and device go.
  virtual Variable* replica(int replica) const {
    return replica == 0 ? const_cast<Variable*>(this) : nullptr;
  }
  // The strategy whose replicas hold the copies; nullptr for a plain one.
  virtual const void* distributed_by() const { return nullptr; }
  // The order in which that strategy made its variables (gradient buckets
  // are formed from the last made); -1 for a plain one.
  virtual int64_t creation_index() const { return -1; }

  // Partitions: a partitioned variable (train/partitioned_variable.h: a
  // large table split along dimension 0, e.g. over parameter servers) is
  // num_partitions() plain variables, partition p holding its rows
  // [partition_offset(p), partition_offset(p) + partition(p)->shape()[0]).
  // A variable that is not partitioned is its own only partition.
  virtual int num_partitions() const { return 1; }
  virtual Variable* partition(int p) const {
    return p == 0 ? const_cast<Variable*>(this) : nullptr;
  }
  virtual int64_t partition_offset(int p) const { return 0; }

  // Set on a variable whose copies hold blocks of other tensors (ZeRO's
  // shards); nullptr for any other.
  const ShardedContents* sharded_contents() const { return sharded_.get(); }
  void set_sharded_contents(ShardedContents contents) {
    sharded_ = std::make_shared<const ShardedContents>(std::move(contents));
  }

 protected:
  // `scope` with the variable's device and no request of its own.
  Scope OnDevice(const Scope& scope) const { return scope.WithDevice(device_); }

 private:
  const std::string name_;
  const Output handle_;
  const DataType dtype_;
  const TensorShape shape_;
  Node* const initializer_;
  const std::string device_;
  const bool trainable_;
  std::shared_ptr<const ShardedContents> sharded_;
};

// A creator at the bottom of the stack, or one that a creator calls to get
// the default behaviour from below it.
using VariableCreatorFn =
    std::function<absl::StatusOr<std::unique_ptr<Variable>>(const Scope&, const VariableArgs&)>;
// A creator in the stack: `next` creates with the creators below it.
using VariableCreator = std::function<absl::StatusOr<std::unique_ptr<Variable>>(
    const Scope&, const VariableArgs&, const VariableCreatorFn& next)>;

// Pushes `creator` on this thread's stack for the object's lifetime. Scopes
// must be destroyed in reverse order of creation (as stack objects are).
class VariableCreatorScope {
 public:
  explicit VariableCreatorScope(VariableCreator creator);
  ~VariableCreatorScope();
  VariableCreatorScope(const VariableCreatorScope&) = delete;
  VariableCreatorScope& operator=(const VariableCreatorScope&) = delete;
};

// The bottom of the stack (see the file comment). InvalidArgument naming the
// variable if the initializer is missing or its value has another dtype or a
// shape incompatible with `args.shape`; the scope's error if building failed.
absl::StatusOr<std::unique_ptr<Variable>> DefaultVariableCreator(const Scope& scope,
                                                                 const VariableArgs& args);

// Creates a variable through this thread's creator stack and records it in
// the graph's collection. nullptr (error recorded in the scope) on failure.
Variable* CreateVariable(const Scope& scope, const VariableArgs& args);
Variable* CreateVariable(const Scope& scope, const std::string& name, const TensorShape& shape,
                         DataType dtype, const Initializer& initializer, bool trainable = true);

// The variables created in `scope`'s graph, in creation order.
std::vector<Variable*> GlobalVariables(const Scope& scope);
std::vector<Variable*> TrainableVariables(const Scope& scope);

// A NoOp (named "init" under the scope, unless the scope names it) that runs
// after every initializer of the graph's variables so far.
Node* GlobalVariablesInitializer(const Scope& scope);

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_VARIABLE_H_
