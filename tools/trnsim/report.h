// The run summary of `trnsim run`: stats.json and the printed table, which `trnsim stats` prints again from
// a stats.json (and `trnsim stats --compare A B` puts two side by side).
//
// Figures (units in the names; every one is defined in stats.json "definitions"):
//   peak          PE 128 x 128 MACs x 2 FLOP x PE clock x dtype factor x physical cores used; dtype factor 1
//                 (BF16/FP16 nc_matmul), 2 (FP8 double_row), 4 (nc_matmul_mx): the fastest matmul the program
//                 issues (reference/trainium-hardware.md §1.3)
//   useful FLOPs  2 M N K per matmul output of the kernel's host reference (else the model's PE FLOPs)
//   roofline      max(useful FLOPs / peak, compulsory HBM bytes / HBM bandwidth), compulsory bytes = the
//                 kernel's input and output tensors read or written once (programs: the tensors with an
//                 "init" or an "output")
//   summary       profile-style counters named like a Neuron profile's Summary table (reference §5), e.g.
//                 tensor_engine_active_time_percent, mfu_estimated_percent, dma_transfer_average_bytes;
//                 opcodes (count, total and mean ns per engine and opcode) and source_lines (busiest kernel
//                 lines per engine) come from model::StatsObserver.
// The table is always rendered from the JSON (format_stats), so `trnsim stats` shows what the run showed.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "kernels/ref/kernel_refs.h"
#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"
#include "sim/model/run.h"
#include "sim/model/stats_observer.h"

namespace trnsim::cli {

struct RunSummary {
  std::string workload, kernel, hardware;
  std::string program;  // program JSON path (program runs; workload and kernel are then empty)
  nlohmann::json params;
  int cores = 2;  // physical cores the program uses
  model::RunStats stats;
  model::ProfileStats profile;
  std::vector<std::string> files;  // the program's source files (index = SourceLoc::file)
  int dtype_factor = 1;
  std::string dtype_label = "bf16";
  double peak_flops_per_ns = 0;  // = TFLOP/s x 1000
  double useful_flops = 0;
  bool flops_from_reference = false;
  double compulsory_hbm_bytes = 0;
  double hbm_bandwidth_GBps = 0;
  double roofline_ns = 0;
  bool numerics_run = false;
  std::string numerics_note;  // why there is no numerics report, if there is none
  std::vector<ref::OutputNumerics> numerics;
  double wall_seconds = 0;
};

// Fastest matmul dtype factor in `program` (1 when it has no matmul) and its label ("bf16", "fp8_double_row",
// "mx").
int peak_dtype_factor(const isa::Program& program, std::string* label);

// Fills peak, roofline and the dtype factor from the program, config and stats.
void compute_roofline(RunSummary& s, const isa::Program& program, const config::HwConfig& hw);

// The summary of a program run (`trnsim run PROGRAM.json`): compulsory bytes = tensors with init or output.
RunSummary program_summary(const std::string& path, const isa::Program& program, const config::HwConfig& hw,
                           const model::RunStats& stats, const model::ProfileStats& profile);

nlohmann::json stats_json(const RunSummary& s);
std::string format_summary(const RunSummary& s);  // = format_stats(stats_json(s))

// The table of a stats.json; `top_lines` busiest source lines.
std::string format_stats(const nlohmann::json& j, size_t top_lines = 10);
// Headline figures of two runs side by side, with B/A ratios.
std::string format_compare(const nlohmann::json& a, const nlohmann::json& b, const std::string& name_a,
                           const std::string& name_b);

// Reads a stats.json; InputError "<path>: ..." if it is missing, not JSON or not a trnsim stats.json.
nlohmann::json load_stats(const std::string& path);
// Writes DIR/stats.json atomically (through DIR/.stats.json.partial). InputError if it cannot.
void write_stats(const std::string& dir, const nlohmann::json& j);

}  // namespace trnsim::cli
