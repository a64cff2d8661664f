#include "backends/StoreIn.h"

#include <map>
#include <optional>
#include <set>
#include <vector>

namespace pto {
namespace {

using namespace Halide::Internal;
using Halide::Expr;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What one iteration of the consumer's loop does with the two buffers: the
// offset of each consumer store from the stage load in its value (lets
// substituted), the names bound inside the iteration, and whether the stage's
// buffer is used other than by loads and stores.
class Survey : public IRVisitor {
 public:
  Survey(const std::string& stage, const std::string& consumer)
      : stage_(stage), consumer_(consumer) {}

  std::vector<Expr> offsets;    // one per consumer store; undefined where it has no offset
  std::set<std::string> inner;  // loops and lets bound inside the iteration
  bool other_use = false;       // the stage's buffer as a variable (its address, a call)
  std::optional<Halide::Parameter> param;  // the consumer's buffer parameter

 private:
  using IRVisitor::visit;

  void visit(const LetStmt* op) override {
    op->value.accept(this);
    lets_[op->name] = substitute(lets_, op->value);
    inner.insert(op->name);
    op->body.accept(this);
  }
  void visit(const For* op) override {
    inner.insert(op->name);
    IRVisitor::visit(op);
  }
  void visit(const Variable* op) override {
    if (op->name == stage_ || op->name == stage_ + ".buffer") other_use = true;
  }
  void visit(const Store* op) override {
    IRVisitor::visit(op);
    if (op->name != consumer_) return;
    param = op->param;
    // The stage's loads in the stored value, its lets substituted.
    struct Loads : IRVisitor {
      const std::string& name;
      std::vector<const Load*> found;
      explicit Loads(const std::string& n) : name(n) {}
      void visit(const Load* l) override {
        IRVisitor::visit(l);
        if (l->name == name) found.push_back(l);
      }
    } loads(stage_);
    const Expr value = substitute_in_all_lets(op->value);
    value.accept(&loads);
    Expr offset;
    for (const Load* l : loads.found) {
      Expr d = simplify(substitute(lets_, op->index) - substitute(lets_, l->index));
      if (const auto* b = d.as<Broadcast>()) d = b->value;
      if (!d.type().is_scalar() || (offset.defined() && !can_prove(offset == d))) {
        offset = Expr();
        break;
      }
      offset = d;
    }
    offsets.push_back(offset);
  }

  const std::string& stage_;
  const std::string& consumer_;
  std::map<std::string, Expr> lets_;
};

// The stage's loads and stores as the consumer's, `offset` further on.
class Move : public IRMutator {
 public:
  Move(const std::string& stage, const std::string& consumer, Expr offset, Halide::Parameter param)
      : stage_(stage), consumer_(consumer), offset_(std::move(offset)), param_(std::move(param)) {}

 private:
  using IRMutator::visit;

  Expr shifted(const Expr& index) const {
    const int lanes = index.type().lanes();
    // Simplified, so that a ramp stays a ramp (a dense vector access, not a gather).
    return simplify(index + (lanes > 1 ? Broadcast::make(offset_, lanes) : offset_));
  }
  Expr visit(const Load* op) override {
    if (op->name != stage_) return IRMutator::visit(op);
    return Load::make(op->type, consumer_, shifted(mutate(op->index)), Halide::Buffer<>(), param_,
                      mutate(op->predicate), ModulusRemainder());
  }
  Stmt visit(const Store* op) override {
    if (op->name != stage_) return IRMutator::visit(op);
    return Store::make(consumer_, mutate(op->value), shifted(mutate(op->index)), param_,
                       mutate(op->predicate), ModulusRemainder());
  }

  const std::string& stage_;
  const std::string& consumer_;
  Expr offset_;
  Halide::Parameter param_;
};

// Does `s` use buffer `name` (a load, store or variable of it)?
bool uses(const Stmt& s, const std::string& name) {
  struct Uses : IRVisitor {
    const std::string& name;
    bool found = false;
    explicit Uses(const std::string& n) : name(n) {}
    using IRVisitor::visit;
    void visit(const Load* op) override {
      found |= op->name == name;
      IRVisitor::visit(op);
    }
    void visit(const Store* op) override {
      found |= op->name == name;
      IRVisitor::visit(op);
    }
    void visit(const Variable* op) override {
      found |= op->name == name || op->name == name + ".buffer";
    }
  } u(name);
  s.accept(&u);
  return u.found;
}

class StoreInPass : public IRMutator {
 public:
  StoreInPass(std::string stage, std::string consumer, std::string loop)
      : stage_(std::move(stage)),
        consumer_(std::move(consumer)),
        prefix_(consumer_ + ".s0."),
        suffix_("." + loop) {}

  using IRMutator::mutate;
  // The whole statement: the loops moved, then the stage's allocation
  // dropped where nothing uses it any more.
  Stmt mutate(const Stmt& s) override {
    if (depth_++ > 0) {
      Stmt r = IRMutator::mutate(s);
      --depth_;
      return r;
    }
    const Stmt moved = IRMutator::mutate(s);
    --depth_;
    struct Drop : IRMutator {
      const std::string& name;
      explicit Drop(const std::string& n) : name(n) {}
      using IRMutator::visit;
      Stmt visit(const Allocate* op) override {
        if (op->name == name && !uses(op->body, name)) return mutate(op->body);
        return IRMutator::visit(op);
      }
      Stmt visit(const Free* op) override {
        return op->name == name ? Evaluate::make(0) : IRMutator::visit(op);
      }
    } drop(stage_);
    const Stmt dropped = drop.mutate(moved);
    // The Free of an allocation still in use stays.
    return uses(dropped, stage_) ? moved : dropped;
  }

 private:
  using IRMutator::visit;

  Stmt visit(const For* op) override {
    if (op->name.rfind(prefix_, 0) != 0 || !ends_with(op->name, suffix_))
      return IRMutator::visit(op);
    Survey survey(stage_, consumer_);
    op->body.accept(&survey);
    if (survey.other_use || survey.offsets.empty() || !survey.param) return op;
    const Expr offset = survey.offsets.front();
    for (const Expr& o : survey.offsets)
      if (!o.defined() || !can_prove(o == offset)) return op;
    // The offset must be fixed for the iteration.
    struct BoundInside : IRVisitor {
      const std::set<std::string>& inner;
      bool bound_inside = false;
      explicit BoundInside(const std::set<std::string>& i) : inner(i) {}
      using IRVisitor::visit;
      void visit(const Variable* v) override { bound_inside |= inner.count(v->name) > 0; }
    } bound(survey.inner);
    offset.accept(&bound);
    if (bound.bound_inside) return op;
    Move move(stage_, consumer_, offset, *survey.param);
    return For::make(op->name, op->min, op->extent, op->for_type, op->partition_policy,
                     op->device_api, move.mutate(op->body));
  }

  const std::string stage_, consumer_, prefix_, suffix_;
  int depth_ = 0;
};

}  // namespace

IRMutator* make_store_in_pass(const std::string& stage, const std::string& consumer,
                              const std::string& loop) {
  return new StoreInPass(stage, consumer, loop);
}

}  // namespace pto
