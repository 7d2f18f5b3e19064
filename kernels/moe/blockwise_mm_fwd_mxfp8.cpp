// blockwise_mm_fwd_mxfp8 (Trn3): the MXFP8 blockwise MoE forward of aws-neuron/nki-library
// (experimental/moe_mxfp8/fwd), with its activation checkpoints for blockwise_mm_bwd_mxfp8. Parameters:
// fwd_params.h; instruction streams: fwd_kernel.h; host reference: fwd_reference.h; routing: routing.h.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "kernels/api/package.h"
#include "kernels/moe/fwd_kernel.h"
#include "kernels/moe/fwd_lib.h"
#include "kernels/moe/fwd_reference.h"
#include "kernels/moe/moe_common.h"
#include "kernels/moe/routing.h"
#include "kernels/ref/metrics.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

using moe::CheckpointConfig;
using moe::FwdParams;

moe::RoutingShape routing_shape(const FwdParams& p) {
  return {p.T, p.E, p.top_k, p.block_size, p.N(), p.pad(), !p.no_indirect_load};
}

void routing_recipe(const FwdParams& p, const moe::RoutingArgs& a, RecipeIO& io) {
  moe::routing_recipe(routing_shape(p), a, io);
}

void check_routing(const FwdParams& p, const Tensors& in) {
  moe::check_routing_inputs(routing_shape(p), in);
}

// Indirect DMAs the kernel emits per block (as fwd_kernel.cpp does): affinity and hidden-row gathers, and per
// down output chunk one gather (read-modify-write) and one scatter.
struct IndirectCounts {
  int64_t gathers = 0, scatters = 0, rows_per_pass = 0;
};
IndirectCounts indirect_counts(const FwdParams& p) {
  IndirectCounts c;
  if (p.no_indirect_load) return c;
  if (p.library()) {
    // Every block emits the same indirect DMAs: counted on a build of one block per core.
    FwdParams one = p;
    one.num_blocks = p.cores();
    const isa::Limits limits = default_limits(isa::Generation::Trn3);
    const moe::FwdLibPlan f = moe::plan_fwd_lib(one, limits);
    const KernelBuild b = build_program([&](Kernel& k) { moe::emit_fwd_lib(k, one, f); },
                                        {.limits = limits, .num_programs = f.cores});
    for (const auto& core : b.program.streams)
      for (const auto& stream : core)
        for (const auto& in : stream)
          if (in.op == isa::Opcode::DmaCopy && in.ops[2].present())
            ++(in.has(isa::kIndirectDst) ? c.scatters : c.gathers);
    c.gathers = c.gathers / p.cores() * p.N(), c.scatters = c.scatters / p.cores() * p.N();
    return c;
  }
  const moe::FwdPlan f = moe::plan_fwd(p, default_limits(isa::Generation::Trn3));
  const int64_t G = f.B / 128;
  const int64_t bn = f.down_plan.block_n * f.down_plan.tile_n;
  int64_t chunks = 0;
  for (int64_t n0 = 0; n0 < f.H; n0 += bn)
    chunks += (std::min(bn, f.H - n0) + f.down_chunk - 1) / f.down_chunk;
  const int64_t per_block_scatters = G * chunks;
  c.gathers = f.N * (G + G * ((f.H + f.gather_chunk - 1) / f.gather_chunk) +
                     (p.is_tensor_update_accumulating ? per_block_scatters : 0));
  c.scatters = f.N * per_block_scatters;
  return c;
}

std::vector<KernelStat> stats(const FwdParams& p, const Tensors& in) {
  std::vector<KernelStat> s;
  const IndirectCounts c = indirect_counts(p);
  s.push_back(
      moe::gather_dma_stat(c.gathers, "affinities, hidden rows, the scatter's read-modify-write reads"));
  s.push_back(moe::scatter_dma_stat(c.scatters, "output rows into the slabs"));
  if (p.no_indirect_load) return s;
  const auto tp = moe::int_values(in.at("token_position_to_id")),
             be = moe::int_values(in.at("block_to_expert"));
  const moe::RoutingStats r = moe::routing_stats({&tp, &be, p.T, p.E, p.block_size, p.N(), p.pad()});
  for (KernelStat& k : moe::routing_kernel_stats(routing_shape(p), in)) s.push_back(std::move(k));
  const int64_t skipped_rows_per_pass = p.skip() ? r.padding_slots : 0;
  const int64_t G = p.block_size / 128;
  const int64_t passes = c.gathers / std::max<int64_t>(1, p.N() * G);  // gathers per 128-slot tile
  s.push_back(moe::rows_skipped_stat(
      static_cast<double>(skipped_rows_per_pass * (passes + c.scatters / std::max<int64_t>(1, p.N() * G)))));
  return s;
}

// --- checks: one shared reference evaluation for every output.

constexpr double kReferenceBudget = 16e9;  // FP64 work of the sampled references (both numerics)

// Whether any [N, slots, I, B] checkpoint is written (compared on sampled blocks).
bool any_checkpoint(const CheckpointConfig& ck) {
  return ck.save_gate_up_proj_act || ck.save_scaled_intermediate || ck.save_gate_act || ck.save_intermediate;
}

struct RefCache {
  const void* key = nullptr;
  std::unique_ptr<moe::FwdReference> ref;
  std::map<int64_t, std::array<moe::SlotValues, 2>> vals;
  std::vector<int64_t> rows, blocks;  // sampled output rows and checkpoint blocks
};

moe::FwdInputs inputs_of(const FwdParams& p, const CheckContext& ctx) {
  return moe::FwdInputs::from(p, [&](const std::string& n) -> const tensor::HostTensor* {
    return ctx.has_input(n) ? &ctx.input(n) : nullptr;
  });
}

void evaluate(RefCache& c, const FwdParams& p, const CheckContext& ctx) {
  const void* key = &ctx.input("hidden_states");
  if (c.key == key && c.ref) return;
  c = RefCache{};
  c.key = key;
  c.ref = std::make_unique<moe::FwdReference>(p, inputs_of(p, ctx));
  const moe::FwdReference& r = *c.ref;
  const bool any_ckpt = any_checkpoint(p.checkpoint_config);
  // Half the budget for the output rows (all their slots, with the down GEMM), half for checkpoint blocks.
  double row_cost = 0;
  for (int64_t t = 0; t < p.rows(); ++t)
    row_cost += static_cast<double>(r.slots_of_row(t).size()) * r.slot_flops(true);
  c.rows = moe::sample_groups(p.rows(), 32, row_cost, kReferenceBudget / 2, ctx.full_reference());
  if (any_ckpt) {
    const double block_cost = static_cast<double>(p.block_size) * r.slot_flops(false);
    c.blocks = moe::sample_groups(p.N(), 1, block_cost * static_cast<double>(p.N()), kReferenceBudget / 2,
                                  ctx.full_reference());
  }
  std::set<int64_t> with_out;
  std::vector<int64_t> slots;
  for (int64_t t : c.rows)
    for (int64_t s : r.slots_of_row(t)) with_out.insert(s);
  slots.assign(with_out.begin(), with_out.end());
  for (int64_t b : c.blocks)
    for (int64_t j = 0; j < p.block_size; ++j)
      if (!with_out.count(b * p.block_size + j)) slots.push_back(b * p.block_size + j);
  c.vals = r.evaluate(slots, with_out);
}

OutputCheck output_check(const FwdParams& p, std::shared_ptr<RefCache> cache) {
  OutputCheck c;
  c.output = "output_hidden_states";
  c.reference_flops = kReferenceBudget;
  c.run = [p, cache](const CheckContext& ctx) {
    evaluate(*cache, p, ctx);
    const tensor::HostTensor& out = ctx.output("output_hidden_states");
    ref::MetricsAccumulator e, q;
    std::vector<double> ex(static_cast<size_t>(p.H)), kq(static_cast<size_t>(p.H));
    std::vector<float> k(static_cast<size_t>(p.H));
    for (int64_t r : cache->rows) {
      cache->ref->output_row(r, cache->vals, ex.data(), kq.data());
      for (int64_t h = 0; h < p.H; ++h) k[h] = out.value(r * p.H + h);
      e.add(k.data(), ex.data(), p.H);
      q.add(k.data(), kq.data(), p.H);
    }
    return tolerance_result("output_hidden_states", out, e.finish(moe::kMoeTolerance.atol_factor),
                            q.finish(moe::kMoeTolerance.atol_factor), true, moe::kMoeTolerance,
                            static_cast<int64_t>(cache->rows.size()), p.rows());
  };
  return c;
}

// A checkpoint [N, slots, I, B]: `fields` are the SlotValues members stored in its slots (gate and up, or
// one of act / inter / scaled), compared on the sampled blocks.
OutputCheck checkpoint_check(const FwdParams& p, std::shared_ptr<RefCache> cache, const std::string& name,
                             std::vector<std::vector<double> moe::SlotValues::*> fields) {
  OutputCheck c;
  c.output = name;
  c.run = [p, cache, name, fields](const CheckContext& ctx) {
    evaluate(*cache, p, ctx);
    const tensor::HostTensor& out = ctx.output(name);
    const int64_t I = p.I_TP, B = p.block_size, F = static_cast<int64_t>(fields.size());
    std::vector<float> kb(static_cast<size_t>(F * I * B));  // one block of the output
    ref::MetricsAccumulator e, q;
    // One block at a time in the checkpoint's [slot, I, B] order.
    std::vector<double> ge(static_cast<size_t>(F * I * B)), gq(ge.size());
    for (int64_t b : cache->blocks) {
      for (int64_t j = 0; j < B; ++j) {
        const auto& v = cache->vals.at(b * B + j);
        for (int64_t f = 0; f < F; ++f) {
          const std::vector<double>&ve = v[0].*fields[f], &vq = v[1].*fields[f];
          for (int64_t i = 0; i < I; ++i) ge[(f * I + i) * B + j] = ve[i], gq[(f * I + i) * B + j] = vq[i];
        }
      }
      for (int64_t x = 0; x < F * I * B; ++x) kb[x] = out.value(b * F * I * B + x);
      e.add(kb.data(), ge.data(), F * I * B);
      q.add(kb.data(), gq.data(), F * I * B);
    }
    const int64_t n = static_cast<int64_t>(cache->blocks.size());
    return tolerance_result(name, out, e.finish(moe::kMoeTolerance.atol_factor),
                            q.finish(moe::kMoeTolerance.atol_factor), true, moe::kMoeTolerance, n * F * I,
                            p.N() * F * I);
  };
  return c;
}

// down_proj_act_checkpoint [N, B, H] (AFFINITY_ON_H): the rows of the slots of the sampled output rows (the
// slots whose down output the reference computes; padding slots that feed no row are not compared).
OutputCheck down_checkpoint_check(const FwdParams& p, std::shared_ptr<RefCache> cache) {
  OutputCheck c;
  c.output = "down_proj_act_checkpoint";
  c.run = [p, cache](const CheckContext& ctx) {
    evaluate(*cache, p, ctx);
    const tensor::HostTensor& out = ctx.output("down_proj_act_checkpoint");
    const int64_t H = p.H;
    ref::MetricsAccumulator e, q;
    std::vector<float> k(static_cast<size_t>(H));
    int64_t n = 0;
    for (int64_t r : cache->rows)
      for (int64_t s : cache->ref->slots_of_row(r)) {
        const auto& v = cache->vals.at(s);
        for (int64_t h = 0; h < H; ++h) k[h] = out.value(s * H + h);
        e.add(k.data(), v[0].down.data(), H);
        q.add(k.data(), v[1].down.data(), H);
        ++n;
      }
    return tolerance_result("down_proj_act_checkpoint", out, e.finish(moe::kMoeTolerance.atol_factor),
                            q.finish(moe::kMoeTolerance.atol_factor), true, moe::kMoeTolerance, n,
                            p.N() * p.block_size);
  };
  return c;
}

// Host bytes the checks hold at most (OutputCheck::reference_bytes, the memory check before a run), from
// the parameters alone: evaluate()'s sample with each token holding its top_k slots (FwdReference::
// slot_flops: 12 I H a slot with its down GEMM, 8 I H without), without --full-reference.
double reference_bytes(const FwdParams& p) {
  const double H = static_cast<double>(p.H), I = static_cast<double>(p.I_TP),
               B = static_cast<double>(p.block_size);
  const double IH = I * H;
  const int64_t per_row = p.no_indirect_load ? 1 : p.top_k;
  const double rows =
      static_cast<double>(moe::sample_groups(p.rows(), 32, static_cast<double>(p.T * per_row) * 12.0 * IH,
                                             kReferenceBudget / 2, false)
                              .size());
  const double blocks =
      any_checkpoint(p.checkpoint_config)
          ? static_cast<double>(moe::sample_groups(p.N(), 1, static_cast<double>(p.N()) * B * 8.0 * IH,
                                                   kReferenceBudget / 2, false)
                                    .size())
          : 0.0;
  const double n_out = rows * static_cast<double>(per_row), n = n_out + blocks * B;  // evaluated slots
  // RefCache::vals: per slot and numerics five I-wide FP64 rows, and the output row (AFFINITY_ON_H: also
  // the down row) of the sampled rows' slots.
  const double on_h = p.affinity_option == moe::AffinityOption::OnH ? 2.0 : 1.0;
  const double vals = 2.0 * (40.0 * I * n + 8.0 * H * on_h * n_out);
  // FwdReference::evaluate(), one expert at a time with at most all n slots: the expert's weights read in
  // place (BF16) or decoded whole to FP32 (pre-quantized or pre-swizzled: gate/up 8 I H, down 4 I H; 8 I H
  // more while a pre-swizzled weight is unswizzled), its slots' hidden rows (FP32 4 n H and both numerics'
  // FP64 16 n H), gate/up in both numerics (32 n I), the down GEMM's operands (24 n I) and product (8 n H),
  // and one block of weight rows with its product (gemm_weight: gate/up [n, 2I] over H, down [n, H] over I).
  const bool sw_gu = p.gate_up_weight_is_swizzled, sw_d = p.down_weight_is_swizzled;
  const double decoded =
      (p.gate_up_weight_scales || sw_gu ? 8.0 * IH : 0.0) + (p.down_weight_scales || sw_d ? 4.0 * IH : 0.0);
  const double unswizzle = sw_gu || sw_d ? 8.0 * IH : 0.0;
  const int64_t ns = static_cast<int64_t>(n);
  const double block =
      std::max(moe::gemm_weight_bytes(ns, 2 * p.I_TP, p.H), moe::gemm_weight_bytes(ns, p.H, p.I_TP));
  const double evaluate = decoded + unswizzle + n * (28.0 * H + 56.0 * I) + block;
  return vals + evaluate;
}

std::vector<OutputCheck> checks(const FwdParams& p) {
  auto cache = std::make_shared<RefCache>();
  std::vector<OutputCheck> v{output_check(p, cache)};
  // The references read the inputs alone: computed while the simulation runs.
  v.front().prepare = [p, cache](const CheckContext& ctx) { evaluate(*cache, p, ctx); };
  const CheckpointConfig& ck = p.checkpoint_config;
  using SV = moe::SlotValues;
  if (ck.save_gate_up_proj_act)
    v.push_back(checkpoint_check(p, cache, "gate_up_proj_act_checkpoint_T", {&SV::gate, &SV::up}));
  if (ck.save_scaled_intermediate)
    v.push_back(checkpoint_check(p, cache, "scaled_intermediate_checkpoint_T", {&SV::scaled}));
  if (ck.save_gate_act) v.push_back(checkpoint_check(p, cache, "gate_act_checkpoint_T", {&SV::act}));
  if (ck.save_intermediate)
    v.push_back(checkpoint_check(p, cache, "intermediate_checkpoint_T", {&SV::inter}));
  if (ck.save_down_proj_act) v.push_back(down_checkpoint_check(p, cache));
  // The checks share one cache: each says its peak, which the memory check counts once.
  const double bytes = reference_bytes(p);
  for (OutputCheck& c : v) c.reference_bytes = [bytes](const auto&) { return bytes; };
  return v;
}

}  // namespace

std::unique_ptr<KernelDef> blockwise_mm_fwd_mxfp8_kernel() {
  KernelPackage<FwdParams> k;
  k.name = "blockwise_mm_fwd_mxfp8";
  k.doc =
      "MXFP8 blockwise MoE forward on Trn3 (nkilib blockwise_mm_fwd_mxfp8): per block of block_size token "
      "slots of one expert, gather the tokens, gate/up GEMMs, clamps, SiLU(gate) * up * affinity "
      "(AFFINITY_ON_I; AFFINITY_ON_H: the down output times the affinity), down GEMM, scatter-add into "
      "output_hidden_states; writes the activation checkpoints the backward reads. SHARD_ON_BLOCK over the "
      "LNC2 pair";
  k.cores = [](const FwdParams& p) { return p.cores(); };
  k.cores_param = "run_with_lnc2";
  k.build = [](const FwdParams& p, const BuildOptions& options) {
    if (p.library()) {
      const moe::FwdLibPlan f = moe::plan_fwd_lib(p, options.limits);
      BuildOptions o = options;
      o.num_programs = f.cores;
      return build_program([&](Kernel& kc) { moe::emit_fwd_lib(kc, p, f); }, o);
    }
    const moe::FwdPlan f = moe::plan_fwd(p, options.limits);
    BuildOptions o = options;
    o.num_programs = f.cores;
    return build_program([&](Kernel& kc) { moe::emit_fwd(kc, p, f); }, o);
  };
  k.useful_flops = [](const FwdParams& p) {
    const double pairs = static_cast<double>(p.T) * (p.no_indirect_load ? 1 : p.top_k);
    return pairs * 6.0 * static_cast<double>(p.H) * static_cast<double>(p.I_TP);
  };
  k.checks = checks;
  k.recipes.push_back(make_recipe<FwdParams, moe::RoutingArgs>(
      "routing", moe::kRoutingDoc, [](const FwdParams&) { return moe::routing_outputs(); }, nullptr,
      routing_recipe));
  k.input_stats = stats;
  k.check_inputs = check_routing;
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
