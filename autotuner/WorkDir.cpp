#include "autotuner/WorkDir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "dsl/Error.h"

namespace pto::tuner {
namespace {

// Registered directories as fixed-size C strings, so that the signal handler
// reads them without allocating. A slot is in use while `used` is set.
constexpr int kSlots = 16;
constexpr size_t kPathMax = 1024;
struct Slot {
  std::atomic<bool> used{false};
  char path[kPathMax] = {};
};
Slot g_slots[kSlots];
std::mutex g_slots_mutex;  // serializes register/unregister (never taken in the handler)

void register_dir(const std::string& dir) {
  if (dir.size() >= kPathMax) return;  // cleaned on normal exit or as stale at the next start
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  for (Slot& s : g_slots)
    if (!s.used.load()) {
      std::memcpy(s.path, dir.c_str(), dir.size() + 1);
      s.used.store(true);
      return;
    }
}

void unregister_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  for (Slot& s : g_slots)
    if (s.used.load() && dir == s.path) s.used.store(false);
}

// Async-signal-safe removal of a flat directory (the measurer writes only
// files into it): openat/unlinkat/rmdir, and readdir on a directory stream
// opened before (glibc's readdir does not allocate after opendir's buffer;
// fdopendir allocates, which is accepted here: the process is about to die).
void remove_flat_dir_signal_safe(const char* path) {
  const int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    if (DIR* d = fdopendir(fd)) {
      while (const dirent* e = readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) unlinkat(fd, e->d_name, 0);
      closedir(d);
    } else {
      close(fd);
    }
  }
  rmdir(path);
}

// Live worker pids, 0 where free: atomics the handler reads without a lock.
constexpr int kWorkers = 64;
std::atomic<pid_t> g_workers[kWorkers];

void on_signal(int sig) {
  for (auto& w : g_workers) {
    const pid_t pid = w.load();
    if (pid <= 0) continue;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);  // it writes nothing more
  }
  for (Slot& s : g_slots)
    if (s.used.load()) remove_flat_dir_signal_safe(s.path);
  // Terminate as the signal would have: default action, re-raised.
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

std::string make_work_dir(const std::string& parent) {
  std::string tmpl = (std::filesystem::path(parent) / ("pto-tune-" + std::to_string(getpid()) + "-XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) throw Error("measurer: cannot create a temporary directory in '" + parent + "': " + std::strerror(errno));
  register_dir(tmpl);
  return tmpl;
}

void remove_work_dir(const std::string& dir) {
  unregister_dir(dir);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

std::vector<std::string> clean_stale_work_dirs(const std::string& parent) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = "pto-tune-";
    if (name.rfind(prefix, 0) != 0) continue;
    // pto-tune-<pid>-XXXXXX; older names without a pid are left alone.
    const size_t dash = name.find('-', prefix.size());
    if (dash == std::string::npos || dash == prefix.size()) continue;
    const std::string digits = name.substr(prefix.size(), dash - prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    struct stat st{};
    if (lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
    // ESRCH: no such process. EPERM means it runs (as another user): keep it.
    if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    std::filesystem::remove_all(e.path(), rm);
    if (!rm) removed.push_back(e.path().string());
  }
  return removed;
}

void register_worker(pid_t pid) {
  for (auto& w : g_workers) {
    pid_t free = 0;
    if (w.compare_exchange_strong(free, pid)) return;
  }
}

void unregister_worker(pid_t pid) {
  for (auto& w : g_workers) {
    pid_t p = pid;
    if (w.compare_exchange_strong(p, 0)) return;
  }
}

void remove_work_dirs_on_signals() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace pto::tuner
