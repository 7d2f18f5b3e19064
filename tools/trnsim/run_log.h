// The messages' options every command takes, and a run's log file (sim/base/log.h).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "sim/base/log.h"
#include "sim/io/output_files.h"

namespace trnsim::cli {

// --log-level trace|debug|info|warn|error|off, --quiet (errors only) and --verbose (debug): which messages
// reach stderr (info by default). The command's result on stdout is printed whatever the level.
void add_log_options(CLI::App* cmd);

// OUT/trnsim.log holding what `record` holds: one file of the run's set in `out_dir`, written and recorded
// with the others (OutDir::commit), so a kill leaves the earlier run's log or this one whole, never part of
// it. Messages after the set is written (the summary's notes, the host time) are on stderr only.
io::OutputFile run_log_file(const std::string& out_dir, const log::Record& record);

}  // namespace trnsim::cli
