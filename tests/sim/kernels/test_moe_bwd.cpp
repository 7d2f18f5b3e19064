// blockwise_mm_bwd_mxfp8 on the SystemC model (Trn3) on small shapes, each run with numerics and every
// output checked against the FP64 host references (full, not sampled): nkilib's MoE comparator against the
// exact reference and rel L2 against the emulation of the kernel's numerics; the cases of public bug
// reports (an expert without tokens, a token in several blocks, -1 padding, T padding); the documented
// rejections with their messages.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "sim/base/error.h"
#include "sim/numerics/float_formats.h"
#include "tests/sim/kernels/test_moe_fwd_util.h"

using namespace trnsim;
using namespace trnsim::test;

namespace {

// T = 256 tokens, top-2 over E = 4 experts, blocks of 128: N = ceil(509 / 128) + 3 = 7 blocks; both cores.
json small(json extra = json::object()) {
  json p = {{"T", 256},
            {"H", 512},
            {"I_TP", 256},
            {"E", 4},
            {"top_k", 2},
            {"block_size", 128},
            {"skip_dma", {{"skip_token", true}}}};
  p.merge_patch(extra);
  return p;
}

// The forward's inputs plus dY, the routing and the checkpoints made on the host.
json bwd_inputs(double zipf = 0.5, int64_t seed = 4) {
  json in = moe_inputs(zipf, seed);
  in["output_hidden_states_grad"] = {{"generator", "normal"}, {"seed", 5}};
  in["checkpoints"] = {{"recipe", "checkpoints"}};
  return in;
}

workload::PreparedWorkload prepare_bwd(const json& params, const json& inputs) {
  static std::atomic<int> n{0};
  const json w = {{"name", "moe_bwd_test"},
                  {"hardware", "trn3"},
                  {"kernel", "blockwise_mm_bwd_mxfp8"},
                  {"params", params},
                  {"inputs", inputs}};
  const auto path = moe_tmp_dir() / ("bwd" + std::to_string(n++) + ".json");
  std::ofstream(path) << w.dump(1);
  return workload::prepare_workload(workload::parse_workload(path.string()));
}

// Runs with numerics and full references; `edit` may change inputs after the recipes.
MoeRun run_bwd(const json& params, const json& inputs = bwd_inputs(),
               const std::function<void(kernels::Tensors&)>& edit = {}) {
  MoeRun r{prepare_bwd(params, inputs)};
  r.inputs = workload::make_inputs(r.prepared);
  if (edit) edit(r.inputs);
  run::Session s(r.prepared.build.program, r.prepared.hw);
  for (const auto& [name, t] : r.inputs) s.set_input(name, t);
  r.result = s.run({.numerics = true});
  for (const auto& t : r.prepared.outputs) r.outputs.emplace(t.name, s.read(t.name));
  r.checks = workload::evaluate_checks(r.prepared, r.inputs, r.outputs, true);
  r.stats = r.prepared.kernel->input_stats(r.inputs);
  return r;
}

std::string bwd_error(const json& params) {
  try {
    prepare_bwd(params, bwd_inputs());
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
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
  CHECK_THAT(
      err({{"affinity_option", "AFFINITY_ON_H"}}),
      Catch::Contains("parameter 'affinity_option': expected one of AFFINITY_ON_I, got \"AFFINITY_ON_H\""));
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

TEST_CASE("moe bwd: skip_grad_initialization leaves the zeroing to the caller") {
  // The model starts every output poisoned (NaN): the caller's zeros are set first, and the kernel adds.
  MoeRun r{prepare_bwd(small({{"skip_grad_initialization", true}}), bwd_inputs())};
  r.inputs = workload::make_inputs(r.prepared);
  run::Session s(r.prepared.build.program, r.prepared.hw);
  for (const auto& [name, t] : r.inputs) s.set_input(name, t);
  for (const auto& t : r.prepared.outputs) s.set_input(t.name, tensor::HostTensor::zeros(t.dtype, t.shape));
  r.result = s.run({.numerics = true});
  for (const auto& t : r.prepared.outputs) r.outputs.emplace(t.name, s.read(t.name));
  r.checks = workload::evaluate_checks(r.prepared, r.inputs, r.outputs, true);
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

TEST_CASE("moe bwd: single_expert_dense with num_valid_tokens: the rows past the count are never computed") {
  // One expert, 512 tokens in 4 contiguous blocks of 128, on both cores; the first 300 tokens are valid.
  const json p = {{"T", 512},
                  {"H", 512},
                  {"I_TP", 256},
                  {"E", 1},
                  {"top_k", 1},
                  {"block_size", 128},
                  {"single_expert_dense", true},
                  {"accumulate_hidden_states_grad", false},
                  {"num_valid_tokens", true},
                  {"checkpoint_config", {{"save_scaled_intermediate", false}}}};
  json in = bwd_inputs();
  in["num_valid_tokens"] = {{"generator", "constant"}, {"value", 300}};
  const MoeRun r = run_bwd(p, in);
  expect_pass(r);
  CHECK(r.outputs.at("hidden_states_grad").shape == std::vector<int64_t>{512, 512});
  CHECK(r.checks[0].metric("reference_rows_compared") == 300);
  // Rows 300.. stay as the setup zeroed them (nkilib leaves them undefined).
  CHECK(all_zero(r.outputs.at("hidden_states_grad"), 300 * 512, 212 * 512));
  // Without the count every row is computed.
  json full = p;
  full.erase("num_valid_tokens");
  full["checkpoint_config"] = json::object();
  const MoeRun f = run_bwd(full);
  expect_pass(f);
  CHECK(f.checks[0].metric("reference_rows_compared") == 512);
}
