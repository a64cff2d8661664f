// The measurer's private working directories, and their cleanup.
//
// Each Measurer writes the program, the candidates and the reference output
// into `<tmp>/pto-tune-<pid>-XXXXXX`. A normal exit removes it (the Measurer's
// destructor). A tuner killed by SIGINT/SIGTERM removes it from the signal
// handler that `remove_work_dirs_on_signals()` installs (the CLI does; a host
// process such as Python keeps its own handlers). `kill -9` cannot be caught,
// so every new Measurer first removes the directories whose owner pid (the
// number in the name) no longer runs: nothing accumulates in /tmp.
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace pto::tuner {

// Creates `<parent>/pto-tune-<pid>-XXXXXX` and registers it for signal cleanup.
std::string make_work_dir(const std::string& parent);
// Removes a directory made by make_work_dir and unregisters it.
void remove_work_dir(const std::string& dir);
// Removes `pto-tune-<pid>-*` directories in `parent` that belong to this user
// and whose pid is not running. Returns the directories removed.
std::vector<std::string> clean_stale_work_dirs(const std::string& parent);
// SIGINT and SIGTERM kill the registered worker processes (which write into
// the directories: a file one creates after the handler's pass would keep
// its directory), remove the registered directories, then terminate the
// process as the signal would have (its default action, re-raised).
void remove_work_dirs_on_signals();
// A worker process the signal handler kills first; unregistered once reaped.
void register_worker(pid_t pid);
void unregister_worker(pid_t pid);

}  // namespace pto::tuner
