// Chains of workloads (docs/workloads.md "Chains"): a workload input may be another workload's output,
//
//   "inputs": {"output_grad": {"from": "ce.json", "output": "input_grad_rowwise_data",
//                              "convert": "te_rowwise_data_to_x4"}}
//
// ("from" relative to the workload's folder; "convert" optional), and a pipeline file lists stages:
//
//   {"name": "...", "description": "...", "stages": ["ce.json", "lm_head.json"],
//    "reference": "lm_head_backward"}                 optional: a chain reference (kernels/chains)
//
// load_chain reads the file given (a pipeline, or a workload whose inputs name other workloads), follows
// every "from" to the workloads it names (each file one stage, however many consumers read it), orders the
// stages so each runs after the stages it reads (a cycle is an InputError naming the files around it), and
// prepares every stage (prepare_workload). Every link is checked before anything is simulated: the producer
// makes the output named (its kernel declares it with these parameters), and its dtype and shape are what
// the consumer's kernel input needs after the conversion. Stage names (the workloads' "name") are unique.
//
// Conversions are explicit layout steps on the host between TransformerEngine's MXFP8 tensors (what
// cross_entropy_bwd writes) and the x4 layouts the MXFP8 matmul kernels read pre-quantized (quant_scheme
// 1x32, whose MX groups are OCP's 32 contiguous values along the contraction, as TE's blocks are; wrapX
// groups are not, and TE bytes cannot be rearranged into them without quantizing again). They move bytes
// only (no value changes), cost no simulated time and are named in the consumer's file:
//   te_rowwise_data_to_x4        [M, N] FP8, blocks along N     -> x4 [N/4, M]  (contraction N)
//   te_rowwise_scales_to_x4      TE compact [roundup(M,128), roundup(N/32,4)] -> scale tile [N/4, M]
//   te_columnwise_data_to_x4     [M, N] FP8, blocks along M     -> x4 [M/4, N]  (contraction M)
//   te_columnwise_scales_to_x4   TE compact [roundup(M/32,4), roundup(N,128)] -> scale tile [M/4, N]
// (scale tiles: sim/numerics/scale_layout.h scales_to_trainium, unpacked; bytes holding no scale 0x7F).
// The consumer must run quant_scheme 1x32, and the producer scale_layout compact: else an InputError.
//
// --set: for a workload file the assignments apply to it (not to the workloads it reads); for a pipeline
// file each is STAGE.PATH=VALUE with STAGE a stage's name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/chains/chain_reference.h"
#include "kernels/workload/workload.h"
#include "kernels/workload/workload_run.h"

namespace trnsim::workload {

// The conversions "convert" accepts.
const std::vector<std::string>& chain_conversions();
// The tensor `convert` reads to make `target` (a consumer's input); InputError (the reason) when it cannot
// make it. "" is no conversion: target itself.
TensorInfo conversion_source(const std::string& convert, const TensorInfo& target);
// Makes `target` from `in` (conversion_source(convert, target)'s dtype and shape).
tensor::HostTensor convert_tensor(const std::string& convert, const tensor::HostTensor& in,
                                  const TensorInfo& target);

struct ChainLink {
  std::string input;    // the consumer's kernel input
  size_t producer = 0;  // stage index
  std::string output;   // the producer's output
  std::string convert;  // "" or a conversion
};

struct ChainStage {
  std::string file;  // as found (relative to the current directory, or absolute)
  std::unique_ptr<WorkloadRun> run;
  std::vector<ChainLink> links;
  const std::string& name() const { return run->name(); }
};

struct Chain {
  std::string file;  // the file given
  std::string name, description;
  bool pipeline = false;           // a pipeline file (else a workload with inputs from others)
  std::string reference;           // "" or a chain reference's name (kernels/chains/chain_reference.h)
  std::vector<ChainStage> stages;  // in run order

  // After stage i ran with numerics: its inputs for later stages, kept (copies) before its outputs go to
  // their files. Then give_inputs(j) hands stage j every kept tensor it reads, converted.
  void keep_outputs(size_t i);
  void give_inputs(size_t j);
  // The stages as the chain reference sees them (with their tensors once they ran with numerics), and its
  // checks (empty without a reference or numerics). InputError "<file>: reference: ..." on bad values.
  std::vector<kernels::ChainStageData> stage_data(bool with_tensors) const;
  std::vector<tensor::CheckResult> run_reference() const;
  // Why the chain reference it names does not run ("stage 'x' ran without numerics ..."), "" when it runs or
  // there is none.
  std::string reference_not_run() const;

 private:
  std::map<std::pair<size_t, std::string>, tensor::HostTensor> kept_;
};

// True if `path` holds a JSON object with a top-level "stages" key.
bool is_pipeline_file(const std::string& path);
// True if the workload at `path`, with the --set assignments applied, has an input {"from": ...} (reads its
// JSON only).
bool has_chained_inputs(const std::string& path, const std::vector<std::string>& sets = {});

// The chain's name (its default output folder is out/<name>), from its file's JSON alone: a pipeline's
// "name", or the root workload's (with `sets` applied); no stage is built, no kernel code runs (a run locks
// its folder before load_chain). InputError as load_chain's for a bad name.
std::string chain_name(const std::string& path, const std::vector<std::string>& sets);

// Reads, orders, prepares and checks a chain (above). `no_numerics`: every stage timing only.
Chain load_chain(const std::string& path, const std::vector<std::string>& sets, bool no_numerics);

}  // namespace trnsim::workload
