// The trnsim subcommands. Each lives in its own cmd_<name>.cpp and registers itself on the app; main.cpp
// calls every add_*_command in turn. A command reports bad input by throwing trnsim::Error (main prints
// "trnsim: error: <message>" and exits 1).
#pragma once

#include <CLI/CLI.hpp>

#include <new>
#include <string>

#include "sim/base/error.h"

namespace trnsim::cli {

// Runs a command's work on `file`; running out of host memory becomes an InputError naming the file
// ("<file>: out of memory ...") instead of a bare "out of memory".
template <typename F>
void on_file(const std::string& file, F&& work) {
  try {
    work();
  } catch (const std::bad_alloc&) {
    throw InputError(file + ": out of memory (the host cannot hold what this input asks for)");
  }
}

// trnsim quantize IN.npy --format --rule --axis [--layout te|x4] [--scale-layout | --quant-scheme
// --use-scale-packing] --data --scales [--dequant] [--threads]; or --axis --layout bf16-swizzled
// [--quant-scheme]
// --data
void add_quantize_command(CLI::App& app);

// trnsim run PROGRAM.json [--out DIR] [--no-numerics] [--set path=value ...] [--hw trn2|trn3|FILE]
void add_run_command(CLI::App& app);

// trnsim validate WORKLOAD.json [--set path=value ...]
void add_validate_command(CLI::App& app);

// trnsim list [KERNEL] [--json]
void add_list_command(CLI::App& app);

// trnsim stats FILE.json [--lines N] | trnsim stats --compare A.json B.json (alias: summary)
void add_stats_command(CLI::App& app);

// trnsim sweep SWEEP.json [...] | trnsim sweep status|collect|resubmit DIR (docs/sweeps.md)
void add_sweep_command(CLI::App& app);

// trnsim tune SWEEP.json [--budget N] [--objective COLUMN] [...] (docs/sweeps.md)
void add_tune_command(CLI::App& app);

// --overwrite of every command that writes files: an output may replace a file at its path that no trnsim
// record lists, or that changed since trnsim wrote it (refused otherwise, before any work:
// sim/io/replace_check.h).
void add_overwrite_option(CLI::App* cmd);

// --timeout S of trnsim sweep and trnsim tune: seconds a point may run (or be checked) before it is stopped.
void add_timeout_option(CLI::App* cmd, double& seconds);

}  // namespace trnsim::cli
