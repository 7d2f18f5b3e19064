// A sweep's results: one row per point. Each finished point's row is kept in DIR/points/<key>.json (written
// all or nothing, by the local pool or a Slurm task); results.csv and results.jsonl list every point of the
// plan in sweep order with its axis values and its row.
//
// Row (points/<key>.json): {"key", "status": "ok" | "numerics_fail" | "error", "error": message,
//   "metrics": {column: value}, "host_seconds": wall time of the point's trnsim run}.
// Invalid points (trnsim validate failed) are not run and not kept: the plan holds their reason.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace trnsim::sweep {

// A column of the results and where it comes from in stats.json (sim/run/stat_defs.cpp defines each).
struct Metric {
  const char* column;
  const char* stats_path;  // dotted
  const char* unit;
};
const std::vector<Metric>& metrics();
bool is_metric(const std::string& column);

// The metric columns of a run's stats.json (null where the file has no such value); numerics_pass is true
// when every check passed, false when one failed, null without numerics.
nlohmann::json metrics_of(const nlohmann::json& stats);

std::string points_dir(const std::string& dir);
std::string row_path(const std::string& dir, const std::string& key);
// The kept row of `key`, or null if there is none (or it cannot be read: check_rows refuses such a file
// before a sweep runs).
nlohmann::json read_row(const std::string& dir, const std::string& key);
// The row in the file `path` for `key`, or null (`why`, if given, says what is wrong).
nlohmann::json read_row_file(const std::string& path, const std::string& key, std::string* why = nullptr);
// InputError "<DIR/points/K.json>: <what is wrong>: ..." for a file there named like a row (K.json, not
// hidden) that is no readable row of point K: a symlink, not a regular file, not JSON, another key. Such a
// file is the user's or a damaged row and is never replaced unread.
void check_rows(const std::string& dir);
void write_row(const std::string& dir, const nlohmann::json& row);

// True if a row is final: ok or numerics_fail (an error is redone by a rerun).
bool row_done(const nlohmann::json& row);

// The records of results.jsonl / results.csv for a plan (plan.json) and its rows: index, label, the
// columns, status, the metrics, host_seconds, key, error.
std::vector<nlohmann::ordered_json> result_records(const nlohmann::json& plan, const std::string& dir);
// Writes DIR/results.csv and DIR/results.jsonl together (all or nothing).
void write_results(const std::string& dir, const nlohmann::json& plan,
                   const std::vector<nlohmann::ordered_json>& records);
std::string csv_text(const nlohmann::json& plan, const std::vector<nlohmann::ordered_json>& records);

}  // namespace trnsim::sweep
