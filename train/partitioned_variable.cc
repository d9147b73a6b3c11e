#include "train/partitioned_variable.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"

namespace strata {
namespace train {

Partitioner FixedShardsPartitioner(int num_shards) {
  return [num_shards](const TensorShape& shape, DataType) {
    if (shape.dims() < 1 || num_shards < 1) return 1;
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(num_shards, shape.dim_size(0))));
  };
}

Partitioner MinSizePartitioner(int64_t min_shard_bytes, int max_shards) {
  return [min_shard_bytes, max_shards](const TensorShape& shape, DataType dtype) {
    if (shape.dims() < 1 || min_shard_bytes < 1) return 1;
    const int64_t bytes = shape.num_elements() * static_cast<int64_t>(DataTypeSize(dtype));
    int64_t n = std::min<int64_t>({bytes / min_shard_bytes, max_shards, shape.dim_size(0)});
    return static_cast<int>(std::max<int64_t>(1, n));
  };
}

std::vector<int64_t> PartitionRows(int64_t rows, int n) {
  std::vector<int64_t> out;
  for (int p = 0; p < n; ++p) out.push_back(rows / n + (p < rows % n ? 1 : 0));
  return out;
}

PartitionedVariable::PartitionedVariable(std::string name, DataType dtype, TensorShape shape,
                                         std::vector<std::unique_ptr<Variable>> parts,
                                         Node* initializer, bool trainable)
    : Variable(std::move(name), Output(), dtype, std::move(shape), initializer, "", trainable),
      parts_(std::move(parts)) {
  int64_t offset = 0;
  for (const auto& p : parts_) {
    offsets_.push_back(offset);
    offset += p->shape().dim_size(0);
  }
}

Output PartitionedVariable::Read(const Scope& scope) const {
  OutputList reads;
  for (const auto& p : parts_) reads.push_back(p->Read(scope));
  return ops::Concat(scope, reads, ops::Const(scope, 0));
}

Node* PartitionedVariable::Write(const Scope& scope, Output value, WriteKind kind) const {
  std::vector<Node*> writes;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const Variable& p = *parts_[i];
    Output rows = PartitionRows(scope, value, *this, static_cast<int>(i));
    Node* w = kind == WriteKind::kAssign ? p.Assign(scope, rows)
              : kind == WriteKind::kAdd  ? p.AssignAdd(scope, rows)
                                         : p.AssignSub(scope, rows);
    if (w == nullptr) return nullptr;
    writes.push_back(w);
  }
  return ops::NoOp(scope.WithControlDependencies(writes));
}

Node* PartitionedVariable::Assign(const Scope& scope, Output value) const {
  return Write(scope, value, WriteKind::kAssign);
}
Node* PartitionedVariable::AssignAdd(const Scope& scope, Output value) const {
  return Write(scope, value, WriteKind::kAdd);
}
Node* PartitionedVariable::AssignSub(const Scope& scope, Output value) const {
  return Write(scope, value, WriteKind::kSub);
}

Output PartitionRows(const Scope& scope, Output value, const Variable& var, int p) {
  std::vector<int64_t> begin(var.shape().dims(), 0), size(var.shape().dims(), -1);
  begin[0] = var.partition_offset(p);
  size[0] = var.partition(p)->shape().dim_size(0);
  return ops::Slice(scope, value, ops::Const<int64_t>(scope, begin),
                    ops::Const<int64_t>(scope, size));
}

absl::StatusOr<std::unique_ptr<Variable>> CreatePartitioned(const Scope& scope,
                                                            const VariableArgs& args,
                                                            int num_partitions,
                                                            const MakePartitionFn& make) {
  STRATA_RETURN_IF_ERROR(scope.status());
  if (num_partitions == 1) return make(0, args);
  if (num_partitions < 1 || args.shape.dims() < 1 || args.shape.dim_size(0) < num_partitions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "variable '", args.name, "' of shape ", args.shape.DebugString(), " cannot be split into ",
        num_partitions, " partitions (at least one row each)"));
  }
  const std::string name = scope.WithOpName(args.name).GetUniqueNameForOp("");
  std::vector<std::unique_ptr<Variable>> parts;
  std::vector<Node*> inits;
  int64_t offset = 0;
  for (int64_t rows : PartitionRows(args.shape.dim_size(0), num_partitions)) {
    const int p = static_cast<int>(parts.size());
    VariableArgs part = args;
    part.name = absl::StrCat(args.name, "/part_", p);
    std::vector<int64_t> dims(args.shape.dim_sizes().begin(), args.shape.dim_sizes().end());
    dims[0] = rows;
    STRATA_ASSIGN_OR_RETURN(part.shape, TensorShape::FromDims(dims));
    part.initializer = [init = args.initializer, full = args.shape, offset](
                           const Scope& s, const TensorShape& shape, DataType dtype) {
      return init.Rows(s, full, offset, shape, dtype);
    };
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Variable> v, make(p, part));
    if (v == nullptr)
      return absl::InternalError(absl::StrCat("partition ", p, " of '", name, "' was not made"));
    if (v->initializer() != nullptr) inits.push_back(v->initializer());
    parts.push_back(std::move(v));
    offset += rows;
  }
  Node* init = ops::NoOp(scope.WithNoControlDependencies()
                             .WithOpName(absl::StrCat(args.name, "/init"))
                             .WithControlDependencies(inits));
  STRATA_RETURN_IF_ERROR(scope.status());
  return std::make_unique<PartitionedVariable>(name, args.dtype, args.shape, std::move(parts), init,
                                               args.trainable);
}

}  // namespace train
}  // namespace strata
