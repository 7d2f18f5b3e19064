// blockwise_mm_bwd_mxfp8 on the SystemC model (Trn3) on small shapes, each run with numerics and every
// output checked against the FP64 host references (full, not sampled): nkilib's MoE comparator against the
// exact reference and rel L2 against the emulation of the kernel's numerics; the cases of public bug
// reports (an expert without tokens, a token in several blocks, -1 padding, T padding); the documented
// rejections with their messages.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "kernels/moe/bwd_reference.h"
#include "kernels/moe/moe_common.h"
#include "kernels/ref/metrics.h"
#include "sim/base/error.h"
#include "sim/io/npy.h"
#include "sim/numerics/float_formats.h"
#include "sim/tensor/input_source.h"
#include "tests/sim/kernels/test_matmul_mxfp8_util.h"
#include "tests/sim/kernels/test_moe_fwd_util.h"

using namespace trnsim;
using namespace trnsim::test;

namespace {

// The forward's inputs plus dY, the routing and the checkpoints made on the host.
json bwd_inputs(double zipf = 0.5, int64_t seed = 4) {
  json in = moe_inputs(zipf, seed);
  in["output_hidden_states_grad"] = {{"generator", "normal"}, {"seed", 5}};
  in["checkpoints"] = {{"recipe", "checkpoints"}};
  return in;
}

workload::PreparedWorkload prepare_bwd(const json& params, const json& inputs) {
  return prepare_moe(params, inputs, kMoeBwd);
}

// Runs with numerics and full references; `edit` may change inputs after the recipes.
MoeRun run_bwd(const json& params, const json& inputs = bwd_inputs(),
               const std::function<void(kernels::Tensors&)>& edit = {}) {
  return run_moe(params, inputs, edit, kMoeBwd);
}

std::string bwd_error(const json& params) {
  return moe_error(params, bwd_inputs(), kMoeBwd);
}

// Every output checked, passing, and within FP32-vs-FP64 sums (and a few bfloat16 rounding flips) of the
// emulation of the kernel's numerics.
void expect_pass(const MoeRun& r) {
  REQUIRE(r.checks.size() == 4);
  for (const auto& c : r.checks) {
    std::string why;
    for (const auto& f : c.failures) why += f + "; ";
    INFO(c.output << ": " << why);
    CHECK(c.pass);
    CHECK(c.nonfinite == 0);
    CHECK(c.metric("rel_l2_vs_quantized") <= (c.dtype == "bfloat16" ? 1e-3 : 1e-5));
  }
}

void set_bf16_row(tensor::HostTensor& t, int64_t row, float v) {
  const int64_t H = t.shape[1];
  for (int64_t h = 0; h < H; ++h) t.set(row * H + h, v);
}

bool all_zero(const tensor::HostTensor& t, int64_t first, int64_t count) {
  for (int64_t i = first; i < first + count; ++i)
    if (t.value(i) != 0.0f) return false;
  return true;
}

}  // namespace

TEST_CASE("moe bwd: the default config (top-2, both cores, -1 padding) against the references") {
  const MoeRun r = run_bwd(small());
  expect_pass(r);
  CHECK(r.prepared.build.program.num_cores == 2);
  CHECK(r.outputs.at("hidden_states_grad").shape == std::vector<int64_t>{256, 512});
  CHECK(r.outputs.at("expert_affinities_masked_grad").shape == std::vector<int64_t>{256 * 4, 1});
  CHECK(r.outputs.at("gate_up_proj_weight_grad").shape == std::vector<int64_t>{4, 512, 2, 256});
  CHECK(r.outputs.at("down_proj_weight_grad").shape == std::vector<int64_t>{4, 256, 512});
  // The references were full: every row and every expert compared.
  for (const auto& c : r.checks)
    CHECK(c.metric("reference_rows_compared") == c.metric("reference_rows_total"));
  // Phase 2 adds a token's blocks in block order in bfloat16, exactly as the reference emulates.
  CHECK(r.checks[0].output == "hidden_states_grad");
  CHECK(r.checks[0].metric("rel_l2_vs_quantized") == 0.0);
}

TEST_CASE("moe bwd: references prepared on a second thread during the simulation, as trnsim run does") {
  const MoeRun a = run_bwd(small()), b = run_moe_references_alongside(small(), bwd_inputs(), kMoeBwd);
  expect_pass(b);
  expect_same_checks(a, b);
}

TEST_CASE("moe bwd: a token in several blocks accumulates in block order, the same bytes every run") {
  const MoeRun a = run_bwd(small()), b = run_bwd(small());
  // Every token is in two blocks (top-2 over distinct experts).
  const auto& tp = a.inputs.at("token_position_to_id");
  std::vector<int> seen(256, 0);
  for (int64_t i = 0; i < tp.elements(); ++i)
    if (tp.int_value(i) >= 0) ++seen[tp.int_value(i)];
  CHECK(std::count(seen.begin(), seen.end(), 2) == 256);
  for (const char* o : {"hidden_states_grad", "expert_affinities_masked_grad", "gate_up_proj_weight_grad",
                        "down_proj_weight_grad"}) {
    INFO(o);
    CHECK(a.outputs.at(o).bytes == b.outputs.at(o).bytes);
  }
}

TEST_CASE("moe bwd: an expert without tokens gets weight gradients of exactly zero, never NaN") {
  // A strong skew over 8 experts: the last ones get no token (outputs start poisoned with NaN in the model).
  const MoeRun r = run_bwd(small({{"E", 8}}), bwd_inputs(6.0, 3));
  expect_pass(r);
  REQUIRE(r.stat("experts_without_tokens") >= 1);
  const auto& be = r.inputs.at("block_to_expert");
  const auto& tp = r.inputs.at("token_position_to_id");
  const auto& dgu = r.outputs.at("gate_up_proj_weight_grad");
  const auto& dd = r.outputs.at("down_proj_weight_grad");
  int64_t empty = 0;
  for (int64_t e = 0; e < 8; ++e) {
    int64_t tokens = 0;
    for (int64_t s = 0; s < tp.elements(); ++s) tokens += be.int_value(s / 128) == e && tp.int_value(s) >= 0;
    if (tokens > 0) continue;
    ++empty;
    INFO("expert " << e);
    CHECK(all_zero(dgu, e * 512 * 2 * 256, 512 * 2 * 256));
    CHECK(all_zero(dd, e * 256 * 512, 256 * 512));
  }
  CHECK(empty == r.stat("experts_without_tokens"));
}

TEST_CASE("moe bwd: -1 padding never reads or writes a row") {
  // Token 17 is taken out of the routing (its slots become -1) and its rows of hidden_states and dY become
  // NaN: no output may see a NaN, and its gradient rows stay exactly zero.
  int64_t removed = 0;
  const MoeRun r = run_bwd(small(), bwd_inputs(), [&](kernels::Tensors& in) {
    auto& tp = in.at("token_position_to_id");
    for (int64_t i = 0; i < tp.elements(); ++i)
      if (tp.int_value(i) == 17) tp.set_int(i, -1), ++removed;
    set_bf16_row(in.at("hidden_states"), 17, std::nanf(""));
    set_bf16_row(in.at("output_hidden_states_grad"), 17, std::nanf(""));
  });
  CHECK(removed == 2);
  expect_pass(r);
  CHECK(all_zero(r.outputs.at("hidden_states_grad"), 17 * 512, 512));
  CHECK(all_zero(r.outputs.at("expert_affinities_masked_grad"), 17 * 4, 4));
}

TEST_CASE("moe bwd: T padding reads the zero row T and writes only zeros into it") {
  for (bool lnc2 : {true, false}) {
    INFO("run_with_lnc2 " << lnc2);
    const MoeRun r = run_bwd(small({{"skip_dma", {{"skip_token", false}}}, {"run_with_lnc2", lnc2}}),
                             bwd_inputs(), [](kernels::Tensors& in) {
                               set_bf16_row(in.at("hidden_states"), 256, 0.0f);
                               set_bf16_row(in.at("output_hidden_states_grad"), 256, 0.0f);
                             });
    expect_pass(r);
    CHECK(r.prepared.build.program.num_cores == (lnc2 ? 2 : 1));
    CHECK(r.outputs.at("hidden_states_grad").shape == std::vector<int64_t>{257, 512});
    CHECK(all_zero(r.outputs.at("hidden_states_grad"), 256 * 512, 512));
    CHECK(all_zero(r.outputs.at("expert_affinities_masked_grad"), 256 * 4, 4));
  }
}

TEST_CASE("moe bwd: top-1 overwrite scatter, clamps, every checkpoint given, E5M2 without packing",
          "[heavy]") {
  expect_pass(run_bwd(small({{"top_k", 1}, {"accumulate_hidden_states_grad", false}})));
  expect_pass(run_bwd(small({{"clamp_limits",
                              {{"linear_clamp_upper_limit", 1.0},
                               {"linear_clamp_lower_limit", -1.0},
                               {"non_linear_clamp_upper_limit", 1.0}}}})));
  expect_pass(
      run_bwd(small({{"checkpoint_config", {{"save_gate_act", true}, {"save_intermediate", true}}}})));
  expect_pass(run_bwd(
      small({{"fp8_x4_dtype", "float8_e5m2_x4"}, {"use_scale_packing", false}, {"spill_reload", false}})));
}

TEST_CASE("moe bwd: gate/up recomputed without their checkpoint, Phase 4 from Phase 1", "[heavy]") {
  const json none = {{"save_gate_up_proj_act", false}, {"save_scaled_intermediate", false}};
  expect_pass(run_bwd(small({{"I_TP", 1024}, {"checkpoint_config", none}})));
  expect_pass(run_bwd(small({{"I_TP", 512},
                             {"run_with_lnc2", false},
                             {"checkpoint_config", none},
                             {"clamp_limits", {{"non_linear_clamp_upper_limit", 3.0}}}})));
}

TEST_CASE("moe bwd: blocks of 512 on one core", "[heavy]") {
  expect_pass(run_bwd(
      small({{"T", 1024}, {"H", 1024}, {"I_TP", 512}, {"block_size", 512}, {"run_with_lnc2", false}})));
}

TEST_CASE("moe bwd: rejected parameters name the parameter and the documented reason") {
  const std::string k = "kernel 'blockwise_mm_bwd_mxfp8': ";
  const auto err = [](const json& extra) { return bwd_error(small(extra)); };
  CHECK_THAT(
      err({{"clamp_limits", {{"non_linear_clamp_lower_limit", 7.5}, {"non_linear_clamp_upper_limit", 7}}}}),
      Catch::EndsWith(k + "parameter 'clamp_limits': non_linear_clamp_lower_limit = 7.5 is above "
                          "non_linear_clamp_upper_limit = 7"));
  CHECK_THAT(err({{"num_valid_tokens", true}}),
             Catch::EndsWith(k + "parameter 'num_valid_tokens': needs single_expert_dense (the count bounds "
                                 "the dense mode's block loop; routed blocks are bounded by "
                                 "token_position_to_id)"));
  CHECK_THAT(err({{"num_valid_tokens", true}, {"single_expert_dense", true}, {"bias", true}}),
             Catch::EndsWith(k + "parameters 'num_valid_tokens' and 'bias': bias is not supported in "
                                 "single_expert_dense mode"));
  CHECK_THAT(
      err({{"num_valid_tokens", true}, {"single_expert_dense", true}}),
      Catch::EndsWith(k + "parameters 'num_valid_tokens' and 'checkpoint_config.save_scaled_intermediate': "
                          "the forward leaves the checkpoint's rows past num_valid_tokens undefined; "
                          "Phase 4 must use Phase 1's scaled intermediate"));
  CHECK_THAT(
      err({{"block_size", 384}}),
      Catch::EndsWith(k + "parameter 'block_size': must be 128, 256, 512, 1024, 2048 or 4096, got 384"));
  CHECK_THAT(err({{"activation_type", "GELU_Tanh_Approx"}}),
             Catch::EndsWith(k + "parameter 'activation_type' = GELU_Tanh_Approx: only ActFnType.SiLU is "
                                 "implemented in blockwise_mm_bwd_mxfp8 (nki-library's entry asserts it; the "
                                 "library's MXFP8 MoE kernels accept no other activation)"));
  CHECK_THAT(err({{"I_TP", 384}}),
             Catch::EndsWith(k + "parameter 'I_TP' = 384 must be a multiple of 256 (128 per core: "
                                 "SHARD_ON_FREE gives each of the 2 core(s) I_TP / 2 rows of x4 data in "
                                 "groups of 128; a model whose size is not, e.g. 2880, runs zero-padded to "
                                 "the next multiple, 3072)"));
  CHECK_THAT(
      err({{"accumulate_hidden_states_grad", false}}),
      Catch::EndsWith(k + "parameter 'accumulate_hidden_states_grad' = false overwrites a token's rows "
                          "with each of its blocks: only valid for top_k = 1, got top_k = 2"));
  CHECK_THAT(err({{"checkpoint_config", {{"save_gate_up_proj_act", false}}}}),
             Catch::EndsWith(k + "checkpoint_config.save_gate_up_proj_act = false: recomputing gate/up reads "
                                 "the [H, I_TP] weight slices K-by-F, which needs I_TP per core % 512 == 0, "
                                 "got I_TP / 2 = 128 (give the checkpoint)"));
  CHECK_THAT(err({{"top_k", 5}}), Catch::EndsWith(k + "parameter 'top_k' = 5 is more than E = 4 experts"));
  CHECK_THAT(err({{"compute_dtype", "float32"}}),
             Catch::Contains("parameter 'compute_dtype': expected one of bfloat16, got \"float32\""));
  CHECK_THAT(
      err({{"bias", true}, {"checkpoint_config", {{"save_gate_up_proj_act", false}}}}),
      Catch::EndsWith(k + "parameters 'bias' and 'checkpoint_config.save_gate_up_proj_act' = false: "
                          "recomputing gate/up would need the gate/up bias, which is not an input of the "
                          "backward; give the checkpoint"));
  CHECK_THAT(
      err({{"single_expert_dense", true}}),
      Catch::EndsWith(k + "parameter 'single_expert_dense': needs exactly one expert (E = 1), got E = 4"));
  CHECK_THAT(
      err({{"single_expert_dense", true}, {"E", 1}, {"top_k", 1}}),
      Catch::EndsWith(k + "parameter 'single_expert_dense': needs accumulate_hidden_states_grad = false "
                          "(each token is in one block)"));
  CHECK_THAT(err({{"affinity_option", "AFFINITY_ON_H"}}),
             Catch::EndsWith(k + "parameter 'affinity_option' = AFFINITY_ON_H: needs "
                                 "checkpoint_config.save_down_proj_act (down_proj_act_checkpoint): the "
                                 "affinity gradient is the sum over H of the down projection's output times "
                                 "dY, which the backward does not recompute"));
  CHECK_THAT(
      err({{"affinity_option", "AFFINITY_ON_H"},
           {"bias", true},
           {"checkpoint_config", {{"save_down_proj_act", true}, {"save_scaled_intermediate", false}}}}),
      Catch::EndsWith(k + "parameters 'affinity_option' = AFFINITY_ON_H and 'bias': the affinity "
                          "gradient under AFFINITY_ON_H is the sum over H of dY times the down output "
                          "with its bias (nkilib: (h W_down + b_down) x affinity), while "
                          "down_proj_act_checkpoint holds the down GEMM's output without the bias, "
                          "which is not an input of the backward; use AFFINITY_ON_I with bias"));
  CHECK_THAT(err({{"checkpoint_config", {{"save_down_proj_act", true}}}}),
             Catch::EndsWith(k + "parameter 'checkpoint_config.save_down_proj_act': down_proj_act_checkpoint "
                                 "is for AFFINITY_ON_H only (AFFINITY_ON_I derives the affinity gradient in "
                                 "Phase 1)"));
  CHECK_THAT(
      err({{"affinity_option", "AFFINITY_ON_H"}, {"checkpoint_config", {{"save_down_proj_act", true}}}}),
      Catch::EndsWith(k + "parameters 'affinity_option' = AFFINITY_ON_H and "
                          "'checkpoint_config.save_scaled_intermediate': the forward never forms "
                          "intermediate x affinity under AFFINITY_ON_H; Phase 4 reads the unscaled "
                          "intermediate (intermediate_checkpoint_T with save_intermediate, else Phase "
                          "1's)"));
  CHECK_THAT(err({{"I_TP", 1024},
                  {"gate_up_weight_scales", {4, 512, 512}},
                  {"checkpoint_config", {{"save_gate_up_proj_act", false}}}}),
             Catch::EndsWith(k + "parameters 'gate_up_weight_scales' and "
                                 "'checkpoint_config.save_gate_up_proj_act' = false: recomputing gate/up "
                                 "contracts the weights over H, but pre-quantized gate/up weights are "
                                 "quantized along Phase 2's contraction 2*I_TP; give the checkpoint"));
  // The scales' shapes of the backward's layouts: gate/up along 2*I_TP, down along H.
  CHECK_THAT(
      err({{"gate_up_weight_scales", {4, 100, 512}}}),
      Catch::EndsWith(k + "parameter 'gate_up_weight_scales': shape [4, 100, 512] is neither [E, "
                          "2*I_TP/4, H] = [4, 128, 512] (unpacked) nor [E, ceil(2*I_TP/2048)*128, H] = "
                          "[4, 128, 512] (packed)"));
  CHECK_THAT(
      err({{"down_weight_scales", {4, 64, 256}}}),
      Catch::EndsWith(k + "parameter 'down_weight_scales': shape [4, 64, 256] is neither [E, H/4, "
                          "I_TP] = [4, 128, 256] (unpacked) nor [E, ceil(H/2048)*128, I_TP] = [4, 128, "
                          "256] (packed)"));
  CHECK_THAT(err({{"I_TP", 1024}, {"gate_up_weight_scales", {4, 128, 512}}, {"use_scale_packing", false}}),
             Catch::EndsWith(k + "parameter 'gate_up_weight_scales': use_scale_packing = false but the shape "
                                 "[4, 128, 512] is the packed layout"));
  CHECK(err(json::object()) == "no error");
}

// Every check of a bias run passes, the bias gradients within the kernel numerics' emulation.
void expect_bias_pass(bool lnc2) {
  const MoeRun r = run_bwd(small({{"bias", true}, {"run_with_lnc2", lnc2}}));
  REQUIRE(r.checks.size() == 6);
  for (const auto& c : r.checks) {
    INFO(c.output);
    CHECK(c.pass);
    CHECK(c.metric("rel_l2_vs_quantized") <= (c.dtype == "bfloat16" ? 1e-3 : 1e-5));
  }
  CHECK(r.outputs.at("gate_and_up_proj_bias_grad").shape == std::vector<int64_t>{4, 2, 256});
  CHECK(r.outputs.at("down_proj_bias_grad").shape == std::vector<int64_t>{4, 512});
}

TEST_CASE("moe bwd: bias gradients on both cores") {
  expect_bias_pass(true);
}

TEST_CASE("moe bwd: bias gradients on one core", "[heavy]") {
  expect_bias_pass(false);
}

TEST_CASE(
    "moe bwd: the weight-gradient checks, folded one expert and one numerics at a time, give the "
    "metrics of one comparison of every expert") {
  const MoeRun r = run_bwd(small({{"bias", true}}));
  kernels::moe::BwdParams p;
  p.schedule = kernels::moe::Schedule::TrnsimOptimized;  // the schedule run_bwd runs
  p.T = 256, p.H = 512, p.I_TP = 256, p.E = 4, p.top_k = 2, p.block_size = 128, p.bias = true;
  p.skip_dma.skip_token = true;
  const auto lookup = [&](const std::string& n) -> const tensor::HostTensor* {
    return r.inputs.count(n) ? &r.inputs.at(n) : nullptr;
  };
  const kernels::moe::BwdReference ref(p, kernels::moe::BwdInputs::from(p, lookup));
  // Every expert's golden values of the four weight outputs, concatenated: [w][q].
  std::array<std::array<std::vector<double>, 2>, 4> all;
  for (int64_t e = 0; e < p.E; ++e) {
    std::array<std::array<std::vector<double>, 2>, 4> g;
    ref.expert_grads(e, g[0], g[1], &g[2], &g[3]);
    for (int q = 0; q < 2; ++q) {
      // One numerics alone gives the same values.
      std::array<std::vector<double>, 4> one;
      ref.expert_grads(e, q, one[0], one[1], &one[2], &one[3]);
      for (int w = 0; w < 4; ++w) {
        CHECK(one[w] == g[w][q]);
        all[w][q].insert(all[w][q].end(), g[w][q].begin(), g[w][q].end());
      }
    }
  }
  const char* names[4] = {"gate_up_proj_weight_grad", "down_proj_weight_grad", "gate_and_up_proj_bias_grad",
                          "down_proj_bias_grad"};
  const auto& tol = kernels::moe::kMoeTolerance;
  for (int w = 0; w < 4; ++w) {
    INFO(names[w]);
    const std::vector<float> k = r.outputs.at(names[w]).values();
    REQUIRE(all[w][0].size() == k.size());
    const ref::ErrorMetrics e = ref::compare(k.data(), all[w][0].data(), static_cast<int64_t>(k.size()),
                                             tol.atol_factor, tol.rtol),
                            q = ref::compare(k.data(), all[w][1].data(), static_cast<int64_t>(k.size()),
                                             tol.atol_factor, tol.rtol);
    const tensor::CheckResult& c = r.check(names[w]);
    CHECK(c.metric("reference_rows_compared") == 4);
    CHECK(c.metric("max_abs_err") == e.max_abs_err);
    CHECK(c.metric("rel_l2_vs_exact") == e.rel_l2);
    CHECK(c.metric("cosine_vs_exact") == e.cosine);
    CHECK(c.metric("normalized_euclidean_vs_exact") == e.norm_euclidean);
    CHECK(c.metric("max_abs_golden") == e.max_abs_golden);
    CHECK(c.metric("allclose_vs_exact") == (e.allclose ? 1.0 : 0.0));
    CHECK(c.metric("rel_l2_vs_quantized") == q.rel_l2);
    CHECK(c.metric("max_abs_err_vs_quantized") == q.max_abs_err);
    CHECK(c.metric("cosine_vs_quantized") == q.cosine);
    CHECK(e.rel_l2 > 0.0);  // the kernel's MX quantization is visible against the exact reference
  }
}

TEST_CASE("moe bwd: skip_grad_initialization leaves the zeroing to the caller") {
  // The model starts every output poisoned (NaN): the caller's zeros are set first (the outputs the kernel
  // names, as `trnsim run` sets them), and the kernel adds.
  // WorkloadRun (as `trnsim run`) sets the zeros the kernel leaves to its caller.
  workload::WorkloadRun run(prepare_bwd(small({{"skip_grad_initialization", true}}), bwd_inputs()));
  CHECK(prepare_bwd(small(), bwd_inputs()).kernel->zeroed_outputs().empty());
  const std::vector<std::string> zeroed = run.prepared().kernel->zeroed_outputs();
  CHECK(zeroed == std::vector<std::string>{"hidden_states_grad", "expert_affinities_masked_grad",
                                           "gate_up_proj_weight_grad", "down_proj_weight_grad"});
  run.run({.full_reference = true});
  CHECK(run.notes().back() ==
        "outputs hidden_states_grad, expert_affinities_masked_grad, gate_up_proj_weight_grad, "
        "down_proj_weight_grad start at zero, set by trnsim as the caller (kernel parameters leave their "
        "initialization to the caller)");
  MoeRun r{std::move(run.prepared())};
  r.inputs = std::move(run.inputs());
  r.outputs = std::move(run.outputs());
  r.result = run.result();
  r.checks = run.checks();
  expect_pass(r);
  // The zeroing DMAs are gone: fewer instructions than with the default.
  const auto count = [](const isa::Program& p) {
    size_t n = 0;
    for (const auto& core : p.streams)
      for (const auto& stream : core) n += stream.size();
    return n;
  };
  CHECK(count(r.prepared.build.program) < count(prepare_bwd(small(), bwd_inputs()).build.program));
}

namespace {

// Dense mode on one expert: 512 tokens in 4 contiguous blocks of 128, both cores, with num_valid_tokens.
json dense_params() {
  return {{"T", 512},
          {"H", 512},
          {"I_TP", 256},
          {"E", 1},
          {"top_k", 1},
          {"block_size", 128},
          {"single_expert_dense", true},
          {"accumulate_hidden_states_grad", false},
          {"num_valid_tokens", true},
          {"checkpoint_config", {{"save_scaled_intermediate", false}}}};
}

json dense_inputs(int64_t count) {
  json in = bwd_inputs();
  in["num_valid_tokens"] = {{"generator", "constant"}, {"value", count}};
  return in;
}

// Instructions of both cores per phase name.
std::map<std::string, int64_t> phase_counts(const isa::Program& prog) {
  std::map<std::string, int64_t> n;
  for (const auto& core : prog.streams)
    for (const auto& stream : core)
      for (const auto& in : stream) ++n[prog.phases[in.phase]];
  return n;
}

}  // namespace

TEST_CASE("moe bwd: single_expert_dense with num_valid_tokens: the rows past the count are never computed") {
  // The first 300 of 512 tokens are valid: the dynamic block loop runs ceil(300 / 128) = 3 blocks.
  const MoeRun r = run_bwd(dense_params(), dense_inputs(300));
  expect_pass(r);
  CHECK(r.outputs.at("hidden_states_grad").shape == std::vector<int64_t>{512, 512});
  CHECK(r.checks[0].metric("reference_rows_compared") == 300);
  // Rows 300.. stay as the setup zeroed them (nkilib leaves them undefined).
  CHECK(all_zero(r.outputs.at("hidden_states_grad"), 300 * 512, 212 * 512));
  // Without the count every row is computed.
  json full = dense_params();
  full.erase("num_valid_tokens");
  full["checkpoint_config"] = json::object();
  const MoeRun f = run_bwd(full);
  expect_pass(f);
  CHECK(f.checks[0].metric("reference_rows_compared") == 512);
}

TEST_CASE(
    "moe bwd: num_valid_tokens bounds the dense block loop: no work and no time for the blocks past it") {
  // 512 tokens in N = 4 blocks of 128: counts 512, 300 and 100 run 4, ceil(300 / 128) = 3 and 1 blocks.
  const MoeRun all = run_bwd(dense_params(), dense_inputs(512));
  const MoeRun three = run_bwd(dense_params(), dense_inputs(300));
  const MoeRun one = run_bwd(dense_params(), dense_inputs(100));
  for (const MoeRun* r : {&all, &three, &one}) expect_pass(*r);
  // The program holds the executed blocks only: every per-block phase has 3/4 and 1/4 of the instructions
  // of the 4-block run (each block emits the same ones), and the affinity-gradient scatter covers the
  // executed blocks' 128-token tiles (4, 3, 1: one DMA each, over both cores). Phase 1 of the last executed
  // block also masks the checkpoint values past the count: 4 instructions (iota, is_lt, two selects) per
  // epilogue step, one step of [128 rows of I, 128 slots] per core (I_TP / 2 = 128 = B): 8.
  const auto na = phase_counts(all.prepared.build.program), n3 = phase_counts(three.prepared.build.program),
             n1 = phase_counts(one.prepared.build.program);
  for (const char* ph : {"gather", "P1", "P2", "P3", "P4"}) {
    INFO(ph);
    const int64_t m = std::string(ph) == "P1" ? 8 : 0;
    REQUIRE(na.at(ph) > 0);
    CHECK((n3.at(ph) - m) * 4 == (na.at(ph) - m) * 3);
    CHECK((n1.at(ph) - m) * 4 == na.at(ph) - m);
  }
  CHECK(na.at("setup") == n1.at("setup"));
  CHECK(three.stat("gather_dma_count") * 4 == all.stat("gather_dma_count") * 3);
  // Skipped slots: only those of the last executed block past the count (3 * 128 - 300 = 84, 128 - 100 =
  // 28), times the indirect passes over a block's slots.
  CHECK(all.stat("rows_skipped") == 0);
  CHECK(three.stat("rows_skipped") > 0);
  CHECK(three.stat("rows_skipped") * 28 == one.stat("rows_skipped") * 84);
  // The valid rows' gradients are the same bytes whatever the count (dense: each token in one block).
  const auto same_rows = [&](const MoeRun& a, const MoeRun& b, const char* out, int64_t rows, int64_t w) {
    const auto& x = a.outputs.at(out).bytes;
    const auto& y = b.outputs.at(out).bytes;
    const int64_t n = rows * w * static_cast<int64_t>(x.size() / a.outputs.at(out).elements());
    return std::equal(x.begin(), x.begin() + n, y.begin());
  };
  CHECK(same_rows(all, three, "hidden_states_grad", 300, 512));
  CHECK(same_rows(all, one, "hidden_states_grad", 100, 512));
  CHECK(same_rows(all, three, "expert_affinities_masked_grad", 300, 1));
  // Simulated time: each block costs about the same, so dropping 1 block (512 -> 300) saves about half of
  // what dropping 2 more (300 -> 100) saves.
  const double ta = all.result.stats.total_time.ns(), t3 = three.result.stats.total_time.ns(),
               t1 = one.result.stats.total_time.ns();
  INFO("4 blocks " << ta << " ns, 3 blocks " << t3 << " ns, 1 block " << t1 << " ns");
  CHECK(t1 < t3);
  CHECK(t3 < ta);
  CHECK(std::abs((t3 - t1) / 2 - (ta - t3)) < 0.25 * (ta - t3));
  // A count above T is clamped to T (nki-library API reference): all 4 blocks run, the bytes of count 512.
  const MoeRun over = run_bwd(dense_params(), dense_inputs(1000));
  expect_pass(over);
  CHECK(phase_counts(over.prepared.build.program) == na);
  for (const char* out : {"hidden_states_grad", "expert_affinities_masked_grad", "gate_up_proj_weight_grad",
                          "down_proj_weight_grad"})
    CHECK(over.outputs.at(out).bytes == all.outputs.at(out).bytes);
  CHECK(over.result.stats.total_time.ns() == ta);
  // Count 0 runs no block: setup only, no per-block or affinity-gradient instruction.
  const auto zero = phase_counts(prepare_bwd(dense_params(), dense_inputs(0)).build.program);
  for (const char* ph : {"gather", "P1", "P2", "P3", "P4", "dEA"}) CHECK(zero.count(ph) == 0);
}

TEST_CASE(
    "moe bwd: num_valid_tokens: the inputs come from a declaration build without blocks, so a large T "
    "with a small count builds the blocks the count needs only") {
  // The workload learns how to make num_valid_tokens from a declaration build: the full build's inputs and
  // outputs (its scratch tensors may be fewer), no instruction.
  const workload::PreparedWorkload w = prepare_bwd(dense_params(), dense_inputs(100));
  const kernels::KernelBuild decl = w.kernel->build(
      {.limits = w.hw.limits(), .num_programs = w.cores, .max_instructions = 0, .declare_only = true});
  CHECK(decl.inputs == w.build.inputs);
  CHECK(decl.outputs == w.build.outputs);
  const auto find = [](const isa::Program& prog, const std::string& name) {
    const auto it = std::find_if(prog.tensors.begin(), prog.tensors.end(),
                                 [&](const isa::TensorDecl& t) { return t.name == name; });
    REQUIRE(it != prog.tensors.end());
    return *it;
  };
  for (const auto* names : {&w.build.inputs, &w.build.outputs})
    for (const std::string& n : *names) {
      INFO(n);
      const isa::TensorDecl a = find(decl.program, n), b = find(w.build.program, n);
      CHECK((a.dtype == b.dtype && a.shape == b.shape));
    }
  for (const auto& core : decl.program.streams)
    for (const auto& stream : core) CHECK(stream.empty());
  // T = 262144 slots in N = 256 blocks of 1024 at Llama-3.1-8B's MLP shape (all 256 blocks would be more
  // than the 4M-instruction limit): count 1 builds one block, as count 1024 does, and count 2048 two.
  const auto dense = [](int64_t count) {
    json p = dense_params();
    p.merge_patch({{"T", 262144}, {"H", 4096}, {"I_TP", 14336}, {"block_size", 1024}});
    return phase_counts(prepare_bwd(p, dense_inputs(count)).build.program);
  };
  const auto one = dense(1), full = dense(1024), two = dense(2048);
  for (const char* ph : {"gather", "P1", "P2", "P3", "P4"}) {
    INFO(ph);
    CHECK(one.at(ph) == full.at(ph));
  }
  CHECK(two.at("P3") == 2 * one.at("P3"));
}

namespace {

// BF16 N(0, std) values, as raw bits.
std::vector<uint16_t> normal_bf16(int64_t n, uint32_t seed, float std) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, std);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = num::f32_to_bf16(d(gen));
  return v;
}

json npy_input(const std::string& name, io::NpyDType dt, const std::vector<int64_t>& shape,
               const void* data) {
  const std::string path = (moe_tmp_dir() / (name + ".npy")).string();
  io::write_npy(path, dt, shape, data);
  return json{{"npy", path}};
}

double rel_l2(const tensor::HostTensor& a, const tensor::HostTensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.elements(); ++i) {
    const double x = a.value(i), y = b.value(i);
    num += (x - y) * (x - y), den += y * y;
  }
  return std::sqrt(num / den);
}

const char* const kGrads[] = {"hidden_states_grad", "expert_affinities_masked_grad",
                              "gate_up_proj_weight_grad", "down_proj_weight_grad"};

}  // namespace

TEST_CASE("moe bwd: pre-quantized weights give the bytes of the on-chip quantization") {
  // The weights' x4 data and scales made on the host along each phase's contraction (gate/up [H, 2*I_TP]
  // along 2*I_TP for Phase 2, down [I_TP, H] along H for Phase 1), as quantize_mx makes them on chip: the
  // gradients are the bytes of the BF16-weight run, with the same checkpoints.
  const int64_t E = 4, H = 512, I = 256;
  const auto wgu = normal_bf16(E * H * 2 * I, 61, 0.05f), wd = normal_bf16(E * I * H, 62, 0.05f);
  json in = bwd_inputs();
  in["gate_up_proj_weight"] = npy_input("bwd_wgu", io::NpyDType::U16, {E, H, 2, I}, wgu.data());
  in["down_proj_weight"] = npy_input("bwd_wd", io::NpyDType::U16, {E, I, H}, wd.data());
  const MoeRun ref = run_bwd(small(), in);
  expect_pass(ref);
  const auto expert = [](const std::vector<uint16_t>& w, int64_t e, int64_t n) {
    return std::vector<uint16_t>(w.begin() + e * n, w.begin() + (e + 1) * n);
  };
  for (bool packed : {true, false}) {
    INFO("packed " << packed);
    Bytes d1, s1, d2, s2;
    for (int64_t e = 0; e < E; ++e) {
      const auto ge = expert(wgu, e, H * 2 * I), de = expert(wd, e, I * H);
      // Logical [K, F]: gate/up K = 2I, F = H (element (k, h) at ge[h * 2I + k]); down K = H, F = I.
      auto [a, b] =
          prequantized({&ge, 2 * I, H, false}, num::QuantScheme::WrapX, num::Fp8Format::E4M3FN, packed);
      auto [c, d] = prequantized({&de, H, I, false}, num::QuantScheme::WrapX, num::Fp8Format::E4M3FN, packed);
      d1.insert(d1.end(), a.begin(), a.end()), s1.insert(s1.end(), b.begin(), b.end());
      d2.insert(d2.end(), c.begin(), c.end()), s2.insert(s2.end(), d.begin(), d.end());
    }
    // 2I = 512 and H = 512: one 512-row K tile, so the packed and unpacked scales have the same shape.
    const int64_t sgu = 2 * I / 4, sd = H / 4;
    json q = bwd_inputs();
    q["gate_up_proj_weight"] = npy_input("bwd_qgu", io::NpyDType::I32, {E, 2 * I / 4, H}, d1.data());
    q["gate_up_weight_scales"] = npy_input("bwd_sgu", io::NpyDType::U8, {E, sgu, H}, s1.data());
    q["down_proj_weight"] = npy_input("bwd_qd", io::NpyDType::I32, {E, H / 4, I}, d2.data());
    q["down_weight_scales"] = npy_input("bwd_sd", io::NpyDType::U8, {E, sd, I}, s2.data());
    const MoeRun r =
        run_bwd(small({{"use_scale_packing", packed},
                       {"gate_up_weight_scales", {E, sgu, H}},
                       {"down_weight_scales", {E, sd, I}}}),
                q, [&](kernels::Tensors& t) {
                  for (const char* c : {"gate_up_proj_act_checkpoint_T", "scaled_intermediate_checkpoint_T"})
                    t.at(c) = ref.inputs.at(c);
                });
    expect_pass(r);
    CHECK(r.prepared.input("gate_up_proj_weight")->shape == std::vector<int64_t>{E, 2 * I / 4, H});
    for (const char* o : kGrads) {
      INFO(o);
      CHECK(r.outputs.at(o).bytes == ref.outputs.at(o).bytes);
    }
  }
}

TEST_CASE("moe bwd: pre-quantized weights with packed scales over several K tiles", "[heavy]") {
  // I_TP = 1024: Phase 2's K = 2048 is four 512-row tiles sharing one packed scale tile ([E, 128, H]); H =
  // 512 keeps the down scales [E, 128, I_TP]. The checkpoint recipe reads the dequantized gate/up weights.
  const int64_t E = 4, H = 512, I = 1024;
  const auto wgu = normal_bf16(E * H * 2 * I, 63, 0.05f), wd = normal_bf16(E * I * H, 64, 0.05f);
  Bytes d1, s1, d2, s2;
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<uint16_t> ge(wgu.begin() + e * H * 2 * I, wgu.begin() + (e + 1) * H * 2 * I),
        de(wd.begin() + e * I * H, wd.begin() + (e + 1) * I * H);
    auto [a, b] = prequantized({&ge, 2 * I, H, false}, num::QuantScheme::WrapX, num::Fp8Format::E4M3FN, true);
    auto [c, d] = prequantized({&de, H, I, false}, num::QuantScheme::WrapX, num::Fp8Format::E4M3FN, true);
    d1.insert(d1.end(), a.begin(), a.end()), s1.insert(s1.end(), b.begin(), b.end());
    d2.insert(d2.end(), c.begin(), c.end()), s2.insert(s2.end(), d.begin(), d.end());
  }
  json q = bwd_inputs();
  q["gate_up_proj_weight"] = npy_input("bwd_qgu2", io::NpyDType::I32, {E, 2 * I / 4, H}, d1.data());
  q["gate_up_weight_scales"] = npy_input("bwd_sgu2", io::NpyDType::U8, {E, 128, H}, s1.data());
  q["down_proj_weight"] = npy_input("bwd_qd2", io::NpyDType::I32, {E, H / 4, I}, d2.data());
  q["down_weight_scales"] = npy_input("bwd_sd2", io::NpyDType::U8, {E, 128, I}, s2.data());
  expect_pass(run_bwd(
      small({{"I_TP", I}, {"gate_up_weight_scales", {E, 128, H}}, {"down_weight_scales", {E, 128, I}}}), q));
}

TEST_CASE("moe bwd: the prequantized_weights recipe makes quantize_mx's bytes of the generator's weights") {
  // Gate/up [E, H, 2I] quantized along 2I = 512, down [E, I, H] along H = 512: one 512-row K tile each, so
  // packed and unpacked scales have the same shape [E, 128, F] and differ in where each scale sits.
  const int64_t E = 4, H = 512, I = 256;
  const auto gen = [&](int64_t seed, const std::vector<int64_t>& shape) {
    const tensor::HostTensor t = tensor::generate(
        tensor::parse_generator({{"generator", "uniform"}, {"seed", seed}, {"low", -0.05}, {"high", 0.05}},
                                "test"),
        isa::DType::BF16, shape, 1);
    std::vector<uint16_t> v(static_cast<size_t>(t.elements()));
    std::memcpy(v.data(), t.bytes.data(), 2 * v.size());
    return v;
  };
  const auto wgu = gen(7, {E, H, 2, I}), wd = gen(8, {E, I, H});
  json in = bwd_inputs();
  in.erase("gate_up_proj_weight");
  in.erase("down_proj_weight");
  in["weights"] = {{"recipe", "prequantized_weights"},
                   {"gate_up_seed", 7},
                   {"down_seed", 8},
                   {"low", -0.05},
                   {"high", 0.05}};
  for (bool packed : {true, false}) {
    INFO("packed " << packed);
    const json p = small({{"use_scale_packing", packed},
                          {"gate_up_weight_scales", {E, 2 * I / 4, H}},
                          {"down_weight_scales", {E, H / 4, I}}});
    MoeRun r{prepare_bwd(p, in)};
    r.inputs = workload::make_inputs(r.prepared);
    Bytes d1, s1, d2, s2;
    for (int64_t e = 0; e < E; ++e) {
      const std::vector<uint16_t> ge(wgu.begin() + e * H * 2 * I, wgu.begin() + (e + 1) * H * 2 * I),
          de(wd.begin() + e * I * H, wd.begin() + (e + 1) * I * H);
      auto [a, b] =
          prequantized({&ge, 2 * I, H, false}, num::QuantScheme::WrapX, num::Fp8Format::E4M3FN, packed);
      auto [c, d] = prequantized({&de, H, I, false}, num::QuantScheme::WrapX, num::Fp8Format::E4M3FN, packed);
      d1.insert(d1.end(), a.begin(), a.end()), s1.insert(s1.end(), b.begin(), b.end());
      d2.insert(d2.end(), c.begin(), c.end()), s2.insert(s2.end(), d.begin(), d.end());
    }
    CHECK(r.inputs.at("gate_up_proj_weight").bytes == d1);
    CHECK(r.inputs.at("gate_up_weight_scales").bytes == s1);
    CHECK(r.inputs.at("down_proj_weight").bytes == d2);
    CHECK(r.inputs.at("down_weight_scales").bytes == s2);
    if (packed) expect_pass(run_bwd(p, in));
  }
  // Bounds that give no range are an error naming the recipe entry.
  json bad = in;
  bad["weights"]["low"] = 0.1;
  bad["weights"]["high"] = 0.1;
  const json p = small({{"gate_up_weight_scales", {E, 2 * I / 4, H}}, {"down_weight_scales", {E, H / 4, I}}});
  // Found when the workload is prepared (trnsim validate), not only when the inputs are made.
  CHECK_THROWS_WITH(
      prepare_bwd(p, bad),
      Catch::EndsWith("inputs.weights (recipe 'prequantized_weights'): 'low' = 0.1 must be below "
                      "'high' = 0.1"));
}

namespace {

json on_h(json extra = json::object()) {
  json p =
      small({{"affinity_option", "AFFINITY_ON_H"},
             {"checkpoint_config", {{"save_scaled_intermediate", false}, {"save_down_proj_act", true}}}});
  p.merge_patch(extra);
  return p;
}

}  // namespace

TEST_CASE("moe bwd: AFFINITY_ON_H gives the gradients of AFFINITY_ON_I, within the MX quantization") {
  const MoeRun h = run_bwd(on_h()), i = run_bwd(small());
  expect_pass(h);
  CHECK(h.prepared.input("down_proj_act_checkpoint")->shape == std::vector<int64_t>{7, 128, 512});
  // The two placements quantize different operands (affinity x dY in Phases 1 and 4; the affinity gradient
  // from the down output's MX-quantized checkpoint instead of Phase 1's d_int x intermediate), so their MX
  // errors (about 5 % rel L2 each against the exact reference, which both pass) are independent: the two
  // differ by about as much, with the direction kept (cosine).
  for (const char* o : kGrads) {
    INFO(o);
    const auto &a = h.outputs.at(o), &b = i.outputs.at(o);
    double dot = 0, aa = 0, bb = 0;
    for (int64_t k = 0; k < a.elements(); ++k)
      dot += double(a.value(k)) * b.value(k), aa += double(a.value(k)) * a.value(k),
          bb += double(b.value(k)) * b.value(k);
    CHECK(rel_l2(a, b) < 0.08);
    CHECK(dot / std::sqrt(aa * bb) > 0.996);
  }
}

TEST_CASE("moe bwd: the exact reference gives both placements the same gradients without bias") {
  // The FP64 reference of the AFFINITY_ON_H run against the AFFINITY_ON_I one on the same inputs: dX and the
  // weight gradients agree to FP64 rounding; the affinity gradient differs only by the down output's
  // bfloat16 checkpoint when that is the exact down output (the recipe's is the forward kernel's, with its
  // MX quantization: about 4 % off).
  const MoeRun h = run_bwd(on_h());
  kernels::Tensors in = h.inputs;
  {
    const int64_t B = 128, I = 256, H = 512;
    const auto &ck = in.at("gate_up_proj_act_checkpoint_T"), &wd = in.at("down_proj_weight");
    const auto &tp = in.at("token_position_to_id"), &be = in.at("block_to_expert");
    auto& da = in.at("down_proj_act_checkpoint");
    std::vector<double> inter(I);
    for (int64_t s = 0; s < tp.elements(); ++s) {
      if (tp.int_value(s) < 0) continue;
      const int64_t b = s / B, j = s % B, e = be.int_value(b);
      for (int64_t i = 0; i < I; ++i) {
        const double g = ck.value(((b * 2 + 0) * I + i) * B + j), u = ck.value(((b * 2 + 1) * I + i) * B + j);
        inter[i] = g / (1 + std::exp(-g)) * u;
      }
      for (int64_t x = 0; x < H; ++x) {
        double y = 0;
        for (int64_t i = 0; i < I; ++i) y += inter[i] * wd.value((e * I + i) * H + x);
        da.set(s * H + x, static_cast<float>(y));
      }
    }
  }
  const auto bwd_params = [](bool onh) {
    kernels::moe::BwdParams p;
    p.schedule = kernels::moe::Schedule::TrnsimOptimized;  // AFFINITY_ON_H runs there
    p.T = 256, p.H = 512, p.I_TP = 256, p.E = 4, p.top_k = 2, p.block_size = 128;
    p.skip_dma.skip_token = true;
    p.checkpoint_config.save_scaled_intermediate = false;  // ON_I: inter x a, from the same gate/up
    if (onh) {
      p.affinity_option = kernels::moe::BwdAffinity::OnH;
      p.checkpoint_config.save_down_proj_act = true;
    }
    return p;
  };
  const auto lookup = [&](const std::string& n) -> const tensor::HostTensor* {
    return in.count(n) ? &in.at(n) : nullptr;
  };
  const kernels::moe::BwdParams ph = bwd_params(true), pi = bwd_params(false);
  const kernels::moe::BwdReference rh(ph, kernels::moe::BwdInputs::from(ph, lookup)),
      ri(pi, kernels::moe::BwdInputs::from(pi, lookup));
  std::vector<int64_t> slots;
  for (int64_t s = 0; s < rh.slots(); ++s)
    if (rh.token(s) >= 0) slots.push_back(s);
  const auto vh = rh.evaluate(slots, true), vi = ri.evaluate(slots, true);
  double dx = 0, dxn = 0, dea = 0, dean = 0;
  for (int64_t s : slots) {
    const auto &a = vh.at(s)[0], &b = vi.at(s)[0];
    for (size_t k = 0; k < a.dx.size(); ++k) dx += std::pow(a.dx[k] - b.dx[k], 2), dxn += b.dx[k] * b.dx[k];
    dea += std::pow(a.dea - b.dea, 2), dean += b.dea * b.dea;
  }
  CHECK(std::sqrt(dx / dxn) < 1e-14);
  CHECK(std::sqrt(dea / dean) < 2e-3);
  CHECK(std::sqrt(dea / dean) > 0.0);
  // Every expert's weight gradients: the largest difference against the largest value.
  double diff = 0, top = 0;
  for (int64_t e = 0; e < 4; ++e) {
    std::array<std::vector<double>, 2> gh, gi, dh, di;
    rh.expert_grads(e, gh, dh);
    ri.expert_grads(e, gi, di);
    for (size_t k = 0; k < gh[0].size(); ++k)
      diff = std::max(diff, std::abs(gh[0][k] - gi[0][k])), top = std::max(top, std::abs(gi[0][k]));
    for (size_t k = 0; k < dh[0].size(); ++k)
      diff = std::max(diff, std::abs(dh[0][k] - di[0][k])), top = std::max(top, std::abs(di[0][k]));
  }
  CHECK(top > 0.0);
  CHECK(diff <= 1e-13 * top);
}

TEST_CASE("moe bwd: AFFINITY_ON_H on one core, with the intermediate checkpoint and clamps", "[heavy]") {
  expect_pass(run_bwd(on_h({{"run_with_lnc2", false}})));
  expect_pass(run_bwd(on_h({{"checkpoint_config", {{"save_intermediate", true}}}})));
  const MoeRun b = run_bwd(on_h({{"clamp_limits", {{"linear_clamp_upper_limit", 1.0}}}}));
  REQUIRE(b.checks.size() == 4);
  for (const auto& c : b.checks) {
    INFO(c.output);
    CHECK(c.pass);
    CHECK(c.metric("rel_l2_vs_quantized") <= (c.dtype == "bfloat16" ? 1e-3 : 1e-5));
  }
  expect_pass(run_bwd(on_h({{"T", 512},
                            {"E", 1},
                            {"top_k", 1},
                            {"single_expert_dense", true},
                            {"accumulate_hidden_states_grad", false}})));
  const json none = {{"save_gate_up_proj_act", false}, {"save_scaled_intermediate", false}};
  expect_pass(run_bwd(on_h({{"I_TP", 1024}, {"checkpoint_config", none}})));
}

TEST_CASE("moe bwd: the indirect-DMA stats count the program's gathers, scatters and skipped rows") {
  for (const json& p : {small(), on_h({{"run_with_lnc2", false}})}) {
    INFO(p.dump());
    const workload::PreparedWorkload w = prepare_bwd(p, bwd_inputs());
    const kernels::Tensors in = workload::make_inputs(w);
    const auto stats = w.kernel->input_stats(in);
    const auto stat = [&](const std::string& n) {
      for (const auto& s : stats)
        if (s.name == n) return s.value;
      FAIL("no stat " << n);
      return 0.0;
    };
    int64_t g = 0, sc = 0, rows = 0;
    for (const auto& core : w.build.program.streams)
      for (const auto& stream : core)
        for (const auto& i : stream)
          if (i.op == isa::Opcode::DmaCopy && i.ops[2].present()) {
            ++(i.has(isa::kIndirectDst) ? sc : g);
            // AFFINITY_ON_H's Phase 4 gathers the scaled rows back from the block's scratch: no -1 there.
            if (!(p.contains("affinity_option") && w.build.program.phases[i.phase] == "P4"))
              rows += i.ops[2].partitions;
          }
    CHECK(stat("gather_dma_count") == g);
    CHECK(stat("scatter_dma_count") == sc);
    // Every indirect DMA pass covers a block's 128-slot tiles once: rows / (N B) passes, each skipping the
    // -1 slots.
    const auto& tp = in.at("token_position_to_id");
    int64_t pad = 0;
    for (int64_t s = 0; s < tp.elements(); ++s) pad += tp.int_value(s) < 0;
    REQUIRE(rows % tp.elements() == 0);
    CHECK(stat("rows_skipped") == pad * (rows / tp.elements()));
    CHECK(stat("hidden_grad_rmw_bytes") == (tp.elements() - pad) * 512 * 2 * 2);
  }
}

namespace {

// Instructions of opcode `op` in phase `phase` over both cores' streams.
int64_t count_ops(const isa::Program& prog, isa::Opcode op, const std::string& phase) {
  int64_t n = 0;
  for (const auto& core : prog.streams)
    for (const auto& stream : core)
      for (const auto& i : stream) n += i.op == op && prog.phases[i.phase] == phase;
  return n;
}

int64_t count_all(const isa::Program& prog) {
  int64_t n = 0;
  for (const auto& core : prog.streams)
    for (const auto& stream : core) n += static_cast<int64_t>(stream.size());
  return n;
}

// Every phase's config with the same fields.
json all_phases(const json& cfg) {
  return {{"phase1_config", cfg}, {"phase2_config", cfg}, {"phase3_config", cfg}, {"phase4_config", cfg}};
}

// One expert, contiguous blocks: the config the PE weight modes and pe_transpose_only need.
json dense(json extra = json::object()) {
  json p = small({{"T", 512},
                  {"E", 1},
                  {"top_k", 1},
                  {"single_expert_dense", true},
                  {"accumulate_hidden_states_grad", false},
                  {"skip_dma", {{"skip_token", false}}}});
  p.merge_patch(extra);
  return p;
}

}  // namespace

TEST_CASE("moe bwd: per-phase spill_reload and enable_scale_packing override the top-level defaults") {
  // Phase 2 in two N blocks of 128 (H / 2 = 256 per core) and four K blocks of 128 (2*I_TP = 512), more
  // than the two block slots: the second N block misses every d_gate_up block again. Without spill only
  // Phase 2's stream changes (it quantizes them again instead of reloading), the gradients are the same.
  const json tiles = {{"tile_n", 128},
                      {"TILES_IN_BLOCK_N", 1},
                      {"TILES_IN_LOAD_N", 1},
                      {"tile_k", 128},
                      {"TILES_IN_BLOCK_K", 1}};
  json nospill = tiles;
  nospill["spill_reload"] = false;
  const MoeRun d = run_bwd(small({{"phase2_config", tiles}})),
               s2 = run_bwd(small({{"phase2_config", nospill}}));
  expect_pass(s2);
  for (const char* o : kGrads) {
    INFO(o);
    CHECK(s2.outputs.at(o).bytes == d.outputs.at(o).bytes);
  }
  const isa::Program &pd = d.prepared.build.program, &ps = s2.prepared.build.program;
  for (const char* ph : {"P1", "P3", "P4"})
    for (auto op : {isa::Opcode::DmaCopy, isa::Opcode::QuantizeMx, isa::Opcode::DmaTranspose}) {
      INFO(ph << " opcode " << static_cast<int>(op));
      CHECK(count_ops(ps, op, ph) == count_ops(pd, op, ph));
    }
  CHECK(count_ops(ps, isa::Opcode::QuantizeMx, "P2") > count_ops(pd, isa::Opcode::QuantizeMx, "P2"));
  // Every phase set explicitly is the top-level setting: the same program.
  const auto prog = [](const json& p) { return prepare_bwd(p, bwd_inputs()).build.program; };
  json all_off = all_phases({{"spill_reload", false}}), top_off = {{"spill_reload", false}};
  all_off["phase2_config"].merge_patch(tiles);
  top_off["phase2_config"] = tiles;
  CHECK(count_all(prog(small(all_off))) == count_all(prog(small(top_off))));
  CHECK(count_all(prog(small(top_off))) != count_all(pd));
  // The phase's packing decides the pre-quantized scales' expected layout: Phase 2's for the gate/up weights
  // (2*I_TP = 2048: packed [4, 128, 512], unpacked [4, 512, 512]).
  const std::string k = "kernel 'blockwise_mm_bwd_mxfp8': ";
  json off = small({{"I_TP", 1024}, {"gate_up_weight_scales", {4, 128, 512}}});
  off["phase2_config"] = {{"enable_scale_packing", false}};
  CHECK_THAT(
      bwd_error(off),
      Catch::EndsWith(k + "parameter 'gate_up_weight_scales': phase2_config.enable_scale_packing = false but "
                          "the shape [4, 128, 512] is the packed layout"));
  json on = small({{"I_TP", 1024}, {"gate_up_weight_scales", {4, 512, 512}}, {"use_scale_packing", false}});
  on["phase2_config"] = {{"enable_scale_packing", true}};
  CHECK_THAT(
      bwd_error(on),
      Catch::EndsWith(k + "parameter 'gate_up_weight_scales': phase2_config.enable_scale_packing = true but "
                          "the shape [4, 512, 512] is the unpacked layout"));
}

TEST_CASE("moe bwd: quant_scheme 1x32 in every phase against the references") {
  // 1x32 groups 32 contiguous K-indices (of H, 2*I_TP and the block's tokens) under one scale: other
  // groups than wrapX's, so other bytes, each within the emulation of the kernel's 1x32 numerics.
  const MoeRun w = run_bwd(small()), x = run_bwd(small(all_phases({{"quant_scheme", "1x32"}})));
  expect_pass(x);
  for (const char* o : kGrads) {
    INFO(o);
    CHECK(x.outputs.at(o).bytes != w.outputs.at(o).bytes);
  }
  // Phases 3 and 4 gather the same rows (by the index in 1x32 order): the same indirect DMAs.
  const isa::Program &pw = w.prepared.build.program, &px = x.prepared.build.program;
  for (const char* ph : {"P3", "P4"})
    CHECK(count_ops(px, isa::Opcode::DmaCopy, ph) == count_ops(pw, isa::Opcode::DmaCopy, ph));
  CHECK(x.stat("gather_dma_count") == w.stat("gather_dma_count"));
}

TEST_CASE("moe bwd: quant_scheme 1x32 with AFFINITY_ON_H, dense num_valid_tokens, 512-token blocks",
          "[heavy]") {
  const json x = all_phases({{"quant_scheme", "1x32"}});
  expect_pass(run_bwd(on_h(x)));
  json d = dense(x);
  d["num_valid_tokens"] = true;
  d["checkpoint_config"] = {{"save_scaled_intermediate", false}};
  json in = bwd_inputs();
  in["num_valid_tokens"] = {{"generator", "constant"}, {"value", 300}};
  const MoeRun r = run_bwd(d, in);
  expect_pass(r);
  CHECK(r.checks[0].metric("reference_rows_compared") == 300);
  // Blocks of 512 (full 1x32 index groups) and 2*I_TP = 768 on one core (a 256-row remainder of the
  // resident d_gate_up^T).
  json b = small({{"T", 1024}, {"I_TP", 384}, {"block_size", 512}, {"run_with_lnc2", false}});
  b.merge_patch(x);
  expect_pass(run_bwd(b));
}

TEST_CASE("moe bwd: swizzle modes: PE loads the same bytes as DGT, on the PE") {
  // Routed: the activation operands' modes (the PE weight modes need E == 1).
  const json pe = {{"output_grad_swizzle_mode", "PE"},
                   {"d_gate_up_t_swizzle_mode", "PE"},
                   {"scaled_intermediate_t_swizzle_mode", "PE"}};
  const MoeRun d = run_bwd(small()), p = run_bwd(small(pe));
  expect_pass(p);
  for (const char* o : kGrads) {
    INFO(o);
    CHECK(p.outputs.at(o).bytes == d.outputs.at(o).bytes);
  }
  const isa::Program &pd = d.prepared.build.program, &pp = p.prepared.build.program;
  for (const char* ph : {"P1", "P3", "P4"}) {
    INFO(ph);
    // DGT: dma_transposes and no PE transposes in the phase's loads; PE: the reverse.
    CHECK(count_ops(pd, isa::Opcode::DmaTranspose, ph) > 0);
    CHECK(count_ops(pp, isa::Opcode::DmaTranspose, ph) < count_ops(pd, isa::Opcode::DmaTranspose, ph));
    CHECK(count_ops(pp, isa::Opcode::NcTranspose, ph) > count_ops(pd, isa::Opcode::NcTranspose, ph));
  }
  // Dense (E = 1): the weights too; their phases then have no dma_transpose left with the activations PE.
  json all = pe;
  all["down_weight_swizzle_mode"] = "PE";
  all["gate_up_weight_swizzle_mode"] = "PE";
  const MoeRun dd = run_bwd(dense()), dp = run_bwd(dense(all));
  expect_pass(dp);
  for (const char* o : kGrads) {
    INFO(o);
    CHECK(dp.outputs.at(o).bytes == dd.outputs.at(o).bytes);
  }
  for (const char* ph : {"P1", "P2", "P3", "P4"}) {
    INFO(ph);
    CHECK(count_ops(dp.prepared.build.program, isa::Opcode::DmaTranspose, ph) == 0);
  }
}

TEST_CASE("moe bwd: the fields without an effect in this design are accepted and change nothing") {
  // d_gate_up and the Phase 4 dY rows are K-by-F here (no transpose to choose), the DGT is already a direct
  // pattern (fast_dma_transpose), Phases 3/4 have no transposes (transpose modes), and pe_transpose_only's
  // effect is its required PE modes: the same program as without each.
  const auto prog = [](const json& p) { return prepare_bwd(p, bwd_inputs()).build.program; };
  const int64_t base = count_all(prog(small()));
  for (const json& extra :
       {json{{"d_gate_up_swizzle_mode", "PE"}}, json{{"output_grad_t_swizzle_mode", "PE"}},
        json{{"hidden_states_t_swizzle_mode", "PE"}},  // with the checkpoint: no recompute
        json{{"phase3_transpose_mode", "DMA"}, {"phase4_transpose_mode", "DMA"}}}) {
    INFO(extra.dump());
    CHECK(count_all(prog(small(extra))) == base);
  }
  // Routed with both weights pre-quantized, fast_dma_transpose passes the plan (the inputs then need .npy
  // files: the generators cannot make x4 data).
  CHECK_THAT(bwd_error(small({{"fast_dma_transpose", true},
                              {"gate_up_weight_scales", {4, 128, 512}},
                              {"down_weight_scales", {4, 128, 256}}})),
             Catch::Contains("generator 'normal' cannot fill a float8_e4m3fn_x4 tensor"));
  json pe;
  for (const char* m : {"output_grad", "down_weight", "d_gate_up", "gate_up_weight", "d_gate_up_t",
                        "hidden_states_t", "output_grad_t", "scaled_intermediate_t"})
    pe[std::string(m) + "_swizzle_mode"] = "PE";
  json only = pe;
  only["pe_transpose_only"] = true;
  CHECK(count_all(prog(dense(only))) == count_all(prog(dense(pe))));
  CHECK(count_all(prog(dense({{"fast_dma_transpose", true}}))) == count_all(prog(dense())));
}

TEST_CASE("moe bwd: the swizzle-mode, scheme and transpose rejections name the parameter and the reason") {
  const std::string k = "kernel 'blockwise_mm_bwd_mxfp8': ";
  const auto err = [](const json& extra) { return bwd_error(small(extra)); };
  CHECK_THAT(
      err({{"phase3_config", {{"quant_scheme", "1x32"}}}}),
      Catch::EndsWith(k + "parameter 'phase3_config.quant_scheme' = 1x32 but phase1_config.quant_scheme "
                          "= wrapX: every phase must use the same quantization scheme (nkilib "
                          "MXFP8MOEBwdConfig; one x4 interleave per tensor for all the phases that "
                          "read it)"));
  CHECK_THAT(
      err({{"down_weight_swizzle_mode", "PE"}}),
      Catch::EndsWith(k + "parameter 'down_weight_swizzle_mode' = PE needs E == 1, got E = 4: the "
                          "PE-transpose loader ignores the per-expert scalar_offset (nkilib); use DGT"));
  CHECK_THAT(
      err({{"gate_up_weight_swizzle_mode", "PE"}, {"gate_up_weight_scales", {4, 128, 512}}}),
      Catch::EndsWith(k + "parameter 'gate_up_weight_swizzle_mode' = PE needs E == 1, got E = 4: the "
                          "PE-transpose loader ignores the per-expert scalar_offset (nkilib); use DGT"));
  CHECK_THAT(err({{"fast_dma_transpose", true}, {"down_weight_scales", {4, 128, 256}}}),
             Catch::EndsWith(k + "parameter 'fast_dma_transpose' with E = 4: the direct 4-D DGT pattern "
                                 "ignores the per-expert scalar_offset (nkilib SwizzleMode DGT_FAST), so the "
                                 "BF16 gate_up_proj_weight of every block would be expert 0's; give "
                                 "pre-quantized weights or E = 1"));
  CHECK_THAT(err({{"pe_transpose_only", true}}),
             Catch::EndsWith(k + "parameter 'pe_transpose_only': needs single_expert_dense"));
  CHECK_THAT(bwd_error(dense({{"pe_transpose_only", true}, {"fast_dma_transpose", true}})),
             Catch::EndsWith(k + "parameters 'pe_transpose_only' and 'fast_dma_transpose': pe_transpose_only "
                                 "keeps every transpose on the PE, fast_dma_transpose is a DMA transpose"));
  CHECK_THAT(bwd_error(dense({{"pe_transpose_only", true}, {"phase4_transpose_mode", "DMA"}})),
             Catch::EndsWith(k + "parameter 'pe_transpose_only': needs phase3_transpose_mode and "
                                 "phase4_transpose_mode NC (the DMA mode transposes on the DMA engine)"));
  CHECK_THAT(bwd_error(dense({{"pe_transpose_only", true}})),
             Catch::EndsWith(k + "parameter 'pe_transpose_only': needs output_grad_swizzle_mode = PE (DGT is "
                                 "a DMA transpose)"));
  CHECK_THAT(err({{"output_grad_swizzle_mode", "DGT_FAST"}}),
             Catch::Contains("parameter 'output_grad_swizzle_mode': expected one of DGT, PE"));
}

TEST_CASE("moe bwd: AFFINITY_ON_H from the forward kernel's own down_proj_act_checkpoint") {
  // The checkpoints AFFINITY_ON_H needs: gate/up, the unscaled intermediate and the down output.
  const json ck = {{"save_gate_up_proj_act", true},
                   {"save_scaled_intermediate", false},
                   {"save_intermediate", true},
                   {"save_down_proj_act", true}};
  const json bp = small({{"affinity_option", "AFFINITY_ON_H"}, {"checkpoint_config", ck}});
  // The backward's inputs, with the checkpoints of the host `checkpoints` recipe.
  MoeRun host{prepare_bwd(bp, bwd_inputs())};
  host.inputs = workload::make_inputs(host.prepared);
  // The forward kernel on the same tokens, routing and weights (in its forward-natural layouts: gate/up
  // [E, 2, I, H] from the backward's [E, H, 2, I], down [E, H, I] from [E, I, H]).
  const int64_t E = 4, H = 512, I = 256;
  const MoeRun fwd = run_moe(
      small({{"affinity_option", "AFFINITY_ON_H"}, {"checkpoint_config", ck}}), moe_inputs(),
      [&](kernels::Tensors& in) {
        for (const char* n :
             {"hidden_states", "expert_affinities_masked", "token_position_to_id", "block_to_expert"})
          in.at(n) = host.inputs.at(n);
        auto& gu = in.at("gate_up_proj_weight");
        auto& d = in.at("down_proj_weight");
        const auto& bgu = host.inputs.at("gate_up_proj_weight");
        const auto& bd = host.inputs.at("down_proj_weight");
        for (int64_t e = 0; e < E; ++e)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < I; ++i) {
              for (int64_t s = 0; s < 2; ++s)
                gu.set(((e * 2 + s) * I + i) * H + h, bgu.value(((e * H + h) * 2 + s) * I + i));
              d.set((e * H + h) * I + i, bd.value((e * I + i) * H + h));
            }
      },
      kMoeFwd);
  // The forward's outputs and its down checkpoint pass against its references.
  REQUIRE(fwd.checks.size() == 4);
  CHECK(fwd.check("down_proj_act_checkpoint").pass);
  CHECK(fwd.all_pass());
  // Its checkpoints are the recipe's bytes but for a few bfloat16 roundings: the recipe sums each GEMM in
  // FP64 and rounds once, the kernel accumulates in FP32 PSUM, so a sum next to a rounding boundary can
  // land one ulp apart (here 2, 2 and 4 elements; every other byte equal; the intermediate of a gate/up
  // one ulp apart up to two).
  const char* const names[] = {"gate_up_proj_act_checkpoint_T", "intermediate_checkpoint_T",
                               "down_proj_act_checkpoint"};
  for (const char* n : names) {
    const auto& a = fwd.outputs.at(n);
    const auto& b = host.inputs.at(n);
    REQUIRE(a.shape == b.shape);
    REQUIRE(a.dtype == isa::DType::BF16);
    int64_t diff = 0, far = 0;
    for (int64_t x = 0; x < a.elements(); ++x) {
      uint16_t u, v;
      std::memcpy(&u, a.bytes.data() + 2 * x, 2);
      std::memcpy(&v, b.bytes.data() + 2 * x, 2);
      diff += u != v;
      far += std::abs(int(u) - int(v)) > 2;  // more than two ulps (or a sign) apart
    }
    INFO(n << ": " << diff << " of " << a.elements() << " elements differ");
    CHECK(diff <= 4);
    CHECK(far == 0);
  }
  // Fed to the backward, they give its gradients within the references.
  const MoeRun r = run_bwd(bp, bwd_inputs(), [&](kernels::Tensors& in) {
    for (const char* n : names) in.at(n) = fwd.outputs.at(n);
  });
  expect_pass(r);
}

TEST_CASE("moe bwd: the checkpoints recipe gives the same bytes on 1, 2 and 3 host threads") {
  // Every checkpoint the recipe can write (the scaled intermediate under AFFINITY_ON_I, the down output under
  // AFFINITY_ON_H), so that each write path runs on the experts' threads.
  const json on_i = {{"save_gate_up_proj_act", true},
                     {"save_scaled_intermediate", true},
                     {"save_gate_act", true},
                     {"save_intermediate", true}};
  const json on_h = {{"save_gate_up_proj_act", true},
                     {"save_scaled_intermediate", false},
                     {"save_gate_act", true},
                     {"save_intermediate", true},
                     {"save_down_proj_act", true}};
  for (const auto& [affinity, ck] : {std::pair{"AFFINITY_ON_I", on_i}, {"AFFINITY_ON_H", on_h}}) {
    const workload::PreparedWorkload p =
        prepare_bwd(small({{"affinity_option", affinity}, {"checkpoint_config", ck}}), bwd_inputs());
    const kernels::Tensors made = workload::make_inputs(p);
    const std::vector<std::string>& names = p.recipe_outputs.at("checkpoints");
    REQUIRE(names.size() == 4);
    std::vector<kernels::Tensors> runs;
    for (int threads : {1, 2, 3}) {
      kernels::Tensors out;
      for (const std::string& n : names) {
        const workload::TensorInfo& t = *p.input(n);
        out.emplace(n, tensor::HostTensor::zeros(t.dtype, t.shape));
      }
      kernels::RecipeIO io(made, out, threads);
      p.kernel->run_recipe("checkpoints", p.recipe_args.at("checkpoints"), io);
      runs.push_back(std::move(out));
    }
    for (const std::string& n : names) {
      INFO(affinity << " " << n);
      CHECK(runs[0].at(n).bytes == made.at(n).bytes);  // make_inputs' own thread count
      CHECK(runs[1].at(n).bytes == runs[0].at(n).bytes);
      CHECK(runs[2].at(n).bytes == runs[0].at(n).bytes);
    }
  }
}
