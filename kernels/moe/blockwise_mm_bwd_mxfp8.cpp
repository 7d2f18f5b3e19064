// blockwise_mm_bwd_mxfp8 (Trn3): the MXFP8 blockwise MoE backward of aws-neuron/nki-library
// (experimental/moe_mxfp8/bwd): the gradients of hidden_states, the affinities and both weights from the
// forward's checkpoints. Parameters: bwd_params.h; instruction streams: bwd_kernel.h (trnsim_optimized) and
// bwd_lib.h (nki_library); recipes: bwd_recipes.h; output checks: bwd_output_checks.h; host reference:
// bwd_reference.h; routing and the shared pieces: routing.h, moe_common.h.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "kernels/api/package.h"
#include "kernels/moe/bwd_kernel.h"
#include "kernels/moe/bwd_lib.h"
#include "kernels/moe/bwd_output_checks.h"
#include "kernels/moe/bwd_recipes.h"
#include "kernels/moe/bwd_reference.h"
#include "kernels/moe/moe_common.h"
#include "kernels/ref/metrics.h"
#include "sim/base/error.h"
#include "sim/numerics/host_threads.h"
#include "sim/numerics/scale_layout.h"
#include "sim/tensor/input_source.h"
namespace trnsim::kernels {
namespace {

using moe::BwdParams;
using moe::CheckpointConfig;

// Indirect DMAs of one block, over both cores: every block emits the same ones (the affinity-gradient scatter
// included: one per 128 slots), so a one-block build of the run's own plan, counted, gives them. `rows`: the
// index entries over those that index the routing's slots (each such pass covers the block's slots once).
struct BlockDmas {
  int64_t gathers = 0, scatters = 0, rows = 0;
};
BlockDmas block_dmas(const BwdParams& p) {
  const isa::Limits limits = default_limits(isa::Generation::Trn3);
  KernelBuild b;
  if (p.library()) {
    BwdParams one = p;
    one.num_blocks = 1;
    const moe::BwdLibPlan f = moe::plan_bwd_lib(one, limits);
    b = build_program([&](Kernel& k) { moe::emit_bwd_lib(k, one, f); },
                      {.limits = limits, .num_programs = f.cores});
  } else {
    moe::BwdPlan f = moe::plan_bwd(p, limits);
    f.N = f.run_blocks = 1;
    b = build_program([&](Kernel& k) { moe::emit_bwd(k, p, f); },
                      {.limits = limits, .num_programs = f.cores});
  }
  BlockDmas d;
  for (const auto& core : b.program.streams)
    for (const auto& stream : core)
      for (const auto& in : stream)
        if (in.op == isa::Opcode::DmaCopy && in.ops[2].present()) {
          ++(in.has(isa::kIndirectDst) ? d.scatters : d.gathers);
          // AFFINITY_ON_H: Phase 4 gathers the block's scaled rows from the scratch (no -1 in that index).
          if (!(p.on_h() && b.program.phases[in.phase] == "P4")) d.rows += in.ops[2].partitions;
        }
  return d;
}

// FLOPs of the backward's matmuls for `tokens` token slots: per slot and expert, 2 H I_TP in Phases 1 and 4
// each and 2 H 2 I_TP in Phases 2 and 3 each: 12 H I_TP.
double useful_flops(const BwdParams& p, int64_t tokens) {
  return static_cast<double>(tokens) * static_cast<double>(p.top_k) * 12.0 * static_cast<double>(p.H) *
         static_cast<double>(p.I_TP);
}

// The count of the dense mode's dynamic block loop, when given; 0 in a declaration build (no block needed to
// declare the tensors).
std::optional<int64_t> valid_count(const BwdParams& p, const BuildOptions& o) {
  if (p.num_valid_tokens && o.declare_only) return 0;
  const auto it = o.input_values.find("num_valid_tokens");
  if (!p.num_valid_tokens || it == o.input_values.end() || it->second.empty()) return std::nullopt;
  return it->second[0];
}

std::vector<KernelStat> stats(const BwdParams& p, const Tensors& in) {
  std::vector<KernelStat> s = moe::routing_kernel_stats(moe::bwd_routing_shape(p), in);
  const int64_t B = p.block_size;
  // The blocks the loop runs: all N, or with num_valid_tokens the dynamic loop's ceil(count / B).
  int64_t N = p.N(), valid = N * B;
  if (p.num_valid_tokens && in.count("num_valid_tokens")) {
    valid = std::clamp<int64_t>(in.at("num_valid_tokens").int_value(0), 0, p.T);
    N = std::min(N, (valid + B - 1) / B);
  }
  const double H = static_cast<double>(p.H), I = static_cast<double>(p.I_TP);
  const double G = static_cast<double>(B) / 128;
  // Slots the indirect DMAs skip: -1 padding, or in dense mode the slots of the last block from
  // num_valid_tokens on.
  int64_t skipped = 0;
  if (p.single_expert_dense) {
    if (p.num_valid_tokens) skipped = N * B - valid;
  } else if (p.skip()) {
    for (int32_t t : moe::int_values(in.at("token_position_to_id"))) skipped += t < 0;
  }
  const BlockDmas d = block_dmas(p);
  s.push_back(moe::gather_dma_stat(
      N * d.gathers,
      "affinities, dY rows (and hidden rows for the gate/up recompute), the Phase 3/4 operand rows, the "
      "Phase 2 read-modify-write reads"));
  s.push_back(
      moe::scatter_dma_stat(N * d.scatters, "hidden_states_grad rows (Phase 2) and affinity gradients"));
  s.push_back(moe::rows_skipped_stat(static_cast<double>(skipped * (d.rows / B))));
  const double slots = static_cast<double>(N * B), rows_bytes = slots * H * 2;
  // dY for Phase 1 on each core (and X for the recompute), X for Phase 3, dY for Phase 4 (AFFINITY_ON_H
  // reads the block's scaled scratch instead).
  // nki_library: each core gathers the block's hidden rows (transposed for Phase 3) and dY twice (natural for
  // Phase 1, transposed for Phase 4).
  const double passes = p.library()
                            ? 3.0 * p.cores()
                            : p.cores() * (p.gate_up_given() ? 1.0 : 2.0) + 1.0 + (p.on_h() ? 0.0 : 1.0);
  s.push_back({"gather_bytes", rows_bytes * passes, "bytes",
               "token rows the indirect DMAs gather: dY for Phase 1 on each core (and X for the gate/up "
               "recompute), X and dY for Phases 3/4 (AFFINITY_ON_H: X only)"});
  s.push_back(
      {"hidden_grad_rmw_bytes",
       p.accumulate_hidden_states_grad ? (slots - static_cast<double>(skipped)) * H * 2 * 2 : 0.0, "bytes",
       "hidden_states_grad rows read and written back by Phase 2's read-modify-write scatter (skipped "
       "slots neither)"});
  s.push_back({"weight_grad_rmw_bytes", static_cast<double>(N) * (3 * I * H) * 2 * 2, "bytes",
               "weight-gradient bytes read and written back by Phases 3 and 4 (bfloat16)"});
  s.push_back({"dea_sendrecv_bytes", p.cores() == 2 ? 128 * static_cast<double>(N) * G * 4 : 0.0, "bytes",
               "affinity-gradient partials each core sends its peer (sendrecv)"});
  return s;
}

}  // namespace

std::unique_ptr<KernelDef> blockwise_mm_bwd_mxfp8_kernel() {
  KernelPackage<BwdParams> k;
  k.name = "blockwise_mm_bwd_mxfp8";
  k.doc =
      "MXFP8 blockwise MoE backward on Trn3 (nkilib blockwise_mm_bwd_mxfp8): per block of block_size token "
      "slots of one expert, from the forward's checkpoints: Phase 1 dY W_down^T and the SwiGLU backward "
      "(AFFINITY_ON_I, the affinity gradient; or AFFINITY_ON_H from the down output's checkpoint), Phase 2 "
      "the hidden-states gradient scattered by "
      "read-modify-write, Phases 3 and 4 the gate/up and down weight gradients read-modify-written at the "
      "block's expert. SHARD_ON_FREE over the LNC2 pair";
  k.cores = [](const BwdParams& p) { return p.cores(); };
  k.cores_param = "run_with_lnc2";
  k.build = [](const BwdParams& p, const BuildOptions& options) {
    if (p.library()) {
      const moe::BwdLibPlan f = moe::plan_bwd_lib(p, options.limits);
      BuildOptions o = options;
      o.num_programs = f.cores;
      return build_program([&](Kernel& kc) { moe::emit_bwd_lib(kc, p, f); }, o);
    }
    const moe::BwdPlan f = moe::plan_bwd(p, options.limits, valid_count(p, options));
    BuildOptions o = options;
    o.num_programs = f.cores;
    return build_program([&](Kernel& kc) { moe::emit_bwd(kc, p, f); }, o);
  };
  // skip_grad_initialization: the caller zeroes the gradients (nkilib), and the kernel adds into them.
  k.zeroed_outputs = [](const BwdParams& p) {
    std::vector<std::string> v;
    if (!p.skip_grad_initialization) return v;
    v = {"hidden_states_grad", "expert_affinities_masked_grad", "gate_up_proj_weight_grad",
         "down_proj_weight_grad"};
    if (p.bias) v.insert(v.end(), {"gate_and_up_proj_bias_grad", "down_proj_bias_grad"});
    return v;
  };
  k.build_reads = [](const BwdParams& p) {
    return p.num_valid_tokens ? std::vector<std::string>{"num_valid_tokens"} : std::vector<std::string>{};
  };
  k.useful_flops = [](const BwdParams& p) { return useful_flops(p, p.T); };
  // With num_valid_tokens the dense loop handles only the first `count` token slots: the useful FLOPs are
  // theirs, and the per-token tensors (hidden rows, dY, affinities, checkpoints and their gradients) are
  // moved for those slots only. The weights are read whole when a block runs and not at all at count 0; the
  // weight and bias gradients are written whole, except at count 0 under skip_grad_initialization (the
  // kernel neither zeroes nor accumulates them).
  k.roofline_work = [](const BwdParams& p, const std::map<std::string, std::vector<int64_t>>& values,
                       const std::map<std::string, double>& bytes) -> std::optional<RooflineWork> {
    BuildOptions o;
    o.input_values = values;
    const std::optional<int64_t> count = valid_count(p, o);
    if (!count) return std::nullopt;
    const int64_t valid = std::clamp<int64_t>(*count, 0, p.T);
    static const std::set<std::string> per_token{"hidden_states",
                                                 "expert_affinities_masked",
                                                 "output_hidden_states_grad",
                                                 "gate_up_proj_act_checkpoint_T",
                                                 "gate_act_checkpoint_T",
                                                 "intermediate_checkpoint_T",
                                                 "scaled_intermediate_checkpoint_T",
                                                 "down_proj_act_checkpoint",
                                                 "hidden_states_grad",
                                                 "expert_affinities_masked_grad"};
    static const std::set<std::string> weights{"gate_up_proj_weight", "down_proj_weight",
                                               "gate_up_weight_scales", "down_weight_scales"};
    static const std::set<std::string> weight_grads{"gate_up_proj_weight_grad", "down_proj_weight_grad",
                                                    "gate_and_up_proj_bias_grad", "down_proj_bias_grad"};
    const auto share = [&](const std::string& name) {
      if (per_token.count(name)) return static_cast<double>(valid) / static_cast<double>(p.T);
      if (weights.count(name)) return valid > 0 ? 1.0 : 0.0;
      if (weight_grads.count(name)) return valid > 0 || !p.skip_grad_initialization ? 1.0 : 0.0;
      return 1.0;
    };
    RooflineWork w;
    w.useful_flops = useful_flops(p, valid);
    for (const auto& [name, b] : bytes) w.compulsory_hbm_bytes += b * share(name);
    return w;
  };
  k.checks = moe::bwd_output_checks;
  k.recipes = moe::bwd_recipes();
  k.input_stats = stats;
  k.check_inputs = [](const BwdParams& p, const Tensors& in) {
    moe::check_routing_inputs(moe::bwd_routing_shape(p), in);
    // Above T the count is clamped to T, as the API reference documents; a negative count is no count.
    if (p.num_valid_tokens && in.count("num_valid_tokens")) {
      const int64_t v = in.at("num_valid_tokens").int_value(0);
      if (v < 0) throw InputError(fmt::format("num_valid_tokens[0] = {} is negative: not a token count", v));
    }
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
