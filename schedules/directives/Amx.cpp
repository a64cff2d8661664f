#include "schedules/directives/Amx.h"

#include <set>

#include "dsl/Error.h"
#include "dsl/IRVisitor.h"
#include "schedules/directives/Json.h"
#include "schedules/directives/OnlineSoftmax.h"

namespace pto::directives {
namespace {

// The index variables an expression reads.
std::set<std::string> vars_of(const Expr& e) {
  struct Find : IRVisitor {
    std::set<std::string> names;
    void visit_var(const VarNode& v) override { names.insert(v.name); }
  } f;
  f.visit(e);
  return f.names;
}

// The type a factor has before its widening casts (f32(bf16 x) is bf16).
DType narrowest_source(const Expr& e) {
  Expr x = e;
  while (const auto* c = x.as<CastNode>()) {
    if (!is_float(c->a.type()) || bytes(c->a.type()) > bytes(c->type)) break;
    x = c->a;
  }
  return x.type();
}

}  // namespace

std::optional<AmxContraction> amx_contraction(const Program& p, const Stage& st, std::string* why) {
  const auto no = [&](const std::string& w) -> std::optional<AmxContraction> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (!st.reduce || *st.reduce != ReduceOp::Sum) return no("it is not a sum reduction");
  if (st.rvars.size() != 1)
    return no("it reduces over " + std::to_string(st.rvars.size()) + " variables, not one");
  if (st.vars.size() < 2) return no("it has fewer than two dims (rows and columns)");
  if (st.dtype != DType::F32)
    return no("its type is " + std::string(to_string(st.dtype)) + ", not f32");
  AmxContraction c;
  c.i = st.vars[st.vars.size() - 2];
  c.j = st.vars.back();
  c.k = st.rvars[0].name;
  const Dim& di = st.shape[st.shape.size() - 2];
  const Dim& dj = st.shape.back();
  const Dim& dk = st.rvars[0].extent;
  if (di.is_symbolic() || dj.is_symbolic() || dk.is_symbolic())
    return no("its rows, columns and reduction need static extents, got " + di.str() + " x " +
              dj.str() + " x " + dk.str());
  c.m = di.value, c.n = dj.value, c.depth = dk.value;
  if (c.n % 16) return no("its columns (" + std::to_string(c.n) + ") are not whole tiles of 16");
  Expr v = st.value;
  while (const auto* cst = v.as<CastNode>()) v = cst->a;
  const auto* mul = v.as<BinaryNode>();
  if (!mul || mul->op != BinOp::Mul || !is_float(mul->type))
    return no("its value is not a product of two factors");
  Expr a = mul->a, b = mul->b;
  const auto reads = [](const Expr& e, const std::string& x) { return vars_of(e).count(x) > 0; };
  if (reads(a, c.j) || reads(b, c.i)) std::swap(a, b);
  if (reads(a, c.j) || reads(b, c.i) || !reads(a, c.k) || !reads(b, c.k))
    return no("its product is not L(.., " + c.i + ", " + c.k + ") * R(.., " + c.k + ", " + c.j +
              "): one factor must read the rows and k, the other k and the columns");
  c.lhs = a;
  c.rhs = b;
  c.exact = narrowest_source(a) == DType::BF16 && narrowest_source(b) == DType::BF16;
  (void)p;
  return c;
}

bool amx_rounds(const Program& p, const Stage& st, const StageSchedule& ss) {
  if (!ss.amx) return false;
  const auto c = amx_contraction(p, st);
  return !c || !c->exact;
}

namespace {

struct AmxDirective : Directive {
  AmxDirective() : Directive("amx") {}

  bool owns_loops() const override { return true; }

  void parse_value(const nlohmann::json& v, StageSchedule& ss,
                   const std::string& path) const override {
    ss.amx = json::get_bool(v, path);
  }
  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    if (ss.amx) js["amx"] = true;
  }

  void check(const CheckContext& c) const override {
    if (!c.ss.amx) return;
    const StageSchedule& ss = c.ss;
    const std::string where = c.where() + ": amx";
    if (c.target && !c.target->amx)
      throw ScheduleError(where +
                          " needs a CPU with AMX tiles (Sapphire Rapids or later); target '" +
                          c.target->name + "' has none");
    std::string why;
    if (!amx_contraction(c.program, c.stage, &why))
      throw ScheduleError(
          where + " needs a contraction L(.., i, k) * R(.., k, j) summed over k, but " + why);
    if (ss.compute.kind != Placement::Kind::Root || ss.store)
      throw ScheduleError(where + " runs its own loop nest at root; the stage is placed " +
                          to_string(ss.compute) + "; use \"compute\": \"root\"");
    StageSchedule plain = ss;
    clear_plain_loops(plain);
    if (!(plain == ss) || ss.online_softmax || !ss.pad_lanes.empty() || ss.specialize ||
        !ss.store_in.empty())
      throw ScheduleError(
          where +
          " schedules the tile loops itself, so the stage's own loop directives "
          "(tile, order, vectorize, unroll, parallel, update, accumulator_at, cache, rfactor, "
          "skip_padding, dot_pairs, pipeline, pad_lanes, specialize, store_in, "
          "online_softmax) must be empty");
    if (ss.device != "cpu")
      throw ScheduleError(where + " runs on the CPU only; device is '" + ss.device + "'");
    for (DType t : {c.precision.storage, c.precision.accumulate})
      if (t != DType::F32)
        throw ScheduleError(where + " accumulates and stores in f32; the stage's precision is " +
                            std::string(to_string(t)) + " (storage and accumulate must be f32)");
  }

  std::string explain_head(const StageSchedule& ss) const override {
    return ss.amx ? ", on AMX tiles" : "";
  }

  bool explain_update(ExplainContext& e, const Stage& st, const StageSchedule& ss,
                      const UpdateText& u, int depth) const override {
    if (!ss.amx) return false;
    e.line(depth,
           "packed at root: L(.., i, k) rounded to bf16, rows padded to tiles of 16, k to steps of "
           "32");
    e.line(depth, "parallel for (batch, strip of 16 columns):");
    e.line(depth + 1,
           "packed: the strip's R(.., k, j) rounded to bf16, in pairs of k [k / 2, 16, 2]");
    e.line(depth + 1, "for tile of 16 rows:");
    e.line(depth + 2, "tile register = 0 (16 x 16 f32)");
    e.line(depth + 2, "for k in steps of 32: tdpbf16ps " + u.value);
    e.line(depth + 2, "store the tile");
    e.line(depth + 1, "vectorized: " + u.lhs + " = the strip's tiles");
    return true;
  }

 protected:
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    if (!amx_contraction(c.program, c.stage) || (c.target && !c.target->amx)) return {};
    StageSchedule v = c.ss;
    clear_plain_loops(v);
    v.compute = Placement{};
    v.store.reset();
    v.pad_lanes.clear();
    v.specialize = false;
    v.store_in.clear();
    v.online_softmax.reset();
    v.precision = Precision{};
    v.amx = true;
    return {v};
  }
};

}  // namespace

const Directive& amx_directive() {
  return instance<AmxDirective>();
}

}  // namespace pto::directives
