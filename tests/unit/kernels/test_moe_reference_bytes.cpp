// The host bytes the MoE checks say they hold at most (OutputCheck::reference_bytes, counted by the memory
// check before a run with numerics): the arithmetic of blockwise_mm_fwd_mxfp8's and blockwise_mm_bwd_mxfp8's
// estimates worked by hand, and every check of a kernel giving the same figure (they share one evaluation).
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "kernels/api/registry.h"

using namespace trnsim;

namespace {

// Every check's figure; they must agree.
double reference_bytes(const std::string& kernel, const nlohmann::json& params) {
  const auto checks = kernels::registry().bind(kernel, params)->checks();
  REQUIRE(!checks.empty());
  const std::map<std::string, std::vector<int64_t>> shapes;  // the MoE figures read the parameters only
  const double b = checks.front().reference_bytes(shapes);
  for (const auto& c : checks) {
    REQUIRE(c.reference_bytes);
    CHECK(c.reference_bytes(shapes) == b);
  }
  return b;
}

}  // namespace

TEST_CASE("moe reference bytes: the backward's estimate", "[moe]") {
  // BF16 weights are read in place a block at a time (gemm_weight): gemm_weight_bytes(m, c, K) = r (12 K +
  // 8 m) with r = min(c, weight_block_rows(K)), weight_block_rows(K) = max(24, 2^21 / K).
  // T 256, H = I = 256 (I H = 65536), E 4, top-2, B 128: N = ceil((512 - 3) / 128) + 3 = 7 blocks.
  // Sampling: a slot with its dX costs 12 I H = 786432 FLOP (gate/up from the checkpoint), all 512 slots
  // 402653184 < 8e9: every row, n = 512 slots; the experts' 7 * 128 * 16 I H = 939524096 < 24e9: all 4.
  //   vals      = 16 n H                                        = 2097152
  //   blocks(m) = max(W_down [256, 256]: 256 (3072 + 8 m), dX's W_gu [256, 512]: 256 (6144 + 8 m))
  //   evaluate  = blocks(512) + n (20 H + 48 I)                  = 2621440 + 8912896 = 11534336
  //   products  = 8 max(256 * 512, 256 * 256)                    = 1048576
  //   grads     = 24 I H + B (36 H + 56 I) + max(blocks(128), products)
  //             = 1572864 + 3014656 + 1835008                    = 6422528
  //   held      = 4 experts, both numerics, 2 * 8 * 3 I H = 3145728 each = 12582912, of which the last
  //               one's second numerics (8 * 3 I H = 1572864) is counted in grads
  //   total     = vals + max(evaluate, held - 1572864 + grads)  = 2097152 + 17432576 = 19529728
  CHECK(
      reference_bytes("blockwise_mm_bwd_mxfp8",
                      {{"T", 256}, {"H", 256}, {"I_TP", 256}, {"E", 4}, {"top_k", 2}, {"block_size", 128}}) ==
      19529728.0);
  // DeepSeek-V3's backward (configs/workloads/moe/deepseek_v3_bwd_mxfp8.json): H 7168, I 1024 (I H =
  // 7340032), T 4096, E 256, top-8, B 512: N = ceil((32768 - 255) / 512) + 255 = 319.
  // Rows: 32768 slots * 12 I H = 2.886e12 FLOP, stride ceil(360.8) = 361 > 128 groups: one group of 32
  // rows, n = 256. Experts: 319 * 512 * 16 I H = 1.918e13, stride 256 (clamped to E): one expert.
  // Blocks: W_down [1024, 7168] over H, 292 rows: 292 (86016 + 8 m); W_gu [7168, 2048] over 2I, 1024 rows:
  // 1024 (24576 + 8 m), the larger for m = 256 (27262976) and m = 512 (29360128).
  //   vals      = 16 * 256 * 7168                                      = 29360128
  //   evaluate  = 27262976 + 256 (143360 + 49152)                      = 76546048
  //   products  = 8 max(1024 * 2048, 292 * 7168)                       = 16777216
  //   grads     = 176160768 + 512 (258048 + 57344) + 29360128          = 367001600
  //   held      = one expert of 48 I H = 352321536, less its second numerics' 24 I H = 176160768
  //   total     = 29360128 + 176160768 + 367001600                     = 572522496
  // (748683264 before the weights were read in blocks: their FP32 copy 12 I H and FP64 copies 16 I H.)
  CHECK(reference_bytes("blockwise_mm_bwd_mxfp8", {{"T", 4096},
                                                   {"H", 7168},
                                                   {"I_TP", 1024},
                                                   {"E", 256},
                                                   {"top_k", 8},
                                                   {"block_size", 512},
                                                   {"skip_dma", {{"skip_token", true}}}}) == 572522496.0);
}

TEST_CASE("moe reference bytes: the forward's estimate", "[moe]") {
  // T 256 with padding T (rows T + 1 = 257), H = I = 256 (I H = 65536), E 4, top-2, B 128, N = 7; the
  // default checkpoints (gate/up and scaled intermediate) are compared on sampled blocks.
  // Rows: 512 slots * 12 I H = 402653184 < 8e9: all 257 rows, n_out = 514 slots; blocks: 7 * 128 * 8 I H
  // = 469762048 < 8e9: all 7, n = 514 + 896 = 1410 slots.
  //   vals     = 2 (40 I n + 8 H n_out)                       = 2 (14438400 + 1052672)        = 30982144
  //   block    = max(gate/up [512, 256]: 512 (3072 + 8 n), down [256, 256]: 256 (3072 + 8 n)) = 7348224
  //   evaluate = n (28 H + 56 I) + block                       = 30320640 + 7348224            = 37668864
  //   total    = 68651008
  CHECK(
      reference_bytes("blockwise_mm_fwd_mxfp8",
                      {{"T", 256}, {"H", 256}, {"I_TP", 256}, {"E", 4}, {"top_k", 2}, {"block_size", 128}}) ==
      68651008.0);
  // DeepSeek-V3's forward (configs/workloads/moe/deepseek_v3_fwd_mxfp8.json): H 7168, I 2048 (I H =
  // 14680064), T 4096 (rows T: -1 padding), E 256, top-8, B 512, N = 319.
  // Rows: 32768 slots * 12 I H = 5.77e12 > 8e9, stride 722 clamped to the 128 groups: 32 rows, n_out = 256;
  // blocks: 319 * 512 * 8 I H = 1.92e13, one block: n = 256 + 512 = 768.
  //   vals     = 2 (40 * 2048 * 768 + 8 * 7168 * 256)          = 155189248
  //   block    = max(gate/up [4096, 7168]: 292 (86016 + 6144), down [7168, 2048]: 1024 (24576 + 6144))
  //            = 31457280
  //   evaluate = 768 (200704 + 114688) + 31457280              = 273678336
  //   total    = 428867584 (576716800 before: the expert's FP32 weights, 12 I H, and 512-row chunks)
  CHECK(reference_bytes("blockwise_mm_fwd_mxfp8", {{"T", 4096},
                                                   {"H", 7168},
                                                   {"I_TP", 2048},
                                                   {"E", 256},
                                                   {"top_k", 8},
                                                   {"block_size", 512},
                                                   {"skip_dma", {{"skip_token", true}}}}) == 428867584.0);
}
