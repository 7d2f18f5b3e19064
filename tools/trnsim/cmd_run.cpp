// trnsim run WORKLOAD.json | PROGRAM.json [--out DIR] [--no-numerics] [--set path=value ...] [--hw ...]
//            [--trace FILE.pftrace|FILE.json] [--dump-inputs] [--full-reference]
// A workload (a top-level "kernel" key) goes through the kernel registry (run_workload.cpp); a pipeline file
// (a "stages" key) or a workload reading other workloads' outputs runs as a chain (run_chain.cpp); anything
// else is an instruction-stream program (run_program.cpp). Both run through sim/run/session.h.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "kernels/workload/chain.h"
#include "kernels/workload/workload.h"
#include "kernels/workload/workload_run.h"
#include "sim/base/env_bytes.h"
#include "sim/base/error.h"
#include "sim/base/resident_governor.h"
#include "sim/config/hw_names.h"
#include "tools/sweep/report_script.h"
#include "tools/trnsim/commands.h"
#include "tools/trnsim/run_log.h"
#include "tools/trnsim/run_options.h"

namespace trnsim::cli {

void add_run_command(CLI::App& app) {
  auto opts = std::make_shared<RunCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run a workload (a kernel with its parameters and inputs: configs/workloads/) or an instruction-stream "
      "program (docs/program-format.md) on the simulated LNC=2 pair");
  cmd->add_option("config", opts->config, "workload JSON (has a \"kernel\" key) or program JSON")->required();
  cmd->add_option(
      "--out", opts->out,
      "output directory (created if missing): stats.json and the output tensors (.npy); workloads "
      "default to out/<name>, programs to the current directory");
  cmd->add_option("--hw", opts->hw,
                  fmt::format("hardware config: {} or a JSON file (default: the program's generation)",
                              fmt::join(config::known_hw_configs(), ", ")));
  cmd->add_option("--set", opts->sets,
                  "override a value: for a workload any key, e.g. --set params.M=512 or "
                  "--set hardware.overrides.hbm.bandwidth_GBps=600; for a program a hardware parameter, "
                  "e.g. --set hbm.bandwidth_GBps=600");
  cmd->add_flag("--no-numerics", opts->no_numerics, "timing only: no functional results, no outputs");
  cmd->add_flag("--dump-inputs", opts->dump_inputs,
                "workload configs: also write the inputs used (DIR/inputs/)");
  cmd->add_flag("--full-reference", opts->full_reference,
                "workload configs: compute the FP64 host references on every output row (large outputs are "
                "otherwise checked on an evenly spaced sample of rows)");
  cmd->add_option("--trace", opts->trace,
                  "write a trace while running: FILE.pftrace (Perfetto) or FILE.json");
  cmd->add_flag("--replace-stage", opts->replace_stage,
                "let --out be a folder inside another run's set, e.g. a finished chain's stage folder "
                "OUT/<stage> (refused otherwise): the run replaces that stage's files, and trnsim stats "
                "then says the chain's set is mixed");
  add_overwrite_option(cmd);
  add_log_options(cmd);
  auto report = std::make_shared<std::string>();
  cmd->add_option("--report", *report,
                  "also write an HTML report of the run (engine time, critical path, roofline, source lines, "
                  "numerics) to FILE.html");
  cmd->callback([opts, cmd, report] {
    if (cmd->get_option("--report")->count() > 0 && report->empty())
      throw InputError("--report: empty file name");
    std::error_code ec;
    if (!report->empty() && std::filesystem::is_directory(*report, ec))
      throw InputError("--report " + *report + ": cannot write: it is a directory");
    opts->out_given = cmd->get_option("--out")->count() > 0;
    if (opts->out_given && opts->out.empty()) throw InputError("--out: empty directory name");
    if (cmd->get_option("--trace")->count() > 0 && opts->trace.empty())
      throw InputError("--trace: empty file name");
    opts->report = *report;
    int rc = 0;
    // Large .npy inputs are read through mappings and large tensors live in scratch files in the output
    // folder once it exists (sim/base/host_bytes.h): memory the OS can page.
    set_pageable(true);
    // Their pages leave the process's resident set once it holds more of them than its budget: at the
    // run's safe points, and shared ones also within a step that touches GBs (a weight generated or
    // scanned whole), checked every 50 ms.
    resident::start(std::nullopt);
    resident::watch(std::chrono::milliseconds(50));
    // Read by workloads and chains only (run_workload.cpp), refused when malformed for every input alike.
    (void)env_byte_count("TRNSIM_SCRATCH_IN_MEMORY_BYTES");
    on_file(opts->config, [&] {
      if (workload::is_pipeline_file(opts->config) ||
          (workload::is_workload_file(opts->config) &&
           workload::has_chained_inputs(opts->config, opts->sets))) {
        if (!opts->hw.empty())
          throw InputError("--hw applies to program JSON; a chain's workloads name their hardware");
        rc = run_chain_file(*opts);
      } else if (workload::is_workload_file(opts->config)) {
        if (!opts->hw.empty())
          throw InputError(
              "--hw applies to program JSON; a workload names its hardware (use --set hardware=...)");
        rc = run_workload_file(*opts);
      } else {
        if (opts->dump_inputs) throw InputError("--dump-inputs applies to workload configs only");
        if (opts->full_reference) throw InputError("--full-reference applies to workload configs only");
        rc = run_program_file(*opts);
      }
    });
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace trnsim::cli
