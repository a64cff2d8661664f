// The autotuner's search space: knob domains derived from a Program and a Target.
//
// A candidate is a *genome*, one choice index per knob, and `decode` turns it
// into a plain Schedule value (schedules/Schedule.h). Strategies only ever see
// genomes (so mutation and crossover are index operations), the measurer and
// the tuning database only ever see Schedules. Knobs per stage:
//   placement   inline / root / computed at a loop of its (dominating) consumer
//   tile        the two innermost pure dims: multiples of the vector width (or
//               small row blocks), divisors of the extent or not
//   order       tile loops outside point loops, outer tile loops swappable
//   vectorize   none / lanes / 2 x lanes on the innermost loop
//   unroll      the row point loop: none / 2 / 4 / fully
//   parallel    the outermost loop (root stages only)
//   update      for reductions: reduction loops innermost / outermost / between
//               tile and point loops (register blocking), reduction tile, a tile
//               of a third dim (conv output channels, unrolled), vector width,
//               unrolls, parallel; or rfactor (vectorized partial results, see
//               RFactor in schedules/Schedule.h) by 1, 2 or 4 vectors
//   pipeline    for stages computed at a consumer: none / async (/ async + ring_buffer 2, opt-in)
//   precision   storage type of intermediates, only when the accuracy budget allows
// Domains keep only values that fit the static extents; a decoded schedule is
// still validated (validate()) before it is measured.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "target/Target.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

namespace pto::tuner {

using Genome = std::vector<int>;

struct Knob {
  std::string stage;   // the stage it belongs to
  std::string name;    // e.g. "tile_j", "update_mode"
  std::vector<int64_t> values;  // the domain; meaning depends on the knob (see SearchSpace.cpp)
};

struct SearchSpaceOptions {
  // Largest relative error (to the output's largest magnitude) a candidate may
  // have; 0 = exact f32, which keeps every stage at its logical precision.
  double max_rel_error = 0;
  // Offer `async` for stages computed at a consumer loop (see SearchSpace.cpp).
  bool pipelining = true;
  // Also offer double buffers (async + ring_buffer 2, storage hoisted one loop
  // out) for pure stages; off by default (run timeouts seen, see SearchSpace.cpp).
  bool ring_buffers = false;
};

// Does an accuracy budget (SearchSpaceOptions::max_rel_error) leave room for
// values rounded to `t`? bf16 keeps 8 significant bits (relative rounding
// 2^-9 ~ 2e-3), f16 11 (2^-12 ~ 2.4e-4): each is offered where the budget
// leaves room for a few such roundings to compound (bf16 from 1e-2, f16 from
// 2e-3); f32 and wider always. The one rule of the genome space's storage
// knob and of the Mutator's precision candidates.
bool budget_allows(DType t, double max_rel_error);

class SearchSpace {
 public:
  SearchSpace(const Program& p, const Target& t, SearchSpaceOptions o = {});

  const std::vector<Knob>& knobs() const { return knobs_; }
  const Program& program() const { return p_; }
  const Target& target() const { return t_; }
  double max_rel_error() const { return o_.max_rel_error; }
  // Number of distinct genomes (saturates at 1e18), for reports.
  double size() const;

  Genome random(std::mt19937_64& rng) const;
  // A few rule-based starting points (register-blocked reductions, inlined
  // elementwise producers, parallel vectorized outputs, at several tile
  // sizes): measured right after the default schedule, they give the
  // strategies good parents instead of only uniform samples.
  std::vector<Genome> seeds() const;
  // Changes `count` randomly chosen knobs to other values of their domains.
  Genome mutate(const Genome& g, std::mt19937_64& rng, int count = 1) const;
  // Uniform crossover: each knob from either parent.
  Genome crossover(const Genome& a, const Genome& b, std::mt19937_64& rng) const;

  // The schedule a genome stands for (not yet validated). Throws ScheduleError
  // for a genome of the wrong length or with out-of-range choices.
  Schedule decode(const Genome& g) const;

 private:
  void add_stage_knobs(const Stage& st);
  int64_t knob(const Genome& g, const std::string& stage, const std::string& name, int64_t fallback) const;

  Program p_;
  Target t_;
  SearchSpaceOptions o_;
  std::vector<Knob> knobs_;
};

// Compact text of a genome ("3,0,1,...") for the database and logs; and back.
std::string genome_to_string(const Genome& g);
Genome genome_from_string(const std::string& s);

}  // namespace pto::tuner
