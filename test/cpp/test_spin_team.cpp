// The JIT's worker team (backends/SpinTeam.h): every index of every job
// runs once, on distinct threads, whatever the team sizes in turn (workers
// outside a job's team must not run it, nor run the next one twice); jobs
// after the workers went to sleep still run; concurrent callers each either
// get the team or are told to run serially; a job's body cannot fork a
// nested job.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "backends/SpinTeam.h"

using pto::run_on_team;

TEST_CASE("run_on_team runs each index once on its own thread, team sizes changing", "[parallel]") {
  // Sizes up and down: a worker left out of a 2-team job sees the 5-team one.
  for (const int team : {2, 3, 5, 2, 4, 2, 2, 7, 3}) {
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<std::atomic<int>> ran(static_cast<size_t>(team));
      std::mutex m;
      std::set<std::thread::id> threads;
      std::atomic<int> outside{0};
      const bool on_team = run_on_team(team, [&](int me) {
        if (me < 0 || me >= team) return void(outside.fetch_add(1));
        ran[static_cast<size_t>(me)].fetch_add(1);
        const std::lock_guard<std::mutex> lock(m);
        threads.insert(std::this_thread::get_id());
      });
      INFO("team " << team << " rep " << rep);
      REQUIRE(on_team);
      CHECK(outside.load() == 0);
      for (const auto& r : ran) CHECK(r.load() == 1);
      CHECK(threads.size() == static_cast<size_t>(team));
    }
  }
}

TEST_CASE("run_on_team wakes workers that went to sleep", "[parallel]") {
  for (int rep = 0; rep < 3; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the spin time
    std::atomic<int> ran{0};
    REQUIRE(run_on_team(3, [&](int) { ran.fetch_add(1); }));
    CHECK(ran.load() == 3);
  }
}

TEST_CASE("run_on_team serves one caller at a time; the others run serially", "[parallel]") {
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep) {
        const auto body = [&](int) { total.fetch_add(1); };
        if (!run_on_team(2, body)) body(0), body(1);
      }
    });
  for (auto& t : callers) t.join();
  CHECK(total.load() == 4 * 200 * 2);
}

TEST_CASE("run_on_team refuses a nested job and teams under 2", "[parallel]") {
  std::atomic<int> nested_ran{0}, refused{0};
  REQUIRE(run_on_team(2, [&](int) {
    if (run_on_team(2, [&](int) { nested_ran.fetch_add(1); })) return;
    refused.fetch_add(1);
  }));
  CHECK(refused.load() == 2);
  CHECK(nested_ran.load() == 0);
  CHECK_FALSE(run_on_team(1, [](int) {}));
  CHECK_FALSE(run_on_team(0, [](int) {}));
}
