// Running a sweep (docs/sweeps.md): its folder, its plan (every point with its key or why it is invalid),
// the local backend (a pool of `trnsim run` children), collecting the rows into results.csv, results.jsonl
// and the HTML report.
//
// DIR (default out/sweeps/<name>):
//   plan.json                the points in sweep order: values, --set assignments, key or invalid reason
//   points/<key>.json        one row per finished point (results.h), shared by reruns, tune and Slurm tasks
//   results.csv, .jsonl      every point of the plan with its row
//   report.html, plots/      the HTML report (inline SVG) and each plot as SVG and PNG
//   stats/<key>.json         each point's stats.json (--keep-stats)
//   slurm/<n>/               a Slurm submission (slurm.h)
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/io/dir_lock.h"
#include "tools/sweep/spec.h"

namespace trnsim::sweep {

struct SweepOptions {
  std::string out;     // "" = out/sweeps/<name>
  int jobs = 0;        // 0 = the cores
  bool yes = false;    // run more than kConfirmPoints points
  bool rerun = false;  // ignore kept rows (after a change to the simulator itself)
  bool keep_stats = false;
  bool report = true;
  double timeout_seconds = 0;
};

// Points above which a sweep asks for --yes; beyond kMaxPoints it is refused.
inline constexpr uint64_t kConfirmPoints = 20000;
inline constexpr uint64_t kMaxPoints = 10'000'000;

std::string sweep_dir(const Spec& spec, const std::string& out);
// Checks that DIR is this sweep's folder or a new one (InputError if it holds another sweep or other files),
// creates it and locks it (sim/io/dir_lock.h) for as long as the returned lock lives: a second sweep or tune
// into DIR is refused at once (InputError) instead of interleaving its plan and results with this one's.
[[nodiscard]] io::DirLock prepare_dir(const std::string& dir, const std::string& sweep_name);
// InputError when one of the sweep's files or folders in DIR (plan.json, results.csv, results.jsonl,
// report.html, best_workload.json; points/, plots/, stats/, .runs/) is a symlink (a write through it would
// replace the user's files: io::check_no_links), a file is a folder or a folder a file, or a file under
// points/ named like a row is not one (check_rows), or results.csv, results.jsonl or report.html may not be
// replaced (io::check_may_replace: edited since trnsim wrote it, or unrecorded, without --overwrite).
// prepare_dir and collect call it before anything runs.
void check_sweep_folder(const std::string& dir);
// The jobs to use: `jobs`, or the cores this process may run on.
int default_jobs(int jobs);

// A plan's header (no points yet).
nlohmann::json plan_header(const Spec& spec);
nlohmann::json plan_point(const Point& p);
nlohmann::json read_plan(const std::string& dir);
void write_plan(const std::string& dir, const nlohmann::json& plan);

// Validates every point of `points` in-process and records its key or reason in `plan` (printing progress).
void check_all(const Spec& spec, const std::vector<Point>& points, nlohmann::json& plan,
               double timeout_seconds = 0);

// trnsim sweep SWEEP.json (local backend). Returns the exit code.
int run_local(const std::string& sweep_file, const SweepOptions& o);

// Writes results.csv, results.jsonl and (unless !report) the HTML report of DIR's plan; prints a summary
// with the best point by the plan's objective. Returns the number of points without a final row.
size_t collect(const std::string& dir, bool report);

// The best row of DIR's plan by its objective (null if none ran).
nlohmann::ordered_json best_record(const nlohmann::json& plan,
                                   const std::vector<nlohmann::ordered_json>& records);

}  // namespace trnsim::sweep
