#include "graph/tensor_shape.h"

#include <cstdlib>
#include <iostream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace strata {

namespace {
// a * b, or false if it would overflow int64 (both non-negative).
bool MulNoOverflow(int64_t a, int64_t b, int64_t* out) {
  if (a == 0 || b == 0) {
    *out = 0;
    return true;
  }
  if (a > std::numeric_limits<int64_t>::max() / b) return false;
  *out = a * b;
  return true;
}
}  // namespace

TensorShape::TensorShape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) {
    absl::Status s = AddDim(d);
    if (!s.ok()) {
      std::cerr << "invalid TensorShape literal: " << s << "\n";
      std::abort();
    }
  }
}

absl::Status TensorShape::AddDim(int64_t size) {
  if (size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dimension ", dims_.size(), " has negative size ", size));
  }
  int64_t n;
  if (!MulNoOverflow(num_elements_, size, &n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape ", DebugString(), " with another dimension of ", size,
        " has more than 2^63-1 elements"));
  }
  dims_.push_back(size);
  num_elements_ = n;
  return absl::OkStatus();
}

absl::StatusOr<TensorShape> TensorShape::FromDims(absl::Span<const int64_t> dims) {
  TensorShape s;
  for (int64_t d : dims) STRATA_RETURN_IF_ERROR(s.AddDim(d));
  return s;
}

absl::StatusOr<TensorShape> TensorShape::FromProto(const ::tensorflow::TensorShapeProto& p) {
  if (p.unknown_rank()) {
    return absl::InvalidArgumentError("shape has unknown rank where a known shape is required");
  }
  TensorShape s;
  for (const auto& d : p.dim()) STRATA_RETURN_IF_ERROR(s.AddDim(d.size()));
  return s;
}

void TensorShape::AsProto(::tensorflow::TensorShapeProto* p) const {
  p->Clear();
  for (int64_t d : dims_) p->add_dim()->set_size(d);
}

std::string TensorShape::DebugString() const {
  return absl::StrCat("[", absl::StrJoin(dims_, ","), "]");
}

PartialTensorShape::PartialTensorShape(absl::Span<const int64_t> dims)
    : unknown_rank_(false), dims_(dims.begin(), dims.end()) {}

PartialTensorShape::PartialTensorShape(const TensorShape& s)
    : unknown_rank_(false), dims_(s.dim_sizes().begin(), s.dim_sizes().end()) {}

absl::StatusOr<PartialTensorShape> PartialTensorShape::FromProto(
    const ::tensorflow::TensorShapeProto& p) {
  if (p.unknown_rank()) return PartialTensorShape();
  DimVector dims;
  for (const auto& d : p.dim()) {
    if (d.size() < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("dimension ", dims.size(), " has invalid size ", d.size()));
    }
    dims.push_back(d.size());
  }
  return PartialTensorShape(dims);
}

bool PartialTensorShape::IsFullyDefined() const {
  if (unknown_rank_) return false;
  for (int64_t d : dims_) {
    if (d < 0) return false;
  }
  return true;
}

absl::StatusOr<TensorShape> PartialTensorShape::AsTensorShape() const {
  if (!IsFullyDefined()) {
    return absl::FailedPreconditionError(
        absl::StrCat("shape ", DebugString(), " is not fully defined"));
  }
  return TensorShape::FromDims(dims_);
}

bool PartialTensorShape::IsCompatibleWith(const PartialTensorShape& o) const {
  if (unknown_rank_ || o.unknown_rank_) return true;
  if (dims_.size() != o.dims_.size()) return false;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] >= 0 && o.dims_[i] >= 0 && dims_[i] != o.dims_[i]) return false;
  }
  return true;
}

absl::StatusOr<PartialTensorShape> PartialTensorShape::Merge(const PartialTensorShape& o) const {
  if (unknown_rank_) return o;
  if (o.unknown_rank_) return *this;
  if (!IsCompatibleWith(o)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shapes ", DebugString(), " and ", o.DebugString(), " are incompatible"));
  }
  DimVector dims(dims_);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) dims[i] = o.dims_[i];
  }
  return PartialTensorShape(dims);
}

void PartialTensorShape::AsProto(::tensorflow::TensorShapeProto* p) const {
  p->Clear();
  if (unknown_rank_) {
    p->set_unknown_rank(true);
    return;
  }
  for (int64_t d : dims_) p->add_dim()->set_size(d);
}

std::string PartialTensorShape::DebugString() const {
  if (unknown_rank_) return "<unknown>";
  std::string out = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i > 0) out += ",";
    out += dims_[i] < 0 ? "?" : absl::StrCat(dims_[i]);
  }
  return out + "]";
}

}  // namespace strata
