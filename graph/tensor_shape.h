// TensorShape: the fully known dimensions of a tensor (outermost first), with
// the element count kept and overflow-checked. PartialTensorShape: a shape
// that may have unknown dimensions (-1) or unknown rank, as shape inference
// and Placeholder's `shape` attr use.
//
//   absl::StatusOr<TensorShape> s = TensorShape::FromDims({256, 784});
//   s->num_elements();                 // 200704
//   TensorShape t{2, 3};               // trusted literal: checked, aborts if invalid
//
// Value types; not thread-safe for concurrent mutation.
#ifndef STRATA_GRAPH_TENSOR_SHAPE_H_
#define STRATA_GRAPH_TENSOR_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/tensor_shape.pb.h"

namespace strata {

using DimVector = absl::InlinedVector<int64_t, 4>;

class TensorShape {
 public:
  TensorShape() = default;  // a scalar
  // For literals in trusted code; aborts on a negative or overflowing dim.
  TensorShape(std::initializer_list<int64_t> dims);

  // Validates: every dim >= 0 and the element count fits in int64.
  static absl::StatusOr<TensorShape> FromDims(absl::Span<const int64_t> dims);
  // Validates a proto: known rank, every dim >= 0, no overflow.
  static absl::StatusOr<TensorShape> FromProto(const ::tensorflow::TensorShapeProto& p);

  int dims() const { return static_cast<int>(dims_.size()); }
  int64_t dim_size(int d) const { return dims_[d]; }
  absl::Span<const int64_t> dim_sizes() const { return dims_; }
  int64_t num_elements() const { return num_elements_; }

  // Appends a dim; fails on a negative size or an overflowing element count.
  absl::Status AddDim(int64_t size);

  void AsProto(::tensorflow::TensorShapeProto* p) const;
  std::string DebugString() const;  // "[2,3]", "[]" for a scalar

  bool operator==(const TensorShape& o) const { return dims_ == o.dims_; }
  bool operator!=(const TensorShape& o) const { return !(*this == o); }

 private:
  DimVector dims_;
  int64_t num_elements_ = 1;
};

class PartialTensorShape {
 public:
  PartialTensorShape() : unknown_rank_(true) {}  // unknown rank
  explicit PartialTensorShape(absl::Span<const int64_t> dims);  // -1 = unknown dim
  PartialTensorShape(std::initializer_list<int64_t> dims)
      : PartialTensorShape(absl::Span<const int64_t>(dims.begin(), dims.size())) {}
  PartialTensorShape(const TensorShape& s);  // NOLINT: implicit, a known shape is partial too

  static PartialTensorShape UnknownRank() { return PartialTensorShape(); }
  // Validates: dims >= -1.
  static absl::StatusOr<PartialTensorShape> FromProto(const ::tensorflow::TensorShapeProto& p);

  bool unknown_rank() const { return unknown_rank_; }
  int dims() const { return unknown_rank_ ? -1 : static_cast<int>(dims_.size()); }
  int64_t dim_size(int d) const { return dims_[d]; }
  absl::Span<const int64_t> dim_sizes() const { return dims_; }
  bool IsFullyDefined() const;
  // The known shape; FailedPrecondition if not fully defined.
  absl::StatusOr<TensorShape> AsTensorShape() const;
  // True if some fully defined shape is compatible with both.
  bool IsCompatibleWith(const PartialTensorShape& o) const;
  bool IsCompatibleWith(const TensorShape& o) const { return IsCompatibleWith(PartialTensorShape(o)); }
  // The most specific shape compatible with both; InvalidArgument if none.
  absl::StatusOr<PartialTensorShape> Merge(const PartialTensorShape& o) const;

  void AsProto(::tensorflow::TensorShapeProto* p) const;
  std::string DebugString() const;  // "[?,3]", "<unknown>"

  bool operator==(const PartialTensorShape& o) const {
    return unknown_rank_ == o.unknown_rank_ && dims_ == o.dims_;
  }

 private:
  bool unknown_rank_ = false;
  DimVector dims_;
};

}  // namespace strata

#endif  // STRATA_GRAPH_TENSOR_SHAPE_H_
