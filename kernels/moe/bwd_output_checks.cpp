#include "kernels/moe/bwd_output_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "kernels/moe/bwd_reference.h"
#include "kernels/moe/moe_common.h"
#include "kernels/ref/metrics.h"
#include "sim/base/error.h"
#include "sim/numerics/host_threads.h"

namespace trnsim::kernels::moe {
namespace {

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
    if (r.blocks_of_expert(e).empty()) continue;  // zeros: fold_weights makes them when it reaches them
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

}  // namespace

double bwd_reference_bytes(const BwdParams& p) {
  const double H = static_cast<double>(p.H), I = static_cast<double>(p.I_TP),
               B = static_cast<double>(p.block_size);
  const double IH = I * H;
  // The sampling of evaluate(), every token holding its top_k slots (BwdReference::slot_flops and
  // expert_flops; N blocks of B slots over the experts).
  const int64_t per_row = p.single_expert_dense ? 1 : p.top_k;
  const double gu_flops = p.gate_up_given() ? 0.0 : 4.0 * IH;
  const double slot = 2.0 * (gu_flops + 2.0 * IH), slot_dx = slot + 8.0 * IH;
  const double rows = static_cast<double>(
      sample_groups(p.T, 32, static_cast<double>(p.T * per_row) * slot_dx, kRowBudget, false).size());
  const double experts = static_cast<double>(
      sample_groups(p.E, 1, static_cast<double>(p.N()) * B * (slot + 12.0 * IH), kExpertBudget, false)
          .size());
  const double n = rows * static_cast<double>(per_row);  // sampled slots
  const int64_t ns = static_cast<int64_t>(n), Hi = p.H, Ii = p.I_TP, Bi = p.block_size;
  // RefCache::vals: each sampled slot's dX row in both numerics, held until the checks end.
  const double vals = 16.0 * n * H;
  // BF16 weights are read in place, a block of rows at a time (gemm_weight); pre-quantized ones are decoded
  // whole to FP32 (BwdReference::Weights: gate/up 8 I H, down 4 I H).
  const double weights = (p.gate_up_weight_scales ? 8.0 * IH : 0.0) + (p.down_weight_scales ? 4.0 * IH : 0.0);
  // The weight GEMMs' blocks for m rows: Phase 1's d_int (W_down [I, H]), the recomputed gate/up (W_gu^T
  // [2I, H]), dX (W_gu [H, 2I]).
  const auto blocks = [&](int64_t m) {
    return std::max({gemm_weight_bytes(m, Ii, Hi), p.gate_up_given() ? 0.0 : gemm_weight_bytes(m, 2 * Ii, Hi),
                     gemm_weight_bytes(m, Hi, 2 * Ii)});
  };
  // evaluate(), one expert at a time with at most all n slots: the weights, a weight block, the slots' dY
  // rows (FP64 8 n H, with its FP32 read and quantized copies 20 n H at most; then dX 8 n H) and I-wide rows
  // (phase1's d_int, gate/up, d_gate_up and scaled: 48 n I; then d_gate_up quantized beside d_gate_up and
  // scaled, as much).
  const double evaluate = weights + blocks(ns) + n * (20.0 * H + 48.0 * I);
  // expert_grads() of one expert in one numerics: its two gradients (24 I H), the weights, and per block the
  // block's x and dY rows (transposed FP64, 16 B H, and 20 B H more while phase1 reads dY) and I-wide rows
  // (56 B I: phase1's 48, or d_gate_up and scaled with d_gate_up transposed and quantized), with phase1's
  // weight block or one block of rows of Phase 3's and 4's products (gemm_weight's rows for their widths).
  const double products =
      8.0 * std::max(static_cast<double>(std::min(Hi, weight_block_rows(2 * Ii))) * 2.0 * I,
                     static_cast<double>(std::min(Ii, weight_block_rows(Hi))) * H);
  const double grads = 24.0 * IH + weights + B * (36.0 * H + 56.0 * I) + std::max(blocks(Bi), products);
  // The prepare step's gradients: both numerics of the sampled experts (those with blocks) while they fit,
  // the last one's second numerics being made (in `grads`) while the rest are held.
  const double one = 8.0 * (3.0 * IH + (p.bias ? 2.0 * I + H : 0.0));  // one expert's gradients, one numerics
  const double held = std::min(experts, std::floor(kPreparedGradBytes / (2.0 * one))) * 2.0 * one;
  return vals + std::max(evaluate, std::max(0.0, held - one) + grads);
}

std::vector<OutputCheck> bwd_output_checks(const BwdParams& p) {
  auto cache = std::make_shared<RefCache>();
  std::vector<OutputCheck> v{dx_check(p, cache), dea_check(p, cache), weight_check(p, cache, 0),
                             weight_check(p, cache, 1)};
  // The references read the inputs alone: computed while the simulation runs.
  v.front().prepare = [p, cache](const CheckContext& ctx) { evaluate(*cache, p, ctx, true); };
  if (p.bias) {
    v.push_back(weight_check(p, cache, 2));
    v.push_back(weight_check(p, cache, 3));
  }
  // The checks share one cache: each says its peak, which the memory check counts once.
  const double bytes = bwd_reference_bytes(p);
  for (OutputCheck& c : v) c.reference_bytes = [bytes](const auto&) { return bytes; };
  return v;
}

}  // namespace trnsim::kernels::moe
