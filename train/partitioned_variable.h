// Partitioned variables: one logical variable split along dimension 0 into
// consecutive row ranges, each a plain variable of its own on a device of
// its own, as TensorFlow's ShardedVariable (tf.distribute's
// variable_partitioner). A table too large for one parameter server is
// spread over several; an embedding lookup (train/layers.h, Embedding)
// gathers each id's row from the partition that holds it, and the gradient
// goes back as rows to those partitions only (train::SparseGradient).
//
//   // In a creator (ParameterServerStrategy does this): 1M x 64 over 2 devices
//   auto v = *CreatePartitioned(scope, args, 2, [&](int p, const VariableArgs& part) {
//     return next(scope.WithDevice(ps_devices[p]), part);
//   });
//   v->num_partitions();                 // 2
//   v->partition(1)->name();             // "embedding/embeddings/part_1"
//   v->partition_offset(1);              // 500000
//
// Rows: partition p of n holds rows // n rows, the first rows % n one more
// (TensorFlow's rule). Each partition is initialised alone with its rows of
// the initializer (Initializer::Rows: no device makes the whole table).
//
// Reads and writes of the whole: Read concatenates the partitions' reads
// (where the reading scope says: use it for small variables, a checkpoint,
// an evaluation); Assign, AssignAdd and AssignSub cut the value into the
// partitions' rows and write each where it lives. A checkpoint
// (fit/checkpoint.h) holds the whole tensor under the variable's name,
// restorable into any partitioning or none, but reads and writes it by
// partition, a block of rows at a time. handle() is null: ops on the
// variable go through a partition.
//
// Thread-safety: as for train::Variable. Ownership: the partitioned variable
// owns its partitions; the graph's collection owns it.
#ifndef STRATA_TRAIN_PARTITIONED_VARIABLE_H_
#define STRATA_TRAIN_PARTITIONED_VARIABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/scope.h"
#include "train/variable.h"

namespace strata {
namespace train {

// How many partitions a variable of `shape` and `dtype` gets (1: none).
using Partitioner = std::function<int(const TensorShape& shape, DataType dtype)>;
// num_shards partitions for every variable of rank >= 1, at most one per
// row (TensorFlow's FixedShardsPartitioner).
Partitioner FixedShardsPartitioner(int num_shards);
// As many partitions as keep each at least min_shard_bytes, at most
// max_shards and one per row (TensorFlow's MinSizePartitioner).
Partitioner MinSizePartitioner(int64_t min_shard_bytes = int64_t{256} << 10, int max_shards = 1);

// The rows of each of `n` partitions of `rows` rows (see the file comment).
std::vector<int64_t> PartitionRows(int64_t rows, int n);

class PartitionedVariable : public Variable {
 public:
  // `parts` hold consecutive rows in order (their shapes agree with `shape`
  // but for dimension 0, whose sizes add up to shape[0]); `initializer`
  // runs all of theirs.
  PartitionedVariable(std::string name, DataType dtype, TensorShape shape,
                      std::vector<std::unique_ptr<Variable>> parts, Node* initializer,
                      bool trainable);

  int num_partitions() const override { return static_cast<int>(parts_.size()); }
  Variable* partition(int p) const override { return parts_[p].get(); }
  int64_t partition_offset(int p) const override { return offsets_[p]; }

  Output Read(const Scope& scope) const override;
  Node* Assign(const Scope& scope, Output value) const override;
  Node* AssignAdd(const Scope& scope, Output value) const override;
  Node* AssignSub(const Scope& scope, Output value) const override;

 private:
  enum class WriteKind { kAssign, kAdd, kSub };
  Node* Write(const Scope& scope, Output value, WriteKind kind) const;

  const std::vector<std::unique_ptr<Variable>> parts_;
  std::vector<int64_t> offsets_;
};

// The rows of partition `p` of `var` (a partitioned variable, or a plain
// one as its own partition 0) cut from `value`, a tensor of var's shape
// (a whole value to write, a gradient to apply), in `scope`.
Output PartitionRows(const Scope& scope, Output value, const Variable& var, int p);

// Makes the variable `args` describes as `num_partitions` partitions:
// partition p is made by `make(p, part_args)`, part_args being `args` with
// the name "<name>/part_<p>", the partition's shape and an initializer of
// its rows. num_partitions 1 makes a plain variable through make(0, args).
// InvalidArgument naming the variable for a scalar, more partitions than
// rows, or num_partitions < 1; `make`'s errors.
using MakePartitionFn =
    std::function<absl::StatusOr<std::unique_ptr<Variable>>(int p, const VariableArgs& part)>;
absl::StatusOr<std::unique_ptr<Variable>> CreatePartitioned(const Scope& scope,
                                                            const VariableArgs& args,
                                                            int num_partitions,
                                                            const MakePartitionFn& make);

}  // namespace train
}  // namespace strata

#endif  // STRATA_TRAIN_PARTITIONED_VARIABLE_H_
