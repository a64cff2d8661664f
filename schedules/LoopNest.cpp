#include "schedules/LoopNest.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>

#include "dsl/Error.h"

namespace pto {

std::string outer_loop(const std::string& dim) { return dim + "_o"; }
std::string middle_loop(const std::string& dim) { return dim + "_m"; }
std::string inner_loop(const std::string& dim) { return dim + "_i"; }
std::string split_rest(const std::string& dim) { return dim + "_t"; }
std::string lane_loop(const std::string& dim) { return dim + "_v"; }
std::string lanes_rest(const std::string& dim) { return dim + "_x"; }
std::string pair_loop(const std::string& rvar) { return rvar + "_2"; }
std::string rfactor_lane(const std::string& rvar) { return rvar + "_lane"; }
std::string rfactor_part(const std::string& rvar) { return rvar + "_part"; }

std::vector<std::string> split_names(const std::string& dim, size_t levels) {
  if (levels == 0) return {dim};
  if (levels == 1) return {outer_loop(dim), inner_loop(dim)};
  return {outer_loop(dim), middle_loop(dim), inner_loop(dim)};
}

bool is_tile_point(const Loop& l) { return l.name == inner_loop(l.dim) || l.name == middle_loop(l.dim); }

bool is_reduction_loop(const Stage& stage, const std::string& loop) {
  for (const RVar& r : stage.rvars) {
    if (loop == split_rest(r.name)) return true;  // the intermediate of a two-level split
    for (size_t lv = 0; lv <= 2; ++lv)
      for (const auto& n : split_names(r.name, lv))
        if (n == loop) return true;
  }
  return false;
}

const Loop* find_loop(const std::vector<Loop>& loops, const std::string& name) {
  for (const auto& l : loops)
    if (l.name == name) return &l;
  return nullptr;
}

std::vector<std::string> loop_names(const std::vector<Loop>& loops) {
  std::vector<std::string> r;
  for (const auto& l : loops) r.push_back(l.name);
  return r;
}

bool factor_split(const LoopSchedule& ls, const Loop& l) {
  const auto u = ls.unroll.find(l.name);
  const bool unroll_split = u != ls.unroll.end() && u->second != 0 && !(l.extent == u->second && l.name != l.dim);
  const bool vector_split =
      ls.vectorize == l.name && ls.vector_width != 0 && !(l.extent == ls.vector_width && l.name != l.dim);
  return unroll_split || vector_split;
}

namespace {
std::string join(const std::vector<Loop>& loops) {
  std::string r;
  for (const Loop& l : loops) r += (r.empty() ? "" : ", ") + l.name;
  return r;
}
}  // namespace

std::vector<Loop> loop_nest(const Stage& stage, const LoopSchedule& ls, bool update) {
  const std::string where = "stage '" + stage.name + "'" + (update ? " (update)" : "");
  struct DimInfo {
    std::string name;
    Dim extent;
    bool reduction;
  };
  std::vector<DimInfo> dims;
  for (size_t i = 0; i < stage.vars.size(); ++i) dims.push_back({stage.vars[i], stage.shape[i], false});
  if (update)
    for (const RVar& r : stage.rvars) dims.push_back({r.name, r.extent, true});

  for (const auto& [dim, sizes] : ls.tile) {
    const auto it = std::find_if(dims.begin(), dims.end(), [&](const DimInfo& d) { return d.name == dim; });
    if (it == dims.end()) {
      std::string valid;
      for (const auto& d : dims) valid += (valid.empty() ? "" : ", ") + d.name;
      throw ScheduleError(where + ": tile on unknown dim '" + dim + "'; dims: " + valid);
    }
    if (sizes.empty() || sizes.size() > 2)
      throw ScheduleError(where + ": tile on dim '" + dim + "' needs 1 or 2 sizes, got " +
                          std::to_string(sizes.size()));
    for (int64_t t : sizes) {
      if (t < 1)
        throw ScheduleError(where + ": tile " + std::to_string(t) + " on dim '" + dim +
                            "' must be at least 1");
      // Loops are 32-bit in the generated code (symbolic dims have no extent to check against).
      if (t > std::numeric_limits<int32_t>::max())
        throw ScheduleError(where + ": tile " + std::to_string(t) + " on dim '" + dim +
                            "' does not fit a 32-bit loop; use at most " +
                            std::to_string(std::numeric_limits<int32_t>::max()));
    }
    if (!it->extent.is_symbolic() && sizes[0] > it->extent.value)
      throw ScheduleError(where + ": tile " + std::to_string(sizes[0]) + " on dim '" + dim +
                          "' exceeds extent " + std::to_string(it->extent.value));
    if (sizes.size() == 2 && (sizes[1] >= sizes[0] || sizes[0] % sizes[1] != 0))
      throw ScheduleError(where + ": inner tile " + std::to_string(sizes[1]) + " on dim '" + dim +
                          "' must be smaller than and divide outer tile " + std::to_string(sizes[0]));
  }

  std::vector<Loop> loops;
  for (const DimInfo& d : dims) {
    const auto t = ls.tile.find(d.name);
    const std::vector<int64_t> sizes = t == ls.tile.end() ? std::vector<int64_t>{} : t->second;
    const auto names = split_names(d.name, sizes.size());
    for (size_t k = 0; k < names.size(); ++k) {
      Loop l{names[k], d.name, d.reduction, -1, "", 1};
      if (k == 0) {
        l.step = sizes.empty() ? 1 : sizes[0];
        if (!d.extent.is_symbolic()) {
          l.extent = (d.extent.value + l.step - 1) / l.step;
          l.extent_str = std::to_string(l.extent);
        } else {
          l.extent_str = sizes.empty() ? d.extent.sym : "ceil(" + d.extent.sym + "/" + std::to_string(l.step) + ")";
        }
      } else if (k + 1 < names.size()) {
        l.extent = sizes[0] / sizes[1];
        l.step = sizes[1];
      } else {
        l.extent = sizes.back();
      }
      if (l.extent_str.empty()) l.extent_str = std::to_string(l.extent);
      loops.push_back(l);
    }
  }

  // `order` permutes the listed loops among the positions they occupy.
  std::set<std::string> seen;
  std::vector<size_t> positions;
  for (const std::string& n : ls.order) {
    if (!seen.insert(n).second) throw ScheduleError(where + ": loop '" + n + "' appears twice in order");
    const auto it = std::find_if(loops.begin(), loops.end(), [&](const Loop& l) { return l.name == n; });
    if (it == loops.end())
      throw ScheduleError(where + ": order names unknown loop '" + n + "'; loops: " + join(loops));
    positions.push_back(static_cast<size_t>(it - loops.begin()));
  }
  std::vector<size_t> sorted = positions;
  std::sort(sorted.begin(), sorted.end());
  std::vector<Loop> reordered = loops;
  for (size_t k = 0; k < positions.size(); ++k) reordered[sorted[k]] = loops[positions[k]];
  // The loops split from one dim must stay outer to inner: a tile's inner loop
  // outside its outer loop is never useful and breaks Halide's tail handling.
  for (const DimInfo& d : dims) {
    int last = -1;
    for (size_t k = 0; k < reordered.size(); ++k) {
      if (reordered[k].dim != d.name) continue;
      const auto names = split_names(d.name, ls.tile.count(d.name) ? ls.tile.at(d.name).size() : 0);
      const int idx = static_cast<int>(std::find(names.begin(), names.end(), reordered[k].name) - names.begin());
      if (idx < last)
        throw ScheduleError(where + ": order puts '" + reordered[k].name + "' outside '" +
                            names[static_cast<size_t>(last)] + "'; the loops of one dim must stay outer to inner");
      last = idx;
    }
  }
  return reordered;
}

}  // namespace pto
