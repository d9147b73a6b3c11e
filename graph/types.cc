#include "graph/types.h"

#include "absl/strings/str_cat.h"

namespace strata {

size_t DataTypeSize(DataType dt) {
  switch (dt) {
    case DT_FLOAT: return 4;
    case DT_DOUBLE: return 8;
    case DT_INT32: return 4;
    case DT_INT64: return 8;
    case DT_UINT8: return 1;
    case DT_INT8: return 1;
    case DT_INT16: return 2;
    case DT_UINT16: return 2;
    case DT_UINT32: return 4;
    case DT_UINT64: return 8;
    case DT_BOOL: return 1;
    case DT_HALF: return 2;
    case DT_BFLOAT16: return 2;
    // A resource handle: one uint64 id per element (kernels/resource_mgr.h).
    case DT_RESOURCE: return 8;
    default: return 0;
  }
}

// Resource handles have a size but are not plain data: a TensorProto must
// never carry one (an id forged from a file would name another process's
// state), so they are excluded here and allowed explicitly where tensors are
// allocated.
bool DataTypeCanUseMemcpy(DataType dt) { return dt != DT_RESOURCE && DataTypeSize(dt) != 0; }

bool DataTypeCanAllocate(DataType dt) { return DataTypeSize(dt) != 0; }

namespace {
struct NameEntry {
  DataType dt;
  const char* name;
};
constexpr NameEntry kNames[] = {
    {DT_FLOAT, "float"},   {DT_DOUBLE, "double"},     {DT_INT32, "int32"},
    {DT_INT64, "int64"},   {DT_UINT8, "uint8"},       {DT_INT8, "int8"},
    {DT_INT16, "int16"},   {DT_UINT16, "uint16"},     {DT_UINT32, "uint32"},
    {DT_UINT64, "uint64"}, {DT_BOOL, "bool"},         {DT_HALF, "half"},
    {DT_BFLOAT16, "bfloat16"}, {DT_STRING, "string"}, {DT_RESOURCE, "resource"},
    {::tensorflow::DT_VARIANT, "variant"},
};
}  // namespace

std::string DataTypeString(DataType dt) {
  if (IsRefType(dt)) {
    return absl::StrCat(DataTypeString(static_cast<DataType>(dt - 100)), "_ref");
  }
  for (const auto& e : kNames) {
    if (e.dt == dt) return e.name;
  }
  return absl::StrCat("unknown dtype ", static_cast<int>(dt));
}

absl::StatusOr<DataType> DataTypeFromString(absl::string_view s) {
  for (const auto& e : kNames) {
    if (s == e.name) return e.dt;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype name '", s, "'"));
}

}  // namespace strata
