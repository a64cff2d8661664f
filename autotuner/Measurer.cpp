#include "autotuner/Measurer.h"
#include "autotuner/WorkDir.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dsl/Error.h"
#include "dsl/ProgramJson.h"
#include "schedules/ScheduleJson.h"

namespace pto::tuner {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string tail_of_file(const std::string& path, size_t n = 600) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  if (s.size() > n) s = "..." + s.substr(s.size() - n);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// One worker process and its pipes.
struct Worker {
  enum class Phase { Compiling, Ready, Running };
  size_t index = 0;        // into the candidate list
  pid_t pid = -1;
  int to_child = -1, from_child = -1;
  std::string out, err_path;
  Phase phase = Phase::Compiling;
  Clock::time_point started, ready_at, run_started;
  bool have_result = false;
  json result;
  bool killed_for_timeout = false;
  std::string timeout_what;
  double compile_s = 0;

  void close_fds() {
    if (to_child >= 0) close(to_child);
    if (from_child >= 0) close(from_child);
    to_child = from_child = -1;
  }
};

Worker spawn(const std::string& exe, const std::vector<std::string>& args, const std::string& err_path) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
    throw Error(std::string("measurer: pipe failed: ") + std::strerror(errno));
  std::vector<std::string> all{exe};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("measurer: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec. Die with the parent, so
    // that a killed tuner leaves no hung worker behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in[0], 0);
    dup2(out[1], 1);
    const int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (e >= 0) dup2(e, 2);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  register_worker(pid);
  close(in[0]);
  close(out[1]);
  Worker w;
  w.pid = pid;
  w.to_child = in[1];
  w.from_child = out[0];
  w.err_path = err_path;
  w.started = Clock::now();
  fcntl(w.from_child, F_SETFL, O_NONBLOCK);
  return w;
}

Measurement finish(Worker& w) {
  int st = 0;
  waitpid(w.pid, &st, 0);
  unregister_worker(w.pid);
  w.close_fds();
  Measurement m;
  m.compile_s = w.compile_s;
  const std::string err = tail_of_file(w.err_path);
  if (w.killed_for_timeout) {
    m.status = TrialStatus::Timeout;
    m.error = w.timeout_what;
    return m;
  }
  if (w.have_result) {
    const json& r = w.result;
    m.status = parse_trial_status(r.value("status", "runtime_error"));
    m.error = r.value("error", "");
    m.median_ms = r.value("median_ms", 0.0);
    m.min_ms = r.value("min_ms", 0.0);
    m.max_ms = r.value("max_ms", 0.0);
    m.reps = r.value("reps", 0);
    m.max_rel_error = r.value("max_rel_error", 0.0);
    m.compile_s = r.value("compile_s", w.compile_s);
    return m;
  }
  m.status = TrialStatus::Crash;
  if (WIFSIGNALED(st))
    m.error = "worker killed by signal " + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")";
  else if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
    m.error = "cannot run the worker executable (exit 127)";
  else
    m.error = "worker exited with status " + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) + " without a result";
  if (!err.empty()) m.error += "; stderr: " + err;
  return m;
}

// Reads what the worker wrote and parses complete lines. Returns false at EOF.
bool pump(Worker& w) {
  char buf[4096];
  bool eof = false;
  for (;;) {
    const ssize_t n = read(w.from_child, buf, sizeof buf);
    if (n > 0) {
      w.out.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      eof = true;
      break;
    } else if (errno != EINTR) {
      break;  // EAGAIN: nothing more for now
    }
  }
  size_t nl;
  while ((nl = w.out.find('\n')) != std::string::npos) {
    const std::string line = w.out.substr(0, nl);
    w.out.erase(0, nl + 1);
    if (line.rfind("compiled ", 0) == 0 && w.phase == Worker::Phase::Compiling) {
      w.phase = Worker::Phase::Ready;
      w.ready_at = Clock::now();
      w.compile_s = std::atof(line.c_str() + 9);
    } else if (line.rfind("result ", 0) == 0) {
      try {
        w.result = json::parse(line.substr(7));
        w.have_result = true;
      } catch (const json::exception&) {
        // A garbled line: reported as a crash without a result.
      }
    }
  }
  return !eof;
}

uint64_t seed_of(const Program& p) { return std::stoull(program_fingerprint(p), nullptr, 16); }

}  // namespace

std::string default_worker_exe() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "pto";
  return (self.parent_path() / "pto").string();
}

Measurer::Measurer(const Program& p, const Target& t, MeasureOptions o) : p_(p), t_(t), o_(std::move(o)) {
  if (o_.worker_exe.empty()) o_.worker_exe = default_worker_exe();
  if (o_.jobs < 0)
    throw Error("measurer: jobs must be at least 1 (0: one per core), got " +
                std::to_string(o_.jobs));
  jobs_ = o_.jobs > 0 ? o_.jobs : std::max(1, t_.cores);
  if (::access(o_.worker_exe.c_str(), X_OK) != 0)
    throw Error("measurer: worker executable '" + o_.worker_exe + "' is missing or not executable");
  // Writing "go" to a worker that just died must not kill the tuner.
  std::signal(SIGPIPE, SIG_IGN);
  // Directories of tuners killed with -9 first (their pid no longer runs).
  const std::string tmp = std::filesystem::temp_directory_path().string();
  clean_stale_work_dirs(tmp);
  dir_ = make_work_dir(tmp);
  const json cfg = {{"program", program_to_json(p_)}, {"target", t_.name},          {"input_seed", seed_of(p_)},
                    {"tolerance", o_.tolerance},        {"warmup", o_.warmup},        {"min_reps", o_.min_reps},
                    {"max_reps", o_.max_reps},          {"min_seconds", o_.min_seconds}};
  std::ofstream(dir_ + "/config.json") << cfg.dump();
}

Measurer::~Measurer() {
  if (!dir_.empty()) remove_work_dir(dir_);
}

void Measurer::prepare() {
  if (prepared_) return;
  // The reference runs the plain schedule in f64: allow it generous time.
  Worker w = spawn(o_.worker_exe, {"worker", "--dir", dir_, "--reference"}, dir_ + "/reference.err");
  const double limit = 10 * (o_.compile_timeout_s + o_.run_timeout_s);
  bool sent = false;
  for (;;) {
    pollfd pfd{w.from_child, POLLIN, 0};
    poll(&pfd, 1, 100);
    const bool open = pump(w);
    if (w.phase == Worker::Phase::Ready && !sent) {
      sent = write(w.to_child, "go\n", 3) == 3;
    }
    if (!open) break;
    if (seconds_since(w.started) > limit) {
      kill(w.pid, SIGKILL);
      w.killed_for_timeout = true;
      w.timeout_what = "reference computation exceeded " + std::to_string(limit) + " s";
    }
  }
  const Measurement m = finish(w);
  if (m.status != TrialStatus::Ok)
    throw Error("cannot compute the reference output of program '" + p_.name() + "': " + to_string(m.status) + ": " + m.error);
  prepared_ = true;
}

void Measurer::measure(const std::vector<Candidate>& cands,
                       const std::function<void(const Candidate&, const Measurement&)>& done) {
  prepare();
  std::vector<Worker> live;
  size_t next = 0;
  while (next < cands.size() || !live.empty()) {
    // Phases, as MetaSchedule's builder and runner: up to `jobs` workers
    // compile at once (all cores), then the compiled ones run one at a time
    // with nothing compiling beside them, so that a timing has the machine.
    const auto in_phase = [&](Worker::Phase ph) {
      return std::any_of(live.begin(), live.end(), [&](const Worker& w) { return w.phase == ph; });
    };
    const bool running = in_phase(Worker::Phase::Running),
               compiling = in_phase(Worker::Phase::Compiling);
    if (!running && !in_phase(Worker::Phase::Ready))
      while (next < cands.size() && static_cast<int>(live.size()) < jobs_) {
        const Candidate& c = cands[next];
        const std::string sp = dir_ + "/trial_" + std::to_string(c.trial) + ".json";
        std::ofstream(sp) << schedule_to_json_string(c.schedule, -1);
        Worker w =
            spawn(o_.worker_exe,
                  {"worker", "--dir", dir_, "--schedule", sp, "--trial", std::to_string(c.trial)},
                  dir_ + "/trial_" + std::to_string(c.trial) + ".err");
        w.index = next++;
        live.push_back(std::move(w));
      }
    // Let the longest-waiting compiled worker run when nobody is timing or compiling.
    if (!running && !compiling) {
      Worker* first = nullptr;
      for (Worker& w : live)
        if (w.phase == Worker::Phase::Ready && (!first || w.ready_at < first->ready_at)) first = &w;
      if (first) {
        first->phase = Worker::Phase::Running;
        first->run_started = Clock::now();
        // "go <ms>": a first run slower than that is the candidate's only one (Worker.cpp).
        const std::string go =
            o_.slow_ms > 0 ? "go " + std::to_string(o_.slow_ms) + "\n" : std::string("go\n");
        if (write(first->to_child, go.data(), go.size()) != static_cast<ssize_t>(go.size())) {
          /* it died; EOF below reports it */
        }
      }
    }
    std::vector<pollfd> fds;
    for (const Worker& w : live) fds.push_back({w.from_child, POLLIN, 0});
    poll(fds.data(), fds.size(), 50);
    for (size_t i = 0; i < live.size();) {
      Worker& w = live[i];
      const bool open = pump(w);
      if (open && !w.killed_for_timeout) {
        if (w.phase == Worker::Phase::Compiling && seconds_since(w.started) > o_.compile_timeout_s) {
          kill(w.pid, SIGKILL);
          w.killed_for_timeout = true;
          w.timeout_what = "compile exceeded the timeout of " + std::to_string(o_.compile_timeout_s) + " s (killed)";
        } else if (w.phase == Worker::Phase::Running && seconds_since(w.run_started) > o_.run_timeout_s) {
          kill(w.pid, SIGKILL);
          w.killed_for_timeout = true;
          w.timeout_what = "run exceeded the timeout of " + std::to_string(o_.run_timeout_s) + " s (killed)";
        }
      }
      if (open) {
        ++i;
        continue;
      }
      const Measurement m = finish(w);
      const Candidate& c = cands[w.index];
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      done(c, m);
    }
  }
}

}  // namespace pto::tuner
