// The HTML reports are drawn by Python scripts with matplotlib (tools/report/*.py), run with Debian's
// /usr/bin/python3 (python3-matplotlib; TRNSIM_PYTHON overrides the interpreter). A script is looked up as
// tools/report/<name> in the trnsim binary's folder or any of its ancestors, then in the source tree.
#pragma once

#include <string>
#include <vector>

namespace trnsim::sweep {

// Runs tools/report/<script> with `args`; its output goes to stderr. InputError naming what is missing
// (the interpreter, the script, matplotlib) or the script's exit status.
void run_report_script(const std::string& script, const std::vector<std::string>& args);

}  // namespace trnsim::sweep
