#include "dsl/BatchAxis.h"

#include <vector>

#include "dsl/IRVisitor.h"

namespace pto {
namespace {

constexpr int kShared = -1;

// Classifies tensors as batched (along an axis) or shared, from the outputs
// back to the inputs; the first conflict is the reason the axis fails.
class Classifier {
 public:
  Classifier(const Program& p, const Dim& extent) : p_(p), extent_(extent) {}

  // Marks `tensor` as read by `by` along `axis` (kShared: not along the batch axis).
  bool mark(const std::string& tensor, int axis, const std::string& by) {
    if (axis != kShared) {
      const Dim& d = p_.tensor(tensor).shape[static_cast<size_t>(axis)];
      if (d != extent_)
        return fail("stage '" + by + "' reads '" + tensor + "' along its batch index at axis " +
                    std::to_string(axis) + ", of extent " + d.str() + ", not " + extent_.str());
    }
    const auto [it, fresh] = cls_.emplace(tensor, axis);
    if (fresh || it->second == axis) return true;
    const auto as = [](int a) {
      return a == kShared ? std::string("whole") : "along axis " + std::to_string(a);
    };
    return fail("'" + tensor + "' is read " + as(it->second) + " by one stage and " + as(axis) +
                " by '" + by + "'");
  }

  // The reads of stage `s`, batched along its axis `axis` (or shared).
  bool classify(const Stage& s, int axis) {
    if (axis == kShared) {
      for (const std::string& t : s.reads())
        if (!mark(t, kShared, s.name)) return false;
      return true;
    }
    struct Reads : IRVisitor {
      Classifier& c;
      const Stage& s;
      const std::string& v;
      bool ok = true;
      Reads(Classifier& cl, const Stage& st, const std::string& var) : c(cl), s(st), v(var) {}
      void visit_var(const VarNode& n) override {
        if (ok && n.name == v)
          ok = c.fail("stage '" + s.name + "' uses its batch index '" + v +
                      "' other than as a whole index of a read");
      }
      void visit_access(const AccessNode& a) override {
        int at = kShared;
        for (size_t k = 0; k < a.args.size() && ok; ++k) {
          const auto* var = a.args[k].as<VarNode>();
          if (!var || var->name != v) {
            visit(a.args[k]);
          } else if (at != kShared) {
            ok = c.fail("stage '" + s.name + "' reads '" + a.tensor +
                        "' with its batch index twice");
          } else {
            at = static_cast<int>(k);
          }
        }
        if (ok) ok = c.mark(a.tensor, at, s.name);
      }
    } reads(*this, s, s.vars[static_cast<size_t>(axis)]);
    reads.visit(s.value);
    return reads.ok;
  }

  bool fail(std::string why) {
    why_ = std::move(why);
    return false;
  }
  const std::string& why() const { return why_; }
  std::map<std::string, int>& classes() { return cls_; }

 private:
  const Program& p_;
  const Dim extent_;
  std::map<std::string, int> cls_;
  std::string why_;
};

std::optional<BatchAxis> try_axis(const Program& p, int axis, std::string& why) {
  const std::vector<std::string> outs = p.outputs();
  if (outs.empty()) {
    why = "the program has no outputs";
    return std::nullopt;
  }
  const Stage& first = p.stage(outs[0]);
  if (first.shape.size() <= static_cast<size_t>(axis)) {
    why = "output '" + first.name + "' has no axis " + std::to_string(axis);
    return std::nullopt;
  }
  const Dim extent = first.shape[static_cast<size_t>(axis)];
  if (!extent.is_symbolic() && extent.value < 2) {
    why = "axis " + std::to_string(axis) + " of output '" + first.name + "' has extent " +
          extent.str();
    return std::nullopt;
  }
  Classifier c(p, extent);
  for (const std::string& o : outs) {
    if (p.stage(o).shape.size() <= static_cast<size_t>(axis)) {
      why = "output '" + o + "' has no axis " + std::to_string(axis);
      return std::nullopt;
    }
    if (!c.mark(o, axis, "the outputs")) {
      why = c.why();
      return std::nullopt;
    }
  }
  // Stages are in topological order: walking back, every stage's readers are classified first.
  const auto& stages = p.stages();
  for (auto s = stages.rbegin(); s != stages.rend(); ++s) {
    const auto it = c.classes().find(s->name);
    if (it == c.classes().end()) continue;  // read by no output
    if (!c.classify(*s, it->second)) {
      why = c.why();
      return std::nullopt;
    }
  }
  return BatchAxis{std::move(c.classes()), extent};
}

}  // namespace

std::string BatchAxis::describe(const Program& p) const {
  const std::string o = p.outputs().at(0);
  return "axis " + std::to_string(of(o)) + " of '" + o + "' (extent " + extent.str() + ")";
}

std::optional<BatchAxis> batch_axis(const Program& p, std::string* why) {
  size_t rank = 0;
  for (const std::string& o : p.outputs()) rank = std::max(rank, p.stage(o).shape.size());
  std::string first_why = rank == 0 ? "the outputs are scalars" : "";
  for (size_t a = 0; a < rank; ++a) {
    std::string w;
    if (auto b = try_axis(p, static_cast<int>(a), w)) return b;
    if (first_why.empty()) first_why = "axis " + std::to_string(a) + ": " + w;
  }
  if (why) *why = first_why;
  return std::nullopt;
}

Program with_batch_extent(const Program& p, const BatchAxis& b, int64_t extent,
                          const std::map<std::string, int64_t>& sizes) {
  const auto bound = [&](const Dim& d) -> Dim {
    if (!d.is_symbolic()) return d;
    const auto it = sizes.find(d.sym);
    if (it == sizes.end())
      throw SymbolicSizeError("program '" + p.name() + "': symbolic size '" + d.sym +
                              "' has no value");
    return it->second;
  };
  const auto shape_of = [&](const std::string& name, const Shape& s) {
    Shape r;
    for (const Dim& d : s) r.push_back(bound(d));
    if (const int a = b.of(name); a >= 0) r[static_cast<size_t>(a)] = extent;
    return r;
  };
  Program q(p.name());
  for (const TensorInfo& t : p.inputs()) q.input(t.name, shape_of(t.name, t.shape), t.dtype);
  for (Stage s : p.stages()) {
    if (!b.axis.count(s.name))
      continue;  // no output reads it: it would read the batched tensors whole
    s.shape = shape_of(s.name, s.shape);
    for (RVar& r : s.rvars) r.extent = bound(r.extent);
    q.add_stage(std::move(s));
  }
  for (const std::string& o : p.outputs()) q.output(o);
  return q;
}

}  // namespace pto
