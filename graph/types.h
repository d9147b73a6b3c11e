// Element types. DataType is the wire enum of proto/types.proto, whose values
// are TensorFlow's, so a dtype read from a GraphDef needs no translation.
//
//   DataType dt = DataTypeToEnum<float>::value;   // DT_FLOAT
//   size_t n = DataTypeSize(dt);                   // 4
//   std::string s = DataTypeString(dt);            // "float"
#ifndef STRATA_GRAPH_TYPES_H_
#define STRATA_GRAPH_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/types.pb.h"

namespace strata {

using DataType = ::tensorflow::DataType;
using ::tensorflow::DT_BOOL;
using ::tensorflow::DT_DOUBLE;
using ::tensorflow::DT_FLOAT;
using ::tensorflow::DT_HALF;
using ::tensorflow::DT_BFLOAT16;
using ::tensorflow::DT_INT32;
using ::tensorflow::DT_INT64;
using ::tensorflow::DT_INT8;
using ::tensorflow::DT_INT16;
using ::tensorflow::DT_UINT8;
using ::tensorflow::DT_UINT16;
using ::tensorflow::DT_UINT32;
using ::tensorflow::DT_UINT64;
using ::tensorflow::DT_INVALID;
using ::tensorflow::DT_RESOURCE;
using ::tensorflow::DT_STRING;

// Bytes per element; 0 for types Strata cannot hold in a flat buffer
// (string, variant, invalid, reference types). DT_RESOURCE is 8: a resource
// handle is a uint64 id (kernels/resource_mgr.h).
size_t DataTypeSize(DataType dt);

// True for the plain-data types: the fixed-size numeric types and bool, which
// TensorProtos and Const nodes may carry. False for DT_RESOURCE.
bool DataTypeCanUseMemcpy(DataType dt);

// True for the types a Tensor can hold: the plain-data types and DT_RESOURCE.
bool DataTypeCanAllocate(DataType dt);

// TensorFlow's short names: "float", "double", "int32", "int64", "bool", ...
std::string DataTypeString(DataType dt);

// Parses the short names above (and "half", "bfloat16").
absl::StatusOr<DataType> DataTypeFromString(absl::string_view s);

// True for reference dtypes (TensorFlow v1 variables): the base type plus
// 100 (DT_FLOAT_REF = 101, ...); from 200 on a number is no dtype at all,
// not a reference to one.
inline bool IsRefType(DataType dt) {
  return static_cast<int>(dt) > 100 && static_cast<int>(dt) < 200;
}

template <typename T>
struct DataTypeToEnum;
#define STRATA_MATCH_TYPE_AND_ENUM(TYPE, ENUM)          \
  template <>                                           \
  struct DataTypeToEnum<TYPE> {                         \
    static constexpr DataType value = ::tensorflow::ENUM; \
  }
STRATA_MATCH_TYPE_AND_ENUM(float, DT_FLOAT);
STRATA_MATCH_TYPE_AND_ENUM(double, DT_DOUBLE);
STRATA_MATCH_TYPE_AND_ENUM(int32_t, DT_INT32);
STRATA_MATCH_TYPE_AND_ENUM(int64_t, DT_INT64);
STRATA_MATCH_TYPE_AND_ENUM(uint8_t, DT_UINT8);
STRATA_MATCH_TYPE_AND_ENUM(int8_t, DT_INT8);
STRATA_MATCH_TYPE_AND_ENUM(int16_t, DT_INT16);
STRATA_MATCH_TYPE_AND_ENUM(uint16_t, DT_UINT16);
STRATA_MATCH_TYPE_AND_ENUM(uint32_t, DT_UINT32);
STRATA_MATCH_TYPE_AND_ENUM(uint64_t, DT_UINT64);
STRATA_MATCH_TYPE_AND_ENUM(bool, DT_BOOL);
#undef STRATA_MATCH_TYPE_AND_ENUM

// Runs `fn(TypeTag<T>{})` with the C++ type T of `dt` (float, double, int32,
// int64) and returns its Status; InvalidArgument for any other dtype.
//   return DispatchRealNumber(dt, [&](auto tag) -> absl::Status {
//     using T = typename decltype(tag)::type; ...; return absl::OkStatus(); });
template <typename T>
struct TypeTag {
  using type = T;
};

template <typename Fn>
absl::Status DispatchRealNumber(DataType dt, Fn&& fn) {
  switch (dt) {
    case ::tensorflow::DT_FLOAT: return fn(TypeTag<float>{});
    case ::tensorflow::DT_DOUBLE: return fn(TypeTag<double>{});
    case ::tensorflow::DT_INT32: return fn(TypeTag<int32_t>{});
    case ::tensorflow::DT_INT64: return fn(TypeTag<int64_t>{});
    default:
      return absl::InvalidArgumentError(
          "dtype " + DataTypeString(dt) + " is not one of float, double, int32, int64");
  }
}

}  // namespace strata

#endif  // STRATA_GRAPH_TYPES_H_
