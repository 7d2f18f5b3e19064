#include "kernels/moe/bwd_recipes.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>

#include "kernels/moe/bwd_reference.h"
#include "kernels/moe/moe_common.h"
#include "sim/base/error.h"
#include "sim/numerics/host_threads.h"
#include "sim/numerics/scale_layout.h"
#include "sim/tensor/input_source.h"

namespace trnsim::kernels::moe {
namespace {

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
  // element(r, i) for every slot r of `slots` (in block order) and i < I, the slots of one block at a time
  // and i outer: the checkpoints' elements (i, j) of a block are then written along their rows (j
  // consecutive), not 2 I rows apart.
  const auto by_block_rows = [&](const std::vector<int64_t>& slots, const auto& element) {
    for (size_t r0 = 0; r0 < slots.size();) {
      size_t r1 = r0 + 1;
      while (r1 < slots.size() && slots[r1] / B == slots[r0] / B) ++r1;
      for (int64_t i = 0; i < I; ++i)
        for (size_t r = r0; r < r1; ++r) element(r, i);
      r0 = r1;
    }
  };
  // The slots without a token.
  const auto write_empty = [&](const std::vector<int64_t>& slots) {
    by_block_rows(slots, [&](size_t r, int64_t i) {
      const int64_t b = slots[r] / B, j = slots[r] % B;
      if (gu) {
        gu->set(((b * 2 + 0) * I + i) * B + j, static_cast<float>(g0));
        gu->set(((b * 2 + 1) * I + i) * B + j, static_cast<float>(u0));
      }
      const int64_t o = (b * I + i) * B + j;
      if (sc) sc->set(o, sc0);
      if (ga) ga->set(o, act0);
      if (it) it->set(o, inter0[0]);
    });
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
        if (t >= 0 && t < p.T)
          slots.push_back(s);
        else
          empty.push_back(s);
      }
    write_empty(empty);
    write_down(empty, inter0, e, y);  // one row, the same for every slot without a token
    if (slots.empty()) return;
    ref.forward_gate_up(e, slots, 1, v);
    std::vector<float> inter(da ? slots.size() * I : 0);
    std::vector<double> a(slots.size());
    for (size_t r = 0; r < slots.size(); ++r) a[r] = ea.value(ref.token(slots[r]) * E + e);
    by_block_rows(slots, [&](size_t r, int64_t i) {
      const double g = v[r * 2 * I + i], u = v[r * 2 * I + I + i];
      write(slots[r], i, g, u, a[r]);
      if (da) inter[r * I + i] = static_cast<float>(moe::round_to(moe::silu(g) * u, cdt));
    });
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

}  // namespace

RoutingShape bwd_routing_shape(const BwdParams& p) {
  return {p.T, p.E, p.top_k, p.block_size, p.N(), p.pad(), !p.single_expert_dense};
}

std::vector<Recipe<BwdParams>> bwd_recipes() {
  std::vector<Recipe<BwdParams>> v;
  v.push_back(make_recipe<BwdParams, RoutingArgs>(
      "routing", kRoutingDoc, [](const BwdParams&) { return routing_outputs(); }, nullptr,
      [](const BwdParams& p, const RoutingArgs& a, RecipeIO& io) {
        routing_recipe(bwd_routing_shape(p), a, io);
      }));
  v.push_back(make_recipe<BwdParams, CheckpointArgs>(
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
  v.push_back(make_recipe<BwdParams, PrequantArgs>(
      "prequantized_weights",
      "pre-quantized weights (x4 data and E8M0 scales) for the weights whose *_weight_scales are set: BF16 "
      "U(low, high) weights drawn in the BF16 layouts as the uniform generator draws them, quantized on the "
      "host as quantize_mx quantizes them on chip, along the contraction of the phase that reads each "
      "(gate/up along 2*I_TP, down along H), in its quant_scheme and scale packing",
      prequant_names, nullptr, prequant_recipe, prequant_check));
  return v;
}

}  // namespace trnsim::kernels::moe
