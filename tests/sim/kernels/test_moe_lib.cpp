// The MoE kernels' default schedule, nki_library (kernels/moe/bwd_lib.h, fwd_lib.h): the per-block
// instruction counts of a small layer against a count derived by hand from nki-library's source, runs with
// numerics against the references (the library's bfloat16 chain emulated), the transpose and swizzle modes'
// effects, and the refusals of what the library lacks.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>

#include "kernels/moe/moe_common.h"
#include "sim/isa/opcodes.h"
#include "sim/isa/semantics.h"
#include "tests/sim/kernels/test_moe_fwd_util.h"

using namespace trnsim;
using namespace trnsim::test;

namespace {

json lib(json extra = json::object()) {
  json p = small(std::move(extra));
  p["schedule"] = "nki_library";
  return p;
}

json bwd_in() {
  json in = moe_inputs();
  in["output_hidden_states_grad"] = {{"generator", "normal"}, {"seed", 5}};
  in["checkpoints"] = {{"recipe", "checkpoints"}};
  return in;
}

// Instructions by opcode name (both cores) of a program.
std::map<std::string, int64_t> opcodes(const isa::Program& prog) {
  std::map<std::string, int64_t> n;
  for (const auto& core : prog.streams)
    for (const auto& stream : core)
      for (const auto& in : stream) ++n[isa::opcode_name(in.op)];
  return n;
}

// Instructions by opcode and engine ("nc_transpose@PE"), both cores.
std::map<std::string, int64_t> opcodes_on(const isa::Program& prog) {
  std::map<std::string, int64_t> n;
  for (const auto& core : prog.streams)
    for (const auto& stream : core)
      for (const auto& in : stream)
        ++n[fmt::format("{}@{}", isa::opcode_name(in.op), isa::engine_name(in.engine))];
  return n;
}

std::map<std::string, int64_t> minus(std::map<std::string, int64_t> a,
                                     const std::map<std::string, int64_t>& b) {
  for (const auto& [k, v] : b) a[k] -= v;
  for (auto it = a.begin(); it != a.end();) it = it->second == 0 ? a.erase(it) : std::next(it);
  return a;
}

// The float32 outputs match the emulation to 1e-5, except the affinity gradient, whose values the library
// rounds to bfloat16 (bound: bfloat16's).
void expect_pass(const MoeRun& r, double bf16_bound = 1e-3) {
  REQUIRE(!r.checks.empty());
  for (const auto& c : r.checks) {
    std::string why;
    for (const auto& f : c.failures) why += f + "; ";
    INFO(c.output << ": " << why);
    CHECK(c.pass);
    const bool bf16 = c.dtype == "bfloat16" || c.output == "expert_affinities_masked_grad";
    CHECK(c.metric("rel_l2_vs_quantized") <= (bf16 ? bf16_bound : 1e-5));
  }
}

}  // namespace

TEST_CASE("moe lib bwd: one block's instructions by opcode, as derived from nki-library's source") {
  // small(): T 256, H 512, I_TP 256, E 4, top-2, B 128, -1 padding, both cores (H 256 and I 128 per core),
  // spill_reload and scale packing on (the defaults). One block is the difference of a 3-block and a
  // 2-block build (the setup is the same; the last block prefetches no token ids). Per core
  // (bwmm_bwd_dropless_mxfp8.py, generic_matmul_mxfp8_api and its helpers at e9ef98fc):
  //   gather: the down weight's expert offset (1 tensor_scalar); block b + 1's token ids (1 dma_transpose);
  //     hidden^T and dY^T: 1 x 4 tiles of 128 x 128 each, per tile memset, indirect dma_copy, nc_transpose
  //     (PE), ACT tensor_copy, dma_copy store (8 each); dY rows: 1 x 1 tile of 128 x 512: memset, gather,
  //     store.
  //   Phase 1 (M 128, K 512, N 128: one tile of each, no spill: one N block and one M block): affinities:
  //     tensor_scalar, tensor_tensor, tensor_scalar (max -1), memset, gather, tensor_copy, memset of the
  //     dEA accumulator; one API call: per DGT operand (dY, down weight) one iota and 4 nc_transposes on
  //     DVE (the vector-offset pattern), per load a tensor_scalar (+1 for the down weight's expert) and one
  //     dma_transpose; one quantize_mx each; one nc_matmul_mx; tensor_copy PSUM -> accumulator; the
  //     128 x 128 SwiGLU tile: 2 dma_transpose (checkpoint), 2 activation, tensor_tensor silu_dx x up,
  //     silu x up, d_int x inter, tensor_reduce, tensor_tensor dEA add, tensor_scalar x a twice,
  //     tensor_tensor d_gate and d_up, 3 dma_copy stores, and for d_gate and d_up one nc_transpose, ACT
  //     tensor_copy and store; dEA: sendrecv (with its ready core_barrier), tensor_tensor add, ACT
  //     tensor_copy, indirect scatter (one 128-token tile: both cores scatter it); 3 core_barriers.
  //   Phase 2 (M 128, K 512, N 256): expert offset (tensor_scalar); one API call as Phase 1's (the weight's
  //     pattern has 8 columns); tensor_copy to bfloat16, memset, gather, tensor_tensor add, scatter.
  //   Phase 3 (M 256 in 2 M blocks, K 128: tile_k 128, N 256): the RHS (hidden^T) spills (2 M blocks);
  //     M block 0: gate and up calls each load and quantize both operands (2 iota, 8 DVE nc_transpose, 2
  //     tensor_scalar, 2 dma_transpose, 2 quantize_mx) and spill the RHS (data + one 4-row packed scale
  //     slot of the 32-partition tile: 2 dma_copy), 1 nc_matmul_mx, 1 tensor_copy; M block 1: each call
  //     loads the LHS by DGT (1 iota, 4 nc_transpose, 1 tensor_scalar, 1 dma_transpose, 1 quantize_mx) and
  //     reloads the RHS (data + scales: 2 dma_copy), 1 nc_matmul_mx, 1 tensor_copy; per M block and half
  //     (gate, up) a tensor_copy to bfloat16 and 2 pieces of 128 x 128: nc_transpose, ACT copy, load, add,
  //     store.
  //   Phase 4: the scaled intermediate [128, 256] transposed: 1 row-tile load, 2 x (nc_transpose, copy
  //     (ACT then DVE), store); 2 core_barriers; (M 256 in 2 blocks, K 128, N 256; both operands spill):
  //     M block 0 loads both (2 iota, 8 nc_transpose, 2 tensor_scalar, 2 dma_transpose, 2 quantize_mx) and
  //     spills both (4 dma_copy); M block 1 loads the LHS (N block 0: from HBM again, and spills it again: 1
  //     iota, 4 nc_transpose, 1 tensor_scalar, 1 dma_transpose, 1 quantize_mx, 2 dma_copy) and reloads the
  //     RHS (2 dma_copy); per M block 1 nc_matmul_mx, 1 tensor_copy, then a tensor_copy to bfloat16 and 2
  //     pieces as Phase 3's.
  // Per core: dma_transpose 1 + 4 + 2 + 6 + 3; iota 2 + 2 + 6 + 3; nc_transpose 4 per iota (DVE) + 8 + 2 +
  // 8 + 6 (PE); tensor_scalar 1 + 7 + 4 + 6 + 3; tensor_tensor 8 + 1 + 8 + 4; memset 9 + 2 + 1; quantize_mx
  // 2 + 2 + 6 + 3; nc_matmul_mx 1 + 1 + 4 + 2; tensor_copy 8 (ACT) + 5 + 2 + 16 + 10; dma_copy 18 + 7 + 2 +
  // 24 + 19; core_barrier 4 + 2; sendrecv 1; tensor_reduce 1; activation 2.
  const auto build = [](int64_t n) {
    return opcodes(prepare_moe(lib({{"num_blocks", n}}), bwd_in(), kMoeBwd).build.program);
  };
  const std::map<std::string, int64_t> per_core = {
      {"dma_transpose", 16}, {"iota", 13},     {"nc_transpose", 52 + 24}, {"tensor_scalar", 21},
      {"tensor_tensor", 21}, {"memset", 12},   {"quantize_mx", 13},       {"nc_matmul_mx", 8},
      {"tensor_copy", 41},   {"dma_copy", 70}, {"core_barrier", 6},       {"sendrecv", 1},
      {"tensor_reduce", 1},  {"activation", 2}};
  std::map<std::string, int64_t> both;
  for (const auto& [k, v] : per_core) both[k] = 2 * v;
  CHECK(minus(build(3), build(2)) == both);
}

TEST_CASE("moe lib fwd: one block's instructions by opcode, as derived from nki-library's source") {
  // small() with I_TP 512 (every GEMM one 128 x 512 x 512 tile: no K remainder), both cores
  // (SHARD_ON_BLOCK: core s runs blocks s, s + 2, ...), the documented defaults (no spill_reload, scale
  // packing, both checkpoints, read-modify-write scatter, skip_token). One block per core is the difference
  // of a 5-block and a 3-block build (blocks 3 and 4; the setup, slab zeroing and final reduce are the
  // same; a core's last block prefetches no token ids). Per block (bwmm_fwd_dropless_mxfp8.py and
  // generic_matmul_mxfp8_api at 092a49dc):
  //   the next block's token ids: 1 dma_transpose;
  //   _gather_hidden_block (1 x 128 tokens x 512 columns): memset, indirect dma_copy, store dma_copy;
  //   _gather_block_affinities (one 128-token tile): tensor_scalar (x E), tensor_tensor (+ expert),
  //     tensor_scalar (max -1, skip_token), memset, indirect dma_copy, tensor_copy;
  //   gate/up: the weight's expert offset (tensor_scalar); the gate call loads both operands by DGT (per
  //     operand one iota and 4 DVE nc_transposes for the vector-offset pattern, one tensor_scalar for the
  //     tile base (+1 for the weight's expert offset), one dma_transpose, one quantize_mx), one
  //     nc_matmul_mx and a tensor_copy PSUM -> accumulator (k block 0 initializes); the up call reuses the
  //     quantized hidden tile: the weight alone (iota, 4 nc_transpose, 2 tensor_scalar, dma_transpose,
  //     quantize_mx), nc_matmul_mx, tensor_copy; the epilogue of the one 128 x 512 tile: 2 tensor_copy
  //     (gate, up to bfloat16), no clamps, both halves checkpointed transposed (4 pieces of 128 columns
  //     each: nc_transpose on PE, ACT tensor_copy, dma_copy), activation silu, tensor_tensor x up,
  //     tensor_scalar x affinity, dma_copy into the scaled intermediate, and its checkpoint (4 pieces);
  //   down: the weight's expert offset (tensor_scalar); one call loading both operands (the scaled
  //     intermediate: iota, 4 nc_transpose, tensor_scalar, dma_transpose, quantize_mx; the weight: the
  //     same with 2 tensor_scalar), nc_matmul_mx, tensor_copy; tensor_copy to bfloat16 and a store;
  //   _scatter_output_block (1 x 512 columns): load, memset, indirect gather, tensor_tensor add, indirect
  //     scatter.
  // Per core: dma_transpose 1 + 3 + 2 = 6; iota 3 + 2 = 5; nc_transpose 4 x 5 (DVE) + 12 (PE) = 32;
  // tensor_scalar 2 + 1 + 3 + 2 + 1 + 1 + 3 = 13; tensor_tensor 1 + 1 + 1 = 3; memset 3; quantize_mx 5;
  // nc_matmul_mx 3; tensor_copy 1 + 2 + 2 + 12 + 1 + 1 = 19; activation 1; dma_copy 2 + 1 + 12 + 1 + 1 +
  // 3 = 20.
  const auto build = [](int64_t n) {
    return opcodes(prepare_moe(lib({{"I_TP", 512}, {"num_blocks", n}})).build.program);
  };
  const std::map<std::string, int64_t> per_core = {
      {"dma_transpose", 6}, {"iota", 5},       {"nc_transpose", 32}, {"tensor_scalar", 13},
      {"tensor_tensor", 3}, {"memset", 3},     {"quantize_mx", 5},   {"nc_matmul_mx", 3},
      {"tensor_copy", 19},  {"activation", 1}, {"dma_copy", 20}};
  std::map<std::string, int64_t> both;
  for (const auto& [k, v] : per_core) both[k] = 2 * v;
  CHECK(minus(build(5), build(3)) == both);
}

TEST_CASE("moe lib bwd: the DMA transpose modes replace the PE transposes and their PSUM copies") {
  // Per block and core (small(), 2 blocks, both cores: x 4): phase3_transpose_mode DMA turns the gathered
  // hidden rows' 4 transposes (128 tokens x 4 tiles of 128 columns: nc_transpose on the PE and an ACT
  // tensor_copy out of PSUM) into 4 SBUF-to-SBUF dma_transposes (_gather_block_tokens_transposed);
  // phase4_transpose_mode DMA does the same for dY's 4 and the scaled intermediate's 2
  // (_transpose_block_to_hbm, whose PSUM copies alternate ACT and DVE).
  const auto build = [](json extra) {
    extra["num_blocks"] = 2;
    return opcodes(prepare_moe(lib(extra), bwd_in(), kMoeBwd).build.program);
  };
  const auto nc = build({});
  CHECK(minus(build({{"phase3_transpose_mode", "DMA"}}), nc) ==
        std::map<std::string, int64_t>{{"dma_transpose", 16}, {"nc_transpose", -16}, {"tensor_copy", -16}});
  CHECK(minus(build({{"phase4_transpose_mode", "DMA"}}), nc) ==
        std::map<std::string, int64_t>{{"dma_transpose", 24}, {"nc_transpose", -24}, {"tensor_copy", -24}});
}

TEST_CASE("moe lib bwd: the scratch operands' swizzle modes choose their loader") {
  // small(), 2 blocks, both cores (x 4). d_gate_up_swizzle_mode is Phase 2's LHS (d_gate_up [128, 512],
  // F-by-K: one load of 128 F rows per block); output_grad_t_swizzle_mode Phase 4's LHS (dY^T, loaded at
  // both M blocks of H/2 = 256: two loads per block). Per load (load_apis.py at e9ef98fc), DGT: the vector-
  // offset pattern (iota on POOL, 4 nc_transposes on DVE), a tensor_scalar for the tile base and one
  // indirect dma_transpose (software DGE, POOL); PE: the rows by one dma_copy (SP), per 128 F four
  // nc_transposes on the PE and a PSUM copy (the first of the DVE / ACT alternation: DVE).
  const auto build = [](json extra) {
    extra["num_blocks"] = 2;
    return opcodes_on(prepare_moe(lib(extra), bwd_in(), kMoeBwd).build.program);
  };
  const auto per_load = [](int64_t n) {
    return std::map<std::string, int64_t>{{"dma_copy@SP", n},         {"dma_transpose@POOL", -n},
                                          {"iota@POOL", -n},          {"nc_transpose@DVE", -4 * n},
                                          {"nc_transpose@PE", 4 * n}, {"tensor_copy@DVE", n},
                                          {"tensor_scalar@DVE", -n}};
  };
  const auto dgt = build({});
  CHECK(minus(build({{"d_gate_up_swizzle_mode", "PE"}}), dgt) == per_load(4));
  CHECK(minus(build({{"output_grad_t_swizzle_mode", "PE"}}), dgt) == per_load(8));
}

TEST_CASE("moe lib: no quantize_mx of the default streams reads its staging strided (issue 25 item 1)") {
  // The library's loaders (DGT, PE swizzle) write the interleave quantize_mx reads contiguously; the DVE cost
  // model charges a source whose innermost step exceeds memory.strided_access_bytes at its strided rate.
  for (const char* kernel : {kMoeFwd, kMoeBwd}) {
    INFO(kernel);
    const auto w = prepare_moe(lib(), std::string(kernel) == kMoeBwd ? bwd_in() : moe_inputs(), kernel);
    int64_t quantizes = 0, strided = 0;
    for (const auto& core : w.build.program.streams)
      for (const auto& stream : core)
        for (const auto& in : stream)
          if (in.op == isa::Opcode::QuantizeMx) {
            const isa::Dim inner = in.ops[1].dim(in.ops[1].ndim - 1);
            ++quantizes;
            strided += inner.size > 1 && std::abs(inner.stride) * isa::dtype_size(in.ops[1].dtype) >
                                             int64_t{w.hw.memory.strided_access_bytes};
          }
    CHECK(quantizes > 0);
    CHECK(strided == 0);
  }
}

TEST_CASE("moe lib: nki_library is both kernels' default schedule") {
  for (const char* kernel : {kMoeFwd, kMoeBwd}) {
    INFO(kernel);
    const json in = std::string(kernel) == kMoeBwd ? bwd_in() : moe_inputs();
    CHECK(opcodes(prepare_moe_as_given(small(), in, kernel).build.program) ==
          opcodes(prepare_moe(lib(), in, kernel).build.program));
    CHECK(opcodes(prepare_moe_as_given(small(), in, kernel).build.program) !=
          opcodes(prepare_moe(small(), in, kernel).build.program));  // trnsim_optimized
  }
}

TEST_CASE("moe lib: both kernels' library streams pass their numerics checks") {
  // The references emulate the library's bfloat16 chains (kernels/moe/*_reference.cpp).
  expect_pass(run_moe(lib()));
  expect_pass(run_moe(lib(), bwd_in(), {}, kMoeBwd));
}

TEST_CASE("moe lib: a K remainder of 256 + 128 rows reads its own vector-offset patterns") {
  // I_TP 896 = 512 + 384: the down GEMM's second K tile loads by DGT as a 256-row and a 128-row sub-tile
  // (load_block.py _load_single_tensor), each with its own pattern; nki-library keeps the main, 256- and
  // 128-row patterns as three tensors of the descriptor (common_dataclasses.py set_vector_offset_patterns),
  // all live while the block loads. Before, the three shared one allocation site of two buffers, so the
  // 128-row pattern overwrote the main one before the main loads read it: "vector_offset entry 256 = 1792
  // is outside rows [0, 1792) of tensor 'fwd_scaled_intermediate'".
  expect_pass(run_moe(lib({{"I_TP", 896}})));
}

TEST_CASE("moe lib: what nki-library's kernels lack is refused with the schedule that runs it") {
  const json x32 = {{"quant_scheme", "1x32"}};
  CHECK_THAT(moe_error(lib({{"phase1_config", x32},
                            {"phase2_config", x32},
                            {"phase3_config", x32},
                            {"phase4_config", x32}}),
                       bwd_in(), kMoeBwd),
             Catch::Contains("quant_scheme 1x32") && Catch::Contains("\"schedule\": \"trnsim_optimized\""));
  CHECK_THAT(moe_error(lib({{"bias", true}})),
             Catch::Contains("'bias'") && Catch::Contains("\"schedule\": \"trnsim_optimized\""));
}

TEST_CASE("moe lib: a stacked weight whose DGT row indices pass 2^24 is refused before any work") {
  // The flattened view of E experts' [F, K] weights has E F K / vs rows, vs = tile_k / 4 of the smallest DGT
  // tile; every index stays exact in FP32 up to 2^24 rows. E = 1024, F = 2048, K = 1024, tile_k 512 (vs 128):
  // 2^24 rows exactly; one more expert is 2^24 + 2^14.
  using kernels::moe::dgt_expert_offset_error;
  CHECK_FALSE(dgt_expert_offset_error("w", "E * F * K", 1024, 2048, 1024, 512).has_value());
  CHECK_THAT(
      dgt_expert_offset_error("w", "E * F * K", 1025, 2048, 1024, 512).value_or(""),
      Catch::StartsWith("the DGT loads of w index the rows of its flattened view, E * F * K / 128 = 1025 "
                        "* 2048 * 1024 / 128 = 16793600, past 2^24 = 16777216"));
  // The refusal names the library lines that make the limit the library's own.
  CHECK_THAT(dgt_expert_offset_error("w", "E * F * K", 1025, 2048, 1024, 512).value_or(""),
             Catch::Contains("bwmm_bwd_dropless_mxfp8.py _set_expert_offset_on_td") &&
                 Catch::Contains("common_dataclasses.py TileLocation.set_vector_offset"));
  // K = 1152 = 2 x 512 + 128: the 128-row remainder tile has vs = 32, so 4x the rows of vs = 128.
  CHECK_FALSE(dgt_expert_offset_error("w", "E * F * K", 455, 1024, 1152, 512).has_value());  // 16773120
  CHECK_THAT(dgt_expert_offset_error("w", "E * F * K", 456, 1024, 1152, 512).value_or(""),
             Catch::Contains("E * F * K / 32 = 456 * 1024 * 1152 / 32 = 16809984"));
  // Both kernels at E = 1025, H = I_TP = 1024: gate/up's view has 1025 * 2048 * 1024 / 128 rows.
  const json big = {{"E", 1025}, {"H", 1024}, {"I_TP", 1024}};
  const auto refused = [](const std::string& e, const std::string& keys, const std::string& values) {
    INFO(e);
    CHECK_THAT(e,
               Catch::Contains("the DGT loads of gate_up_proj_weight index the rows of its flattened view, " +
                               keys + " / 128 = " + values + " / 128 = 16793600, past 2^24 = 16777216") &&
                   Catch::Contains("\"schedule\": \"trnsim_optimized\""));
  };
  refused(moe_error(lib(big)), "E * (2 * I_TP) * H", "1025 * 2048 * 1024");
  refused(moe_error(lib(big), bwd_in(), kMoeBwd), "E * H * (2 * I_TP)", "1025 * 1024 * 2048");
  // The down weight (E H I_TP / 128 = 2^23 + 2^13 rows) fits; with I_TP doubled it does not either.
  CHECK_THAT(moe_error(lib({{"E", 1025}, {"H", 1024}, {"I_TP", 2048}}), bwd_in(), kMoeBwd),
             Catch::Contains("the DGT loads of down_proj_weight") &&
                 Catch::Contains("E * I_TP * H / 128 = 1025 * 2048 * 1024 / 128 = 16793600"));
}
