// matmul_mxfp8_backward's automatic blocking on its default schedule (nki_library): null tiling fields take
// the blocks of nki-library's auto_generate_default fallback (kernels/lib/mxfp8/lib_config.h, from
// experimental/matmul_mxfp8/matmul_mxfp8_config.py at 092a49dc), and the library stream's tiles leave room
// for the tiles declared after them (lib_api.h SitePlan), so the shipped Llama-3 MLP workloads run the
// library's stream within SBUF.
#include <catch2/catch.hpp>

#include <string>

#include "kernels/lib/mxfp8/lib_config.h"
#include "kernels/workload/workload.h"
#include "kernels/workload/workload_run.h"
#include "tests/sim/kernels/test_matmul_mxfp8_util.h"

using namespace trnsim;
using namespace trnsim::test;
namespace mx = trnsim::kernels::mxfp8;

namespace {

// One phase of matmul_mxfp8_backward as the kernel states it: BF16 LHS F-by-K (dY in input_grad), BF16
// RHS K-by-F, BF16 output, LNC2 sharding N.
mx::MatmulSpec phase(int64_t M, int64_t K, int64_t N) {
  mx::MatmulSpec s;
  s.M = M, s.K = K, s.N = N;
  s.lhs.layout = mx::Layout::FByK;
  s.rhs.layout = mx::Layout::KByF;
  s.out_dtype = isa::DType::BF16;
  s.run_with_lnc2 = true;
  s.shard_rhs = true;
  return s;
}

std::string workload_path(const std::string& name) {
  return std::string(TRNSIM_SOURCE_DIR) + "/configs/workloads/" + name + ".json";
}

}  // namespace

TEST_CASE("matmul_mxfp8_backward blocking: the library's fallback for the main job's phases") {
  // input_grad of the main job: M 4096 tokens, contraction N 4096, N = K 14336 (weight_grad: M = N 4096,
  // contraction M 4096, N 14336: the same numbers). matmul_mxfp8 hands auto_generate_default the per-core N
  // 7168, which it halves again: effective N 3584 = 7 x 512, so tile_n 512; tile_k 512 (unswizzled operands),
  // tile_m 128. Caps: M 32 tiles -> 2048 / 128 = 16, N 7 tiles -> 2048 / 512 = 4, K 8 tiles.
  // Budget 0.8 x 32 MiB = 26843545.6 B; k_bytes 4 (two BF16 operands), out_bytes 2 (BF16).
  // Start 16 x 2 x 8 (block 2048 x 1024 x 4096): 4 * 4096 * 3072 + 2 * 2048 * 1024 = 54525952: too big; K
  // elements 4096 * 3072 >= 2048 * 1024, so K halves: 8 -> 4 (4 * 2048 * 3072 + 4194304 = 29360128, too big)
  // -> 2 (16777216: fits; runs 2 * 2048 * 4, 2 * 1024 * 4, 16 * 1024 * 2 B, all <= 256 KiB).
  // Grow K: 3 (4 * 1536 * 3072 + 4194304 = 23068672 fits; ceil(4096 / 1536) = 3 < 4 blocks: taken), 4 does
  // not fit. M is at its cap. N 3: 4 * 1536 * 3584 + 2 * 2048 * 1536 = 28311552: does not fit.
  // Loads: BF16 unswizzled operands load the largest divisor of the block within 4096 / (4 tile): M 16 within
  // 8 -> 8, N 2 within 2 -> 2.
  const mx::Tiling t = mx::lib::default_tiling(phase(4096, 4096, 14336));
  CHECK(std::vector<int64_t>{t.tile_m, t.tile_k, t.tile_n} == std::vector<int64_t>{128, 512, 512});
  CHECK(std::vector<int64_t>{t.blocks_m, t.blocks_n, t.blocks_k} == std::vector<int64_t>{16, 2, 3});
  CHECK(std::vector<int64_t>{t.load_m, t.load_n} == std::vector<int64_t>{8, 2});

  // The up projection's input_grad (M 4096, contraction N 14336, N = K 4096): effective N 4096 / 4 = 1024,
  // tile_n 512, N cap 2 tiles; K 28 tiles. The same search ends at 16 x 2 x 3 (K grows to 3: ceil(14336 /
  // 1536) = 10 < 14 blocks; 4 does not fit).
  const mx::Tiling up = mx::lib::default_tiling(phase(4096, 14336, 4096));
  CHECK(std::vector<int64_t>{up.blocks_m, up.blocks_n, up.blocks_k, up.load_m, up.load_n} ==
        std::vector<int64_t>{16, 2, 3, 8, 2});
}

TEST_CASE("matmul_mxfp8_backward blocking: the second halving, explicit fields and no LNC2") {
  // (M, contraction, N) = (512, 1024, 1024) under LNC2 sharding N: effective N 1024 / 4 = 256, so tile_n 256
  // (a single halving would give 512). Caps M 4, N 1, K 2 tiles; 4 x 1 x 2 fits at once (4 * 1024 * 768 + 2
  // * 512 * 256) and nothing can grow. Loads: M 4 within 8 -> 4; N 1.
  const mx::Tiling t = mx::lib::default_tiling(phase(512, 1024, 1024));
  CHECK(t.tile_n == 256);
  CHECK(std::vector<int64_t>{t.blocks_m, t.blocks_n, t.blocks_k, t.load_m, t.load_n} ==
        std::vector<int64_t>{4, 1, 2, 4, 1});

  // Without LNC2 the effective N is N: 1024, tile_n 512, N cap 2 tiles; 4 x 2 x 2 fits.
  mx::MatmulSpec one = phase(512, 1024, 1024);
  one.run_with_lnc2 = false;
  const mx::Tiling u = mx::lib::default_tiling(one);
  CHECK(u.tile_n == 512);
  CHECK(std::vector<int64_t>{u.blocks_m, u.blocks_n, u.blocks_k, u.load_m, u.load_n} ==
        std::vector<int64_t>{4, 2, 2, 4, 2});

  // Fields the caller set are kept; loads follow the final block (M 4 within 8 -> 4).
  mx::MatmulSpec given = phase(4096, 4096, 14336);
  given.tiling.blocks_m = 4;
  given.tiling.tile_n = 256;
  given.tiling.load_n = 1;
  const mx::Tiling g = mx::lib::default_tiling(given);
  CHECK(g.blocks_m == 4);
  CHECK(g.tile_n == 256);
  CHECK(g.load_n == 1);
  CHECK(g.load_m == 4);
}

TEST_CASE("matmul_mxfp8_backward blocking: the main job runs nki-library's stream within SBUF") {
  // The shipped workload names no schedule: the default, nki_library, with the fallback's blocks (above).
  // Their tiles fit only if the early ones leave room for the later ones: the FP32 accumulator [128, 16 x
  // 1024] (64 KiB per partition) is declared first and may double-buffer (128 KiB), after which dY's BF16
  // staging [128, 3, 4 x 2048] (48 KiB) keeps one buffer, because the tiles declared after it in the step
  // need 79616 B per partition, one buffer each: vector offsets 512 + 128 + 128, W's staging 24576, the
  // PE-swizzle rows 8192, quantized dY 24576 and W 12288, their scales 6144 and 3072. Without that reserve
  // the staging took two buffers and the PE-swizzle rows found 6656 B free.
  auto w = workload::prepare_workload(
      workload::parse_workload(workload_path("llama3_8b_mlp_down_bwd_mxfp8"), {"numerics=false"}));
  std::map<std::string, kernels::AllocationRecord> first;
  for (const auto& a : w.build.allocations) first.emplace(a.name, a);
  REQUIRE(first.count("dx_output_sbuf"));
  CHECK(first.at("dx_output_sbuf").bytes_per_partition == 65536);
  CHECK(first.at("dx_output_sbuf").bufs == 2);
  CHECK(first.at("lhs_sbuf").bytes_per_partition == 49152);
  CHECK(first.at("lhs_sbuf").bufs == 1);
  CHECK(first.at("lhs_sbuf").reason ==
        "1 of 2 buffers fit in the free sbuf (131072 B per partition, 79616 B "
        "reserved)");
  CHECK(first.at("pe_swizzle_rows").bytes_per_partition == 8192);

  // Simulated time, timing only (`trnsim run configs/workloads/llama3_8b_mlp_down_bwd_mxfp8.json
  // --no-numerics`): 6622522.140 ns on the default; 1808263.909 ns on trnsim_optimized, the stream the
  // workload named before the library's blocking was ported (its time unchanged by that). ACT's DGE lookahead
  // and the refitted launch (dma.hwdge_act_lookahead, sync.kernel_launch_ns) moved them from 6622527.140 and
  // 1806229.215 ns.
  workload::WorkloadRun run(std::move(w));
  run.simulate();
  CHECK(run.result().stats.total_time.count() == 6622522140);
  auto o = workload::prepare_workload(workload::parse_workload(
      workload_path("llama3_8b_mlp_down_bwd_mxfp8"), {"numerics=false", "params.schedule=trnsim_optimized"}));
  workload::WorkloadRun opt(std::move(o));
  opt.simulate();
  CHECK(opt.result().stats.total_time.count() == 1808263909);
}
