// Workload configs (configs/workloads/*.json): a kernel from the registry, its parameters, the hardware and
// the input tensors, for `trnsim run WORKLOAD.json` and `trnsim validate WORKLOAD.json`.
//
//   {"name": "...", "description": "...",
//    "hardware": "trn3" | "path/to/hw.json" | {"name": "trn3", "overrides": {"dma.engine_bandwidth_GBps":
//    40}}, "kernel": "matmul_mxfp8_backward", "params": {...kernel parameters...}, "lnc": 2, (physical cores
//    the kernel runs on: 1 or 2; default 2) "inputs": {"<kernel input>": {"generator": "normal", "seed": 1,
//    "mean": 0, "std": 1} | {"npy": "x.npy"}}, "outputs": ["input_grad", "weight_grad"],   (outputs written
//    as .npy; default: all) "numerics": true}                           (compute results and the numerics
//    report; default true)
// Generators (sim/io/generators.h), each with a required non-negative integer "seed":
//   normal {mean = 0, std = 1}; uniform {low = -1, high = 1}; heavy_tailed {nu = 4, scale = 1} (scaled
//   Student-t); activations_with_outliers {mean = 0, std = 1, outlier_channels = 0, outlier_scale = 1} (the
//   tensor viewed as [dim 0, product of the other dims], outliers are columns).
// Generated values are rounded to the input's dtype (BF16: nearest even). An .npy path is relative to the
// workload file; its shape must equal the kernel input's; dtype float32 (rounded to BF16 for BF16 inputs) or,
// for BF16 inputs, uint16 raw bits.
// A hardware path is relative to the workload file too; names are looked up as sim/config/hw_config.h says.
//
// Errors: InputError "<file>: <JSON path>: <what is wrong>", e.g.
//   configs/workloads/x.json: inputs.output_grad.generator: unknown generator 'gauss' (expected normal,
//   uniform, heavy_tailed, activations_with_outliers)
// Unknown keys are errors. --set PATH=VALUE (value as JSON, a bare word is a string) replaces any key before
// validation: params.M=512, numerics=false, inputs.weights.std=0.01, hardware=trn2,
// hardware.overrides.pe.clock_GHz=2.0 (everything after "hardware.overrides." is one override path).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/ref/kernel_refs.h"
#include "sim/config/hw_config.h"
#include "sim/io/npy.h"

namespace trnsim::cli {

struct InputSpec {
  std::string name;
  std::string generator;  // empty for .npy inputs
  uint64_t seed = 0;
  nlohmann::json args;  // generator parameters with defaults filled in
  std::string npy;      // .npy path as resolved (relative to the workload file)
};

struct Workload {
  std::string file;  // as given on the command line (used in messages)
  std::string name, description;
  std::string hardware;  // config name or resolved path
  config::Overrides hw_overrides;
  std::string kernel;
  nlohmann::json params;  // as written (validated by prepare_workload)
  int lnc = 2;
  std::vector<InputSpec> inputs;
  std::vector<std::string> outputs;  // empty: every kernel output
  bool numerics = true;
};

// True if `path` holds a JSON object with a top-level "kernel" key (a workload rather than a program JSON).
bool is_workload_file(const std::string& path);

// Reads and checks the schema, after applying the --set assignments. Throws InputError.
Workload parse_workload(const std::string& path, const std::vector<std::string>& sets = {});

// A workload ready to run: hardware loaded, parameters validated, program built, inputs checked.
struct PreparedWorkload {
  Workload w;
  config::HwConfig hw;
  nlohmann::json params;  // complete (defaults filled in)
  kernels::KernelBuild build;
  std::optional<ref::KernelReference> reference;
  std::vector<io::NpyArray> npy;  // loaded .npy inputs, parallel to w.inputs (empty arrays for generators)
};

// Throws InputError naming the workload file and the JSON path for any problem.
PreparedWorkload prepare_workload(Workload w);

// One input tensor: raw bytes in the kernel's dtype (HBM image) and the FP32 values they hold.
struct InputTensor {
  std::string name;
  int tensor = -1;  // index in build.program.tensors
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};
std::vector<InputTensor> make_inputs(const PreparedWorkload& p);

struct RunWorkloadOptions {
  std::string path;
  std::string out_dir;  // default out/<workload name>
  bool no_numerics = false;
  bool dump_inputs = false;
  std::vector<std::string> sets;
  std::string trace;  // .pftrace / .perfetto-trace / .pb (Perfetto) or .json (Chrome JSON); empty: none
  bool full_reference = false;  // compute the host references on every output row (else large outputs sample)
};

// Exit codes of `trnsim run WORKLOAD.json` (errors are thrown as InputError / RuleError: exit 1).
inline constexpr int kExitOk = 0;
inline constexpr int kExitNumericsFail = 3;
inline constexpr int kExitBelowRoofline = 4;

// Runs the workload, prints the summary table, writes the outputs; returns the exit code.
int run_workload(const RunWorkloadOptions& o);

}  // namespace trnsim::cli
