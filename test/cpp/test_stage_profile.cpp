// Per-stage profiles (debug/StageProfile.h): placements, production counts
// and buffer sizes follow from the schedule; every root stage is timed and
// the root stages' times are parts of the run's (no figure is asserted:
// only how the parts relate).
#include <catch2/catch.hpp>

#include "Helpers.h"
#include "autotuner/TrialBuffers.h"
#include "debug/StageProfile.h"
#include "dsl/ops/Ops.h"
#include "schedules/defaults/Defaults.h"

using namespace pto;
using namespace pto::test;

namespace {

debug::StageProfile profile(const Program& p, const Schedule& s) {
  auto inputs = tuner::input_buffers(p, 5);
  std::vector<BufferRef> ins;
  for (auto& b : inputs) ins.push_back(b.ref());
  return debug::profile_stages(p, s, host_target(), ins, 0.02);
}

const debug::StageTime& row(const debug::StageProfile& r, const std::string& stage) {
  for (const auto& s : r.stages)
    if (s.stage == stage) return s;
  FAIL("no row for " << stage << "\n" << r.report());
  return r.stages.front();
}

Program block() {
  Program p("block");
  const Tensor x = p.input("x", {96, 128});
  const Tensor w = p.input("w", {128, 256});
  ops::softmax(ops::relu(ops::matmul(x, w, "mm"), "act"), -1, "sm");
  return p;
}

}  // namespace

TEST_CASE("stage profile: under plain loops every stage is at root, its buffer whole",
          "[stage-profile]") {
  const Program p = block();
  const auto r = profile(p, plain_schedule(p));
  INFO(r.report());
  double roots = 0;
  for (const auto& s : r.stages) {
    CHECK(s.placement == "root");
    CHECK(s.productions == 1);
    CHECK(s.ms > 0);
    roots += s.ms;
  }
  CHECK(row(r, "mm").buffer_bytes == 96 * 256 * sizeof(float));
  CHECK(row(r, "sm_max").buffer_bytes == 96 * sizeof(float));
  // The root productions run one after another inside the run.
  CHECK(roots <= r.run_ms * 1.001);
  CHECK(r.runs >= 3);
  CHECK(r.peak_bytes >= 96 * 256 * sizeof(float));
}

TEST_CASE("stage profile: fused stages are listed inside their stage, inlined ones as such",
          "[stage-profile]") {
  const Program p = block();
  Schedule s = plain_schedule(p);
  // The softmax's parts computed per row of it, the activation inlined.
  for (const char* part : {"sm_max", "sm_exp", "sm_sum"})
    s[part].compute = Placement{Placement::Kind::At, "sm", p.stage("sm").vars[0]};
  s["act"].compute = Placement{Placement::Kind::Inline, "", ""};
  const auto r = profile(p, s);
  INFO(r.report());
  CHECK(row(r, "sm_max").placement == "inside sm");
  CHECK(row(r, "sm_max").productions == 96);
  CHECK(row(r, "sm_max").buffer_bytes == sizeof(float));
  CHECK(row(r, "sm_max").ms == 0);  // timed as part of sm
  CHECK(row(r, "act").placement == "inlined");
  CHECK(row(r, "sm").placement == "root");
  CHECK(row(r, "sm").ms > 0);
  CHECK_THAT(r.report(), Catch::Matchers::Contains("inside sm"));
}
