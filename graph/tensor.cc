#include "graph/tensor.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace strata {

namespace {

TensorBuffer* AllocateBuffer(Allocator* alloc, DataType dtype, const TensorShape& shape) {
  const size_t bytes = static_cast<size_t>(shape.num_elements()) * DataTypeSize(dtype);
  void* p = alloc->AllocateRaw(kTensorAlignment, bytes);
  if (p == nullptr) return nullptr;
  return new TensorBuffer(alloc, p, bytes);
}

absl::Status CheckSupported(DataType dtype) {
  if (!DataTypeCanAllocate(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensors of dtype ", DataTypeString(dtype), " are not supported"));
  }
  return absl::OkStatus();
}

}  // namespace

Tensor::Tensor(DataType dtype, const TensorShape& shape) : Tensor(CpuAllocator(), dtype, shape) {}

Tensor::Tensor(Allocator* alloc, DataType dtype, const TensorShape& shape)
    : dtype_(dtype), shape_(shape) {
  absl::Status s = CheckSupported(dtype);
  if (s.ok()) {
    buf_ = AllocateBuffer(alloc, dtype, shape);
    if (buf_ == nullptr) {
      s = absl::ResourceExhaustedError(absl::StrCat("out of memory in ", alloc->Name()));
    }
  }
  if (!s.ok()) {
    std::cerr << "Tensor(" << DataTypeString(dtype) << ", " << shape.DebugString()
              << "): " << s << "\n";
    std::abort();
  }
}

absl::StatusOr<Tensor> Tensor::Allocate(Allocator* alloc, DataType dtype,
                                        const TensorShape& shape) {
  STRATA_RETURN_IF_ERROR(CheckSupported(dtype));
  const double bytes = static_cast<double>(shape.num_elements()) * DataTypeSize(dtype);
  if (bytes > 9.2e18) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tensor ", DataTypeString(dtype), " ", shape.DebugString(), " is too large"));
  }
  Tensor t;
  t.buf_ = AllocateBuffer(alloc, dtype, shape);
  if (t.buf_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory allocating tensor ", DataTypeString(dtype), " ", shape.DebugString(),
        " (", static_cast<int64_t>(bytes), " bytes) in ", alloc->Name()));
  }
  t.dtype_ = dtype;
  t.shape_ = shape;
  return t;
}

absl::StatusOr<Tensor> Tensor::Reshaped(const TensorShape& shape) const {
  if (shape.num_elements() != NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot reshape a tensor of ", NumElements(),
                                                   " elements to ", shape.DebugString()));
  }
  Tensor t(*this);
  t.shape_ = shape;
  return t;
}

Tensor Tensor::DeepCopy() const {
  if (!IsInitialized()) return Tensor();
  Tensor t(dtype_, shape_);
  if (TotalBytes() > 0) std::memcpy(t.raw_data(), raw_data(), TotalBytes());
  return t;
}

namespace {

// Fills `n` elements of `out` from a typed repeated field; a shorter field
// repeats its last value (TensorFlow's rule), an empty one gives zeros.
template <typename Dst, typename Field>
absl::Status FillFromField(const Field& field, int64_t n, Dst* out, const char* field_name) {
  const int64_t m = field.size();
  if (m > n) {
    return absl::InvalidArgumentError(absl::StrCat("TensorProto has ", m, " values in ",
                                                   field_name, " for ", n, " elements"));
  }
  for (int64_t i = 0; i < n; ++i) {
    out[i] = m == 0 ? Dst() : static_cast<Dst>(field.Get(i < m ? i : m - 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> Tensor::FromProto(const ::tensorflow::TensorProto& p, Allocator* alloc) {
  const DataType dtype = p.dtype();
  if (!DataTypeCanUseMemcpy(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TensorProto has unsupported dtype ", DataTypeString(dtype)));
  }
  auto shape_or = TensorShape::FromProto(p.tensor_shape());
  if (!shape_or.ok()) return AnnotateStatus(shape_or.status(), "TensorProto: ");
  STRATA_ASSIGN_OR_RETURN(Tensor t, Allocate(alloc, dtype, *shape_or));
  const int64_t n = t.NumElements();
  if (!p.tensor_content().empty()) {
    if (p.tensor_content().size() != t.TotalBytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TensorProto tensor_content has ", p.tensor_content().size(), " bytes; ",
          DataTypeString(dtype), " ", t.shape().DebugString(), " needs ", t.TotalBytes()));
    }
    std::memcpy(t.raw_data(), p.tensor_content().data(), t.TotalBytes());
    return t;
  }
  switch (dtype) {
    case DT_FLOAT:
      STRATA_RETURN_IF_ERROR(FillFromField(p.float_val(), n, t.data<float>(), "float_val"));
      break;
    case DT_DOUBLE:
      STRATA_RETURN_IF_ERROR(FillFromField(p.double_val(), n, t.data<double>(), "double_val"));
      break;
    case DT_INT32:
      STRATA_RETURN_IF_ERROR(FillFromField(p.int_val(), n, t.data<int32_t>(), "int_val"));
      break;
    case DT_INT16:
      STRATA_RETURN_IF_ERROR(FillFromField(p.int_val(), n, t.data<int16_t>(), "int_val"));
      break;
    case DT_INT8:
      STRATA_RETURN_IF_ERROR(FillFromField(p.int_val(), n, t.data<int8_t>(), "int_val"));
      break;
    case DT_UINT8:
      STRATA_RETURN_IF_ERROR(FillFromField(p.int_val(), n, t.data<uint8_t>(), "int_val"));
      break;
    case DT_UINT16:
      STRATA_RETURN_IF_ERROR(FillFromField(p.int_val(), n, t.data<uint16_t>(), "int_val"));
      break;
    case DT_INT64:
      STRATA_RETURN_IF_ERROR(FillFromField(p.int64_val(), n, t.data<int64_t>(), "int64_val"));
      break;
    case DT_UINT32:
      STRATA_RETURN_IF_ERROR(FillFromField(p.uint32_val(), n, t.data<uint32_t>(), "uint32_val"));
      break;
    case DT_UINT64:
      STRATA_RETURN_IF_ERROR(FillFromField(p.uint64_val(), n, t.data<uint64_t>(), "uint64_val"));
      break;
    case DT_BOOL:
      STRATA_RETURN_IF_ERROR(FillFromField(p.bool_val(), n, t.data<bool>(), "bool_val"));
      break;
    case DT_HALF:
    case DT_BFLOAT16:
      STRATA_RETURN_IF_ERROR(FillFromField(p.half_val(), n, t.data<uint16_t>(), "half_val"));
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("TensorProto has unsupported dtype ", DataTypeString(dtype)));
  }
  return t;
}

absl::Status Tensor::ToProto(::tensorflow::TensorProto* p, bool typed_values) const {
  if (dtype_ == DT_RESOURCE) {
    p->Clear();
    return absl::InvalidArgumentError(
        absl::StrCat("a resource handle tensor ", shape_.DebugString(),
                     " cannot be serialized: handles name state of this process only"));
  }
  AsProto(p, typed_values);
  return absl::OkStatus();
}

void Tensor::AsProto(::tensorflow::TensorProto* p, bool typed_values) const {
  p->Clear();
  p->set_dtype(dtype_);
  shape_.AsProto(p->mutable_tensor_shape());
  // A resource handle's id is never written (see ToProto); the dtype and
  // shape alone make FromProto fail with InvalidArgument.
  if (!IsInitialized() || dtype_ == DT_RESOURCE) return;
  const int64_t n = NumElements();
  if (!typed_values) {
    p->set_tensor_content(std::string(static_cast<const char*>(raw_data()), TotalBytes()));
    return;
  }
  switch (dtype_) {
    case DT_FLOAT: for (int64_t i = 0; i < n; ++i) p->add_float_val(data<float>()[i]); break;
    case DT_DOUBLE: for (int64_t i = 0; i < n; ++i) p->add_double_val(data<double>()[i]); break;
    case DT_INT32: for (int64_t i = 0; i < n; ++i) p->add_int_val(data<int32_t>()[i]); break;
    case DT_INT16: for (int64_t i = 0; i < n; ++i) p->add_int_val(data<int16_t>()[i]); break;
    case DT_INT8: for (int64_t i = 0; i < n; ++i) p->add_int_val(data<int8_t>()[i]); break;
    case DT_UINT8: for (int64_t i = 0; i < n; ++i) p->add_int_val(data<uint8_t>()[i]); break;
    case DT_UINT16: for (int64_t i = 0; i < n; ++i) p->add_int_val(data<uint16_t>()[i]); break;
    case DT_INT64: for (int64_t i = 0; i < n; ++i) p->add_int64_val(data<int64_t>()[i]); break;
    case DT_UINT32: for (int64_t i = 0; i < n; ++i) p->add_uint32_val(data<uint32_t>()[i]); break;
    case DT_UINT64: for (int64_t i = 0; i < n; ++i) p->add_uint64_val(data<uint64_t>()[i]); break;
    case DT_BOOL: for (int64_t i = 0; i < n; ++i) p->add_bool_val(data<bool>()[i]); break;
    case DT_HALF:
    case DT_BFLOAT16:
      for (int64_t i = 0; i < n; ++i) p->add_half_val(data<uint16_t>()[i]);
      break;
    default:
      break;
  }
}

std::string Tensor::DebugString(int max_entries) const {
  if (!IsInitialized()) return "<uninitialized tensor>";
  std::string out = absl::StrCat(DataTypeString(dtype_), " ", shape_.DebugString());
  const int64_t n = std::min<int64_t>(NumElements(), max_entries);
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype_) {
      case DT_FLOAT: absl::StrAppend(&out, " ", data<float>()[i]); break;
      case DT_DOUBLE: absl::StrAppend(&out, " ", data<double>()[i]); break;
      case DT_INT32: absl::StrAppend(&out, " ", data<int32_t>()[i]); break;
      case DT_INT64: absl::StrAppend(&out, " ", data<int64_t>()[i]); break;
      case DT_BOOL: absl::StrAppend(&out, data<bool>()[i] ? " true" : " false"); break;
      case DT_UINT8: absl::StrAppend(&out, " ", data<uint8_t>()[i]); break;
      case DT_RESOURCE: absl::StrAppend(&out, " #", data<uint64_t>()[i]); break;
      default: absl::StrAppend(&out, " ?"); break;
    }
  }
  if (NumElements() > n) absl::StrAppend(&out, " ...");
  return out;
}

}  // namespace strata
