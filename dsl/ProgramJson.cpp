#include "dsl/ProgramJson.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "dsl/IRVisitor.h"

namespace pto {
using nlohmann::json;

namespace {

class ToJson : public IRVisitor {
 public:
  json out;

 protected:
  void visit_const(const ConstNode& n) override {
    // JSON has no Inf or NaN (nlohmann writes them as null): they are written
    // as the strings "inf", "-inf" and "nan" (a max pool's -inf padding).
    const json v = std::isnan(n.value)   ? json("nan")
                   : std::isinf(n.value) ? json(n.value > 0 ? "inf" : "-inf")
                                         : json(n.value);
    out = {{"k", "const"}, {"v", v}, {"t", to_string(n.type)}};
    if (n.weak) out["weak"] = true;
  }
  void visit_var(const VarNode& n) override { out = {{"k", "var"}, {"n", n.name}}; }
  void visit_access(const AccessNode& n) override {
    json args = json::array();
    for (const Expr& a : n.args) args.push_back(expr_to_json(a));
    out = {{"k", "access"}, {"tensor", n.tensor}, {"t", to_string(n.type)}, {"args", args}};
  }
  void visit_unary(const UnaryNode& n) override {
    out = {{"k", "unary"}, {"op", to_string(n.op)}, {"t", to_string(n.type)},
           {"a", expr_to_json(n.a)}};
  }
  void visit_binary(const BinaryNode& n) override {
    out = {{"k", "binary"}, {"op", to_string(n.op)}, {"t", to_string(n.type)},
           {"a", expr_to_json(n.a)}, {"b", expr_to_json(n.b)}};
  }
  void visit_select(const SelectNode& n) override {
    out = {{"k", "select"}, {"t", to_string(n.type)}, {"c", expr_to_json(n.cond)},
           {"a", expr_to_json(n.true_value)}, {"b", expr_to_json(n.false_value)}};
  }
  void visit_cast(const CastNode& n) override {
    out = {{"k", "cast"}, {"t", to_string(n.type)}, {"a", expr_to_json(n.a)}};
  }
};

// Typed field access: a missing or mistyped field is a DefinitionError, not a json exception.
const json& field(const json& j, const char* key, const char* where) {
  if (!j.is_object() || !j.contains(key))
    throw DefinitionError(std::string("program JSON: ") + where + " lacks field '" + key + "'");
  return j.at(key);
}
std::string str_field(const json& j, const char* key, const char* where) {
  const json& f = field(j, key, where);
  if (!f.is_string())
    throw DefinitionError(std::string("program JSON: ") + where + "." + key + " must be a string");
  return f.get<std::string>();
}
const json& arr_field(const json& j, const char* key, const char* where) {
  const json& f = field(j, key, where);
  if (!f.is_array())
    throw DefinitionError(std::string("program JSON: ") + where + "." + key + " must be a list");
  return f;
}

// A convolution's variable roles, by role name (ConvRoles in Stage.h).
using RoleField = std::string ConvRoles::*;
constexpr std::pair<const char*, RoleField> kRoles[] = {
    {"batch", &ConvRoles::batch},           {"out_channel", &ConvRoles::out_channel},
    {"out_row", &ConvRoles::out_row},       {"out_col", &ConvRoles::out_col},
    {"in_channel", &ConvRoles::in_channel}, {"kernel_row", &ConvRoles::kernel_row},
    {"kernel_col", &ConvRoles::kernel_col},
};
json roles_to_json(const ConvRoles& r) {
  json j = json::object();
  for (const auto& [name, field] : kRoles) j[name] = r.*field;
  return j;
}
// Each role names one of the stage's variables, or is empty.
ConvRoles roles_from_json(const json& j, const Stage& s) {
  if (!j.is_object()) throw DefinitionError("program JSON: stage '" + s.name + "' conv_roles must be an object");
  ConvRoles r;
  for (const auto& [name, field] : kRoles) {
    const std::string v = str_field(j, name, "conv_roles");
    const bool known = v.empty() || std::find(s.vars.begin(), s.vars.end(), v) != s.vars.end() ||
                       std::any_of(s.rvars.begin(), s.rvars.end(), [&](const RVar& rv) { return rv.name == v; });
    if (!known)
      throw DefinitionError("program JSON: stage '" + s.name + "' conv_roles." + name + " names '" + v +
                            "', which is not one of its variables");
    r.*field = v;
  }
  return r;
}

json dim_to_json(const Dim& d) { return d.is_symbolic() ? json(d.sym) : json(d.value); }
Dim dim_from_json(const json& j) {
  if (j.is_string()) return Dim::symbol(j.get<std::string>());
  if (j.is_number_integer()) return Dim(j.get<int64_t>());
  throw DefinitionError("program JSON: a dim must be an integer or a symbol name, got " + j.dump());
}
json shape_to_json(const Shape& s) {
  json a = json::array();
  for (const Dim& d : s) a.push_back(dim_to_json(d));
  return a;
}
Shape shape_from_json(const json& j, const char* where) {
  if (!j.is_array()) throw DefinitionError(std::string("program JSON: ") + where + " shape must be a list");
  Shape s;
  for (const auto& d : j) s.push_back(dim_from_json(d));
  return s;
}

// Depth guard: hostile JSON could nest expressions deeply enough to overflow the stack.
Expr expr_from_json_depth(const json& j, int depth) {
  if (depth > 2000) throw DefinitionError("program JSON: expression nested too deeply");
  const std::string k = str_field(j, "k", "expression");
  auto sub = [&](const char* key) { return expr_from_json_depth(field(j, key, "expression"), depth + 1); };
  if (k == "const") {
    const json& v = field(j, "v", "const");
    double value = 0;
    if (v.is_number()) {
      value = v.get<double>();
    } else if (v.is_string() && (v == "inf" || v == "-inf" || v == "nan")) {
      value = v == "nan" ? std::numeric_limits<double>::quiet_NaN()
                         : (v == "inf" ? 1 : -1) * std::numeric_limits<double>::infinity();
    } else {
      throw DefinitionError("program JSON: const value must be a number or one of \"inf\", \"-inf\", \"nan\"; got " +
                            v.dump());
    }
    const DType t = parse_dtype(str_field(j, "t", "const"));
    const bool weak = j.value("weak", false);
    return Expr(std::make_shared<const ConstNode>(value, t, weak));
  }
  if (k == "var") return var(str_field(j, "n", "var"));
  if (k == "access") {
    std::vector<Expr> args;
    for (const auto& a : arr_field(j, "args", "access")) args.push_back(expr_from_json_depth(a, depth + 1));
    return access(str_field(j, "tensor", "access"), std::move(args),
                  parse_dtype(str_field(j, "t", "access")));
  }
  if (k == "unary") {
    Expr e = unary(parse_unop(str_field(j, "op", "unary")), sub("a"));
    return e;
  }
  if (k == "binary") return binary(parse_binop(str_field(j, "op", "binary")), sub("a"), sub("b"));
  if (k == "select") return select(sub("c"), sub("a"), sub("b"));
  if (k == "cast") return cast(parse_dtype(str_field(j, "t", "cast")), sub("a"));
  throw DefinitionError("program JSON: unknown expression kind '" + k + "'");
}

}  // namespace

json expr_to_json(const Expr& e) {
  ToJson t;
  t.visit(e);
  return t.out;
}
Expr expr_from_json(const json& j) { return expr_from_json_depth(j, 0); }

json program_to_json(const Program& p) {
  json j;
  j["schema"] = kProgramSchemaVersion;
  j["name"] = p.name();
  j["inputs"] = json::array();
  for (const auto& t : p.inputs())
    j["inputs"].push_back({{"name", t.name}, {"shape", shape_to_json(t.shape)},
                           {"dtype", to_string(t.dtype)}});
  j["stages"] = json::array();
  for (const Stage& s : p.stages()) {
    json js = {{"name", s.name},   {"vars", s.vars},
               {"shape", shape_to_json(s.shape)}, {"dtype", to_string(s.dtype)},
               {"op", s.op},       {"kind", to_string(s.kind)},
               {"value", expr_to_json(s.value)}};
    if (s.reduce) {
      js["reduce"] = to_string(*s.reduce);
      json rv = json::array();
      for (const auto& r : s.rvars) rv.push_back({{"name", r.name}, {"extent", dim_to_json(r.extent)}});
      js["rvars"] = rv;
    }
    if (s.conv_roles) js["conv_roles"] = roles_to_json(*s.conv_roles);
    j["stages"].push_back(js);
  }
  j["outputs"] = p.outputs();
  return j;
}

Program program_from_json(const json& j) {
  try {
    if (!j.is_object()) throw DefinitionError("program JSON must be an object");
    const json& schema = field(j, "schema", "program");
    if (!schema.is_number_integer() || schema.get<int>() != kProgramSchemaVersion)
      throw DefinitionError("program JSON: schema " + schema.dump() + " is not supported (expected " +
                            std::to_string(kProgramSchemaVersion) + ")");
    Program p(str_field(j, "name", "program"));
    for (const auto& t : arr_field(j, "inputs", "program"))
      p.input(str_field(t, "name", "input"), shape_from_json(field(t, "shape", "input"), "input"),
              parse_dtype(str_field(t, "dtype", "input")));
    for (const auto& js : arr_field(j, "stages", "program")) {
      Stage s;
      s.name = str_field(js, "name", "stage");
      for (const auto& v : arr_field(js, "vars", "stage")) {
        if (!v.is_string()) throw DefinitionError("program JSON: stage vars must be strings");
        s.vars.push_back(v.get<std::string>());
      }
      s.shape = shape_from_json(field(js, "shape", "stage"), "stage");
      s.dtype = parse_dtype(str_field(js, "dtype", "stage"));
      s.op = str_field(js, "op", "stage");
      s.kind = parse_op_kind(str_field(js, "kind", "stage"));
      s.value = expr_from_json(field(js, "value", "stage"));
      if (js.contains("reduce")) {
        s.reduce = parse_reduce_op(str_field(js, "reduce", "stage"));
        for (const auto& r : arr_field(js, "rvars", "stage"))
          s.rvars.push_back({str_field(r, "name", "rvar"), dim_from_json(field(r, "extent", "rvar"))});
      }
      if (js.contains("conv_roles")) s.conv_roles = roles_from_json(js.at("conv_roles"), s);
      p.add_stage(std::move(s));
    }
    if (j.contains("outputs"))
      for (const auto& o : arr_field(j, "outputs", "program")) {
        if (!o.is_string()) throw DefinitionError("program JSON: outputs must be names");
        p.output(o.get<std::string>());
      }
    return p;
  } catch (const json::exception& e) {
    throw DefinitionError(std::string("program JSON: ") + e.what());
  }
}

std::string program_to_json_string(const Program& p, int indent) {
  return program_to_json(p).dump(indent);
}
Program program_from_json_string(const std::string& s) {
  json j;
  try {
    j = json::parse(s);
  } catch (const json::exception& e) {
    throw DefinitionError(std::string("program JSON does not parse: ") + e.what());
  }
  return program_from_json(j);
}

std::string program_fingerprint(const Program& p) {
  json j = program_to_json(p);
  j.erase("name");
  // FNV-1a over the canonical dump: stable across runs and platforms, unlike std::hash.
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : j.dump()) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace pto
