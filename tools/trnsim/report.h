// The run summary of `trnsim run WORKLOAD.json`: a printed table and stats.json.
//
// Figures (units in the names; every one is defined in stats.json "definitions"):
//   peak          PE 128 x 128 MACs x 2 FLOP x PE clock x dtype factor x physical cores used; dtype factor 1
//                 (BF16/FP16 nc_matmul), 2 (FP8 double_row), 4 (nc_matmul_mx): the fastest matmul the program
//                 issues (reference/trainium-hardware.md §1.3)
//   useful FLOPs  2 M N K per matmul output of the kernel's host reference (else the model's PE FLOPs)
//   roofline      max(useful FLOPs / peak, compulsory HBM bytes / HBM bandwidth), compulsory bytes = the
//                 kernel's input and output tensors read or written once
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "kernels/ref/kernel_refs.h"
#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"
#include "sim/model/run.h"

namespace trnsim::cli {

struct RunSummary {
  std::string workload, kernel, hardware;
  nlohmann::json params;
  int cores = 2;  // physical cores the program uses
  model::RunStats stats;
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

std::string format_summary(const RunSummary& s);
nlohmann::json stats_json(const RunSummary& s);

}  // namespace trnsim::cli
