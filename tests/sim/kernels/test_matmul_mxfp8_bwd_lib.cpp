// matmul_mxfp8_backward's instruction streams against a count derived by hand from nki-library's source
// (issue 25 item 2, as test_moe_lib.cpp does for the MoE kernels): per core, by opcode and engine, for a
// small layer with BF16 operands and for one with a pre-quantized dY. The default schedule, nki_library, must
// emit the library's counts; the named option trnsim_optimized is pinned too, and so is its difference from
// the library's, each entry explained (kernels/matmul_mxfp8_backward/README.md lists what the option changes,
// with the library's file and function).
//
// Library source read (aws-neuron/nki-library, src/nkilib_src/nkilib/experimental/): at 092a49dc
// matmul_mxfp8/matmul_mxfp8_generic_backward_kernel.py (matmul_mxfp8_backward: two matmul_mxfp8 calls),
// matmul_mxfp8_generic_kernel.py (matmul_mxfp8: TensorDescriptors, LNC2 offsets, one
// generic_matmul_mxfp8_api call over the core's blocks), matmul_mxfp8_generic_api.py
// (generic_matmul_mxfp8_api: per (m, n, k) block load_lhs_and_rhs, _quantize_and_spill_operand for each BF16
// operand, matmul_mxfp8_blocks, then _store_output_block_to_hbm), matmul_mxfp8_blocks.py
// (_k_inner_loop_helper), mxfp_utils/mxfp8_utils/quantize_mxfp8_block.py (quantize_mxfp8_block: one
// quantize_mx per (F tile, K tile)); at e9ef98fc mxfp_utils/mxfp8_utils/common_dataclasses.py
// (TensorDescriptor.__post_init__: unswizzled BF16 given K-by-F must load through the PE swizzle),
// load_block.py and load_apis.py (load_tile_dgt with its vector-offset pattern, load_tile_PE_swizzle_wrapX).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <map>
#include <string>

#include "sim/isa/opcodes.h"
#include "tests/sim/kernels/test_matmul_mxfp8_util.h"

using namespace trnsim;
using namespace trnsim::test;
using json = nlohmann::json;

namespace {

using Counts = std::map<std::string, int64_t>;

// Instructions of one core by "opcode@engine"; DMAs by opcode alone (the library leaves their queues to the
// compiler).
Counts per_core(const isa::Program& prog, int core) {
  Counts n;
  for (const auto& stream : prog.streams[core])
    for (const auto& in : stream) {
      const std::string op = isa::opcode_name(in.op);
      ++n[op.rfind("dma_", 0) == 0 ? op : fmt::format("{}@{}", op, isa::engine_name(in.engine))];
    }
  return n;
}

// a - b, zero entries dropped.
Counts minus(Counts a, const Counts& b) {
  for (const auto& [k, v] : b) a[k] -= v;
  for (auto it = a.begin(); it != a.end();) it = it->second == 0 ? a.erase(it) : std::next(it);
  return a;
}

// (M, K, N) = (512, 1024, 1024), LNC2 splitting N of both phases (K, the in-features: 512 per core), tiles
// (tile_m, tile_k, tile_n) = (128, 512, 512) and explicit blocks, so the library skips its autotune cache and
// heuristic (auto_generate_default) and both run the same blocks: input_grad (M 512, contraction N 1024, N
// 512 per core) 4 x 1 x 1 tiles per block, one load per block (TILES_IN_LOAD_M 4), so 1 M block, 1 N block, 2
// K blocks; weight_grad (M = N 1024, contraction M 512, N 512 per core) 8 x 1 x 1 tiles, one load: 1 block.
json layer(json extra = json::object()) {
  const auto cfg = [](int bm) {
    return json{{"tile_m", 128},          {"tile_k", 512},         {"tile_n", 512},
                {"TILES_IN_BLOCK_M", bm}, {"TILES_IN_BLOCK_N", 1}, {"TILES_IN_BLOCK_K", 1},
                {"TILES_IN_LOAD_M", bm},  {"TILES_IN_LOAD_N", 1}};
  };
  json p = {
      {"M", 512}, {"K", 1024}, {"N", 1024}, {"input_grad_config", cfg(4)}, {"weight_grad_config", cfg(8)}};
  p.update(extra);
  return p;
}

// The forward's layer (matmul_mxfp8): (M, K, N) = (512, 1024, 1024), unswizzled BF16 x [M, K] and w [N, K],
// explicit tiles (128, 512, 512), blocks 4 x 1 x 1 and loads 4 x 1.
json fwd_layer(json extra = json::object()) {
  json p = {{"M", 512},
            {"K", 1024},
            {"N", 1024},
            {"tile_m", 128},
            {"tile_k", 512},
            {"tile_n", 512},
            {"TILES_IN_BLOCK_M", 4},
            {"TILES_IN_BLOCK_N", 1},
            {"TILES_IN_BLOCK_K", 1},
            {"TILES_IN_LOAD_M", 4},
            {"TILES_IN_LOAD_N", 1},
            {"x_is_swizzled", false},
            {"w_is_swizzled", false}};
  p.update(extra);
  return p;
}

}  // namespace

const json kOptimized = {{"schedule", "trnsim_optimized"}};

json optimized(json extra) {
  extra.update(kOptimized);
  return extra;
}

TEST_CASE("matmul_mxfp8_backward lib: BF16 layer's instructions per core, derived from nki-library's loops") {
  // nki-library, per core (both cores alike: each computes 512 of the 1024 output columns):
  //   input_grad = matmul_mxfp8(dY [M, N] F-by-K, W [N, K] K-by-F): generic_matmul_mxfp8_api runs 2 steps
  //   (k = 0, 1); each step (load_lhs_and_rhs, no masking: every dim a multiple of its block):
  //     dY by DGT (load_tile_dgt): the vector-offset pattern (1 iota on POOL, 4 nc_transposes of 32 x 32 on
  //       DVE: 4 * 512 / 128 = 16 columns), then per load (TILES_IN_LOAD_M 4 = the block) 1 tensor_scalar
  //       (+ the tile's base) and 1 indirect dma_transpose;
  //     W K-by-F: TensorDescriptor forces load_with_PE_swizzle; load_tile_PE_swizzle_wrapX per load of
  //       512 columns = 4 sub-tiles of 128: 4 dma_transposes (K-by-F direct), then per sub-tile 4
  //       nc_transposes on PE into PSUM and 1 tensor_copy out, DVE and ACT alternately
  //       (psum_drain_engine_ratio (1, 1)): 2 DVE + 2 ACT;
  //     quantize_mxfp8_block: one quantize_mx per (F tile, K tile): dY 4 + W 1;
  //     matmul_mxfp8_blocks 'mnk': 4 output tiles, 1 nc_matmul_mx each (TILES_IN_BLOCK_K 1); PSUM is
  //       BF16 (TILES_IN_BLOCK_K == 1, BF16 output), so the PSUM copy-in (FP32 PSUM only) never runs:
  //       k = 0 drains by tensor_copy (4, engine left to the compiler: DVE), k = 1 adds by tensor_tensor (4);
  //   then _store_output_block_to_hbm: 1 dma_copy per tile row (4), casting the FP32 accumulator.
  //   weight_grad = matmul_mxfp8(dY [M, N] K-by-F, X [M, K] K-by-F): 1 step; both operands by the PE swizzle:
  //     dY 1024 columns = 8 sub-tiles (8 dma_transposes, 32 PE nc_transposes, 4 DVE + 4 ACT tensor_copies),
  //     X 512 columns = 4 sub-tiles (4, 16, 2 + 2); quantize_mx 8 + 1; 8 nc_matmul_mx and 8 tensor_copy
  //     drains (DVE); 8 dma_copy stores.
  // Sum: iota 2; nc_transpose DVE 8, PE 32 + 48; tensor_scalar 2; dma_transpose 2 + 8 + 12; tensor_copy DVE
  // 4 + 4 + 6 + 8, ACT 4 + 6; tensor_tensor 4; quantize_mx 10 + 9; nc_matmul_mx 8 + 8; dma_copy 4 + 8.
  const Counts library = {
      {"iota@POOL", 2},        {"nc_transpose@DVE", 8}, {"nc_transpose@PE", 80}, {"tensor_scalar@DVE", 2},
      {"dma_transpose", 22},   {"tensor_copy@DVE", 22}, {"tensor_copy@ACT", 10}, {"tensor_tensor@DVE", 4},
      {"quantize_mx@DVE", 19}, {"nc_matmul_mx@PE", 16}, {"dma_copy", 12},
  };
  // The default schedule emits exactly these.
  const auto lib = build_mx("matmul_mxfp8_backward", layer());
  REQUIRE(lib.program.streams.size() == 2);
  CHECK(per_core(lib.program, 0) == library);
  CHECK(per_core(lib.program, 1) == library);
  // trnsim_optimized (kernels/lib/mxfp8/matmul.cpp, blocks.cpp, loaders.cpp): dY's DGT is one outer-axes
  // dma_transpose per load with no vector offsets (2); a K-by-F operand's rows go straight onto partitions by
  // one strided dma_copy per load (W 2, dY 1, X 1) with no PE pass; one quantize_mx per load, not per tile
  // (input_grad 2 x (1 + 1), weight_grad 1 + 1); the first K block's drains alternate DVE tensor_copy and ACT
  // activation copy (4 + 8); the second adds by tensor_tensor (4); stores as the library's (4 + 8).
  const Counts opt = {
      {"dma_transpose", 2},  {"dma_copy", 4 + 12},     {"quantize_mx@DVE", 6},  {"tensor_copy@DVE", 6},
      {"activation@ACT", 6}, {"tensor_tensor@DVE", 4}, {"nc_matmul_mx@PE", 16},
  };
  const auto b = build_mx("matmul_mxfp8_backward", layer(kOptimized));
  REQUIRE(b.program.streams.size() == 2);
  CHECK(per_core(b.program, 0) == opt);
  CHECK(per_core(b.program, 1) == opt);
  // What the library emits beyond trnsim_optimized (positive) and the option beyond the library (negative):
  // the DGT vector offsets (iota, 4 DVE nc_transposes per step, a tensor_scalar per load); the PE swizzle of
  // the K-by-F operands (80 PE nc_transposes, 20 dma_transposes and 10 + 10 PSUM copies for the option's 4
  // strided dma_copies); the library's first-K-block drains all on DVE (+6 tensor_copy) where the option
  // alternates with ACT activation copies (-6); quantize_mx per tile, not per load (+13).
  const Counts library_extra = {
      {"iota@POOL", 2},       {"nc_transpose@DVE", 8}, {"tensor_scalar@DVE", 2}, {"nc_transpose@PE", 80},
      {"dma_transpose", 20},  {"dma_copy", -4},        {"tensor_copy@DVE", 16},  {"tensor_copy@ACT", 10},
      {"activation@ACT", -6}, {"quantize_mx@DVE", 13},
  };
  CHECK(minus(library, opt) == library_extra);
}

TEST_CASE("matmul_mxfp8_backward lib: pre-quantized dY's instructions per core") {
  // output_grad_scales: x4 dY [N/4, M] quantized along N with scales [N/4, M] (unpacked), and the trnsim
  // extension output_grad_columnwise [M/4, N] with its scales for weight_grad.
  // nki-library, input_grad: the pre-quantized LHS loads per step and per load one dma_copy of the data and
  // one of the scales (load_lhs_and_rhs, unpacked scales): 2 x 2; no pattern, DGT or quantize for it; W as
  // above (2 x (4 dma_transpose, 16 PE nc_transpose, 2 + 2 copies, 1 quantize_mx)); 8 nc_matmul_mx, drains 4
  // tensor_copy + 4 tensor_tensor (inputs_were_prequantized also rules the copy-in out), 4 stores.
  // weight_grad: the library hands the same rowwise pair to this phase, whose K check (N 1024 vs X's M 512)
  // asserts; trnsim's columnwise pair loads as a pre-quantized LHS would (1 data + 1 scales dma_copy),
  // X as above (4, 16, 2 + 2, 1 quantize_mx); 8 nc_matmul_mx, 8 drains, 8 stores.
  const Counts library = {
      {"dma_copy", 4 + 4 + 2 + 8},        {"dma_transpose", 8 + 4},   {"nc_transpose@PE", 32 + 16},
      {"tensor_copy@DVE", 4 + 4 + 2 + 8}, {"tensor_copy@ACT", 4 + 2}, {"tensor_tensor@DVE", 4},
      {"quantize_mx@DVE", 2 + 1},         {"nc_matmul_mx@PE", 16},
  };
  const json prequantized = {{"output_grad_scales", {256, 512}},
                             {"output_grad_columnwise_scales", {128, 1024}}};
  const auto lib = build_mx("matmul_mxfp8_backward", layer(prequantized));
  CHECK(per_core(lib.program, 0) == library);
  CHECK(per_core(lib.program, 1) == library);
  // trnsim_optimized: the same x4 loads (4 + 2); W and X by one strided dma_copy per load (2 + 1); one
  // quantize_mx per load of W and X (2 + 1); drains as in the BF16 layer.
  const Counts opt = {
      {"dma_copy", 4 + 2 + 3 + 12}, {"quantize_mx@DVE", 3},   {"tensor_copy@DVE", 6},
      {"activation@ACT", 6},        {"tensor_tensor@DVE", 4}, {"nc_matmul_mx@PE", 16},
  };
  const auto b = build_mx("matmul_mxfp8_backward", layer(optimized(prequantized)));
  CHECK(per_core(b.program, 0) == opt);
  CHECK(per_core(b.program, 1) == opt);
  // The PE swizzle of W and X (48 PE nc_transposes, 12 dma_transposes, 6 + 6 PSUM copies for 3 strided
  // dma_copies) and the drains' engines (+6 DVE tensor_copy, -6 ACT activation).
  const Counts library_extra = {
      {"nc_transpose@PE", 48}, {"dma_transpose", 12},  {"dma_copy", -3},
      {"tensor_copy@DVE", 12}, {"tensor_copy@ACT", 6}, {"activation@ACT", -6},
  };
  CHECK(minus(library, opt) == library_extra);
}

TEST_CASE(
    "matmul_mxfp8 lib: the forward's default stream is nki-library's, counted per core from its loops") {
  // matmul_mxfp8 (matmul_mxfp8_generic_kernel.py at 092a49dc) is the call matmul_mxfp8_backward makes twice;
  // its entry builds the same TensorDescriptors and runs one generic_matmul_mxfp8_api pass. (M, K, N) =
  // (512, 1024, 1024), both operands F-by-K (x [M, K], w [N, K]: DGT), LNC2 splitting N (512 per core),
  // explicit tiles (128, 512, 512) and blocks 4 x 1 x 1 with TILES_IN_LOAD_M 4: per core 1 M block, 1 N
  // block, 2 K blocks, so 2 API calls, each (load_lhs_and_rhs, no masking):
  //   x and w by DGT (load_tile_dgt): per operand the vector-offset pattern (1 iota on POOL, 4 nc_transposes
  //     of 32 x 32 on DVE: 4 * 512 / 128 = 16 columns each), then per load (one each) 1 tensor_scalar (the
  //     tile's base) and 1 indirect dma_transpose;
  //   quantize_mxfp8_block: one quantize_mx per (F tile, K tile): x 4 + w 1;
  //   matmul_mxfp8_blocks 'mnk': 4 output tiles, 1 nc_matmul_mx each; PSUM BF16 (TILES_IN_BLOCK_K 1, BF16
  //     output): k = 0 drains by tensor_copy (DVE, the compiler's default engine), k = 1 adds by
  //     tensor_tensor;
  // then _store_output_block_to_hbm: 1 dma_copy per tile row (4).
  // Sum per core: iota 2 x 2; nc_transpose DVE 2 x 8; tensor_scalar 2 x 2; dma_transpose 2 x 2; quantize_mx
  // 2 x 5; nc_matmul_mx 2 x 4; tensor_copy 4; tensor_tensor 4; dma_copy 4.
  json p = fwd_layer();
  const Counts library = {
      {"iota@POOL", 4},       {"nc_transpose@DVE", 16}, {"tensor_scalar@DVE", 4},
      {"dma_transpose", 4},   {"quantize_mx@DVE", 10},  {"nc_matmul_mx@PE", 8},
      {"tensor_copy@DVE", 4}, {"tensor_tensor@DVE", 4}, {"dma_copy", 4},
  };
  const auto lib = build_mx("matmul_mxfp8", p);
  REQUIRE(lib.program.streams.size() == 2);
  CHECK(per_core(lib.program, 0) == library);
  CHECK(per_core(lib.program, 1) == library);
  // trnsim_optimized: per K step and operand one outer-axes dma_transpose with no vector offsets and one
  // quantize_mx per load (both operands change with the K block: no reuse), 2 x (1 + 1) each; the first K
  // block's drains alternate DVE tensor_copy and ACT activation copy (2 + 2), the second adds (4); the same
  // stores.
  const Counts opt = {
      {"dma_transpose", 4},  {"quantize_mx@DVE", 4},   {"nc_matmul_mx@PE", 8}, {"tensor_copy@DVE", 2},
      {"activation@ACT", 2}, {"tensor_tensor@DVE", 4}, {"dma_copy", 4},
  };
  p.update(kOptimized);
  const auto b = build_mx("matmul_mxfp8", p);
  REQUIRE(b.program.streams.size() == 2);
  CHECK(per_core(b.program, 0) == opt);
  CHECK(per_core(b.program, 1) == opt);
}

TEST_CASE("matmul_mxfp8 lib: pre-swizzled, 1x32 and PE-remainder loads, counted per core from the loaders") {
  // The forward layer above ((M, K, N) = (512, 1024, 1024), tiles (128, 512, 512), blocks 4 x 1 x 1, loads
  // 4 x 1, LNC2 on N: per core 2 API calls, one per K block) with the operand forms the library stream used
  // to refuse. Common to every case per core: quantize_mx 2 x (4 + 1), nc_matmul_mx 2 x 4, drains tensor_copy
  // 4 (k = 0, BF16 PSUM) and tensor_tensor 4 (k = 1), stores 4 dma_copy.
  const auto counts = [&](json extra) {
    const auto b = build_mx("matmul_mxfp8", fwd_layer(extra));
    REQUIRE(b.program.streams.size() == 2);
    CHECK(per_core(b.program, 1) == per_core(b.program, 0));
    return per_core(b.program, 0);
  };
  SECTION("pre-swizzled BF16 x and w: load_tile's dma_copy branch, one per load") {
    // Per call x (one load of 4 x 128 F, [128, 2048] of [K/4, 4M]) and w 1 dma_copy each: 2 x 2 + 4 stores.
    const Counts lib = {{"dma_copy", 8},
                        {"quantize_mx@DVE", 10},
                        {"nc_matmul_mx@PE", 8},
                        {"tensor_copy@DVE", 4},
                        {"tensor_tensor@DVE", 4}};
    CHECK(counts({{"x_is_swizzled", true}, {"w_is_swizzled", true}}) == lib);
  }
  SECTION("quant_scheme 1x32, F-by-K x and w in DGT mode: load_tile_PE_Swizzle_1x32") {
    // Per call and operand the DGT vector-offset pattern all the same (load_lhs_and_rhs: 1 iota, 4 DVE
    // nc_transposes) and per load its tensor_scalar (TileLocation.__post_init__), then the 1x32 loader: the
    // 512 F rows fit, so 1 dma_copy (4 sub-tiles of 128 F); per sub-tile 2 FP32 nc_transposes on the PE and
    // 1 tensor_copy (DVE). Per core: iota 2 x 2, nc_transpose@DVE 2 x 8, tensor_scalar 2 x 2, dma_copy
    // 2 x 2 + 4, nc_transpose@PE 2 x 2 x 8, tensor_copy 2 x 2 x 4 + 4.
    const Counts lib = {{"iota@POOL", 4},        {"nc_transpose@DVE", 16}, {"tensor_scalar@DVE", 4},
                        {"dma_copy", 8},         {"nc_transpose@PE", 32},  {"tensor_copy@DVE", 20},
                        {"quantize_mx@DVE", 10}, {"nc_matmul_mx@PE", 8},   {"tensor_tensor@DVE", 4}};
    CHECK(counts({{"quant_scheme", "1x32"}}) == lib);
  }
  SECTION("K = 896, w K-by-F: the PE loader's 256- and 128-row remainder sub-tiles") {
    // K blocks: 512, then 384 = 256 + 128 rows; K % 512 != 0, so both staging tiles are zeroed per call
    // (memset, 2 x 2). x by DGT: per call 3 patterns (512, 256, 128 rows: 3 iota, 12 DVE nc_transposes);
    // tensor_scalar + dma_transpose per (sub-)tile: 1 + 2; the 128-row sub-tile at partition 64 through the
    // 32-partition tile and a tensor_copy. w by load_tile_PE_swizzle_wrapX (K-by-F, 4 sub-tiles of 128 F):
    // per (sub-)tile of K 4 dma_transposes, 16 PE nc_transposes and 4 copies out (DVE, ACT, DVE, ACT); 3 such
    // K pieces, the last through the 32-partition tile and a tensor_copy. Per core: memset 4, iota 6,
    // nc_transpose@DVE 24, tensor_scalar 3, dma_transpose 3 + 12, nc_transpose@PE 48, tensor_copy@DVE
    // 6 + 2 + 4, tensor_copy@ACT 6.
    const Counts lib = {{"memset@DVE", 4},        {"iota@POOL", 6},         {"nc_transpose@DVE", 24},
                        {"tensor_scalar@DVE", 3}, {"dma_transpose", 15},    {"nc_transpose@PE", 48},
                        {"tensor_copy@DVE", 12},  {"tensor_copy@ACT", 6},   {"quantize_mx@DVE", 10},
                        {"nc_matmul_mx@PE", 8},   {"tensor_tensor@DVE", 4}, {"dma_copy", 4}};
    CHECK(counts({{"K", 896}, {"w_is_f_by_k", false}}) == lib);
  }
}
