// The report of one run: stats.json and the table `trnsim run` prints (which `trnsim stats` prints again
// from a stats.json, and `trnsim stats --compare A B` puts side by side). Every key is declared once in
// sim/run/stat_defs.cpp with its unit and meaning; stats.json's "definitions" come from there.
//
// Figures:
//   peak          PE 128 x 128 MACs x 2 FLOP x PE clock x dtype factor x physical cores used; dtype factor 1
//                 (BF16/FP16 nc_matmul), 2 (FP8 double_row), 4 (nc_matmul_mx): the fastest matmul the program
//                 issues (hardware fact sheet §1.3: 78.6 TFLOP/s BF16 per core at 2.4 GHz)
//   useful FLOPs  the kernel's declared FLOPs (2 M N K per matmul output), else the model's PE FLOPs
//   roofline      max(useful FLOPs / peak, compulsory HBM bytes / HBM bandwidth); compulsory bytes = the
//                 kernel's inputs and outputs read or written once (programs: tensors with "init" or
//                 "output")
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"
#include "sim/model/run.h"
#include "sim/model/stats_observer.h"
#include "sim/run/session.h"
#include "sim/tensor/check_result.h"

namespace trnsim::run {

// The check results the report prints: the type is sim/tensor's, below both the kernels layer (which makes
// them, kernels/api/checks.h) and sim/run.
using tensor::CheckMetric;
using tensor::CheckResult;
using tensor::kCheckBitExact;
using tensor::kCheckScalar;
using tensor::kCheckTolerance;

// A figure a kernel computes from its inputs (e.g. tokens per expert), reported under "kernel_stats".
struct NamedStat {
  std::string name;
  double value = 0;
  std::string unit;
  std::string description;
};

struct RunReport {
  std::string workload, kernel, hardware;
  std::string hardware_config;         // the hardware config file read (absolute path)
  std::string hardware_config_sha256;  // its SHA-256 as read
  std::string program;                 // program JSON path (program runs; workload and kernel are then empty)
  nlohmann::json params = nlohmann::json::object();
  int cores = 2;
  model::RunStats stats;
  model::ProfileStats profile;
  std::vector<std::string> files;  // the program's source files (index = SourceLoc::file)
  int dtype_factor = 1;
  std::string dtype_label = "bf16";
  double peak_flops_per_ns = 0;
  double useful_flops = 0;
  bool flops_from_reference = false;
  double compulsory_hbm_bytes = 0;
  double hbm_bandwidth_GBps = 0;
  double roofline_ns = 0;
  bool numerics_run = false;
  std::string numerics_note;  // why there is no numerics report, if there is none
  std::vector<CheckResult> checks;
  std::vector<NamedStat> kernel_stats;
  nlohmann::json allocations = nlohmann::json::array();  // "allocations" rows (stat_defs), set by the caller
  nlohmann::json nki = nullptr;  // a Python kernel's front-end record (stats.json "nki", free-form), or null
  std::vector<std::string> notes;  // what the reader should know about the run (e.g. inputs holding NaN)
  TraceSummary trace;
  // Host time of the whole command, s: never in stats.json (which is the same bytes on every run), written
  // to OUT/host.json beside it (host_json_text).
  double wall_seconds = 0;
};

// OUT/host.json of a run: what differs between identical runs, kept out of stats.json:
//   {"trnsim_host": 1, "wall_seconds": <host time of the whole command, s>}
inline constexpr const char* kHostFileName = "host.json";
std::string host_json_text(const RunReport& r);

// Fastest matmul dtype factor in `program` (1 without matmuls) and its label ("bf16", "fp8_double_row",
// "mx").
int peak_dtype_factor(const isa::Program& program, std::string* label);

// A report with the run's figures and the roofline. `useful_flops` < 0: count the PE's FLOPs.
RunReport make_report(const isa::Program& program, const config::HwConfig& hw, const SessionResult& r,
                      double useful_flops, double compulsory_hbm_bytes);
// Compulsory bytes of a program run: its tensors with an "init" or an "output".
double program_compulsory_bytes(const isa::Program& program);

// One check's entry of stats.json's "numerics" (also a chain's checks, tools/trnsim/run_chain.cpp).
nlohmann::json check_json(const CheckResult& c);
// stats.json. Error (a simulator bug) if it would hold a key stat_defs() does not declare.
nlohmann::json stats_json(const RunReport& r);
// The printed table of a stats.json; `top_lines` busiest source lines.
std::string format_stats(const nlohmann::json& j, size_t top_lines = 10);
// The critical path of a stats.json: its time per resource and link kind, then its first `max_segments`
// segments. InputError if the file has none (an older stats.json).
std::string format_critical_path(const nlohmann::json& j, size_t max_segments = 60);
// The comparison rows of two stats.json side by side, with B/A ratios.
std::string format_compare(const nlohmann::json& a, const nlohmann::json& b, const std::string& name_a,
                           const std::string& name_b);
// Reads a stats.json; InputError "<path>: ..." if it is missing, not JSON or not a trnsim stats.json.
nlohmann::json load_stats(const std::string& path);
// The text of stats.json as written (2-space indent, trailing newline).
std::string stats_text(const nlohmann::json& j);

}  // namespace trnsim::run
