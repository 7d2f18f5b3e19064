// blockwise_mm_bwd_mxfp8 (Trn3): the MXFP8 blockwise MoE backward of aws-neuron/nki-library
// (experimental/moe_mxfp8/bwd): the gradients of hidden_states, the affinities and both weights from the
// forward's checkpoints. Parameters: bwd_params.h; instruction streams: bwd_kernel.h; host reference:
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

moe::RoutingShape routing_shape(const BwdParams& p) {
  return {p.T, p.E, p.top_k, p.block_size, p.N(), p.pad(), !p.single_expert_dense};
}

// The checkpoint recipe has no arguments: it runs the forward's gate/up on the host.
struct CheckpointArgs {
  static void describe(Schema<CheckpointArgs>&) {}
};

std::vector<std::string> checkpoint_names(const BwdParams& p) {
  std::vector<std::string> v;
  const CheckpointConfig& c = p.checkpoint_config;
  if (c.save_gate_up_proj_act) v.push_back("gate_up_proj_act_checkpoint_T");
  if (c.save_scaled_intermediate) v.push_back("scaled_intermediate_checkpoint_T");
  if (c.save_gate_act) v.push_back("gate_act_checkpoint_T");
  if (c.save_intermediate) v.push_back("intermediate_checkpoint_T");
  if (c.save_down_proj_act) v.push_back("down_proj_act_checkpoint");
  return v;
}

// The checkpoints as the forward kernel writes them (blockwise_mm_fwd_mxfp8's numerics: gate/up GEMMs with
// both operands MX-quantized along H, clamped and rounded to compute_dtype; SiLU(gate) * up rounded; times
// the affinity, rounded; AFFINITY_ON_H: the down GEMM of the rounded intermediate, both operands quantized
// along I, rounded), for every slot of every block. Pre-quantized weights enter with their MX values.
void checkpoint_recipe(const BwdParams& p, const CheckpointArgs&, RecipeIO& io) {
  const moe::BwdInputs in = moe::BwdInputs::from(
      p, [&](const std::string& n) -> const tensor::HostTensor* { return &io.input(n); }, true);
  BwdParams fwd = p;
  fwd.checkpoint_config.save_gate_up_proj_act = false;  // the reference recomputes gate/up
  const moe::BwdReference ref(fwd, in);
  const CheckpointConfig& c = p.checkpoint_config;
  tensor::HostTensor* gu = c.save_gate_up_proj_act ? &io.output("gate_up_proj_act_checkpoint_T") : nullptr;
  tensor::HostTensor* sc =
      c.save_scaled_intermediate ? &io.output("scaled_intermediate_checkpoint_T") : nullptr;
  tensor::HostTensor* ga = c.save_gate_act ? &io.output("gate_act_checkpoint_T") : nullptr;
  tensor::HostTensor* it = c.save_intermediate ? &io.output("intermediate_checkpoint_T") : nullptr;
  tensor::HostTensor* da = c.save_down_proj_act ? &io.output("down_proj_act_checkpoint") : nullptr;
  const int64_t B = p.block_size, I = p.I_TP, H = p.H, E = p.E;
  const isa::DType cdt = p.compute_dtype;
  const auto& ea = *in.expert_affinities_masked;
  const moe::ClampLimits& cl = p.clamp_limits;
  const auto clamp = [](double x, std::optional<double> lo, std::optional<double> hi) {
    if (lo) x = std::max(x, *lo);
    if (hi) x = std::min(x, *hi);
    return x;
  };
  // A slot without a token (skipped, or reading the zero row T) has gate = up = 0 before the clamps.
  const double g0 =
      moe::round_to(clamp(0.0, cl.non_linear_clamp_lower_limit, cl.non_linear_clamp_upper_limit), cdt);
  const double u0 = moe::round_to(clamp(0.0, cl.linear_clamp_lower_limit, cl.linear_clamp_upper_limit), cdt);
  const auto write = [&](int64_t s, int64_t i, double g, double u, double a) {
    const int64_t b = s / B, j = s % B;
    const double act = moe::silu(g);
    const double inter = moe::round_to(act * u, cdt);
    if (gu) {
      gu->set(((b * 2 + 0) * I + i) * B + j, static_cast<float>(g));
      gu->set(((b * 2 + 1) * I + i) * B + j, static_cast<float>(u));
    }
    const int64_t o = (b * I + i) * B + j;
    if (sc) sc->set(o, static_cast<float>(moe::round_to(inter * a, cdt)));
    if (ga) ga->set(o, static_cast<float>(moe::round_to(act, cdt)));
    if (it) it->set(o, static_cast<float>(inter));
  };
  // down_proj_act_checkpoint rows [n, H] of `slots` from their intermediates [n, I] (the layer's down bias is
  // not an input of the backward: the rows are the bias-free down output).
  const auto write_down = [&](const std::vector<int64_t>& slots, const std::vector<float>& inter, int64_t e,
                              std::vector<double>& y) {
    if (!da || slots.empty()) return;
    const int64_t n = static_cast<int64_t>(inter.size()) / I;
    ref.forward_down(e, inter, n, y);
    for (size_t r = 0; r < slots.size(); ++r) {
      const double* row = y.data() + (n == 1 ? 0 : r) * H;
      for (int64_t h = 0; h < H; ++h) da->set(slots[r] * H + h, static_cast<float>(row[h]));
    }
  };
  const std::vector<float> inter0(static_cast<size_t>(I),
                                  static_cast<float>(moe::round_to(moe::silu(g0) * u0, cdt)));
  // A slot without a token: write()'s values for (g0, u0, 0), computed once.
  const float act0 = static_cast<float>(moe::round_to(moe::silu(g0), cdt)),
              sc0 = static_cast<float>(moe::round_to(static_cast<double>(inter0[0]) * 0.0, cdt));
  const auto write_empty = [&](int64_t s) {
    const int64_t b = s / B, j = s % B;
    for (int64_t i = 0; i < I; ++i) {
      if (gu) {
        gu->set(((b * 2 + 0) * I + i) * B + j, static_cast<float>(g0));
        gu->set(((b * 2 + 1) * I + i) * B + j, static_cast<float>(u0));
      }
      const int64_t o = (b * I + i) * B + j;
      if (sc) sc->set(o, sc0);
      if (ga) ga->set(o, act0);
      if (it) it->set(o, inter0[0]);
    }
  };
  // Every slot belongs to one block of one expert, so each expert writes its own elements: the experts run
  // on io.threads() host threads (taken in turn), and the bytes do not depend on the thread count.
  const auto expert = [&](int64_t e) {
    std::vector<double> v, y;
    const auto& blocks = ref.blocks_of_expert(e);
    std::vector<int64_t> slots, empty;  // the slots holding a token (the GEMMs run on these only), the others
    for (int64_t b : blocks)
      for (int64_t j = 0; j < B; ++j) {
        const int64_t s = b * B + j, t = ref.token(s);
        if (t >= 0 && t < p.T) {
          slots.push_back(s);
        } else {
          write_empty(s);
          empty.push_back(s);
        }
      }
    write_down(empty, inter0, e, y);  // one row, the same for every slot without a token
    if (slots.empty()) return;
    ref.forward_gate_up(e, slots, 1, v);
    std::vector<float> inter(da ? slots.size() * I : 0);
    for (size_t r = 0; r < slots.size(); ++r) {
      const double a = ea.value(ref.token(slots[r]) * E + e);
      for (int64_t i = 0; i < I; ++i) {
        const double g = v[r * 2 * I + i], u = v[r * 2 * I + I + i];
        write(slots[r], i, g, u, a);
        if (da) inter[r * I + i] = static_cast<float>(moe::round_to(moe::silu(g) * u, cdt));
      }
    }
    write_down(slots, inter, e, y);
  };
  std::atomic<int64_t> next{0};
  std::mutex failed_m;
  std::exception_ptr failed;  // the first error of any thread, rethrown here
  const auto worker = [&] {
    try {
      for (int64_t e = next++; e < E; e = next++) expert(e);
    } catch (...) {
      next = E;
      std::lock_guard<std::mutex> g(failed_m);
      if (!failed) failed = std::current_exception();
    }
  };
  num::run_parts(static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(io.threads(), E))),
                 [&](int) { worker(); });
  if (failed) std::rethrow_exception(failed);
}

// The pre-quantized weights recipe: BF16 weights drawn U(low, high) by the workload generator in the
// backward's BF16 layouts (gate/up [E, H, 2, I_TP] from gate_up_seed, down [E, I_TP, H] from down_seed: the
// values a BF16-weight workload with those generators reads), each expert quantized on the host as
// quantize_mx quantizes it on chip: along the contraction of the phase that reads it (gate/up along 2*I_TP
// for Phase 2, down along H for Phase 1), in that phase's quant_scheme interleave and scale packing.
struct PrequantArgs {
  int64_t gate_up_seed = 2, down_seed = 3;
  double low = -0.1, high = 0.1;
  static void describe(Schema<PrequantArgs>& s) {
    // The uniform generator's rules (sim/tensor/input_source.h): seeds >= 0, bounds within FP32 (the values
    // are computed in FP32), low < high (prequant_check).
    constexpr double kF32Max = 3.4028234663852886e38;
    s.add(&PrequantArgs::gate_up_seed, "gate_up_seed", "seed of the uniform BF16 gate/up weights", 2)
        .at_least(0);
    s.add(&PrequantArgs::down_seed, "down_seed", "seed of the uniform BF16 down weights", 3).at_least(0);
    s.add(&PrequantArgs::low, "low", "lower bound of the uniform weights", -0.1).range(-kF32Max, kF32Max);
    s.add(&PrequantArgs::high, "high", "upper bound of the uniform weights (exclusive)", 0.1)
        .range(-kF32Max, kF32Max);
  }
};

std::vector<std::string> prequant_names(const BwdParams& p) {
  std::vector<std::string> v;
  if (p.gate_up_weight_scales) v.insert(v.end(), {"gate_up_proj_weight", "gate_up_weight_scales"});
  if (p.down_weight_scales) v.insert(v.end(), {"down_proj_weight", "down_weight_scales"});
  return v;
}

void prequant_check(const BwdParams&, const PrequantArgs& a) {
  if (!(a.low < a.high)) throw InputError(fmt::format("'low' = {} must be below 'high' = {}", a.low, a.high));
}

void prequant_recipe(const BwdParams& p, const PrequantArgs& a, RecipeIO& io) {
  const int64_t E = p.E, H = p.H, I = p.I_TP;
  const num::QuantScheme qs = p.quant_scheme();
  // One weight: BF16 [E, ...] drawn, then per expert the logical [K, F] (element (k, f) at kf(k, f) of the
  // expert's BF16 values) swizzled, quantized and its scales laid out as the phase reads them.
  const auto make = [&](int64_t seed, const std::vector<int64_t>& shape, int64_t K, int64_t F,
                        const std::function<int64_t(int64_t, int64_t)>& kf, bool packed,
                        const char* data_name, const char* scales_name) {
    const tensor::HostTensor w = tensor::generate(
        tensor::parse_generator({{"generator", "uniform"}, {"seed", seed}, {"low", a.low}, {"high", a.high}},
                                "prequantized_weights"),
        isa::DType::BF16, shape, io.threads());
    tensor::HostTensor& data = io.output(data_name);
    tensor::HostTensor& scales = io.output(scales_name);
    const num::ScaleShape ss = num::trainium_scale_shape(K, F, packed);
    const int64_t sb = static_cast<int64_t>(ss.size());
    if (scales.elements() != E * sb)
      throw InputError(fmt::format("'{}' holds {} scales per expert, the layout needs {}", scales_name,
                                   scales.elements() / E, sb));
    std::vector<uint16_t> logical(static_cast<size_t>(K * F));
    const auto* bits = reinterpret_cast<const uint16_t*>(w.bytes.data());
    for (int64_t e = 0; e < E; ++e) {
      const uint16_t* we = bits + e * K * F;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t f = 0; f < F; ++f) logical[k * F + f] = we[kf(k, f)];
      num::quantize_operand_x4(logical.data(), K, F, qs, p.fp8, num::ScaleRule::Trn3, packed,
                               data.bytes.data() + e * K * F, scales.bytes.data() + e * sb);
    }
  };
  if (p.gate_up_weight_scales)  // [E, H, 2I]: K = 2I (gate then up), F = H
    make(
        a.gate_up_seed, {E, H, 2, I}, 2 * I, H, [&](int64_t k, int64_t h) { return h * 2 * I + k; },
        p.phase_scale_packing(2), "gate_up_proj_weight", "gate_up_weight_scales");
  if (p.down_weight_scales)  // [E, I, H]: K = H, F = I
    make(
        a.down_seed, {E, I, H}, H, I, [&](int64_t h, int64_t i) { return i * H + h; },
        p.phase_scale_packing(1), "down_proj_weight", "down_weight_scales");
}

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
  std::vector<KernelStat> s = moe::routing_kernel_stats(routing_shape(p), in);
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

// --- checks: one shared reference evaluation for every output.

constexpr double kRowBudget = 8e9, kExpertBudget = 24e9;  // FP64 work of the sampled references
// FP64 weight gradients the prepare step may hold for the checks (both numerics): the first sampled experts
// that fit are computed while the simulation runs, the others one at a time when the checks fold them (all
// of them when the checks run without a prepare step).
constexpr double kPreparedGradBytes = 4.0 * 1024 * 1024 * 1024;

constexpr int kWeightOutputs = 4;  // gate/up and down weight gradients, then the two bias gradients
const char* const kWeightNames[kWeightOutputs] = {"gate_up_proj_weight_grad", "down_proj_weight_grad",
                                                  "gate_and_up_proj_bias_grad", "down_proj_bias_grad"};

// Elements per expert of weight output w: [H, 2I], [I, H], [2, I], [H].
int64_t weight_size(const BwdParams& p, int w) {
  const int64_t sizes[kWeightOutputs] = {2 * p.I_TP * p.H, p.I_TP * p.H, 2 * p.I_TP, p.H};
  return sizes[w];
}

using ExpertGrads = std::array<std::array<std::vector<double>, 2>, kWeightOutputs>;  // [w][q]

struct RefCache {
  const void* key = nullptr;
  std::unique_ptr<moe::BwdReference> ref;
  std::map<int64_t, std::array<moe::SlotGrad, 2>> vals;
  std::vector<int64_t> rows, experts;
  int64_t defined_rows = 0;  // rows of hidden_states_grad with defined values (num_valid_tokens: the count)
  std::map<int64_t, ExpertGrads> grads;  // the prepared experts' gradients, until folded
  // Metrics of weight output w against numerics q, folded expert by expert (increasing) over `experts`, for
  // the outputs at folded_key.
  std::array<std::array<ref::MetricsAccumulator, 2>, kWeightOutputs> weight_metrics;
  const void* folded_key = nullptr;
};

// `prepare`: the prepare step's call, which also computes the weight gradients of the first experts.
void evaluate(RefCache& c, const BwdParams& p, const CheckContext& ctx, bool prepare = false) {
  const void* key = &ctx.input("hidden_states");
  if (c.key == key && c.ref) return;
  c = RefCache();
  c.key = key;
  c.ref = std::make_unique<moe::BwdReference>(
      p, moe::BwdInputs::from(p, [&](const std::string& n) -> const tensor::HostTensor* {
        return ctx.has_input(n) ? &ctx.input(n) : nullptr;
      }));
  const moe::BwdReference& r = *c.ref;
  // Rows of hidden_states_grad and the affinity gradient: tokens [0, T) (a padding row T only absorbs the
  // padding slots); with num_valid_tokens the rows from the count on are undefined (not compared).
  const int64_t T = p.num_valid_tokens ? std::min(p.T, ctx.input("num_valid_tokens").int_value(0)) : p.T;
  double row_cost = 0;
  for (int64_t t = 0; t < T; ++t)
    row_cost += static_cast<double>(r.slots_of_row(t).size()) * r.slot_flops(true);
  c.defined_rows = T;
  c.rows = moe::sample_groups(T, 32, row_cost, kRowBudget, ctx.full_reference());
  std::vector<int64_t> slots;
  for (int64_t t : c.rows)
    for (int64_t s : r.slots_of_row(t)) slots.push_back(s);
  c.vals = r.evaluate(slots, true);
  // Experts for the weight gradients: evenly spaced within the budget, plus every expert without blocks
  // (its gradients must stay exactly zero).
  double expert_cost = 0;
  for (int64_t e = 0; e < p.E; ++e) expert_cost += r.expert_flops(e);
  std::set<int64_t> ex;
  for (int64_t e : moe::sample_groups(p.E, 1, expert_cost, kExpertBudget, ctx.full_reference())) ex.insert(e);
  for (int64_t e = 0; e < p.E; ++e)
    if (r.blocks_of_expert(e).empty()) ex.insert(e);
  c.experts.assign(ex.begin(), ex.end());
  if (!prepare) return;
  const int nw = p.bias ? kWeightOutputs : 2;
  double expert_bytes = 0;
  for (int w = 0; w < nw; ++w) expert_bytes += 2.0 * 8.0 * static_cast<double>(weight_size(p, w));
  double held = 0;
  for (int64_t e : c.experts) {
    if (held + expert_bytes > kPreparedGradBytes) break;
    held += expert_bytes;
    ExpertGrads& g = c.grads[e];
    for (int q = 0; q < 2; ++q)
      r.expert_grads(e, q, g[0][q], g[1][q], p.bias ? &g[2][q] : nullptr, p.bias ? &g[3][q] : nullptr);
  }
}

// Folds the weight-gradient metrics of every weight output, one expert and one numerics at a time: its
// FP64 gradients (prepared, or computed now) are released before the next. Each accumulator takes the
// experts in increasing order, whole, as one comparison of the sampled experts would.
void fold_weights(RefCache& c, const BwdParams& p, const CheckContext& ctx) {
  const void* key = &ctx.output(kWeightNames[0]);
  if (c.folded_key == key) return;
  for (auto& m : c.weight_metrics) m.fill(ref::MetricsAccumulator());
  const int nw = p.bias ? kWeightOutputs : 2;
  std::array<std::vector<double>, kWeightOutputs> g;
  std::vector<float> k;
  for (int64_t e : c.experts) {
    const auto pre = c.grads.find(e);
    for (int q = 0; q < 2; ++q) {
      if (pre != c.grads.end()) {
        for (int w = 0; w < nw; ++w) g[w] = std::move(pre->second[w][q]);
      } else {
        c.ref->expert_grads(e, q, g[0], g[1], p.bias ? &g[2] : nullptr, p.bias ? &g[3] : nullptr);
      }
      for (int w = 0; w < nw; ++w) {
        const tensor::HostTensor& out = ctx.output(kWeightNames[w]);
        const int64_t n = weight_size(p, w);
        k.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) k[i] = out.value(e * n + i);
        c.weight_metrics[w][q].add(k.data(), g[w].data(), n);
        std::vector<double>().swap(g[w]);
      }
    }
    if (pre != c.grads.end()) c.grads.erase(pre);
  }
  c.folded_key = key;
}

tensor::CheckResult result(const std::string& name, const tensor::HostTensor& out,
                           const ref::MetricsAccumulator& e, const ref::MetricsAccumulator& q,
                           int64_t compared, int64_t total, bool experts = false,
                           const Tolerance& tol = moe::kMoeTolerance) {
  return tolerance_result(name, out, e.finish(tol.atol_factor), q.finish(tol.atol_factor), true, tol,
                          compared, total, experts);
}

OutputCheck dx_check(const BwdParams& p, std::shared_ptr<RefCache> cache) {
  OutputCheck c;
  c.output = "hidden_states_grad";
  c.reference_flops = kRowBudget + kExpertBudget;
  c.run = [p, cache](const CheckContext& ctx) {
    evaluate(*cache, p, ctx);
    const tensor::HostTensor& out = ctx.output("hidden_states_grad");
    ref::MetricsAccumulator e, q;
    std::vector<double> ex(static_cast<size_t>(p.H)), kq(static_cast<size_t>(p.H));
    std::vector<float> k(static_cast<size_t>(p.H));
    for (int64_t r : cache->rows) {
      cache->ref->dx_row(r, cache->vals, ex.data(), kq.data());
      for (int64_t h = 0; h < p.H; ++h) k[h] = out.value(r * p.H + h);
      e.add(k.data(), ex.data(), p.H);
      q.add(k.data(), kq.data(), p.H);
    }
    return result("hidden_states_grad", out, e, q, static_cast<int64_t>(cache->rows.size()),
                  cache->defined_rows);
  };
  return c;
}

OutputCheck dea_check(const BwdParams& p, std::shared_ptr<RefCache> cache) {
  OutputCheck c;
  c.output = "expert_affinities_masked_grad";
  c.run = [p, cache](const CheckContext& ctx) {
    evaluate(*cache, p, ctx);
    const tensor::HostTensor& out = ctx.output("expert_affinities_masked_grad");
    const int64_t E = p.E;
    ref::MetricsAccumulator e, q;
    std::vector<double> ex(static_cast<size_t>(E)), kq(static_cast<size_t>(E));
    std::vector<float> k(static_cast<size_t>(E));
    for (int64_t t : cache->rows) {
      std::fill(ex.begin(), ex.end(), 0.0);
      std::fill(kq.begin(), kq.end(), 0.0);
      for (int64_t s : cache->ref->slots_of_row(t)) {
        const auto& v = cache->vals.at(s);
        ex[cache->ref->expert(s)] = v[0].dea;
        kq[cache->ref->expert(s)] = v[1].dea;
      }
      for (int64_t x = 0; x < E; ++x) k[x] = out.value(t * E + x);
      e.add(k.data(), ex.data(), E);
      q.add(k.data(), kq.data(), E);
    }
    // nki_library: the float32 output holds bfloat16 values (Phase 1 rounds the summed partials to the
    // compute dtype before the scatter, bwmm_bwd_dropless_mxfp8.py ea_grad_reduced at e9ef98fc), so a sum
    // in another order may round a value to the neighbouring bfloat16: the bound is bfloat16's.
    Tolerance tol = moe::kMoeTolerance;
    if (p.schedule == moe::Schedule::NkiLibrary) tol.max_rel_l2_vs_quantized = kRelL2BoundBf16;
    return result("expert_affinities_masked_grad", out, e, q, static_cast<int64_t>(cache->rows.size()),
                  cache->defined_rows, false, tol);
  };
  return c;
}

OutputCheck weight_check(const BwdParams& p, std::shared_ptr<RefCache> cache, int w) {
  OutputCheck c;
  c.output = kWeightNames[w];
  c.run = [p, cache, w](const CheckContext& ctx) {
    evaluate(*cache, p, ctx);
    fold_weights(*cache, p, ctx);
    const auto& m = cache->weight_metrics[w];
    return result(kWeightNames[w], ctx.output(kWeightNames[w]), m[0], m[1],
                  static_cast<int64_t>(cache->experts.size()), p.E, /*experts=*/true);
  };
  return c;
}

std::vector<OutputCheck> checks(const BwdParams& p) {
  auto cache = std::make_shared<RefCache>();
  std::vector<OutputCheck> v{dx_check(p, cache), dea_check(p, cache), weight_check(p, cache, 0),
                             weight_check(p, cache, 1)};
  // The references read the inputs alone: computed while the simulation runs.
  v.front().prepare = [p, cache](const CheckContext& ctx) { evaluate(*cache, p, ctx, true); };
  if (p.bias) {
    v.push_back(weight_check(p, cache, 2));
    v.push_back(weight_check(p, cache, 3));
  }
  return v;
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
  k.checks = checks;
  k.recipes.push_back(make_recipe<BwdParams, moe::RoutingArgs>(
      "routing", moe::kRoutingDoc, [](const BwdParams&) { return moe::routing_outputs(); }, nullptr,
      [](const BwdParams& p, const moe::RoutingArgs& a, RecipeIO& io) {
        moe::routing_recipe(routing_shape(p), a, io);
      }));
  k.recipes.push_back(make_recipe<BwdParams, CheckpointArgs>(
      "checkpoints",
      "the activation checkpoints checkpoint_config names, as blockwise_mm_fwd_mxfp8 writes them, computed "
      "on the host from hidden_states, gate_up_proj_weight, the routing and the affinities (gate/up GEMMs "
      "with MX-quantized operands, clamps, SiLU, the roundings of the forward kernel); "
      "down_proj_act_checkpoint (AFFINITY_ON_H) also from down_proj_weight: the down GEMM of the "
      "intermediate before the affinity, without bias",
      checkpoint_names,
      [](const BwdParams& p) {
        std::vector<std::string> v{"hidden_states", "gate_up_proj_weight", "token_position_to_id",
                                   "block_to_expert", "expert_affinities_masked"};
        if (p.num_valid_tokens) v.push_back("num_valid_tokens");
        if (p.gate_up_weight_scales) v.push_back("gate_up_weight_scales");
        if (p.checkpoint_config.save_down_proj_act) {
          v.push_back("down_proj_weight");
          if (p.down_weight_scales) v.push_back("down_weight_scales");
        }
        return v;
      },
      checkpoint_recipe));
  k.recipes.push_back(make_recipe<BwdParams, PrequantArgs>(
      "prequantized_weights",
      "pre-quantized weights (x4 data and E8M0 scales) for the weights whose *_weight_scales are set: BF16 "
      "U(low, high) weights drawn in the BF16 layouts as the uniform generator draws them, quantized on the "
      "host as quantize_mx quantizes them on chip, along the contraction of the phase that reads each "
      "(gate/up along 2*I_TP, down along H), in its quant_scheme and scale packing",
      prequant_names, nullptr, prequant_recipe, prequant_check));
  k.input_stats = stats;
  k.check_inputs = [](const BwdParams& p, const Tensors& in) {
    moe::check_routing_inputs(routing_shape(p), in);
    // Above T the count is clamped to T, as the API reference documents; a negative count is no count.
    if (p.num_valid_tokens && in.count("num_valid_tokens")) {
      const int64_t v = in.at("num_valid_tokens").int_value(0);
      if (v < 0) throw InputError(fmt::format("num_valid_tokens[0] = {} is negative: not a token count", v));
    }
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
