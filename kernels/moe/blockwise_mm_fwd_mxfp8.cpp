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
#include "kernels/moe/fwd_reference.h"
#include "kernels/moe/routing.h"
#include "kernels/ref/metrics.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

using moe::CheckpointConfig;
using moe::FwdParams;

// Arguments of the routing recipe.
struct RoutingArgs {
  int64_t seed = 0;
  double zipf = 0.0;
  bool renormalize = true;
  static void describe(Schema<RoutingArgs>& s) {
    s.add(&RoutingArgs::seed, "seed", "seed of the router logits").at_least(0);
    s.add(&RoutingArgs::zipf, "zipf",
          "expert popularity skew: expert e is a token's first choice with probability proportional to "
          "1/(e+1)^zipf (0: uniform)",
          0.0)
        .range(0, 64);
    s.add(&RoutingArgs::renormalize, "renormalize",
          "affinities are the top-k softmax probabilities renormalised to sum to 1 per token (false: the "
          "softmax probabilities over all experts)",
          true);
  }
};

void routing_recipe(const FwdParams& p, const RoutingArgs& a, RecipeIO& io) {
  tensor::HostTensor& tp = io.output("token_position_to_id");
  tensor::HostTensor& be = io.output("block_to_expert");
  tensor::HostTensor& ea = io.output("expert_affinities_masked");
  const int64_t T = p.T, E = p.E, K = p.top_k;
  const moe::TopK r = moe::route_topk(moe::router_logits(static_cast<uint64_t>(a.seed), T, E, a.zipf), T, E,
                                      K, a.renormalize);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      ea.set(t * E + r.experts[t * K + k], static_cast<float>(r.affinities[t * K + k]));
  if (p.no_indirect_load) return;  // the routing tensors are unused dummies
  const moe::Blocks b = moe::form_blocks(r.experts, T, E, K, p.block_size, p.N(), p.pad());
  for (size_t i = 0; i < b.token_position_to_id.size(); ++i)
    tp.set_int(static_cast<int64_t>(i), b.token_position_to_id[i]);
  for (size_t i = 0; i < b.block_to_expert.size(); ++i)
    be.set_int(static_cast<int64_t>(i), b.block_to_expert[i]);
}

std::vector<int32_t> ints(const tensor::HostTensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(t.int_value(static_cast<int64_t>(i)));
  return v;
}

void check_routing(const FwdParams& p, const Tensors& in) {
  if (p.no_indirect_load) return;
  const auto tp = ints(in.at("token_position_to_id")), be = ints(in.at("block_to_expert"));
  moe::validate_routing({&tp, &be, p.T, p.E, p.block_size, p.N(), p.pad()});
}

// Indirect DMAs the kernel emits per block (as fwd_kernel.cpp does): affinity and hidden-row gathers, and per
// down output chunk one gather (read-modify-write) and one scatter.
struct IndirectCounts {
  int64_t gathers = 0, scatters = 0, rows_per_pass = 0;
};
IndirectCounts indirect_counts(const FwdParams& p) {
  IndirectCounts c;
  if (p.no_indirect_load) return c;
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
      {"gather_dma_count", static_cast<double>(c.gathers), "count",
       "indirect DMAs that gather rows (affinities, hidden rows, the scatter's read-modify-write reads)"});
  s.push_back({"scatter_dma_count", static_cast<double>(c.scatters), "count",
               "indirect DMAs that scatter output rows into the slabs"});
  if (p.no_indirect_load) return s;
  const auto tp = ints(in.at("token_position_to_id")), be = ints(in.at("block_to_expert"));
  const moe::RoutingStats r = moe::routing_stats({&tp, &be, p.T, p.E, p.block_size, p.N(), p.pad()});
  const double slots = static_cast<double>(p.N() * p.block_size);
  s.push_back({"tokens_per_expert_min", static_cast<double>(r.tokens_min), "count",
               "fewest (token, expert) pairs routed to one expert"});
  s.push_back({"tokens_per_expert_mean", r.tokens_mean, "count", "(token, expert) pairs per expert"});
  s.push_back({"tokens_per_expert_max", static_cast<double>(r.tokens_max), "count",
               "most (token, expert) pairs routed to one expert"});
  s.push_back({"experts_without_tokens", static_cast<double>(r.experts_without_tokens), "count",
               "experts no token is routed to (their weights are never read)"});
  s.push_back({"padding_fraction", 100.0 * static_cast<double>(r.padding_slots) / slots, "%",
               "slots of the N blocks that hold the padding value (computed, contribute nothing)"});
  s.push_back({"padding_only_blocks", static_cast<double>(r.padding_only_blocks), "count",
               "blocks without any token (still processed, as nkilib does)"});
  const int64_t skipped_rows_per_pass = p.skip() ? r.padding_slots : 0;
  const int64_t G = p.block_size / 128;
  const int64_t passes = c.gathers / std::max<int64_t>(1, p.N() * G);  // gathers per 128-slot tile
  s.push_back(
      {"rows_skipped",
       static_cast<double>(skipped_rows_per_pass * (passes + c.scatters / std::max<int64_t>(1, p.N() * G))),
       "count", "rows the indirect DMAs skip (-1 padding slots times the gather and scatter passes)"});
  return s;
}

// --- checks: one shared reference evaluation for every output.

constexpr double kReferenceBudget = 16e9;  // FP64 work of the sampled references (both numerics)

// nkilib's MXFP8 MoE comparator (test/integration/.../moe_mxfp8/mxfp8_moe_validated_common.py, used by the
// forward and backward suites): allclose with atol = 0.5 max|golden| and rtol 1e-3, cosine >= 0.99,
// normalized Euclidean distance <= 0.70 against the exact reference. The rel L2 bound against the kernel's
// emulated numerics stays the tight one (the output dtype's default bound).
const Tolerance kMoeTolerance{.atol_factor = 0.5,
                              .rtol = 1e-3,
                              .min_cosine = 0.99,
                              .max_norm_euclidean = 0.70,
                              .max_rel_l2_vs_quantized = std::nullopt};

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

// Evenly spaced groups of `group` items out of `total`, so that their cost stays within `budget` (all of them
// with full_reference or when they fit).
std::vector<int64_t> sample(int64_t total, int64_t group, double cost_all, double budget, bool full) {
  int64_t stride = 1;
  const int64_t groups = (total + group - 1) / group;
  if (!full && cost_all > budget)
    stride = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(cost_all / budget)), 1,
                                 std::max<int64_t>(1, groups));
  std::vector<int64_t> v;
  for (int64_t g = 0; g < groups; g += stride)
    for (int64_t i = g * group; i < std::min(total, (g + 1) * group); ++i) v.push_back(i);
  return v;
}

void evaluate(RefCache& c, const FwdParams& p, const CheckContext& ctx) {
  const void* key = &ctx.input("hidden_states");
  if (c.key == key && c.ref) return;
  c = RefCache{};
  c.key = key;
  c.ref = std::make_unique<moe::FwdReference>(p, inputs_of(p, ctx));
  const moe::FwdReference& r = *c.ref;
  const CheckpointConfig& ck = p.checkpoint_config;
  const bool any_ckpt =
      ck.save_gate_up_proj_act || ck.save_scaled_intermediate || ck.save_gate_act || ck.save_intermediate;
  // Half the budget for the output rows (all their slots, with the down GEMM), half for checkpoint blocks.
  double row_cost = 0;
  for (int64_t t = 0; t < p.rows(); ++t)
    row_cost += static_cast<double>(r.slots_of_row(t).size()) * r.slot_flops(true);
  c.rows = sample(p.rows(), 32, row_cost, kReferenceBudget / 2, ctx.full_reference());
  if (any_ckpt) {
    const double block_cost = static_cast<double>(p.block_size) * r.slot_flops(false);
    c.blocks =
        sample(p.N(), 1, block_cost * static_cast<double>(p.N()), kReferenceBudget / 2, ctx.full_reference());
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
    return tolerance_result("output_hidden_states", out, e.finish(kMoeTolerance.atol_factor),
                            q.finish(kMoeTolerance.atol_factor), true, kMoeTolerance,
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
    return tolerance_result(name, out, e.finish(kMoeTolerance.atol_factor),
                            q.finish(kMoeTolerance.atol_factor), true, kMoeTolerance, n * F * I,
                            p.N() * F * I);
  };
  return c;
}

std::vector<OutputCheck> checks(const FwdParams& p) {
  auto cache = std::make_shared<RefCache>();
  std::vector<OutputCheck> v{output_check(p, cache)};
  const CheckpointConfig& ck = p.checkpoint_config;
  using SV = moe::SlotValues;
  if (ck.save_gate_up_proj_act)
    v.push_back(checkpoint_check(p, cache, "gate_up_proj_act_checkpoint_T", {&SV::gate, &SV::up}));
  if (ck.save_scaled_intermediate)
    v.push_back(checkpoint_check(p, cache, "scaled_intermediate_checkpoint_T", {&SV::scaled}));
  if (ck.save_gate_act) v.push_back(checkpoint_check(p, cache, "gate_act_checkpoint_T", {&SV::act}));
  if (ck.save_intermediate)
    v.push_back(checkpoint_check(p, cache, "intermediate_checkpoint_T", {&SV::inter}));
  return v;
}

std::vector<std::string> routing_outputs(const FwdParams&) {
  return {"token_position_to_id", "block_to_expert", "expert_affinities_masked"};
}

}  // namespace

std::unique_ptr<KernelDef> blockwise_mm_fwd_mxfp8_kernel() {
  KernelPackage<FwdParams> k;
  k.name = "blockwise_mm_fwd_mxfp8";
  k.doc =
      "MXFP8 blockwise MoE forward on Trn3 (nkilib blockwise_mm_fwd_mxfp8): per block of block_size token "
      "slots of one expert, gather the tokens, gate/up GEMMs, clamps, SiLU(gate) * up * affinity "
      "(AFFINITY_ON_I), down GEMM, scatter-add into output_hidden_states; writes the activation checkpoints "
      "the backward reads. SHARD_ON_BLOCK over the LNC2 pair";
  k.cores = [](const FwdParams& p) { return p.cores(); };
  k.cores_param = "run_with_lnc2";
  k.build = [](const FwdParams& p, const BuildOptions& options) {
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
  k.recipes.push_back(make_recipe<FwdParams, RoutingArgs>(
      "routing",
      "top-k routing of T tokens over E experts (router logits with a Zipf expert skew, softmax, top-k with "
      "ties to the lower id) into token_position_to_id, block_to_expert and expert_affinities_masked, blocks "
      "formed as nkilib's MoE tests form them; padding -1 or T as skip_dma says",
      routing_outputs, nullptr, routing_recipe));
  k.input_stats = stats;
  k.check_inputs = check_routing;
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
