// The trnsim subcommands. Each lives in its own cmd_<name>.cpp and registers itself on the app; main.cpp
// calls every add_*_command in turn. A command reports bad input by throwing trnsim::Error (main prints
// "trnsim: error: <message>" and exits 1).
#pragma once

#include <CLI/CLI.hpp>

namespace trnsim::cli {

// trnsim quantize IN.npy --format --rule --axis [--scale-layout] --data --scales [--dequant] [--threads]
void add_quantize_command(CLI::App& app);

// trnsim run PROGRAM.json [--out DIR] [--no-numerics] [--set path=value ...] [--hw trn2|trn3|FILE]
void add_run_command(CLI::App& app);

// trnsim validate WORKLOAD.json [--set path=value ...]
void add_validate_command(CLI::App& app);

// trnsim list [KERNEL] [--json]
void add_list_command(CLI::App& app);

// trnsim stats FILE.json [--lines N] | trnsim stats --compare A.json B.json (alias: summary)
void add_stats_command(CLI::App& app);

}  // namespace trnsim::cli
