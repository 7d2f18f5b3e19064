// The HTML reports are drawn by Python scripts with matplotlib (tools/report/*.py), run with Debian's
// /usr/bin/python3 (python3-matplotlib; TRNSIM_PYTHON overrides the interpreter). A script is taken from the
// source tree trnsim was built from (recorded at build time), never from a folder found relative to the
// binary. The scripts draw into a private staging folder; the caller writes the pages and plots they drew
// with its other outputs as one set (sim/io/output_files.h: all or nothing, the folder locked, never a
// user's file replaced by halves), so a report is never drawn from a file another run replaced meanwhile.
#pragma once

#include <string>
#include <vector>

#include "sim/io/output_files.h"

namespace trnsim::sweep {

// The run report of the stats.json text `stats_text` (of a run whose output folder is `run_dir`, which
// only names the page when the stats have no workload or program name), for `html_path`; `host_text` is the
// run's host.json (its host time, run::host_json_text), "" when there is none. Nothing is written.
// InputError naming what is missing (the interpreter, the script, matplotlib) or the script's exit status.
std::vector<io::OutputFile> draw_run_report(const std::string& stats_text, const std::string& run_dir,
                                            const std::string& html_path, const std::string& host_text = "");

// The sweep report of the sweep folder `dir` (its plan and results): DIR/report.html and each plot as
// DIR/plots/<name>.svg and .png (the caller makes DIR/plots). Nothing is written. Errors as draw_run_report.
std::vector<io::OutputFile> draw_sweep_report(const std::string& dir);

}  // namespace trnsim::sweep
