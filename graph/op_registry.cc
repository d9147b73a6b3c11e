#include "graph/op_registry.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status.h"

namespace strata {

const AttrDef* OpDef::FindAttr(const std::string& attr_name) const {
  for (const auto& a : attrs) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

OpRegistry* OpRegistry::Global() {
  static OpRegistry* const r = new OpRegistry;
  return r;
}

absl::Status OpRegistry::Register(OpDef def) {
  if (ops_.count(def.name) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("op '", def.name, "' registered twice"));
  }
  std::string name = def.name;
  ops_.emplace(std::move(name), std::make_unique<const OpDef>(std::move(def)));
  return absl::OkStatus();
}

absl::StatusOr<const OpDef*> OpRegistry::LookUp(const std::string& op) const {
  auto it = ops_.find(op);
  if (it == ops_.end()) {
    return absl::NotFoundError(absl::StrCat("op '", op, "' is not registered in Strata"));
  }
  return it->second.get();
}

std::vector<std::string> OpRegistry::ListOps() const {
  std::vector<std::string> out;
  for (const auto& kv : ops_) out.push_back(kv.first);
  return out;
}

OpDefBuilder::OpDefBuilder(std::string name) { def_.name = std::move(name); }
OpDefBuilder& OpDefBuilder::Input(const std::string& spec) { input_specs_.push_back(spec); return *this; }
OpDefBuilder& OpDefBuilder::Output(const std::string& spec) { output_specs_.push_back(spec); return *this; }
OpDefBuilder& OpDefBuilder::Attr(const std::string& spec) { attr_specs_.push_back(spec); return *this; }
OpDefBuilder& OpDefBuilder::SetIsStateful() { def_.is_stateful = true; return *this; }
OpDefBuilder& OpDefBuilder::SetIsCommutative() { def_.is_commutative = true; return *this; }
OpDefBuilder& OpDefBuilder::SetShapeFn(ShapeFn fn) { def_.shape_fn = std::move(fn); return *this; }

namespace {

std::pair<std::string, std::string> SplitNameColon(const std::string& spec) {
  std::pair<std::string, std::string> kv = absl::StrSplit(spec, absl::MaxSplits(':', 1));
  return {std::string(absl::StripAsciiWhitespace(kv.first)),
          std::string(absl::StripAsciiWhitespace(kv.second))};
}

absl::StatusOr<ArgDef> ParseArg(const std::string& spec) {
  auto [name, type] = SplitNameColon(spec);
  if (name.empty() || type.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("bad arg spec '", spec, "'"));
  }
  ArgDef arg;
  arg.name = name;
  if (auto star = type.find('*'); star != std::string::npos) {
    arg.number_attr = std::string(absl::StripAsciiWhitespace(type.substr(0, star)));
    type = std::string(absl::StripAsciiWhitespace(type.substr(star + 1)));
  }
  auto dt = DataTypeFromString(type);
  if (dt.ok()) {
    arg.type = *dt;
  } else {
    arg.type_attr = type;  // resolved against the attrs in Build()
  }
  return arg;
}

absl::StatusOr<AttrValue> ParseDefault(const std::string& type, std::string text) {
  text = std::string(absl::StripAsciiWhitespace(text));
  AttrValue v;
  if (type == "int") {
    int64_t x;
    if (!absl::SimpleAtoi(text, &x)) return absl::InvalidArgumentError("bad int default");
    v.set_i(x);
  } else if (type == "float") {
    float x;
    if (!absl::SimpleAtof(text, &x)) return absl::InvalidArgumentError("bad float default");
    v.set_f(x);
  } else if (type == "bool") {
    if (text != "true" && text != "false") return absl::InvalidArgumentError("bad bool default");
    v.set_b(text == "true");
  } else if (type == "string") {
    if (text.size() < 2 || (text.front() != '"' && text.front() != '\'')) {
      return absl::InvalidArgumentError("string default must be quoted");
    }
    v.set_s(text.substr(1, text.size() - 2));
  } else if (type == "type") {
    STRATA_ASSIGN_OR_RETURN(DataType dt, DataTypeFromString(text));
    v.set_type(dt);
  } else if (absl::StartsWith(type, "list(")) {
    if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
      return absl::InvalidArgumentError("list default must be [..]");
    }
    auto* l = v.mutable_list();
    const std::string inner = text.substr(1, text.size() - 2);
    for (absl::string_view e : absl::StrSplit(inner, ',', absl::SkipWhitespace())) {
      e = absl::StripAsciiWhitespace(e);
      if (type == "list(int)") {
        int64_t x;
        if (!absl::SimpleAtoi(e, &x)) return absl::InvalidArgumentError("bad list(int) default");
        l->add_i(x);
      } else if (type == "list(float)") {
        float x;
        if (!absl::SimpleAtof(e, &x)) return absl::InvalidArgumentError("bad list(float) default");
        l->add_f(x);
      } else if (type == "list(type)") {
        STRATA_ASSIGN_OR_RETURN(DataType dt, DataTypeFromString(e));
        l->add_type(dt);
      } else if (type == "list(string)") {
        l->add_s(std::string(e.substr(1, e.size() - 2)));
      } else {
        return absl::InvalidArgumentError("unsupported list default");
      }
    }
  } else if (type == "shape") {
    // Only "[]" (scalar) or "<unknown>" defaults are needed.
    if (text == "<unknown>") {
      v.mutable_shape()->set_unknown_rank(true);
    } else if (text == "[]") {
      v.mutable_shape();
    } else {
      return absl::InvalidArgumentError("unsupported shape default");
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("no defaults for attrs of type ", type));
  }
  return v;
}

absl::StatusOr<AttrDef> ParseAttr(const std::string& spec) {
  auto [name, rest] = SplitNameColon(spec);
  if (name.empty() || rest.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("bad attr spec '", spec, "'"));
  }
  AttrDef attr;
  attr.name = name;
  std::string def_text;
  // The default follows the first '=' that is not part of ">=".
  size_t eq = rest.find('=');
  while (eq != std::string::npos && eq > 0 && rest[eq - 1] == '>') eq = rest.find('=', eq + 1);
  if (eq != std::string::npos) {
    def_text = rest.substr(eq + 1);
    rest = std::string(absl::StripAsciiWhitespace(rest.substr(0, eq)));
  }
  if (auto ge = rest.find(">="); ge != std::string::npos) {
    int64_t m;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(rest.substr(ge + 2)), &m)) {
      return absl::InvalidArgumentError(absl::StrCat("bad minimum in attr spec '", spec, "'"));
    }
    attr.minimum = m;
    rest = std::string(absl::StripAsciiWhitespace(rest.substr(0, ge)));
  }
  if (!rest.empty() && rest.front() == '{') {
    // "{float, double}": a type attr restricted to these types.
    if (rest.back() != '}') return absl::InvalidArgumentError(absl::StrCat("bad attr spec '", spec, "'"));
    for (absl::string_view t : absl::StrSplit(rest.substr(1, rest.size() - 2), ',', absl::SkipWhitespace())) {
      auto dt = DataTypeFromString(absl::StripAsciiWhitespace(t));
      if (!dt.ok()) return AnnotateStatus(dt.status(), absl::StrCat("attr spec '", spec, "': "));
      attr.allowed_types.push_back(*dt);
    }
    rest = "type";
  }
  static const char* const kTypes[] = {"type", "int", "float", "bool", "string", "shape",
                                       "tensor", "func", "list(int)", "list(float)",
                                       "list(type)", "list(string)", "list(shape)", "list(bool)"};
  bool known = false;
  for (const char* t : kTypes) known = known || rest == t;
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat("unknown attr type in spec '", spec, "'"));
  }
  attr.type = rest;
  if (!def_text.empty()) {
    auto v = ParseDefault(attr.type, def_text);
    if (!v.ok()) return AnnotateStatus(v.status(), absl::StrCat("attr spec '", spec, "': "));
    attr.default_value = *v;
  }
  return attr;
}

}  // namespace

absl::StatusOr<OpDef> OpDefBuilder::Build() const {
  OpDef def = def_;
  auto where = [&](const std::string& spec) { return absl::StrCat("op ", def.name, ": ", spec, ": "); };
  for (const auto& s : attr_specs_) {
    auto a = ParseAttr(s);
    if (!a.ok()) return AnnotateStatus(a.status(), where(s));
    def.attrs.push_back(*a);
  }
  auto resolve = [&](const std::string& s, ArgDef arg) -> absl::StatusOr<ArgDef> {
    if (!arg.number_attr.empty()) {
      const AttrDef* n = def.FindAttr(arg.number_attr);
      if (n == nullptr || n->type != "int") {
        return absl::InvalidArgumentError(absl::StrCat(where(s), "no int attr ", arg.number_attr));
      }
    }
    if (!arg.type_attr.empty()) {
      const AttrDef* t = def.FindAttr(arg.type_attr);
      if (t == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(where(s), "no attr ", arg.type_attr));
      }
      if (t->type == "list(type)") {
        arg.type_list_attr = arg.type_attr;
        arg.type_attr.clear();
      } else if (t->type != "type") {
        return absl::InvalidArgumentError(absl::StrCat(where(s), arg.type_attr, " is not a type attr"));
      }
    }
    return arg;
  };
  for (const auto& s : input_specs_) {
    auto a = ParseArg(s);
    if (!a.ok()) return AnnotateStatus(a.status(), where(s));
    STRATA_ASSIGN_OR_RETURN(ArgDef arg, resolve(s, *a));
    def.inputs.push_back(arg);
  }
  for (const auto& s : output_specs_) {
    auto a = ParseArg(s);
    if (!a.ok()) return AnnotateStatus(a.status(), where(s));
    STRATA_ASSIGN_OR_RETURN(ArgDef arg, resolve(s, *a));
    def.outputs.push_back(arg);
  }
  return def;
}

namespace op_registration {
Registrar::Registrar(const OpDefBuilder& b) {
  auto def = b.Build();
  absl::Status s = def.ok() ? OpRegistry::Global()->Register(*std::move(def)) : def.status();
  if (!s.ok()) {
    std::cerr << "op registration failed: " << s << "\n";
    std::abort();
  }
}
}  // namespace op_registration

absl::Status ValidateAndCompleteAttrs(const OpDef& op, ::tensorflow::NodeDef* node) {
  auto* attrs = node->mutable_attr();
  auto err = [&](const std::string& attr, const std::string& msg) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", node->name(), "' (op ", op.name, "): attr '", attr, "' ", msg));
  };
  for (const auto& a : op.attrs) {
    auto it = attrs->find(a.name);
    if (it == attrs->end()) {
      if (!a.default_value) return err(a.name, "is missing and has no default");
      (*attrs)[a.name] = *a.default_value;
      continue;
    }
    const AttrValue& v = it->second;
    const std::string got = AttrValueTypeName(v);
    const bool ok = got == a.type || (got == "list(any)" && absl::StartsWith(a.type, "list("));
    if (!ok) {
      return err(a.name, absl::StrCat("has type ", got.empty() ? "<unset>" : got,
                                      ", expected ", a.type));
    }
    if (a.type == "type") {
      if (!DataTypeCanUseMemcpy(v.type()) && v.type() != DT_RESOURCE) {
        return err(a.name, absl::StrCat("has unsupported dtype ", DataTypeString(v.type())));
      }
      if (!a.allowed_types.empty()) {
        bool allowed = false;
        for (DataType t : a.allowed_types) allowed = allowed || t == v.type();
        if (!allowed) return err(a.name, absl::StrCat("= ", DataTypeString(v.type()), " is not an allowed type"));
      }
    }
    if (a.minimum && a.type == "int" && v.i() < *a.minimum) {
      return err(a.name, absl::StrCat("= ", v.i(), " is below the minimum ", *a.minimum));
    }
  }
  for (const auto& kv : *attrs) {
    if (op.FindAttr(kv.first) == nullptr && !absl::StartsWith(kv.first, "_")) {
      return absl::InvalidArgumentError(absl::StrCat("node '", node->name(), "' (op ", op.name,
                                                     "): unknown attr '", kv.first, "'"));
    }
  }
  return absl::OkStatus();
}

namespace {
absl::Status AppendArgTypes(const ::tensorflow::NodeDef& node, const OpDef& op,
                            const ArgDef& arg, std::vector<DataType>* out) {
  const auto& attrs = node.attr();
  auto where = absl::StrCat("node '", node.name(), "' (op ", op.name, "), arg '", arg.name, "': ");
  if (!arg.type_list_attr.empty()) {
    std::vector<DataType> types;
    absl::Status s = GetAttr(attrs, arg.type_list_attr, &types);
    if (!s.ok()) return AnnotateStatus(s, where);
    out->insert(out->end(), types.begin(), types.end());
    return absl::OkStatus();
  }
  DataType t = arg.type;
  if (!arg.type_attr.empty()) {
    absl::Status s = GetAttr(attrs, arg.type_attr, &t);
    if (!s.ok()) return AnnotateStatus(s, where);
  }
  int64_t n = 1;
  if (!arg.number_attr.empty()) {
    absl::Status s = GetAttr(attrs, arg.number_attr, &n);
    if (!s.ok()) return AnnotateStatus(s, where);
    if (n < 0 || n > 1000000) {
      return absl::InvalidArgumentError(absl::StrCat(where, "list length ", n, " is invalid"));
    }
  }
  for (int64_t i = 0; i < n; ++i) out->push_back(t);
  return absl::OkStatus();
}
}  // namespace

absl::Status InOutTypesForNode(const ::tensorflow::NodeDef& node, const OpDef& op,
                               std::vector<DataType>* inputs, std::vector<DataType>* outputs) {
  inputs->clear();
  outputs->clear();
  for (const auto& a : op.inputs) STRATA_RETURN_IF_ERROR(AppendArgTypes(node, op, a, inputs));
  for (const auto& a : op.outputs) STRATA_RETURN_IF_ERROR(AppendArgTypes(node, op, a, outputs));
  return absl::OkStatus();
}

}  // namespace strata
