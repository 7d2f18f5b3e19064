// trnsim tune SWEEP.json [--budget N] [--objective COLUMN] [--maximize|--minimize] [--seed S] [--jobs N]
//                        [--out DIR] [--write FILE] [--no-report] [--timeout S]
// Searches a sweep's space for the best point by an objective within a budget of evaluations and prints the
// best point as a ready workload file (tools/sweep/tune.h says which search and why).
#include <memory>

#include "tools/sweep/tune.h"
#include "tools/trnsim/commands.h"
#include "tools/trnsim/run_log.h"

namespace trnsim::cli {

void add_tune_command(CLI::App& app) {
  auto o = std::make_shared<sweep::TuneOptions>();
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Search a sweep's space for the best point (total_time_ns by default) within a budget of evaluations; "
      "print it as a workload file");
  cmd->add_option("sweep", *file, "sweep .json (configs/sweeps/)")->required();
  cmd->add_option("--budget", o->budget, "points evaluated at most (default 100)")
      ->check(CLI::Range(1, 10000000));
  cmd->add_option("--objective", o->objective,
                  "results column to optimise (default: the sweep's \"objective\", else total_time_ns)");
  cmd->add_flag(
      "--maximize", [o](int64_t) { o->maximize = o->maximize_given = true; }, "highest value wins");
  cmd->add_flag(
      "--minimize", [o](int64_t) { o->maximize = false, o->maximize_given = true; }, "lowest value wins");
  cmd->add_option("--seed", o->seed, "seed of the random phase (default 1)");
  cmd->add_option("--jobs,-j", o->jobs, "worker processes (default: the cores)")->check(CLI::Range(1, 4096));
  cmd->add_option("--out", o->out, "the tune's folder (default out/tune/<name>)");
  cmd->add_option("--write", o->write, "the best workload file (default DIR/best_workload.json)");
  add_overwrite_option(cmd);
  add_log_options(cmd);
  cmd->add_flag(
      "--no-report", [o](int64_t) { o->report = false; }, "no HTML report");
  add_timeout_option(cmd, o->timeout_seconds);
  cmd->callback([o, file] {
    int rc = 0;
    on_file(*file, [&] { rc = sweep::run_tune(*file, *o); });
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace trnsim::cli
