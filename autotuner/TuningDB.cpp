#include "autotuner/TuningDB.h"

#include <sqlite3.h>

#include <HalideRuntime.h>

#include <cstdlib>
#include <filesystem>

#include "dsl/Error.h"
#include "dsl/ProgramJson.h"
#include "schedules/ScheduleJson.h"
#include "schedules/defaults/Defaults.h"

#ifndef PTO_VERSION
#define PTO_VERSION "unknown"
#endif

namespace pto::tuner {
namespace {

const char* kV1 = R"sql(
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS workloads (
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE,
  program_name TEXT NOT NULL,
  shapes TEXT NOT NULL,
  program_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trials (
  id INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  target TEXT NOT NULL,
  pto_version TEXT NOT NULL,
  halide_version TEXT NOT NULL,
  trial_index INTEGER NOT NULL,
  strategy TEXT NOT NULL,
  schedule_json TEXT NOT NULL,
  status TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  median_ms REAL, min_ms REAL, max_ms REAL, reps INTEGER,
  created_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE INDEX IF NOT EXISTS trials_by_workload ON trials(workload_id, target);
)sql";

// v1 -> v2: the genome a candidate came from (evolution resumes from it), the
// accuracy budget it was checked against, its measured error and compile time.
const char* kV1toV2 = R"sql(
ALTER TABLE trials ADD COLUMN genome TEXT NOT NULL DEFAULT '';
ALTER TABLE trials ADD COLUMN budget REAL NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN max_rel_error REAL NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN compile_s REAL NOT NULL DEFAULT 0;
)sql";

// A prepared statement, finalized on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK)
      throw TuningDBError(std::string("tuning database: ") + sqlite3_errmsg(db) + " in: " + sql);
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  // true while rows come; throws on error.
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw TuningDBError(std::string("tuning database: ") + sqlite3_errmsg(db_));
  }
  std::string text(int c) const {
    const auto* p = sqlite3_column_text(s_, c);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  double real(int c) const { return sqlite3_column_double(s_, c); }
  int64_t integer(int c) const { return sqlite3_column_int64(s_, c); }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

std::string halide_version() {
  return std::to_string(HALIDE_VERSION_MAJOR) + "." + std::to_string(HALIDE_VERSION_MINOR) + "." +
         std::to_string(HALIDE_VERSION_PATCH);
}

std::string shapes_of(const Program& p) {
  std::string s;
  for (const auto& in : p.inputs()) s += (s.empty() ? "" : " ") + in.name + to_string(in.shape);
  for (const auto& o : p.outputs()) s += " -> " + o + to_string(p.stage(o).shape);
  return s;
}

const char* kTrialColumns =
    "t.id, t.trial_index, t.strategy, t.schedule_json, t.genome, t.status, t.error, t.median_ms, t.min_ms, "
    "t.max_ms, t.reps, t.max_rel_error, t.compile_s";

TrialRecord read_trial(const Stmt& q) {
  TrialRecord r;
  r.id = q.integer(0);
  r.index = static_cast<int>(q.integer(1));
  r.strategy = q.text(2);
  r.schedule_json = q.text(3);
  r.genome = q.text(4);
  r.status = parse_trial_status(q.text(5));
  r.error = q.text(6);
  r.median_ms = q.real(7);
  r.min_ms = q.real(8);
  r.max_ms = q.real(9);
  r.reps = static_cast<int>(q.integer(10));
  r.max_rel_error = q.real(11);
  r.compile_s = q.real(12);
  return r;
}

}  // namespace

std::string default_db_path() {
  if (const char* e = std::getenv("PTO_TUNING_DB"); e && *e) return e;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/pto/tuning.db";
}

std::string to_string(TrialStatus s) {
  switch (s) {
    case TrialStatus::Ok: return "ok";
    case TrialStatus::CompileError: return "compile_error";
    case TrialStatus::RuntimeError: return "runtime_error";
    case TrialStatus::Crash: return "crash";
    case TrialStatus::Timeout: return "timeout";
    case TrialStatus::WrongResult: return "wrong_result";
    case TrialStatus::Invalid: return "invalid";
  }
  return "?";
}

TrialStatus parse_trial_status(const std::string& s) {
  for (TrialStatus t : {TrialStatus::Ok, TrialStatus::CompileError, TrialStatus::RuntimeError, TrialStatus::Crash,
                        TrialStatus::Timeout, TrialStatus::WrongResult, TrialStatus::Invalid})
    if (to_string(t) == s) return t;
  throw Error("unknown trial status '" + s +
              "'; valid: ok, compile_error, runtime_error, crash, timeout, wrong_result, invalid");
}

WorkloadKey WorkloadKey::of(const Program& p, const Target& t, double budget) {
  return {program_fingerprint(p), p.name(), shapes_of(p), t.halide, budget};
}

const char* schema_v1_sql() { return kV1; }

TuningDB::TuningDB(const std::string& path) : path_(path) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw TuningDBError("cannot open tuning database '" + path + "': " + msg);
  }
  sqlite3_busy_timeout(db_, 10000);  // another tuner may be writing the same file
  try {
    // WAL: readers never block the writer, and a killed writer leaves every
    // committed trial intact. synchronous=NORMAL is durable against process
    // death (only a power loss may drop the last commits).
    exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;");
    migrate();
  } catch (const Error& e) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw TuningDBError("tuning database '" + path + "': " + e.what());
  }
}

TuningDB::~TuningDB() { sqlite3_close(db_); }

void TuningDB::exec(const std::string& sql) const {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw TuningDBError("tuning database: " + msg);
  }
}

int TuningDB::schema_version() const {
  Stmt q(db_, "SELECT version FROM schema_version");
  return q.step() ? static_cast<int>(q.integer(0)) : 0;
}

void TuningDB::migrate() {
  exec("BEGIN IMMEDIATE");
  try {
    exec(kV1);
    int v = schema_version();
    if (v == 0) {
      // A fresh file (no version row, no trials) starts at v1 and migrates like an old one.
      exec("INSERT INTO schema_version(version) VALUES (1)");
      v = 1;
    }
    if (v > kSchemaVersion)
      throw TuningDBError("schema version " + std::to_string(v) + " is newer than this PTO understands (" +
                  std::to_string(kSchemaVersion) + "); use a newer pto or another --db file");
    if (v == 1) {
      exec(kV1toV2);
      v = 2;
    }
    exec("UPDATE schema_version SET version = " + std::to_string(v));
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

int64_t TuningDB::add_trial(const WorkloadKey& key, const Program& p, const TrialRecord& r) {
  exec("BEGIN IMMEDIATE");
  try {
    {
      Stmt w(db_, "INSERT OR IGNORE INTO workloads(fingerprint, program_name, shapes, program_json) VALUES (?,?,?,?)");
      w.bind(1, key.fingerprint).bind(2, key.program_name).bind(3, key.shapes).bind(4, program_to_json_string(p));
      w.step();
    }
    Stmt t(db_,
           "INSERT INTO trials(workload_id, target, pto_version, halide_version, trial_index, strategy, "
           "schedule_json, status, error, median_ms, min_ms, max_ms, reps, genome, budget, max_rel_error, compile_s) "
           "VALUES ((SELECT id FROM workloads WHERE fingerprint = ?), ?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    t.bind(1, key.fingerprint).bind(2, key.target).bind(3, std::string(PTO_VERSION)).bind(4, halide_version());
    t.bind(5, static_cast<int64_t>(r.index)).bind(6, r.strategy).bind(7, r.schedule_json).bind(8, to_string(r.status));
    t.bind(9, r.error).bind(10, r.median_ms).bind(11, r.min_ms).bind(12, r.max_ms).bind(13, static_cast<int64_t>(r.reps));
    t.bind(14, r.genome).bind(15, key.budget).bind(16, r.max_rel_error).bind(17, r.compile_s);
    t.step();
    const int64_t id = sqlite3_last_insert_rowid(db_);
    exec("COMMIT");
    return id;
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::vector<TrialRecord> TuningDB::trials(const WorkloadKey& key) const {
  Stmt q(db_, (std::string("SELECT ") + kTrialColumns +
                " FROM trials t JOIN workloads w ON t.workload_id = w.id "
                "WHERE w.fingerprint = ? AND t.target = ? AND t.budget = ? ORDER BY t.trial_index, t.id")
                   .c_str());
  q.bind(1, key.fingerprint).bind(2, key.target).bind(3, key.budget);
  std::vector<TrialRecord> r;
  while (q.step()) r.push_back(read_trial(q));
  return r;
}

std::optional<TrialRecord> TuningDB::best(const WorkloadKey& key) const {
  Stmt q(db_, (std::string("SELECT ") + kTrialColumns +
                " FROM trials t JOIN workloads w ON t.workload_id = w.id "
                "WHERE w.fingerprint = ? AND t.target = ? AND t.budget <= ? AND t.status = 'ok' "
                "ORDER BY t.median_ms LIMIT 1")
                   .c_str());
  q.bind(1, key.fingerprint).bind(2, key.target).bind(3, key.budget);
  if (!q.step()) return std::nullopt;
  return read_trial(q);
}

std::optional<TrialRecord> TuningDB::best_of(const WorkloadKey& key, const std::string& schedule_json) const {
  Stmt q(db_, (std::string("SELECT ") + kTrialColumns +
                " FROM trials t JOIN workloads w ON t.workload_id = w.id "
                "WHERE w.fingerprint = ? AND t.target = ? AND t.budget <= ? AND t.status = 'ok' "
                "AND t.schedule_json = ? ORDER BY t.median_ms LIMIT 1")
                   .c_str());
  q.bind(1, key.fingerprint).bind(2, key.target).bind(3, key.budget).bind(4, schedule_json);
  if (!q.step()) return std::nullopt;
  return read_trial(q);
}

std::vector<RelatedTrial> TuningDB::related_trials(const WorkloadKey& key, int limit) const {
  Stmt q(db_,
         "SELECT w.program_json, t.schedule_json, t.median_ms, "
         "(SELECT MIN(d.median_ms) FROM trials d WHERE d.workload_id = t.workload_id AND d.target "
         "= t.target "
         "AND d.strategy = 'default' AND d.status = 'ok') AS def "
         "FROM trials t JOIN workloads w ON t.workload_id = w.id "
         "WHERE w.program_name = ? AND w.fingerprint != ? AND t.target = ? AND t.budget <= ? AND "
         "t.status = 'ok' "
         "AND def IS NOT NULL ORDER BY t.id DESC LIMIT ?");
  q.bind(1, key.program_name).bind(2, key.fingerprint).bind(3, key.target).bind(4, key.budget);
  q.bind(5, static_cast<int64_t>(limit));
  std::vector<RelatedTrial> r;
  while (q.step()) r.push_back({q.text(0), q.text(1), q.real(2), q.real(3)});
  return r;
}

Schedule best_schedule(const std::string& db_path, const Program& p, const Target& t, std::string* source) {
  auto say = [&](const std::string& s) {
    if (source) *source = s;
  };
  if (!std::filesystem::exists(db_path)) {
    say("default schedule (no tuning database at " + db_path + ")");
    return default_schedule(p, t);
  }
  try {
    const TuningDB db(db_path);
    const WorkloadKey key = WorkloadKey::of(p, t, 0);
    if (auto r = db.best(key)) {
      const Schedule def = default_schedule(p, t);
      const std::string def_json = schedule_to_json_string(def, -1);
      const auto d = db.best_of(key, def_json);
      const std::string refresh = "; run `pto tune " + p.name() + "` to refresh the tuning database " + db_path + ")";
      if (!d) {
        say("default schedule (the tuned records were not measured against the current default schedule, which "
            "may be faster" + refresh);
        return def;
      }
      if (r->schedule_json == def_json || d->median_ms <= r->median_ms) {
        say("default schedule (measured at " + std::to_string(d->median_ms) + " ms in " + db_path +
            ", no tuned record is faster)");
        return def;
      }
      say("tuned schedule (trial " + std::to_string(r->index) + " in " + db_path + ", " +
          std::to_string(r->median_ms) + " ms; the current default measured " + std::to_string(d->median_ms) + " ms)");
      return schedule_from_json_string(r->schedule_json);
    }
    say("default schedule (no tuned record for this workload and target in " + db_path + ")");
  } catch (const Error& e) {
    say(std::string("default schedule (tuning database unusable: ") + e.what() + ")");
  }
  return default_schedule(p, t);
}

}  // namespace pto::tuner
