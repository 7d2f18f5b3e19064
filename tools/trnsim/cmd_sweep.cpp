// trnsim sweep SWEEP.json [--out DIR] [--jobs N] [--yes] [--rerun] [--keep-stats] [--no-report] [--timeout S]
//                         [--backend local|slurm] [--max-running N] [--points-per-task N] [--sbatch-arg A
//                         ...]
//                         [--wait [--wait-timeout S]]
// trnsim sweep status DIR | collect DIR [--no-report] | resubmit DIR [Slurm options]
// Sweeps (docs/sweeps.md): the points of a sweep file, each a `trnsim run` of the base workload with the
// point's --set assignments, on a local pool of worker processes or as a Slurm job array; results as CSV,
// JSON lines and an HTML report (tools/sweep/sweep.h).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/log.h"
#include "tools/sweep/point_check.h"
#include "tools/sweep/slurm.h"
#include "tools/sweep/spec.h"
#include "tools/sweep/sweep.h"
#include "tools/trnsim/commands.h"
#include "tools/trnsim/run_log.h"

namespace trnsim::cli {
namespace {

struct SweepCliOptions {
  std::string file, dir, backend = "local";
  sweep::SweepOptions local;
  sweep::SlurmOptions slurm;
  int task = -1;
  bool dry_run = false;
  // `trnsim sweep check` (a point's check in a child process, tools/sweep/point_check.h)
  std::string check_workload;
  std::vector<std::string> check_sets;
  int result_fd = -1;
};

void add_slurm_options(CLI::App* cmd, sweep::SlurmOptions& s) {
  cmd->add_option("--max-running", s.max_running,
                  "slurm: array tasks running at once (sbatch --array=...%N; default 8)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--points-per-task", s.points_per_task,
                  "slurm: points each array task runs (default: about 100 tasks)")
      ->check(CLI::Range(1, 100000000));
  cmd->add_option("--sbatch-arg", s.sbatch_args,
                  "slurm: an sbatch option, e.g. --sbatch-arg=--partition=cpu (repeatable)")
      ->allow_extra_args(false);
  cmd->add_flag("--wait", s.wait, "slurm: wait for the job array to end, then collect");
  cmd->add_option("--wait-timeout", s.wait_timeout_seconds,
                  "slurm: with --wait, give up after this many seconds")
      ->check(CLI::Range(0.0, 1e9));
}

// --dry-run: the points and trnsim validate's verdict on each, nothing run or written.
int dry_run(const SweepCliOptions& o) {
  const sweep::Spec spec = sweep::parse_spec(o.file);
  const sweep::Enumeration e =
      sweep::enumerate(spec, o.local.yes ? sweep::kMaxPoints : sweep::kConfirmPoints);
  nlohmann::json plan = sweep::plan_header(spec);
  sweep::check_all(spec, e.points, plan, o.local.timeout_seconds);
  size_t invalid = 0;
  for (const nlohmann::json& pt : plan["points"]) {
    const bool bad = pt.contains("invalid") || pt.contains("failed");
    invalid += bad;
    std::printf("%s%s %s: %s\n", pt["index"].dump().c_str(),
                pt.contains("label") ? (" '" + pt["label"].get<std::string>() + "'").c_str() : "",
                fmt::format("{}", fmt::join(pt["sets"].get<std::vector<std::string>>(), " ")).c_str(),
                bad ? (pt.contains("failed") ? "failed: " + pt["failed"].get<std::string>()
                                             : "invalid: " + pt["invalid"].get<std::string>())
                          .c_str()
                    : "ok");
  }
  std::printf("%s: %zu points (%llu of the product skipped by the constraints): %zu valid, %zu invalid\n",
              spec.name.c_str(), e.points.size(), static_cast<unsigned long long>(e.excluded),
              e.points.size() - invalid, invalid);
  return 0;
}

int run_sweep(SweepCliOptions& o) {
  if (o.dry_run) return dry_run(o);
  if (o.backend == "local") return sweep::run_local(o.file, o.local);
  const sweep::Spec spec = sweep::parse_spec(o.file);
  const sweep::Enumeration e =
      sweep::enumerate(spec, o.local.yes ? sweep::kMaxPoints : sweep::kConfirmPoints);
  const std::string dir = sweep::sweep_dir(spec, o.local.out);
  const io::DirLock lock = sweep::prepare_dir(dir, spec.name);
  nlohmann::json plan = sweep::plan_header(spec);
  log::info(fmt::format("sweep {}: checking {} points before submitting them", spec.name, e.points.size()));
  sweep::check_all(spec, e.points, plan, o.local.timeout_seconds);
  sweep::write_plan(dir, plan);
  o.slurm.keep_stats = o.local.keep_stats;
  o.slurm.timeout_seconds = o.local.timeout_seconds;
  o.slurm.report = o.local.report;
  return sweep::slurm_submit(dir, o.slurm);
}

}  // namespace

void add_timeout_option(CLI::App* cmd, double& seconds) {
  cmd->add_option("--timeout", seconds,
                  "seconds a point may run, or a Python kernel's point be checked, before it is stopped (an "
                  "error row)")
      ->check(CLI::Range(0.0, 1e9));
}

void add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepCliOptions>();
  CLI::App* cmd = app.add_subcommand("sweep",
                                     "Run a sweep: a base workload over axes of --set values "
                                     "(configs/sweeps/, docs/sweeps.md), locally or as "
                                     "a Slurm job array; results as CSV, JSON lines and an HTML report");
  cmd->require_subcommand(0, 1);
  cmd->add_option("sweep", o->file, "sweep .json (configs/sweeps/)");
  cmd->add_option("--out", o->local.out,
                  "the sweep's folder (default out/sweeps/<name>): rows are kept there, so a "
                  "rerun goes on where the last one stopped");
  cmd->add_option("--jobs,-j", o->local.jobs, "worker processes (default: the cores)")
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--yes", o->local.yes,
                fmt::format("run a sweep of more than {} points", sweep::kConfirmPoints));
  cmd->add_flag("--dry-run", o->dry_run,
                "list the points and check each as trnsim validate does; run nothing");
  cmd->add_flag("--rerun", o->local.rerun,
                "run every point again, ignoring kept rows (after changing trnsim itself)");
  cmd->add_flag("--keep-stats", o->local.keep_stats, "keep each point's stats.json as DIR/stats/<key>.json");
  cmd->add_flag(
      "--no-report", [o](int64_t) { o->local.report = false; }, "no HTML report");
  add_timeout_option(cmd, o->local.timeout_seconds);
  add_log_options(cmd);
  cmd->add_option("--backend", o->backend,
                  "local (a pool of worker processes, default) or slurm (sbatch --array)")
      ->check(CLI::IsMember({"local", "slurm"}));
  add_slurm_options(cmd, o->slurm);
  add_overwrite_option(cmd);
  cmd->callback([o, cmd] {
    if (!cmd->get_subcommands().empty()) return;
    if (o->file.empty())
      throw InputError(
          "trnsim sweep: give a sweep file (configs/sweeps/*.json), or status/collect/resubmit DIR");
    int rc = 0;
    on_file(o->file, [&] { rc = run_sweep(*o); });
    if (rc != 0) throw CLI::RuntimeError(rc);
  });

  CLI::App* status = cmd->add_subcommand(
      "status", "Count a sweep's finished, failed and missing points; ask squeue about its Slurm jobs");
  status->add_option("dir", o->dir, "the sweep's folder")->required();
  add_log_options(status);
  status->callback([o] { on_file(o->dir, [&] { sweep::sweep_status(o->dir); }); });

  CLI::App* collect = cmd->add_subcommand(
      "collect", "Write a sweep's results.csv, results.jsonl and HTML report from its rows");
  collect->add_option("dir", o->dir, "the sweep's folder")->required();
  collect->add_flag(
      "--no-report", [o](int64_t) { o->local.report = false; }, "no HTML report");
  add_overwrite_option(collect);
  add_log_options(collect);
  collect->callback([o] { on_file(o->dir, [&] { sweep::collect(o->dir, o->local.report); }); });

  CLI::App* resubmit =
      cmd->add_subcommand("resubmit", "Submit a sweep's failed or missing points to Slurm again");
  resubmit->add_option("dir", o->dir, "the sweep's folder")->required();
  add_slurm_options(resubmit, o->slurm);
  resubmit->add_flag(
      "--no-report", [o](int64_t) { o->slurm.report = false; }, "no HTML report (with --wait)");
  add_overwrite_option(resubmit);
  add_log_options(resubmit);
  resubmit->callback([o] {
    int rc = 0;
    on_file(o->dir, [&] { rc = sweep::slurm_submit(o->dir, o->slurm); });
    if (rc != 0) throw CLI::RuntimeError(rc);
  });

  // Run by the sweep for a point whose kernel is Python (point_check.h), not by hand.
  CLI::App* check = cmd->add_subcommand("check", "");
  check->group("");
  check->add_option("workload", o->check_workload)->required();
  check->add_option("--set", o->check_sets)->allow_extra_args(false);
  check->add_option("--result-fd", o->result_fd)->required();
  check->callback([o] { sweep::check_point_to_fd(o->check_workload, o->check_sets, o->result_fd); });

  // Run by each Slurm array task (job.sh), not by hand.
  CLI::App* task = cmd->add_subcommand("task", "");
  task->group("");
  task->add_option("submission", o->dir, "DIR/slurm/<n>")->required();
  task->add_option("--task", o->task, "the array task id")->required();
  task->callback([o] {
    const char* cpus = std::getenv("SLURM_CPUS_PER_TASK");
    const int jobs = cpus ? std::max(1, std::atoi(cpus)) : 1;
    on_file(o->dir, [&] { sweep::slurm_task(o->dir, o->task, jobs); });
  });
}

}  // namespace trnsim::cli
