// Typed access to node attributes (tensorflow::AttrValue) and builders for
// them. Getters return InvalidArgument naming the attr when it is missing or
// has the wrong type, never abort.
//
//   bool ta;
//   STRATA_RETURN_IF_ERROR(GetAttr(node_def.attr(), "transpose_a", &ta));
//   (*node_def.mutable_attr())["T"] = MakeAttr(DT_FLOAT);
#ifndef STRATA_GRAPH_ATTR_VALUE_H_
#define STRATA_GRAPH_ATTR_VALUE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "google/protobuf/map.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"
#include "proto/attr_value.pb.h"

namespace strata {

using AttrValue = ::tensorflow::AttrValue;
using AttrMap = ::google::protobuf::Map<std::string, AttrValue>;

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, int64_t* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, int32_t* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, float* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, bool* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::string* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, DataType* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, PartialTensorShape* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, TensorShape* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, Tensor* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::vector<int64_t>* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::vector<int32_t>* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::vector<float>* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::vector<DataType>* v);
absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::vector<std::string>* v);

AttrValue MakeAttr(int64_t v);
inline AttrValue MakeAttr(int v) { return MakeAttr(static_cast<int64_t>(v)); }
AttrValue MakeAttr(float v);
AttrValue MakeAttr(bool v);
AttrValue MakeAttr(const std::string& v);
inline AttrValue MakeAttr(const char* v) { return MakeAttr(std::string(v)); }
AttrValue MakeAttr(DataType v);
AttrValue MakeAttr(const PartialTensorShape& v);
AttrValue MakeAttr(const TensorShape& v);
AttrValue MakeAttr(const Tensor& v);
AttrValue MakeAttr(const std::vector<int64_t>& v);
AttrValue MakeAttr(const std::vector<int>& v);
AttrValue MakeAttr(const std::vector<float>& v);
AttrValue MakeAttr(const std::vector<DataType>& v);
AttrValue MakeAttr(const std::vector<std::string>& v);

// The attr type name of a value as op specs spell it ("int", "list(float)",
// ...); for an empty list, "list(any)". "" if no value is set.
std::string AttrValueTypeName(const AttrValue& v);

// Short human-readable form, for error messages and dumps.
std::string AttrValueDebugString(const AttrValue& v);

}  // namespace strata

#endif  // STRATA_GRAPH_ATTR_VALUE_H_
