#include "graph/attr_value.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace strata {

namespace {

absl::StatusOr<const AttrValue*> Find(const AttrMap& attrs, const std::string& name,
                                      AttrValue::ValueCase want, const char* want_name) {
  auto it = attrs.find(name);
  if (it == attrs.end()) {
    return absl::InvalidArgumentError(absl::StrCat("missing attr '", name, "'"));
  }
  if (it->second.value_case() != want) {
    return absl::InvalidArgumentError(absl::StrCat("attr '", name, "' has type ",
                                                   AttrValueTypeName(it->second),
                                                   ", expected ", want_name));
  }
  return &it->second;
}

// Lists: an unset value case is an empty list too (TensorFlow writes `list {}`).
absl::StatusOr<const AttrValue::ListValue*> FindList(const AttrMap& attrs,
                                                     const std::string& name,
                                                     const char* want_name) {
  auto it = attrs.find(name);
  if (it == attrs.end()) {
    return absl::InvalidArgumentError(absl::StrCat("missing attr '", name, "'"));
  }
  if (it->second.value_case() != AttrValue::kList) {
    return absl::InvalidArgumentError(absl::StrCat("attr '", name, "' has type ",
                                                   AttrValueTypeName(it->second),
                                                   ", expected ", want_name));
  }
  return &it->second.list();
}

}  // namespace

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, int64_t* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue* a, Find(attrs, name, AttrValue::kI, "int"));
  *v = a->i();
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, int32_t* v) {
  int64_t x;
  STRATA_RETURN_IF_ERROR(GetAttr(attrs, name, &x));
  if (x < INT32_MIN || x > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("attr '", name, "' = ", x, " is out of int32 range"));
  }
  *v = static_cast<int32_t>(x);
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, float* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue* a, Find(attrs, name, AttrValue::kF, "float"));
  *v = a->f();
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, bool* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue* a, Find(attrs, name, AttrValue::kB, "bool"));
  *v = a->b();
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::string* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue* a, Find(attrs, name, AttrValue::kS, "string"));
  *v = a->s();
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, DataType* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue* a, Find(attrs, name, AttrValue::kType, "type"));
  *v = a->type();
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, PartialTensorShape* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue* a, Find(attrs, name, AttrValue::kShape, "shape"));
  auto s = PartialTensorShape::FromProto(a->shape());
  if (!s.ok()) return AnnotateStatus(s.status(), absl::StrCat("attr '", name, "': "));
  *v = *s;
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, TensorShape* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue* a, Find(attrs, name, AttrValue::kShape, "shape"));
  auto s = TensorShape::FromProto(a->shape());
  if (!s.ok()) return AnnotateStatus(s.status(), absl::StrCat("attr '", name, "': "));
  *v = *s;
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, Tensor* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue* a, Find(attrs, name, AttrValue::kTensor, "tensor"));
  auto t = Tensor::FromProto(a->tensor());
  if (!t.ok()) return AnnotateStatus(t.status(), absl::StrCat("attr '", name, "': "));
  *v = std::move(*t);
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::vector<int64_t>* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue::ListValue* l, FindList(attrs, name, "list(int)"));
  v->assign(l->i().begin(), l->i().end());
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::vector<int32_t>* v) {
  std::vector<int64_t> x;
  STRATA_RETURN_IF_ERROR(GetAttr(attrs, name, &x));
  v->clear();
  for (int64_t e : x) {
    if (e < INT32_MIN || e > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("attr '", name, "' has ", e, ", out of int32 range"));
    }
    v->push_back(static_cast<int32_t>(e));
  }
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::vector<float>* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue::ListValue* l, FindList(attrs, name, "list(float)"));
  v->assign(l->f().begin(), l->f().end());
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::vector<DataType>* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue::ListValue* l, FindList(attrs, name, "list(type)"));
  v->clear();
  for (int t : l->type()) v->push_back(static_cast<DataType>(t));
  return absl::OkStatus();
}

absl::Status GetAttr(const AttrMap& attrs, const std::string& name, std::vector<std::string>* v) {
  STRATA_ASSIGN_OR_RETURN(const AttrValue::ListValue* l, FindList(attrs, name, "list(string)"));
  v->assign(l->s().begin(), l->s().end());
  return absl::OkStatus();
}

AttrValue MakeAttr(int64_t v) { AttrValue a; a.set_i(v); return a; }
AttrValue MakeAttr(float v) { AttrValue a; a.set_f(v); return a; }
AttrValue MakeAttr(bool v) { AttrValue a; a.set_b(v); return a; }
AttrValue MakeAttr(const std::string& v) { AttrValue a; a.set_s(v); return a; }
AttrValue MakeAttr(DataType v) { AttrValue a; a.set_type(v); return a; }
AttrValue MakeAttr(const PartialTensorShape& v) { AttrValue a; v.AsProto(a.mutable_shape()); return a; }
AttrValue MakeAttr(const TensorShape& v) { AttrValue a; v.AsProto(a.mutable_shape()); return a; }
AttrValue MakeAttr(const Tensor& v) { AttrValue a; v.AsProto(a.mutable_tensor()); return a; }
AttrValue MakeAttr(const std::vector<int64_t>& v) {
  AttrValue a;
  auto* l = a.mutable_list();
  for (int64_t x : v) l->add_i(x);
  return a;
}
AttrValue MakeAttr(const std::vector<int>& v) {
  return MakeAttr(std::vector<int64_t>(v.begin(), v.end()));
}
AttrValue MakeAttr(const std::vector<float>& v) {
  AttrValue a;
  auto* l = a.mutable_list();
  for (float x : v) l->add_f(x);
  return a;
}
AttrValue MakeAttr(const std::vector<DataType>& v) {
  AttrValue a;
  auto* l = a.mutable_list();
  for (DataType x : v) l->add_type(x);
  return a;
}
AttrValue MakeAttr(const std::vector<std::string>& v) {
  AttrValue a;
  auto* l = a.mutable_list();
  for (const auto& x : v) l->add_s(x);
  return a;
}

std::string AttrValueTypeName(const AttrValue& v) {
  switch (v.value_case()) {
    case AttrValue::kS: return "string";
    case AttrValue::kI: return "int";
    case AttrValue::kF: return "float";
    case AttrValue::kB: return "bool";
    case AttrValue::kType: return "type";
    case AttrValue::kShape: return "shape";
    case AttrValue::kTensor: return "tensor";
    case AttrValue::kFunc: return "func";
    case AttrValue::kPlaceholder: return "placeholder";
    case AttrValue::kList: {
      const auto& l = v.list();
      if (l.s_size() > 0) return "list(string)";
      if (l.i_size() > 0) return "list(int)";
      if (l.f_size() > 0) return "list(float)";
      if (l.b_size() > 0) return "list(bool)";
      if (l.type_size() > 0) return "list(type)";
      if (l.shape_size() > 0) return "list(shape)";
      if (l.tensor_size() > 0) return "list(tensor)";
      if (l.func_size() > 0) return "list(func)";
      return "list(any)";
    }
    default: return "";
  }
}

std::string AttrValueDebugString(const AttrValue& v) {
  switch (v.value_case()) {
    case AttrValue::kS: return absl::StrCat("\"", v.s(), "\"");
    case AttrValue::kI: return absl::StrCat(v.i());
    case AttrValue::kF: return absl::StrCat(v.f());
    case AttrValue::kB: return v.b() ? "true" : "false";
    case AttrValue::kType: return DataTypeString(v.type());
    case AttrValue::kShape: {
      auto s = PartialTensorShape::FromProto(v.shape());
      return s.ok() ? s->DebugString() : "<bad shape>";
    }
    case AttrValue::kTensor: return "<tensor>";
    case AttrValue::kList: {
      const auto& l = v.list();
      if (l.i_size() > 0) return absl::StrCat("[", absl::StrJoin(l.i(), ","), "]");
      if (l.f_size() > 0) return absl::StrCat("[", absl::StrJoin(l.f(), ","), "]");
      if (l.s_size() > 0) return absl::StrCat("[", absl::StrJoin(l.s(), ","), "]");
      if (l.type_size() > 0) {
        std::vector<std::string> names;
        for (int t : l.type()) names.push_back(DataTypeString(static_cast<DataType>(t)));
        return absl::StrCat("[", absl::StrJoin(names, ","), "]");
      }
      return "[]";
    }
    default: return "<unset>";
  }
}

}  // namespace strata
