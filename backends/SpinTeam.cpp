#include "backends/SpinTeam.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace pto {
namespace {

// How long an idle worker spins before it sleeps. Callers between kernel
// calls (Python, a pipeline's queue) take microseconds to tens of them; a
// sleeping vCPU takes tens to wake. libgomp and ONNX Runtime spin for
// similar times. OMP_WAIT_POLICY=passive (OpenMP's name for it) sleeps at once.
std::chrono::microseconds spin_time() {
  static const std::chrono::microseconds t = [] {
    const char* e = std::getenv("OMP_WAIT_POLICY");
    return std::chrono::microseconds(e && std::string_view(e) == "passive" ? 0 : 300);
  }();
  return t;
}

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A forked child has none of the team's threads (and may hold its lock).
std::atomic<bool> forked{false};
const bool atfork_registered = [] {
  pthread_atfork(nullptr, nullptr, [] { forked.store(true); });
  return true;
}();

thread_local bool in_body = false;

struct InBody {
  InBody() { in_body = true; }
  ~InBody() { in_body = false; }
};

class Team {
 public:
  // Never destroyed: its workers outlive static destructors at exit.
  static Team& get() {
    static Team* const team = new Team;
    return *team;
  }

  bool run(int team, const std::function<void(int)>& body) {
    const std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
    if (!lock) return false;
    const uint64_t gen = (state_.load(std::memory_order_relaxed) >> 32) + 1;
    try {
      while (static_cast<int>(workers_.size()) < team - 1) {
        // A new worker starts from the current job (it must see the next one).
        const int me = static_cast<int>(workers_.size()) + 1;
        workers_.emplace_back([this, me, seen = gen - 1] { work(me, seen); });
      }
    } catch (const std::system_error&) {
      return false;  // no thread to be had (a limit on threads): the caller runs it serially
    }
    body_ = &body;
    pending_.store(team - 1, std::memory_order_relaxed);
    // The job's number and size in one word: a worker that missed a job
    // (not in its team) reads the newest one's whole, never a mix.
    // (seq_cst, as the sleepers' count: a worker going to sleep either is
    // counted here or sees this job before it sleeps.)
    state_.store(gen << 32 | static_cast<uint32_t>(team));
    if (sleepers_.load() > 0) state_.notify_all();  // a futex call: only when needed
    {
      const InBody b;
      body(0);
    }
    for (int k = 0; pending_.load(std::memory_order_acquire) != 0; ++k)
      if (k < (1 << 14))
        relax();
      else
        std::this_thread::yield();  // a worker's vCPU was taken from it
    return true;
  }

 private:
  void work(int me, uint64_t seen) {
    while (true) {
      uint64_t s;
      // Read first after a few spins: most jobs come sooner.
      std::chrono::steady_clock::time_point until{};
      for (int k = 1; ((s = state_.load(std::memory_order_acquire)) >> 32) == seen; ++k) {
        if (k % 64 != 0) {
          relax();
          continue;
        }
        const auto now = std::chrono::steady_clock::now();
        if (k == 64) until = now + spin_time();
        if (now < until) continue;
        sleepers_.fetch_add(1);
        state_.wait(s);
        sleepers_.fetch_sub(1);
        k = 0;
      }
      seen = s >> 32;
      if (me >= static_cast<int>(s & 0xffffffffu)) continue;
      {
        // body_ stays this job's: neither can the job finish nor the next
        // one start before this worker is done.
        const InBody b;
        (*body_)(me);
      }
      pending_.fetch_sub(1, std::memory_order_release);
    }
  }

  std::mutex busy_;
  std::vector<std::thread> workers_;  // worker k runs body(k + 1); never joined
  // The job, on one cache line: a worker reads it in one transfer from the
  // caller's core, and the caller reads its completion back in one more.
  alignas(64) std::atomic<uint64_t> state_{0};  // job number << 32 | team size
  const std::function<void(int)>* body_ = nullptr;
  std::atomic<int> pending_{0};               // workers of the job still running
  alignas(64) std::atomic<int> sleepers_{0};  // workers asleep (or about to be) in state_.wait
};

}  // namespace

bool run_on_team(int team, const std::function<void(int)>& body) {
  (void)atfork_registered;
  if (team < 2 || in_body || forked.load(std::memory_order_relaxed)) return false;
  return Team::get().run(team, body);
}

}  // namespace pto
