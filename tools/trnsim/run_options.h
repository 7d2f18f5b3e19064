// The options of `trnsim run` and its two paths: programs (run_program.cpp) and workloads (run_workload.cpp).
#pragma once

#include <string>
#include <vector>

#include "tools/trnsim/host_memory.h"

namespace trnsim::workload {
struct PreparedWorkload;
}

namespace trnsim::cli {

struct RunCliOptions {
  std::string config;  // workload or program JSON
  std::string out;     // "" = default (workloads: out/<name>; programs: the current directory)
  bool out_given = false;
  std::string hw;  // programs only
  bool no_numerics = false;
  std::vector<std::string> sets;
  bool dump_inputs = false;     // workloads only
  bool full_reference = false;  // workloads only
  std::string trace;            // .pftrace / .json, written while the model runs
  std::string report;           // "" = none; else the HTML report, written with the run's other files
  bool replace_stage = false;   // --replace-stage: --out may be a folder inside another run's set
};

// After the run folder is locked: InputError when `out_dir` lies inside another run's recorded set (a
// chain's stage folder, sim/io/enclosing_set.h), unless --replace-stage.
void check_out_not_in_a_set(const RunCliOptions& o, const std::string& out_dir);

// Exit codes of `trnsim run` besides 0 and 1 (bad input): kernels/workload/workload_run.h.

int run_program_file(const RunCliOptions& o);
int run_workload_file(const RunCliOptions& o);
// A pipeline file, or a workload whose inputs are other workloads' outputs (run_chain.cpp).
int run_chain_file(const RunCliOptions& o);

// What the run of `p` needs of host memory and disk (run_workload.cpp; `trace`, `report`: its --trace and
// --report, "" for none).
HostMemoryNeed host_memory_need(const workload::PreparedWorkload& p, bool dump_inputs,
                                const std::string& trace, const std::string& report = "");
// InputError when this machine cannot hold what the run of `p` into `out_dir` needs (host_memory.h); else
// whether its large tensors are to be memory files (scratch_in_memory: then counted as RAM, not disk).
bool check_host_memory(const workload::PreparedWorkload& p, bool dump_inputs, const std::string& out_dir,
                       const std::string& trace, const std::string& report = "");

}  // namespace trnsim::cli
