// Workloads (configs/workloads/*.json, docs/workloads.md): a registered kernel, its parameters, the hardware
// and where every input comes from. parse_workload reads the file; prepare_workload checks everything that
// can be checked before simulating (hardware, parameters, core count, every input source against the
// kernel's declared tensors) and builds the program; make_inputs produces the input tensors;
// evaluate_checks runs the kernel's output checks.
//
//   {"name": "...", "description": "...",
//    "hardware": "trn3" | "path/to/hw.json" | {"name": "trn3", "overrides": {"dma.engine_bandwidth_GBps":
//    40}}, "kernel": "matmul_mxfp8_backward", "params": {...}, "lnc": 2,                       optional:
//    physical cores (1 or 2) for kernels without a core parameter;
//                                    for the others it must agree with that parameter (e.g. run_with_lnc2)
//    "inputs": {"<kernel input>": {"generator": "normal", "seed": 1} | {"npy": "x.npy"} |
//                                 {"from": "other.json", "output": "y"} (chain.h),
//               "<label>": {"recipe": "<a recipe of the kernel>", ...its arguments}},
//    "outputs": ["input_grad"],      optional: outputs written as .npy (default: all)
//    "numerics": true}               optional: compute results and check them (default true)
//
// A kernel written in Python with NKI (docs/nki.md): "kernel": {"nki": "kernel.py", "function": "name"},
// "params" passed as keyword arguments, each input with "dtype" (and "shape" unless it is a .npy file), and
// an optional "reference": {"nki": "ref.py", "function": "name"} computing the outputs with NumPy. The
// Python layer registers the loader of such kernels (set_kernel_loader); without it (a build without Python)
// such a workload is an InputError naming "kernel". For a registered kernel "dtype"/"shape" are optional and
// checked against the kernel's declaration.
//
// Generators and .npy rules: sim/tensor/input_source.h and host_tensor.h. Paths in the file are relative to
// its folder; paths given with --set are relative to the current directory.
// --set PATH=VALUE (value as JSON, a bare word is a string) replaces any key before validation:
// params.M=512, numerics=false, inputs.w.std=0.01, hardware=trn2, hardware.overrides.pe.clock_GHz=2.0
// (everything after "hardware.overrides." is one override path).
//
// Errors: InputError "<file>: <JSON path>: <what is wrong>"; unknown keys are errors.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/package.h"
#include "sim/config/hw_config.h"
#include "sim/io/npy.h"
#include "sim/tensor/check_result.h"
#include "sim/tensor/input_source.h"

namespace trnsim::workload {

// An input that is another workload's output (chains, kernels/workload/chain.h): {"from": "ce.json",
// "output": "input_grad_rowwise_data", "convert": "te_rowwise_data_to_x4"} ("convert" optional).
struct FromOutput {
  std::string file;     // resolved against the workload's folder
  std::string written;  // as written
  std::string output;   // the producer's output
  std::string convert;  // "" or a layout conversion (chain.h)
};

// One entry of "inputs": a tensor source keyed by the kernel input it fills, or a recipe under a label.
struct InputEntry {
  std::string key;
  bool is_recipe = false;
  tensor::InputSource source;  // when !is_recipe
  std::string recipe;          // when is_recipe
  nlohmann::json recipe_args;  // as written (checked by prepare_workload)
  // "dtype" and "shape" of a generator or .npy input (required for Python kernels).
  std::optional<isa::DType> dtype;
  std::optional<std::vector<int64_t>> shape;
  // The tensor is given by the caller (WorkloadRun::set_input; trnsim.nki.simulate_kernel's arrays), not
  // made from a source: dtype and shape are set (unless `from`).
  bool given = false;
  // Another workload's output, given by the chain runner (given is true).
  std::optional<FromOutput> from;
};

// A kernel or reference function in a source file: "kernel": {"nki": "k.py", "function": "f"}.
struct KernelSource {
  std::string language;  // "nki"
  std::string file;      // resolved against the workload's folder
  std::string written;   // as written in the workload
  std::string function;
};

struct Workload {
  std::string file;  // as given on the command line (used in messages)
  std::string name, description;
  std::string hardware;  // config name or resolved path
  config::Overrides hw_overrides;
  std::string kernel;                         // a registered kernel's name, or "<function> (<file>)"
  std::optional<KernelSource> kernel_source;  // a kernel from a source file instead of the registry
  std::optional<KernelSource> reference;      // its reference ("reference" key)
  nlohmann::json params = nlohmann::json::object();
  std::optional<int> lnc;
  // The build's instruction limit (kernels::BuildOptions::max_instructions, a guard on the program's memory).
  std::optional<uint64_t> max_instructions;
  std::vector<InputEntry> inputs;
  std::vector<std::string> outputs;  // empty: every kernel output
  bool numerics = true;
};

// True if `path` holds a JSON object with a top-level "kernel" key (a workload rather than a program JSON).
bool is_workload_file(const std::string& path);

// Reads and checks the schema, after applying the --set assignments.
Workload parse_workload(const std::string& path, const std::vector<std::string>& sets = {});

// The workload file's JSON document with the --set assignments applied (unchecked; what parse_workload
// reads), e.g. to write a tuned point as a workload file of its own.
nlohmann::json workload_document(const std::string& path, const std::vector<std::string>& sets = {});

// The tensor a kernel input needs, from the built program.
struct TensorInfo {
  std::string name;
  isa::DType dtype = isa::DType::F32;
  std::vector<int64_t> shape;
  std::string describe() const;  // "input 'x' bfloat16 [256, 512]"
};

struct PreparedWorkload {
  Workload w;
  config::HwConfig hw;
  std::unique_ptr<kernels::BoundKernel> kernel;
  kernels::KernelBuild build;
  int cores = 2;                            // physical cores asked of the kernel
  std::vector<TensorInfo> inputs, outputs;  // the kernel's, in declaration order
  std::vector<std::string> written;         // outputs written as .npy
  // Input production order: entries of w.inputs (recipes after what they read); npy arrays read early.
  std::vector<size_t> order;
  std::map<std::string, io::NpyArray> npy;                         // by kernel input
  std::map<std::string, std::vector<std::string>> recipe_outputs;  // by entry key
  std::map<std::string, nlohmann::json> recipe_args;               // checked, complete, by entry key
  // The values of the inputs the build read (KernelPackage::build_reads), by input name, flattened.
  std::map<std::string, std::vector<int64_t>> input_values;

  const TensorInfo* input(const std::string& name) const;
  const TensorInfo* output(const std::string& name) const;
};

PreparedWorkload prepare_workload(Workload w);
// The kernel a workload names, bound to its params, without building it (what prepare_workload starts
// with): a registered kernel, or a source file's through its language's loader, declared with the
// workload's input dtypes and shapes (a .npy input's array is read for its shape, and kept in `npy` when
// given). InputError "<file>: <key>: ..." as prepare_workload.
std::unique_ptr<kernels::BoundKernel> bind_kernel(const Workload& w,
                                                  std::map<std::string, io::NpyArray>* npy = nullptr);

// Makes the kernel of a workload whose "kernel" is a source file of `language` (KernelSource), given the
// inputs the workload declares (name, dtype, shape, in the workload's order). InputError naming the workload
// key for what is wrong. The Python layer registers "nki" (python/src/py_kernel.cpp).
using KernelLoader = std::function<std::unique_ptr<kernels::BoundKernel>(
    const Workload& w, const std::vector<TensorInfo>& inputs)>;
void set_kernel_loader(const std::string& language, KernelLoader loader);
bool has_kernel_loader(const std::string& language);

// Every kernel input, made from its generator, .npy file or recipe, then checked by the kernel's
// check_inputs (InputError "<file>: inputs: ...").
kernels::Tensors make_inputs(const PreparedWorkload& p);

// The kernel's output checks on a numerics run's inputs and outputs (empty if the kernel has none).
std::vector<tensor::CheckResult> evaluate_checks(const PreparedWorkload& p, const kernels::Tensors& inputs,
                                                 const kernels::Tensors& outputs, bool full_reference);

// The same in two steps on one list of checks (kernels/api/checks.h): prepare_checks computes the references
// from the inputs alone (trnsim runs it on a second thread while the simulation runs; it touches nothing the
// simulation does), evaluate_checks compares the outputs with them (and computes whatever prepare did not).
// The results are the same bytes as the one-step call's. InputError "<file>: ..." on bad input values.
std::vector<kernels::OutputCheck> make_checks(const PreparedWorkload& p);
bool has_prepare_step(const std::vector<kernels::OutputCheck>& checks);
void prepare_checks(const PreparedWorkload& p, const std::vector<kernels::OutputCheck>& checks,
                    const kernels::Tensors& inputs, bool full_reference);
std::vector<tensor::CheckResult> evaluate_checks(const PreparedWorkload& p,
                                                 const std::vector<kernels::OutputCheck>& checks,
                                                 const kernels::Tensors& inputs,
                                                 const kernels::Tensors& outputs, bool full_reference);

// Lines about inputs that hold NaN or Inf as the kernel reads them ("inputs.x: 3 of 1024 values are NaN or
// Inf (2 finite values of the .npy overflowed bfloat16)"): a run with them goes on, and its report says so.
std::vector<std::string> input_notes(const PreparedWorkload& p, const kernels::Tensors& inputs);

// Host FLOPs of the output checks (for a progress message before long references).
double reference_flops(const PreparedWorkload& p);

// Host bytes the output checks' references hold at most besides the inputs and outputs (the largest of the
// checks' OutputCheck::reference_bytes, plus the sum of their prepared_bytes, kept from the prepare steps
// that run beside the simulation): for the memory check before a run with numerics.
double reference_host_bytes(const PreparedWorkload& p);

// Compulsory HBM bytes: every kernel input and output read or written once.
double compulsory_hbm_bytes(const PreparedWorkload& p);

// The roofline's work: the kernel's useful FLOPs (< 0: count the PE's) and compulsory_hbm_bytes, or what the
// kernel says of the program the read input values built (KernelPackage::roofline_work).
kernels::RooflineWork roofline_work(const PreparedWorkload& p);

}  // namespace trnsim::workload
