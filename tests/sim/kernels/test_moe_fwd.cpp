// blockwise_mm_fwd_mxfp8 on the SystemC model (Trn3) on small shapes: every parameter value the MoE forward
// issue lists, each run with numerics and checked on every output against the FP64 host references (full,
// not sampled): the nkilib comparator against the exact reference, and rel L2 against the emulation of the
// kernel's numerics (which the kernel matches to FP32-vs-FP64 sums); the routing cases (multi-expert tokens,
// experts without tokens, both paddings); the stats against the program; every rejection with its message.
#include <catch2/catch.hpp>

#include "sim/base/error.h"
#include "sim/io/npy.h"
#include "sim/numerics/float_formats.h"
#include "tests/sim/kernels/test_matmul_mxfp8_util.h"
#include "tests/sim/kernels/test_moe_fwd_util.h"

using namespace trnsim;
using namespace trnsim::test;

namespace {

json patched(json a, const json& b) {
  a.merge_patch(b);
  return a;
}

const json kAllCheckpoints = {{"checkpoint_config",
                               {{"save_gate_up_proj_act", true},
                                {"save_scaled_intermediate", true},
                                {"save_gate_act", true},
                                {"save_intermediate", true}}}};

// Every check passes and the kernel matches the emulation of its numerics closely.
void expect_pass(const MoeRun& r, double max_rel_l2_vs_kernel = 1e-3) {
  REQUIRE_FALSE(r.checks.empty());
  for (const auto& c : r.checks) {
    std::string why;
    for (const auto& f : c.failures) why += f + "; ";
    INFO(c.output << ": " << why);
    CHECK(c.pass);
    CHECK(c.nonfinite == 0);
    // A bfloat16 output's own rounding is about 2^-9.
    CHECK(c.metric("rel_l2_vs_quantized") <= (c.dtype == "bfloat16" ? 1e-3 : max_rel_l2_vs_kernel));
    CHECK(c.metric("reference_rows_compared") == c.metric("reference_rows_total"));
  }
}

// Counts of indirect DMAs (vector_offset present) that gather and that scatter, over both cores.
std::pair<int64_t, int64_t> indirect_dmas(const isa::Program& p) {
  int64_t g = 0, s = 0;
  for (const auto& core : p.streams)
    for (const auto& stream : core)
      for (const auto& in : stream)
        if (in.op == isa::Opcode::DmaCopy && in.ops[2].present()) (in.has(isa::kIndirectDst) ? s : g) += 1;
  return {g, s};
}

}  // namespace

TEST_CASE("moe fwd: top-2 on both cores with -1 padding, every checkpoint, tokens in several blocks") {
  const MoeRun r = run_moe(small(kAllCheckpoints));
  CHECK(r.checks.size() == 5);
  expect_pass(r);
  CHECK(r.outputs.at("output_hidden_states").shape == std::vector<int64_t>{256, 512});
  CHECK(r.outputs.at("gate_up_proj_act_checkpoint_T").shape == std::vector<int64_t>{7, 2, 256, 128});
  CHECK(r.outputs.at("gate_act_checkpoint_T").shape == std::vector<int64_t>{7, 256, 128});
  // Every token is in two blocks (two experts); the kernel summed them (the reference above is the sum).
  const auto& tp = r.inputs.at("token_position_to_id");
  std::vector<int> seen(256, 0);
  for (int64_t i = 0; i < tp.elements(); ++i)
    if (tp.int_value(i) >= 0) ++seen[tp.int_value(i)];
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 2; }));
  CHECK(r.stat("tokens_per_expert_mean") == 128);
  CHECK(r.stat("padding_fraction") == Approx(100.0 * (7 * 128 - 512) / (7 * 128)));
  // Padding slots: a zero hidden row and affinity, so a zero scaled intermediate.
  const auto& sc = r.outputs.at("scaled_intermediate_checkpoint_T");
  for (int64_t s = 0; s < 7 * 128; ++s)
    if (tp.int_value(s) < 0)
      for (int64_t i = 0; i < 256; i += 37) REQUIRE(sc.value(((s / 128) * 256 + i) * 128 + s % 128) == 0.f);
}

TEST_CASE("moe fwd: references prepared on a second thread during the simulation, as trnsim run does") {
  // The same results, bit for bit, as the references computed after the simulation.
  const MoeRun a = run_moe(small(kAllCheckpoints)), b = run_moe_references_alongside(small(kAllCheckpoints));
  CHECK(b.checks.size() == 5);
  expect_pass(b);
  expect_same_checks(a, b);
  // The prepare step's context has the inputs only.
  const kernels::CheckContext inputs_only(b.inputs, true);
  CHECK_THROWS_WITH(inputs_only.output("output_hidden_states"),
                    "check: output 'output_hidden_states' asked for while preparing the references from the "
                    "inputs");
}

TEST_CASE("moe fwd: padding T with an extra zero row, one core, overwrite scatter for top-1") {
  for (bool lnc2 : {true, false}) {
    INFO("run_with_lnc2 " << lnc2);
    const MoeRun r = run_moe(small({{"skip_dma", {{"skip_token", false}}},
                                    {"top_k", 1},
                                    {"run_with_lnc2", lnc2},
                                    {"is_tensor_update_accumulating", false}}));
    expect_pass(r);
    CHECK(r.prepared.build.program.num_cores == (lnc2 ? 2 : 1));
    CHECK(r.outputs.at("output_hidden_states").shape == std::vector<int64_t>{257, 512});
    const auto& tp = r.inputs.at("token_position_to_id");
    CHECK(std::count_if(tp.bytes.begin(), tp.bytes.end(), [](uint8_t) { return true; }) > 0);
    int64_t pads = 0;
    for (int64_t i = 0; i < tp.elements(); ++i) pads += tp.int_value(i) == 256;
    CHECK(pads == r.stat("padding_fraction") / 100.0 * tp.elements());
    CHECK(r.stat("rows_skipped") == 0);
  }
}

TEST_CASE("moe fwd: E5M2, unpacked scales, spill/reload, float32 compute dtype") {
  expect_pass(run_moe(small({{"fp8_x4_dtype", "float8_e5m2_x4"}, {"use_scale_packing", false}})));
  expect_pass(
      run_moe(small({{"spill_reload", true}, {"H", 1024}, {"gate_up_config", {{"TILES_IN_BLOCK_K", 1}}}})));
  const MoeRun f32 = run_moe(patched(small(kAllCheckpoints), {{"compute_dtype", "float32"}}));
  expect_pass(f32, 1e-5);
  CHECK(f32.outputs.at("intermediate_checkpoint_T").dtype == isa::DType::F32);
}

TEST_CASE("moe fwd: clamps before the checkpoint and SiLU, and biases") {
  // Gate and up are about N(0, 1.1): the clamps bite (nkilib's clamp tests: gate <= 1, up in [-0.5, 0.5]).
  const json clamp = {{"clamp_limits",
                       {{"non_linear_clamp_upper_limit", 1.0},
                        {"linear_clamp_lower_limit", -0.5},
                        {"linear_clamp_upper_limit", 0.5}}}};
  const MoeRun c = run_moe(small(clamp));
  expect_pass(c);
  const auto& gu = c.outputs.at("gate_up_proj_act_checkpoint_T");
  float gmax = -1e9f, umin = 1e9f, umax = -1e9f;
  for (int64_t b = 0; b < 7; ++b)
    for (int64_t i = 0; i < 256 * 128; ++i) {
      gmax = std::max(gmax, gu.value((b * 2) * 256 * 128 + i));
      umin = std::min(umin, gu.value((b * 2 + 1) * 256 * 128 + i));
      umax = std::max(umax, gu.value((b * 2 + 1) * 256 * 128 + i));
    }
  CHECK(gmax == 1.0f);
  CHECK(umin == -0.5f);
  CHECK(umax == 0.5f);
  json in = moe_inputs();
  in["gate_and_up_proj_bias"] = {{"generator", "normal"}, {"seed", 8}, {"std", 0.5}};
  in["down_proj_bias"] = {{"generator", "normal"}, {"seed", 9}, {"std", 0.5}};
  expect_pass(run_moe(patched(small(clamp), {{"bias", true}}), in));
}

TEST_CASE("moe fwd: no_indirect_load, one expert with its tokens in block order") {
  json in = moe_inputs();
  in["routing"] = {{"recipe", "routing"}, {"seed", 1}};
  const MoeRun r = run_moe(
      {{"T", 512}, {"H", 512}, {"I_TP", 384}, {"E", 1}, {"block_size", 128}, {"no_indirect_load", true}}, in);
  expect_pass(r);
  CHECK(indirect_dmas(r.prepared.build.program) == std::pair<int64_t, int64_t>{0, 0});
  CHECK(r.stat("gather_dma_count") == 0);
  CHECK(r.prepared.input("token_position_to_id")->shape == std::vector<int64_t>{1});
}

TEST_CASE("moe fwd: pre-quantized weights (packed and unpacked scales) and pre-swizzled weights") {
  const int64_t E = 4, H = 512, I = 256;
  const auto dir = moe_tmp_dir();
  const auto npy = [&](const std::string& name, io::NpyDType dt, std::vector<int64_t> shape, const Bytes& b) {
    const std::string path = (dir / (name + ".npy")).string();
    io::write_npy(path, dt, shape, b.data());
    return json{{"npy", path}};
  };
  // BF16 weights, quantized (or swizzled) on the host expert by expert into the kernel's layouts.
  const auto wgu = random_bf16(E * 2 * I, H, 51), wd = random_bf16(E * H, I, 52);
  const auto expert = [](const std::vector<uint16_t>& w, int64_t e, int64_t n) {
    return std::vector<uint16_t>(w.begin() + e * n, w.begin() + (e + 1) * n);
  };
  for (bool packed : {false, true}) {
    INFO("packed " << packed);
    Bytes d1, s1, d2, s2;
    for (int64_t e = 0; e < E; ++e) {
      const auto ge = expert(wgu, e, 2 * I * H), de = expert(wd, e, H * I);
      auto [a, b] =
          prequantized({&ge, H, 2 * I, false}, num::QuantScheme::WrapX, num::Fp8Format::E4M3FN, packed);
      auto [c, d] = prequantized({&de, I, H, false}, num::QuantScheme::WrapX, num::Fp8Format::E4M3FN, packed);
      d1.insert(d1.end(), a.begin(), a.end()), s1.insert(s1.end(), b.begin(), b.end());
      d2.insert(d2.end(), c.begin(), c.end()), s2.insert(s2.end(), d.begin(), d.end());
    }
    const int64_t su = packed ? 128 : H / 4, sd = packed ? 128 : I / 4;
    json in = moe_inputs();
    in["gate_up_proj_weight"] = npy("wgu", io::NpyDType::I32, {E, H / 4, 2 * I}, d1);
    in["gate_up_weight_scales"] = npy("sgu", io::NpyDType::U8, {E, su, 2 * I}, s1);
    in["down_proj_weight"] = npy("wd", io::NpyDType::I32, {E, I / 4, H}, d2);
    in["down_weight_scales"] = npy("sd", io::NpyDType::U8, {E, sd, H}, s2);
    expect_pass(run_moe(small({{"use_scale_packing", packed},
                               {"gate_up_weight_scales", {E, su, 2 * I}},
                               {"down_weight_scales", {E, sd, H}}}),
                        in));
  }
  std::vector<uint16_t> a, b;
  for (int64_t e = 0; e < E; ++e) {
    const auto ge = expert(wgu, e, 2 * I * H), de = expert(wd, e, H * I);
    const auto x = swizzled({&ge, H, 2 * I, false}, num::QuantScheme::WrapX),
               y = swizzled({&de, I, H, false}, num::QuantScheme::WrapX);
    a.insert(a.end(), x.begin(), x.end()), b.insert(b.end(), y.begin(), y.end());
  }
  json in = moe_inputs();
  in["gate_up_proj_weight"] = npy("swgu", io::NpyDType::U16, {E, H / 4, 8 * I}, as_bytes(a));
  in["down_proj_weight"] = npy("swd", io::NpyDType::U16, {E, I / 4, 4 * H}, as_bytes(b));
  expect_pass(run_moe(small({{"gate_up_weight_is_swizzled", true}, {"down_weight_is_swizzled", true}}), in));
}

TEST_CASE("moe fwd: per-phase tiling configs, wide moving tiles, block sizes 256 and 512") {
  expect_pass(run_moe(small({{"gate_up_config", {{"tile_n", 64}, {"TILES_IN_BLOCK_M", 1}}},
                             {"down_config", {{"tile_n", 1024}, {"TILES_IN_BLOCK_N", 1}}}})));
  expect_pass(run_moe(small({{"T", 512}, {"block_size", 256}, {"gate_up_config", {{"tile_n", 256}}}})));
  expect_pass(run_moe(small({{"T", 1024}, {"block_size", 512}, {"E", 2}, {"top_k", 1}})));
}

TEST_CASE("moe fwd: a scaled intermediate too large for SBUF is planned through HBM") {
  // [I, B] = [4096, 1024] bfloat16 is 64 KiB per partition: no SBUF copy; the down GEMM's K-by-F loads read
  // the scaled-intermediate checkpoint, or a per-core scratch when it is not saved (or saved in float32).
  const json p = {{"T", 256}, {"H", 128},           {"I_TP", 4096},
                  {"E", 2},   {"block_size", 1024}, {"skip_dma", {{"skip_token", true}}}};
  for (const json& extra :
       {json::object(), json{{"checkpoint_config", {{"save_scaled_intermediate", false}}}},
        json{{"compute_dtype", "float32"}}}) {
    INFO(extra.dump());
    const auto w = prepare_moe(patched(p, extra));
    bool scratch = false, reads_ckpt = false;
    for (const auto& t : w.build.program.tensors) scratch |= t.name == "scaled_intermediate_block";
    CHECK(scratch == !extra.empty());
    const auto& tensors = w.build.program.tensors;
    for (const auto& core : w.build.program.streams)
      for (const auto& in : core[static_cast<int>(isa::Engine::SP)])
        reads_ckpt |= in.op == isa::Opcode::DmaCopy && in.ops[1].space == isa::MemSpace::HBM &&
                      tensors[in.ops[1].tensor].name == "scaled_intermediate_checkpoint_T";
    CHECK(reads_ckpt == extra.empty());
  }
}

// The same with numerics (about 10 s: a 4096-wide intermediate).
TEST_CASE(
    "moe fwd: a scaled intermediate too large for SBUF goes through HBM, with and without its checkpoint",
    "[heavy]") {
  // [I, B] = [4096, 1024] bfloat16 is 64 KiB per partition: the down GEMM reads it K-by-F from HBM.
  const json p = {{"T", 256}, {"H", 128},           {"I_TP", 4096},
                  {"E", 2},   {"block_size", 1024}, {"skip_dma", {{"skip_token", true}}}};
  expect_pass(run_moe(p));
  const MoeRun r = run_moe(patched(
      p, {{"checkpoint_config", {{"save_scaled_intermediate", false}}}, {"compute_dtype", "float32"}}));
  expect_pass(r, 1e-5);
  bool scratch = false;
  for (const auto& t : r.prepared.build.program.tensors) scratch |= t.name == "scaled_intermediate_block";
  CHECK(scratch);
}

TEST_CASE("moe fwd: experts without tokens, checkpoints off") {
  // A strong skew over 8 experts: the last ones get no token (and no block but the surplus padding ones).
  const MoeRun r = run_moe(
      {{"T", 128},
       {"H", 256},
       {"I_TP", 128},
       {"E", 8},
       {"block_size", 128},
       {"skip_dma", {{"skip_token", true}}},
       {"checkpoint_config", {{"save_gate_up_proj_act", false}, {"save_scaled_intermediate", false}}}},
      moe_inputs(6.0, 3));
  expect_pass(r);
  CHECK(r.checks.size() == 1);
  CHECK(r.stat("experts_without_tokens") >= 3);
  CHECK(r.stat("padding_only_blocks") >= 1);
  CHECK(r.prepared.output("gate_up_proj_act_checkpoint_T") == nullptr);
}

TEST_CASE("moe fwd: the kernel stats count the program's gathers and scatters") {
  for (const json& extra : {json{{"is_tensor_update_accumulating", false}, {"top_k", 1}},
                            json{{"down_config", {{"tile_n", 256}, {"TILES_IN_BLOCK_N", 1}}}, {"H", 1024}}}) {
    INFO(extra.dump());
    const MoeRun r = run_moe(small(extra));
    const auto [g, s] = indirect_dmas(r.prepared.build.program);
    CHECK(r.stat("gather_dma_count") == g);
    CHECK(r.stat("scatter_dma_count") == s);
    // -1 slots are skipped by every gather and scatter pass over their 128-slot tile.
    const double pad = r.stat("padding_fraction") / 100.0 * 7 * 128;
    CHECK(r.stat("rows_skipped") == Approx(pad * (g + s) / 7.0));
  }
}

TEST_CASE("moe fwd: rejected parameters name the parameter and the reason") {
  const std::string k = "kernel 'blockwise_mm_fwd_mxfp8': ";
  const auto err = [](const json& extra) { return moe_error(small(extra)); };
  CHECK_THAT(
      err({{"block_size", 384}}),
      Catch::EndsWith(k + "parameter 'block_size': must be 128, 256, 512, 1024, 2048 or 4096, got 384"));
  CHECK_THAT(err({{"H", 2880}}),
             Catch::EndsWith(
                 k + "parameter 'H' = 2880 must be a multiple of 128 (the x4 interleave puts H/4 rows on "
                     "partitions in groups of 32; a model whose size is not, e.g. 2880, runs "
                     "zero-padded to the next multiple, 3072)"));
  CHECK_THAT(err({{"I_TP", 200}}), Catch::Contains(k + "parameter 'I_TP' = 200 must be a multiple of 128"));
  CHECK_THAT(err({{"top_k", 5}}), Catch::EndsWith(k + "parameter 'top_k' = 5 is more than E = 4 experts"));
  CHECK_THAT(
      err({{"no_indirect_load", true}}),
      Catch::EndsWith(k + "parameter 'no_indirect_load': needs exactly one expert (E = 1), got E = 4"));
  CHECK_THAT(err({{"no_indirect_load", true}, {"E", 1}, {"T", 200}, {"top_k", 1}}),
             Catch::EndsWith(k + "parameter 'no_indirect_load': needs T % block_size == 0, got T = 200, "
                                 "block_size = 128"));
  CHECK_THAT(
      err({{"no_indirect_load", true}, {"E", 1}, {"T", 128}, {"top_k", 1}}),
      Catch::EndsWith(k + "SHARD_ON_BLOCK gives core s the blocks s, s + 2, ...: N = 1 block(s) for 2 "
                          "cores (T = 128, block_size = 128); use run_with_lnc2 = false or more blocks"));
  CHECK_THAT(
      err({{"T", 70000}, {"E", 256}}),
      Catch::EndsWith(k + "T' * E = 70000 * 256 must be below 2^24: the affinity offsets t * E + e are "
                          "computed on the FP32 ALU"));
  CHECK_THAT(
      err({{"I_TP", 12800}, {"block_size", 256}}),
      Catch::EndsWith(k + "the scaled intermediate [I_TP, block_size] = [12800, 256] does not fit in SBUF "
                          "(51200 bytes per partition, at most 49152), and read from HBM as the down "
                          "GEMM's K-by-F operand it needs block_size % 512 == 0"));
  CHECK_THAT(
      err({{"gate_up_config", {{"tile_m", 64}}}}),
      Catch::EndsWith(k + "parameter 'gate_up_config.tile_m' = 64: the MoE forward needs tile_m = 128 (one "
                          "128-row tile of weights or tokens per partition range, as nkilib requires)"));
  CHECK_THAT(
      err({{"checkpoint_config", {{"save_down_proj_act", true}}}}),
      Catch::EndsWith(k + "parameter 'checkpoint_config.save_down_proj_act': the down projection's output "
                          "before the affinity exists under AFFINITY_ON_H only (AFFINITY_ON_I "
                          "multiplies the intermediate)"));
  CHECK_THAT(err({{"down_config", {{"tile_k", 256}}}}),
             Catch::EndsWith(k + "parameter 'down_config.tile_k' = 256: the MoE forward needs tile_k = 512 "
                                 "(physical K 128, as nkilib requires)"));
  CHECK_THAT(err({{"gate_up_weight_is_swizzled", true}, {"gate_up_weight_scales", {4, 128, 512}}}),
             Catch::EndsWith(k + "parameters 'gate_up_weight_is_swizzled' and 'gate_up_weight_scales': "
                                 "pre-quantized weights are x4 data, already interleaved; leave "
                                 "gate_up_weight_is_swizzled false"));
  CHECK_THAT(err({{"gate_up_weight_scales", {4, 100, 512}}}),
             Catch::EndsWith(k + "parameter 'gate_up_weight_scales': shape [4, 100, 512] is neither [E, H/4, "
                                 "2*I_TP] = [4, 128, 512] (unpacked) nor [E, ceil(H/2048)*128, 2*I_TP] = [4, "
                                 "128, 512] (packed)"));
  CHECK_THAT(err({{"H", 4096}, {"down_weight_scales", {4, 64, 4096}}, {"I_TP", 256}}),
             Catch::Contains(k + "parameter 'down_weight_scales'"));
  CHECK_THAT(
      err({{"H", 4096}, {"gate_up_weight_scales", {4, 1024, 512}}}),
      Catch::EndsWith(k + "parameter 'gate_up_weight_scales': use_scale_packing = true but the shape [4, "
                          "1024, 512] is the unpacked layout"));
  CHECK_THAT(
      err({{"down_config", {{"tile_n", 100}}}}),
      Catch::Contains("(down GEMM: M = block_size, K = I_TP, N = H): tile_n = 100 must be a multiple of 32"));
  CHECK_THAT(err({{"shard_option", "SHARD_ON_H"}}),
             Catch::Contains("parameter 'shard_option': expected one of SHARD_ON_BLOCK, got \"SHARD_ON_H\""));
  CHECK_THAT(err({{"affinity_option", "AFFINITY_ON_X"}}),
             Catch::EndsWith(k + "parameter 'affinity_option': expected one of AFFINITY_ON_I, AFFINITY_ON_H, "
                                 "got \"AFFINITY_ON_X\""));
  CHECK_THAT(
      err({{"affinity_option", "AFFINITY_ON_H"}}),
      Catch::EndsWith(k + "parameters 'affinity_option' = AFFINITY_ON_H and "
                          "'checkpoint_config.save_scaled_intermediate': the forward never forms "
                          "intermediate x affinity under AFFINITY_ON_H (the affinity multiplies the down "
                          "output); set save_scaled_intermediate false (the backward reads "
                          "intermediate_checkpoint_T or recomputes it)"));
  CHECK_THAT(
      err({{"affinity_option", "AFFINITY_ON_H"},
           {"bias", true},
           {"checkpoint_config", {{"save_down_proj_act", true}, {"save_scaled_intermediate", false}}}}),
      Catch::EndsWith(k + "parameters 'bias' and 'checkpoint_config.save_down_proj_act': "
                          "down_proj_act_checkpoint holds the down GEMM's output without the bias, so "
                          "the backward's AFFINITY_ON_H affinity gradient would miss the bias term "
                          "(nkilib: (h W_down + b_down) x affinity); the backward rejects bias with "
                          "AFFINITY_ON_H"));
  // nkilib ActFnType's other members parse and are refused as the library's MXFP8 forward asserts them out.
  for (const char* a : {"GELU", "GELU_Tanh_Approx", "Swish"})
    CHECK_THAT(
        err({{"activation_type", a}}),
        Catch::EndsWith(k + "parameter 'activation_type' = " + a +
                        ": only ActFnType.SiLU is implemented in blockwise_mm_fwd_mxfp8 (nki-library's "
                        "entry asserts it; the library's MXFP8 MoE kernels accept no other activation)"));
  CHECK_THAT(err({{"activation_type", "ReLU"}}),
             Catch::EndsWith(k + "parameter 'activation_type': expected one of SiLU, GELU, GELU_Tanh_Approx, "
                                 "Swish, got \"ReLU\""));
  CHECK_THAT(err({{"clamp_limits", {{"linear_clamp_lower_limit", 1}, {"linear_clamp_upper_limit", -1}}}}),
             Catch::EndsWith(k + "parameter 'clamp_limits': linear_clamp_lower_limit = 1 is above "
                                 "linear_clamp_upper_limit = -1"));
  json trn2 = small();
  CHECK_THAT(moe_error(small(), moe_inputs()), Catch::Equals("no error"));
}

TEST_CASE("moe fwd: block sizes 1024 to 4096 plan and build (the shapes of the real layers' blocks)") {
  for (int64_t B : {1024, 2048, 4096}) {
    INFO("block_size " << B);
    const auto p = prepare_moe({{"T", 4096},
                                {"H", 1024},
                                {"I_TP", 512},
                                {"E", 8},
                                {"top_k", 2},
                                {"block_size", B},
                                {"skip_dma", {{"skip_token", true}}}});
    const int64_t N = (8192 - 7 + B - 1) / B + 7;
    CHECK(p.input("token_position_to_id")->shape == std::vector<int64_t>{N * B});
    CHECK(p.output("scaled_intermediate_checkpoint_T")->shape == std::vector<int64_t>{N, 512, B});
  }
}

TEST_CASE("moe fwd: block sizes 1024 to 4096 with numerics, one block per expert mostly padding") {
  // T = 256 tokens, top-1 over E = 2 experts: N = ceil(255 / B) + 1 = 2 blocks, about 128 tokens each.
  for (int64_t B : {1024, 2048, 4096}) {
    INFO("block_size " << B);
    const MoeRun r = run_moe(small({{"H", 256}, {"I_TP", 128}, {"E", 2}, {"top_k", 1}, {"block_size", B}}));
    expect_pass(r);
    CHECK(r.outputs.at("scaled_intermediate_checkpoint_T").shape == std::vector<int64_t>{2, 128, B});
    CHECK(r.stat("padding_fraction") == Approx(100.0 * (2 * B - 256) / (2 * B)));
  }
}

TEST_CASE("moe fwd: routing from .npy files is checked, errors naming the tensor and the index") {
  // The routing of the block-formation example: T = 8, top-1, E = 3, B = 128 ([N * B] slots).
  const int64_t T = 8, E = 3, B = 128, N = 4;
  std::vector<int32_t> tp(N * B, -1), be{0, 0, 1, 2};
  const std::vector<int32_t> t0{0, 1, 3, 4}, t1{6}, t2{2, 7}, t3{5};
  std::copy(t0.begin(), t0.end(), tp.begin());
  std::copy(t1.begin(), t1.end(), tp.begin() + B);
  std::copy(t2.begin(), t2.end(), tp.begin() + 2 * B);
  std::copy(t3.begin(), t3.end(), tp.begin() + 3 * B);
  std::vector<float> ea(T * E, 0.f);
  for (int64_t t = 0; t < T; ++t) ea[t * E + (t == 2 || t == 7 ? 1 : t == 5 ? 2 : 0)] = 0.5f;
  const auto dir = moe_tmp_dir();
  const auto write = [&](const std::vector<int32_t>& tokens, const std::vector<int32_t>& experts) {
    io::write_npy((dir / "tp.npy").string(), io::NpyDType::I32, {N * B}, tokens.data());
    io::write_npy((dir / "be.npy").string(), io::NpyDType::I32, {N, 1}, experts.data());
    io::write_npy((dir / "ea.npy").string(), io::NpyDType::F32, {T * E, 1}, ea.data());
  };
  json in = moe_inputs();
  in.erase("routing");
  in["token_position_to_id"] = {{"npy", (dir / "tp.npy").string()}};
  in["block_to_expert"] = {{"npy", (dir / "be.npy").string()}};
  in["expert_affinities_masked"] = {{"npy", (dir / "ea.npy").string()}};
  const json p = {{"T", T},
                  {"H", 256},
                  {"I_TP", 128},
                  {"E", E},
                  {"block_size", B},
                  {"num_blocks", N},
                  {"skip_dma", {{"skip_token", true}}}};
  write(tp, be);
  expect_pass(run_moe(p, in));
  const auto made = [&] {
    try {
      workload::make_inputs(prepare_moe(p, in));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto bad = tp;
  bad[B + 1] = 8;
  write(bad, be);
  CHECK_THAT(made(),
             Catch::EndsWith(": inputs: token_position_to_id[129] = 8 is not a token id in [0, T = 8) or "
                             "the padding value -1"));
  bad = tp;
  bad[5] = 3;
  write(bad, be);
  CHECK_THAT(made(),
             Catch::EndsWith(": inputs: token_position_to_id[5] = 3: token 3 appears twice in block 0 "
                             "(also at [2])"));
  write(tp, {0, 0, 3, 2});
  CHECK_THAT(made(), Catch::EndsWith(": inputs: block_to_expert[2] = 3 is not an expert id in [0, E = 3)"));
  io::write_npy((dir / "be.npy").string(), io::NpyDType::I32, {N + 1, 1},
                std::vector<int32_t>(N + 1, 0).data());
  CHECK_THAT(moe_error(p, in), Catch::Contains("block_to_expert"));
}
