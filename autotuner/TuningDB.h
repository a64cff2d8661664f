// The tuning database: every measured candidate, in SQLite.
//
// One file holds trials for many workloads and targets. A trial is keyed by the
// workload (program fingerprint, which covers structure and shapes), the target
// signature (its Halide target string) and the accuracy budget it was tuned
// under; it records the PTO and Halide versions, the strategy, the schedule
// JSON (and the search-space genome it came from), timing statistics, status
// and error text. The database runs in WAL mode and commits every trial on its
// own, so `kill -9` at any moment loses nothing already committed and
// `pto tune` resumes from what is there. A schema_version table drives
// migrations (kSchemaVersion; v1 -> v2 added the genome and accuracy columns).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "target/Target.h"
#include "dsl/Error.h"
#include "dsl/Program.h"
#include "schedules/Schedule.h"

struct sqlite3;

namespace pto::tuner {

inline constexpr int kSchemaVersion = 2;

// The database cannot be opened, read or written (`pto tune` exits with 4).
class TuningDBError : public Error {
 public:
  using Error::Error;
};

// The database file used when none is given: $PTO_TUNING_DB, else ~/.cache/pto/tuning.db.
std::string default_db_path();

enum class TrialStatus { Ok, CompileError, RuntimeError, Crash, Timeout, WrongResult, Invalid };
std::string to_string(TrialStatus s);
TrialStatus parse_trial_status(const std::string& s);  // throws Error

struct TrialRecord {
  int64_t id = 0;              // database row id (0 until stored)
  int index = 0;               // 0-based trial number within (workload, target, budget)
  std::string strategy;        // default | random | evolutionary | model
  std::string schedule_json;   // canonical (compact) schedule JSON
  std::string genome;          // search-space genome, empty for the default schedule
  TrialStatus status = TrialStatus::Ok;
  std::string error;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
  double max_rel_error = 0;    // measured error against the reference
  double compile_s = 0;
};

// Identifies one tuning problem.
struct WorkloadKey {
  std::string fingerprint;     // program_fingerprint()
  std::string program_name;
  std::string shapes;          // readable input/output shapes
  std::string target;          // Target::halide
  double budget = 0;           // --max-rel-error the trials were checked against
  static WorkloadKey of(const Program& p, const Target& t, double budget);
};

// A correct trial of another workload of the same program (other shapes),
// with that workload's default time: what a cost model warm-starts from.
struct RelatedTrial {
  std::string program_json, schedule_json;
  double median_ms = 0, default_ms = 0;
};

class TuningDB {
 public:
  // Opens (creating the file, its directory and the schema, or migrating an
  // older schema). Throws pto::Error naming the file on failure.
  explicit TuningDB(const std::string& path);
  ~TuningDB();
  TuningDB(const TuningDB&) = delete;
  TuningDB& operator=(const TuningDB&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const;

  // Stores one trial in its own transaction; returns the row id.
  int64_t add_trial(const WorkloadKey& key, const Program& p, const TrialRecord& r);
  // All trials of a workload, in trial order.
  std::vector<TrialRecord> trials(const WorkloadKey& key) const;
  // The fastest correct trial of a workload (tuned under a budget <= key.budget).
  std::optional<TrialRecord> best(const WorkloadKey& key) const;
  // The fastest correct trial of exactly this schedule (canonical compact JSON),
  // under a budget <= key.budget; none if it was never measured.
  std::optional<TrialRecord> best_of(const WorkloadKey& key, const std::string& schedule_json) const;
  // Up to `limit` correct trials, newest first, of the other workloads named
  // key.program_name on key.target under a budget <= key.budget, each with
  // its workload's measured default schedule (workloads without one are left out).
  std::vector<RelatedTrial> related_trials(const WorkloadKey& key, int limit) const;

 private:
  void exec(const std::string& sql) const;
  void migrate();
  std::string path_;
  sqlite3* db_ = nullptr;
};

// The best tuned schedule for (p, t) in the database at `db_path` (exact f32
// records only), else the default schedule. Never throws for a missing or
// unreadable database: `source` (if given) says which was used and why.
// Defaults improve between releases, so a record only wins over the *current*
// default schedule if that default was measured in the same database (`pto
// tune` always measures it) and is slower; otherwise the default is used and
// `source` says to run `pto tune` to refresh the records.
Schedule best_schedule(const std::string& db_path, const Program& p, const Target& t, std::string* source = nullptr);

// The SQL of schema version 1, for migration tests.
const char* schema_v1_sql();

}  // namespace pto::tuner
