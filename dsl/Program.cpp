#include "dsl/Program.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <sstream>

#include "dsl/IRVisitor.h"

namespace pto {

struct ProgramData {
  std::string name;
  std::vector<TensorInfo> inputs;
  std::vector<Stage> stages;
  std::vector<TensorInfo> stage_infos;  // parallel to stages
  std::vector<std::string> outputs;
};

namespace {

constexpr std::array<std::string_view, 6> kReduceNames = {"sum", "prod", "min", "max", "argmin",
                                                          "argmax"};
constexpr std::array<std::string_view, 8> kKindNames = {
    "elementwise", "contraction", "convolution", "reduction",
    "normalization", "pooling", "data_movement", "custom"};

// Names with "__" are reserved for helper Funcs made by lowering.
bool is_identifier(const std::string& s) {
  if (s.find("__") != std::string::npos) return false;
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// Collects tensor reads and free variables of an expression.
class UseCollector : public IRVisitor {
 public:
  std::vector<std::string> tensors;
  std::vector<const AccessNode*> accesses;
  std::set<std::string> vars;

 protected:
  void visit_var(const VarNode& n) override { vars.insert(n.name); }
  void visit_access(const AccessNode& n) override {
    if (std::find(tensors.begin(), tensors.end(), n.tensor) == tensors.end())
      tensors.push_back(n.tensor);
    accesses.push_back(&n);
    IRVisitor::visit_access(n);
  }
};

}  // namespace

std::string_view to_string(ReduceOp op) { return kReduceNames[static_cast<size_t>(op)]; }
ReduceOp parse_reduce_op(std::string_view s) {
  for (size_t i = 0; i < kReduceNames.size(); ++i)
    if (kReduceNames[i] == s) return static_cast<ReduceOp>(i);
  throw DefinitionError("unknown reduction '" + std::string(s) +
                        "'; valid: sum, prod, min, max, argmin, argmax");
}
std::string_view to_string(OpKind k) { return kKindNames[static_cast<size_t>(k)]; }
OpKind parse_op_kind(std::string_view s) {
  for (size_t i = 0; i < kKindNames.size(); ++i)
    if (kKindNames[i] == s) return static_cast<OpKind>(i);
  throw DefinitionError("unknown operator kind '" + std::string(s) + "'");
}

std::vector<std::string> Stage::reads() const {
  UseCollector c;
  c.visit(value);
  return c.tensors;
}

std::string to_string(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + s[i].str();
  return r + "]";
}
int64_t static_numel(const Shape& s) {
  int64_t n = 1;
  for (const Dim& d : s) {
    if (d.is_symbolic()) return -1;
    n *= d.value;
  }
  return n;
}

Program::Program(std::string name) : d_(std::make_shared<ProgramData>()) {
  d_->name = std::move(name);
}
const std::string& Program::name() const { return d_->name; }

static void check_new_name(const Program& p, const std::string& name, const char* what) {
  if (!is_identifier(name))
    throw DefinitionError(std::string(what) + " name '" + name +
                          "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*, no \"__\")");
  if (p.has_tensor(name))
    throw DefinitionError(std::string(what) + " '" + name + "': a tensor of that name exists");
}

static void check_shape(const std::string& who, const Shape& shape) {
  for (size_t i = 0; i < shape.size(); ++i) {
    const Dim& d = shape[i];
    if (d.is_symbolic() && !is_identifier(d.sym))
      throw ShapeError("'" + who + "': symbolic size '" + d.sym + "' is not an identifier");
    if (!d.is_symbolic() && d.value <= 0)
      throw ShapeError("'" + who + "': dim " + std::to_string(i) + " has size " +
                       std::to_string(d.value) + "; sizes must be positive");
  }
}

Tensor Program::input(const std::string& name, const Shape& shape, DType dtype) {
  check_new_name(*this, name, "input");
  check_shape(name, shape);
  d_->inputs.push_back({name, shape, dtype, true});
  return Tensor(d_, name);
}

void Program::add_stage(Stage s) {
  check_new_name(*this, s.name, "stage");
  const std::string& n = s.name;
  check_shape(n, s.shape);
  if (s.vars.size() != s.shape.size())
    throw ShapeError("stage '" + n + "': " + std::to_string(s.vars.size()) +
                     " index variables for a rank-" + std::to_string(s.shape.size()) + " shape");
  std::set<std::string> bound;
  for (const auto& v : s.vars) {
    if (!is_identifier(v)) throw DefinitionError("stage '" + n + "': bad variable name '" + v + "'");
    if (!bound.insert(v).second)
      throw DefinitionError("stage '" + n + "': variable '" + v + "' is used twice");
  }
  for (const auto& r : s.rvars) {
    if (!is_identifier(r.name))
      throw DefinitionError("stage '" + n + "': bad reduction variable '" + r.name + "'");
    if (!bound.insert(r.name).second)
      throw DefinitionError("stage '" + n + "': reduction variable '" + r.name +
                            "' clashes with another variable");
    check_shape(n + "." + r.name, {r.extent});
  }
  if (!s.value.defined()) throw DefinitionError("stage '" + n + "' has no value");
  if (s.reduce) {
    if (s.rvars.empty())
      throw DefinitionError("stage '" + n + "': reduction " + std::string(to_string(*s.reduce)) +
                            " needs at least one reduction variable");
    if (s.is_arg_reduction() && s.rvars.size() != 1)
      throw DefinitionError("stage '" + n + "': " + std::string(to_string(*s.reduce)) +
                            " takes exactly one reduction variable, got " +
                            std::to_string(s.rvars.size()));
  } else if (!s.rvars.empty()) {
    throw DefinitionError("stage '" + n + "' has reduction variables but no reduction");
  }
  UseCollector uses;
  uses.visit(s.value);
  for (const std::string& v : uses.vars) {
    if (!bound.count(v))
      throw DefinitionError("stage '" + n + "': variable '" + v + "' is not bound (bound: " +
                            [&] {
                              std::string b;
                              for (const auto& x : bound) b += (b.empty() ? "" : ", ") + x;
                              return b;
                            }() + ")");
  }
  for (const AccessNode* a : uses.accesses) {
    if (a->tensor == n) throw DefinitionError("stage '" + n + "' reads itself");
    if (!has_tensor(a->tensor))
      throw DefinitionError("stage '" + n + "' reads unknown tensor '" + a->tensor + "'");
    const TensorInfo& t = tensor(a->tensor);
    if (a->args.size() != t.shape.size())
      throw ShapeError("stage '" + n + "' indexes '" + a->tensor + "' with " +
                       std::to_string(a->args.size()) + " indices; its rank is " +
                       std::to_string(t.shape.size()));
    if (a->type != t.dtype)
      throw DTypeError("stage '" + n + "' reads '" + a->tensor + "' as " +
                       std::string(to_string(a->type)) + "; it is " +
                       std::string(to_string(t.dtype)));
  }
  const bool arg = s.is_arg_reduction();
  if (arg && s.dtype != DType::I64)
    throw DTypeError("stage '" + n + "': " + std::string(to_string(*s.reduce)) +
                     " produces i64, not " + std::string(to_string(s.dtype)));
  if (!arg && s.dtype != s.value.type())
    throw DTypeError("stage '" + n + "' declared " + std::string(to_string(s.dtype)) +
                     " but its value is " + std::string(to_string(s.value.type())));
  d_->stage_infos.push_back({s.name, s.shape, s.dtype, false});
  d_->stages.push_back(std::move(s));
}

Tensor Program::define(const std::string& name, const std::vector<std::string>& vars,
                       const Shape& shape, const Expr& value, OpKind kind, const std::string& op) {
  Stage s;
  s.name = name;
  s.vars = vars;
  s.shape = shape;
  s.value = value;
  s.dtype = value.defined() ? value.type() : DType::F32;
  s.kind = kind;
  s.op = op;
  add_stage(std::move(s));
  return Tensor(d_, name);
}

Tensor Program::define_reduce(const std::string& name, const std::vector<std::string>& vars,
                              const Shape& shape, ReduceOp reduce, const std::vector<RVar>& rvars,
                              const Expr& body, OpKind kind, const std::string& op) {
  Stage s;
  s.name = name;
  s.vars = vars;
  s.shape = shape;
  s.reduce = reduce;
  s.rvars = rvars;
  s.value = body;
  const bool arg = s.is_arg_reduction();
  s.dtype = arg ? DType::I64 : (body.defined() ? body.type() : DType::F32);
  s.kind = kind;
  s.op = op;
  add_stage(std::move(s));
  return Tensor(d_, name);
}

void Program::output(const Tensor& t) { output(t.name()); }
void Program::output(const std::string& name) {
  if (!find_stage(name)) {
    if (has_tensor(name))
      throw DefinitionError("output '" + name + "' is an input; outputs must be computed stages");
    throw DefinitionError("output '" + name + "' is not a stage of program '" + d_->name + "'");
  }
  if (std::find(d_->outputs.begin(), d_->outputs.end(), name) == d_->outputs.end())
    d_->outputs.push_back(name);
}

const std::vector<TensorInfo>& Program::inputs() const { return d_->inputs; }
const std::vector<Stage>& Program::stages() const { return d_->stages; }

std::vector<std::string> Program::outputs() const {
  if (!d_->outputs.empty()) return d_->outputs;
  std::set<std::string> read;
  for (const Stage& s : d_->stages)
    for (const auto& t : s.reads()) read.insert(t);
  std::vector<std::string> outs;
  for (const Stage& s : d_->stages)
    if (!read.count(s.name)) outs.push_back(s.name);
  return outs;
}

const Stage* Program::find_stage(const std::string& name) const {
  for (const Stage& s : d_->stages)
    if (s.name == name) return &s;
  return nullptr;
}
bool Program::is_output(const std::string& name) const {
  const auto outs = outputs();
  return std::find(outs.begin(), outs.end(), name) != outs.end();
}

const Stage& Program::stage(const std::string& name) const {
  if (const Stage* s = find_stage(name)) return *s;
  std::string valid;
  for (const Stage& s : d_->stages) valid += (valid.empty() ? "" : ", ") + s.name;
  throw DefinitionError("unknown stage '" + name + "' in program '" + d_->name +
                        "'; stages: " + valid);
}
bool Program::has_tensor(const std::string& name) const {
  for (const auto& t : d_->inputs)
    if (t.name == name) return true;
  return find_stage(name) != nullptr;
}
const TensorInfo& Program::tensor(const std::string& name) const {
  for (const auto& t : d_->inputs)
    if (t.name == name) return t;
  for (const auto& t : d_->stage_infos)
    if (t.name == name) return t;
  throw DefinitionError("unknown tensor '" + name + "' in program '" + d_->name + "'");
}
Tensor Program::handle(const std::string& name) const {
  tensor(name);
  return Tensor(d_, name);
}

std::vector<std::string> Program::consumers(const std::string& name) const {
  std::vector<std::string> r;
  for (const Stage& s : d_->stages) {
    const auto reads = s.reads();
    if (std::find(reads.begin(), reads.end(), name) != reads.end()) r.push_back(s.name);
  }
  return r;
}

bool Program::reaches(const std::string& producer, const std::string& consumer) const {
  std::vector<std::string> todo = consumers(producer);
  std::set<std::string> seen;
  while (!todo.empty()) {
    const std::string s = todo.back();
    todo.pop_back();
    if (s == consumer) return true;
    if (!seen.insert(s).second) continue;
    for (const auto& c : consumers(s)) todo.push_back(c);
  }
  return false;
}

std::map<std::string, std::pair<std::string, int>> Program::symbols() const {
  std::map<std::string, std::pair<std::string, int>> r;
  for (const auto& t : d_->inputs)
    for (size_t i = 0; i < t.shape.size(); ++i)
      if (t.shape[i].is_symbolic()) r.emplace(t.shape[i].sym, std::make_pair(t.name, int(i)));
  return r;
}

std::string Program::unique_name(const std::string& prefix) const {
  if (!has_tensor(prefix)) return prefix;
  for (int i = 1;; ++i) {
    std::string n = prefix + "_" + std::to_string(i);
    if (!has_tensor(n)) return n;
  }
}

Program Program::clone() const { return Program(std::make_shared<ProgramData>(*d_)); }

std::string Program::str() const {
  std::ostringstream os;
  os << "program " << d_->name << "\n";
  for (const auto& t : d_->inputs)
    os << "  input " << t.name << ": " << to_string(t.dtype) << to_string(t.shape) << "\n";
  const auto outs = outputs();
  for (const Stage& s : d_->stages) {
    os << "  " << s.name << "(";
    for (size_t i = 0; i < s.vars.size(); ++i) os << (i ? ", " : "") << s.vars[i];
    os << "): " << to_string(s.dtype) << to_string(s.shape) << " = ";
    if (s.reduce) {
      os << to_string(*s.reduce) << "[";
      for (size_t i = 0; i < s.rvars.size(); ++i)
        os << (i ? ", " : "") << s.rvars[i].name << " < " << s.rvars[i].extent.str();
      os << "](" << to_string(s.value) << ")";
    } else {
      os << to_string(s.value);
    }
    os << "    # " << s.op << " (" << to_string(s.kind) << ")";
    if (std::find(outs.begin(), outs.end(), s.name) != outs.end()) os << " -> output";
    os << "\n";
  }
  return os.str();
}

const TensorInfo& Tensor::info() const {
  if (!prog_) throw DefinitionError("use of an undefined Tensor handle");
  return Program(prog_).tensor(name_);
}

Expr Tensor::operator()(std::vector<Expr> idx) const {
  const TensorInfo& t = info();
  if (idx.size() != t.shape.size())
    throw ShapeError("tensor '" + name_ + "' of rank " + std::to_string(t.shape.size()) +
                     " indexed with " + std::to_string(idx.size()) + " indices");
  return access(name_, std::move(idx), t.dtype);
}

}  // namespace pto
