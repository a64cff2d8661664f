#include "schedules/directives/OnlineSoftmax.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "dsl/Error.h"
#include "dsl/IRVisitor.h"
#include "schedules/directives/Json.h"

namespace pto::directives {
namespace {

bool is_var(const Expr& e, const std::string& name) {
  const auto* v = e.as<VarNode>();
  return v && v->name == name;
}

std::optional<double> constant(const Expr& e) {
  if (const auto* c = e.as<ConstNode>()) return c->value;
  if (const auto* c = e.as<CastNode>()) return constant(c->a);
  return std::nullopt;
}

// i + c, c + i, i - c (c an integer constant): the offset c.
std::optional<int64_t> offset_of(const Expr& e, const std::string& i) {
  if (is_var(e, i)) return 0;
  const auto* b = e.as<BinaryNode>();
  if (!b || (b->op != BinOp::Add && b->op != BinOp::Sub)) return std::nullopt;
  if (is_var(b->a, i))
    if (const auto c = constant(b->b); c && *c == static_cast<double>(static_cast<int64_t>(*c)))
      return static_cast<int64_t>(b->op == BinOp::Add ? *c : -*c);
  if (b->op == BinOp::Add && is_var(b->b, i))
    if (const auto c = constant(b->a); c && *c == static_cast<double>(static_cast<int64_t>(*c)))
      return static_cast<int64_t>(*c);
  return std::nullopt;
}

// x's value select(j <= i + c, v, -inf) (or j < i + c, i + c >= j, ...): c.
std::optional<int64_t> causal_offset(const Stage& x) {
  if (x.reduce || x.vars.size() < 2) return std::nullopt;
  const auto* s = x.value.as<SelectNode>();
  if (!s) return std::nullopt;
  const auto f = constant(s->false_value);
  if (!f || *f != -std::numeric_limits<double>::infinity()) return std::nullopt;
  const auto* c = s->cond.as<BinaryNode>();
  if (!c) return std::nullopt;
  const std::string& i = x.vars[x.vars.size() - 2];
  const std::string& j = x.vars.back();
  // Normalize to j <= rhs or j < rhs.
  Expr rhs;
  bool strict = false;
  if ((c->op == BinOp::Le || c->op == BinOp::Lt) && is_var(c->a, j)) {
    rhs = c->b;
    strict = c->op == BinOp::Lt;
  } else if ((c->op == BinOp::Ge || c->op == BinOp::Gt) && is_var(c->b, j)) {
    rhs = c->a;
    strict = c->op == BinOp::Gt;
  } else {
    return std::nullopt;
  }
  const auto off = offset_of(rhs, i);
  if (!off) return std::nullopt;
  return strict ? *off - 1 : *off;
}

}  // namespace

std::optional<SoftmaxContraction> softmax_contraction(const Program& p, const Stage& st,
                                                      std::string* why) {
  const auto no = [&](const std::string& w) -> std::optional<SoftmaxContraction> {
    if (why) *why = w;
    return std::nullopt;
  };
  if (st.reduce != ReduceOp::Sum || st.rvars.size() != 1 || st.vars.size() < 2 || !is_float(st.dtype))
    return no("it is not a sum over one reduction variable with at least two dims");
  const std::string& r = st.rvars[0].name;
  std::vector<std::string> pidx(st.vars.begin(), st.vars.end() - 1);
  pidx.push_back(r);
  SoftmaxContraction sc;
  sc.out = &st;
  for (const std::string& t : st.reads()) {
    const Stage* s = p.find_stage(t);
    if (s && s->op == "softmax" && !s->reduce && read_at(st.value, t, s->shape, pidx)) sc.probs = s;
  }
  if (!sc.probs)
    return no("it reads no softmax over the last axis at (" + join(pidx) +
              "): O(.., i, d) = sum_" + r + " softmax(x)(.., i, " + r + ") * ...");
  const Stage& pr = *sc.probs;
  const auto pr_reads = pr.reads();
  if (pr.vars.size() != pidx.size() || pr_reads.size() != 2)
    return no("softmax '" + pr.name + "' is not the library's softmax (e * (1 / sum))");
  sc.exp = p.find_stage(pr_reads[0]);
  sc.sum = p.find_stage(pr_reads[1]);
  if (!sc.exp || !sc.sum || sc.exp->reduce || sc.sum->reduce != ReduceOp::Sum)
    return no("softmax '" + pr.name + "' is not the library's softmax (e * (1 / sum))");
  const auto e_reads = sc.exp->reads();
  if (e_reads.size() != 2) return no("softmax '" + pr.name + "': exp stage '" + sc.exp->name + "' is not exp(x - max)");
  sc.x = e_reads[0];
  sc.max = p.find_stage(e_reads[1]);
  // Its statistics are read at the row's own indices (a softmax over another
  // axis reads them at others: random program seed 3846, a softmax over axis
  // 0 summed along axis 2, was fused as if along its axis).
  const std::vector<std::string> row(pr.vars.begin(), pr.vars.end() - 1);
  if (!sc.max || sc.max->reduce != ReduceOp::Max || sc.max->vars.size() + 1 != pr.vars.size() ||
      sc.sum->vars.size() + 1 != pr.vars.size() ||
      !read_at(sc.exp->value, sc.max->name, sc.max->shape, row) ||
      !read_at(pr.value, sc.sum->name, sc.sum->shape, row))
    return no("softmax '" + pr.name + "' does not normalize over its last axis");
  for (const Stage* s : {sc.probs, sc.exp, sc.sum, sc.max})
    if (p.is_output(s->name)) return no("softmax stage '" + s->name + "' is an output");
  const auto only = [&](const std::string& t, std::vector<std::string> allowed) {
    for (const std::string& c : p.consumers(t))
      if (std::find(allowed.begin(), allowed.end(), c) == allowed.end()) return false;
    return true;
  };
  if (!only(pr.name, {st.name}) || !only(sc.exp->name, {pr.name, sc.sum->name}) ||
      !only(sc.max->name, {sc.exp->name}) || !only(sc.sum->name, {pr.name}))
    return no("the softmax stages of '" + pr.name + "' are read by other stages");
  // The score contraction, recomputed per block: x itself, or what x reads at its own indices.
  if (const Stage* x = p.find_stage(sc.x)) {
    const bool private_x = !p.is_output(x->name) && only(x->name, {sc.exp->name, sc.max->name});
    if (x->reduce == ReduceOp::Sum && x->kind == OpKind::Contraction && private_x) {
      sc.scores = x;
    } else if (!x->reduce) {
      for (const std::string& t : x->reads()) {
        const Stage* s = p.find_stage(t);
        if (s && s->reduce == ReduceOp::Sum && s->kind == OpKind::Contraction && !p.is_output(t) &&
            only(t, {x->name}) && read_at(x->value, t, s->shape, x->vars))
          sc.scores = s;
      }
      sc.causal_offset = causal_offset(*x);
    } else if (x->reduce) {
      return no("softmax input '" + x->name + "' is a reduction other than a private contraction");
    }
  }
  return sc;
}

void clear_plain_loops(StageSchedule& ss) {
  ss.loops = LoopSchedule{};
  ss.update.reset();
  ss.accumulator_at.clear();
  ss.cache.clear();
  ss.rfactor.reset();
  ss.skip_padding.clear();
  ss.dot_pairs.clear();
  ss.pipeline = Pipelining{};
}

namespace {

constexpr int64_t kMaxBlock = 4096;

struct OnlineSoftmaxDirective : Directive {
  OnlineSoftmaxDirective() : Directive("online_softmax") {}

  bool owns_loops() const override { return true; }

  void parse_value(const nlohmann::json& v, StageSchedule& ss, const std::string& path) const override {
    json::check_keys(v, path, {"rows", "keys"});
    if (!v.contains("rows") || !v.contains("keys")) json::fail(path, "needs \"rows\" and \"keys\"");
    ss.online_softmax = OnlineSoftmax{json::get_int(v["rows"], path + ".rows", 1, kMaxBlock),
                                      json::get_int(v["keys"], path + ".keys", 1, kMaxBlock)};
  }
  void print(const StageSchedule& ss, nlohmann::json& js) const override {
    if (ss.online_softmax)
      js["online_softmax"] = {{"rows", ss.online_softmax->rows}, {"keys", ss.online_softmax->keys}};
  }

  void check(const CheckContext& c) const override {
    if (!c.ss.online_softmax) return;
    const StageSchedule& ss = c.ss;
    const std::string where = c.where() + ": online_softmax";
    std::string why;
    if (!softmax_contraction(c.program, c.stage, &why))
      throw ScheduleError(where + " needs a contraction over the softmax of its reduction axis, but " + why);
    const OnlineSoftmax& os = *ss.online_softmax;
    if (os.rows < 1 || os.rows > kMaxBlock || os.keys < 1 || os.keys > kMaxBlock)
      throw ScheduleError(where + " block of " + std::to_string(os.rows) + " rows x " + std::to_string(os.keys) +
                          " keys: each must be in [1, " + std::to_string(kMaxBlock) + "]");
    if (ss.compute.kind != Placement::Kind::Root || ss.store)
      throw ScheduleError(where + " runs its own loop nest at root; the stage is placed " + to_string(ss.compute) +
                          "; use \"compute\": \"root\"");
    StageSchedule plain = ss;
    clear_plain_loops(plain);
    if (!(plain == ss))
      throw ScheduleError(where + " schedules the fused loop nest itself, so the stage's own loop directives "
                                  "(tile, order, vectorize, unroll, parallel, update, accumulator_at, cache, rfactor, "
                                  "skip_padding, dot_pairs, pipeline) must be empty");
    if (ss.device != "cpu") throw ScheduleError(where + " runs on the CPU only; device is '" + ss.device + "'");
    for (DType t : {c.precision.storage, c.precision.compute, c.precision.accumulate})
      if (t != DType::F32)
        throw ScheduleError(where + " computes in f32; the stage's precision is " +
                            std::string(to_string(t)) + " (storage, compute and accumulate must be f32)");
  }

  std::string explain_head(const StageSchedule& ss) const override {
    if (!ss.online_softmax) return "";
    return ", online softmax over blocks of " + std::to_string(ss.online_softmax->rows) + " query rows x " +
           std::to_string(ss.online_softmax->keys) + " keys";
  }

  bool explain_update(ExplainContext& e, const Stage& st, const StageSchedule& ss, const UpdateText& u,
                      int depth) const override {
    if (!ss.online_softmax) return false;
    const std::string rows = std::to_string(ss.online_softmax->rows);
    const std::string keys = std::to_string(ss.online_softmax->keys);
    e.line(depth, "parallel for (batch, tile of " + rows + " query rows):");
    e.line(depth + 1, "m = -inf, l = 0, acc = 0 (per row; acc per row and column)");
    e.line(depth + 1, "for key block kb of " + keys + " keys (causal: up to the tile's last row):");
    e.line(depth + 2, "S = the block's scores (" + rows + " x " + keys + ", in cache), m_b = rowmax S");
    e.line(depth + 2, "P = exp(S - m_b), l_b = rowsum P, acc_b = " + u.value + " over the block with P");
    e.line(depth + 2, "m' = max(m, m_b); acc = acc exp(m - m') + acc_b exp(m_b - m'); l likewise; m = m'");
    e.line(depth + 1, "vectorized: " + u.lhs + " = acc / l");
    return true;
  }

 protected:
  std::vector<StageSchedule> proposals(const CheckContext& c) const override {
    if (!softmax_contraction(c.program, c.stage)) return {};
    const int lanes = c.target ? std::max(1, c.target->vector_lanes(DType::F32)) : 16;
    std::vector<StageSchedule> r;
    for (int64_t rows : {24, 48, 96})
      for (int64_t keys : {4 * lanes, 8 * lanes, 16 * lanes}) {
        StageSchedule v = c.ss;
        clear_plain_loops(v);
        v.compute = Placement{};
        v.store.reset();
        v.online_softmax = OnlineSoftmax{rows, keys};
        r.push_back(v);
      }
    return r;
  }
};

}  // namespace

const Directive& online_softmax_directive() { return instance<OnlineSoftmaxDirective>(); }

}  // namespace pto::directives
