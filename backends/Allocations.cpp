#include "backends/Allocations.h"

#include <set>

namespace pto {

std::vector<HeapAllocation> heap_allocations(const LoweredPipeline& lp, const Program& p) {
  using namespace Halide::Internal;
  struct Walk : IRVisitor {
    const Program& p;
    std::vector<HeapAllocation> found;
    explicit Walk(const Program& prog) : p(prog) {}
    using IRVisitor::visit;
    void visit(const Allocate* op) override {
      if (op->memory_type != Halide::MemoryType::Stack &&
          op->memory_type != Halide::MemoryType::Register) {
        size_t elems = 1;
        for (const Halide::Expr& e : op->extents) {
          const auto c = as_const_int(e);
          elems = c && *c > 0 && elems ? elems * static_cast<size_t>(*c) : 0;
        }
        if (elems) elems += static_cast<size_t>(std::max(op->padding, 0));
        std::string detail;
        if (const size_t in = op->name.find("_in_"); in != std::string::npos) {
          std::string src = op->name.substr(0, std::min(in, op->name.find_first_of(".$")));
          if (src.size() > 3 && src.ends_with("_im"))
            src.resize(src.size() - 3);  // an input's ImageParam
          detail = "packed copy of '" + src + "'";
        }
        found.push_back(
            {stage_of_func(op->name, p), detail, elems * static_cast<size_t>(op->type.bytes())});
      }
      IRVisitor::visit(op);
    }
  } walk(p);
  const Halide::Module m = with_halide_errors("listing the allocations of '" + p.name() + "'", [&] {
    Halide::Pipeline pipeline = lp.pipeline;  // a handle: compile_to_module is not const
    return pipeline.compile_to_module(lp.arguments(), "kernel", lp.target);
  });
  for (const auto& f : m.functions()) f.body.accept(&walk);
  return walk.found;
}

std::string allocation_owner(const std::vector<HeapAllocation>& allocs, size_t n) {
  // Halide rounds a heap request up a little (alignment, over-read padding).
  constexpr size_t kSlack = 256;
  const auto fits = [&](const HeapAllocation& a) {
    return a.bytes && a.bytes <= n && n <= a.bytes + kSlack;
  };
  std::set<std::string> exact, sized_at_run_time;
  for (const HeapAllocation& a : allocs) {
    const std::string who =
        "'" + a.stage + "'" + (a.detail.empty() ? "" : " (its " + a.detail + ")");
    if (fits(a)) exact.insert(who);
    if (!a.bytes) sized_at_run_time.insert(who);
  }
  const std::set<std::string>& names = exact.empty() ? sized_at_run_time : exact;
  if (names.empty()) return "";
  std::string r;
  for (const std::string& s : names) r += (r.empty() ? "" : " or ") + s;
  return (names.size() == 1 ? "stage " : "one of stages ") + r +
         (exact.empty() ? " (a tile sized at run time)" : "");
}

}  // namespace pto
