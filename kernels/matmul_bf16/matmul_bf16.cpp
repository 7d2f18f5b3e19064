// matmul_bf16: Y[M, N] = X[M, K] @ W[N, K]^T, BF16 inputs in HBM, BF16 or FP32 output. The calibration
// kernel.
//
// Tiling: K in tiles of 128 on the partitions (the contraction), M in tiles of 128 (stationary columns),
// N in tiles of tile_n <= 512 (moving columns, one FP32 PSUM bank). Loop order: N tiles outer (the W^T block
// [K, tile_n] stays in SBUF), M tiles inner (X^T [K, 128] loaded per tile), K innermost accumulating in PSUM.
// Operands reach the K-on-partitions layout by dma_transpose, or by natural loads plus PE transposes
// (transpose_load = "pe"). The PSUM result is cast into SBUF on ACT or DVE, then DMAed to Y.
// LNC2: the N tiles (or M tiles) are split between the two cores; K is never split.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "kernels/api/nki.h"
#include "kernels/api/package.h"

namespace trnsim::kernels {
namespace {

enum class Shard { Auto, N, M, None };
enum class CopyEngine { Act, Dve, Alternate };

struct MatmulParams {
  int64_t M = 0, N = 0, K = 0;
  DType out_dtype = DType::BF16;
  int64_t tile_n = 512;
  bool pe_transpose = false;
  Shard lnc_shard = Shard::Auto;
  CopyEngine copy_engine = CopyEngine::Alternate;

  static void describe(Schema<MatmulParams>& s) {
    s.dim(&MatmulParams::M, "M", "rows of X and Y");
    s.dim(&MatmulParams::N, "N", "rows of W, columns of Y");
    s.dim(&MatmulParams::K, "K", "contraction (columns of X and W)");
    s.choice(&MatmulParams::out_dtype, "output_dtype", "dtype of Y",
             {{"bfloat16", DType::BF16}, {"float32", DType::F32}}, DType::BF16);
    s.add(&MatmulParams::tile_n, "tile_n", "moving free size per matmul (columns of one FP32 PSUM bank at most)",
          512)
        .range(1, 512);
    s.choice(&MatmulParams::pe_transpose, "transpose_load",
             "how X and W reach K-on-partitions: dma_transpose, or natural loads plus PE transposes",
             {{"dma", false}, {"pe", true}}, false);
    s.choice(&MatmulParams::lnc_shard, "lnc_shard",
             "with 2 programs: split N tiles or M tiles between the cores (auto: N if it has as many tiles)",
             {{"auto", Shard::Auto}, {"n", Shard::N}, {"m", Shard::M}, {"none", Shard::None}}, Shard::Auto);
    s.choice(&MatmulParams::copy_engine, "copy_engine", "engine of the PSUM -> SBUF copy with cast",
             {{"act", CopyEngine::Act}, {"dve", CopyEngine::Dve}, {"alternate", CopyEngine::Alternate}},
             CopyEngine::Alternate);
  }
};

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Loads src [rows, cols] (HBM, rows <= 512, cols <= 128) transposed into dst [cols, rows] (SBUF).
void load_transposed(Kernel& k, const View& dst, const View& src, bool pe, int& round) {
  if (!pe) {
    nki::dma_transpose(dst, src);
    return;
  }
  const int64_t rows = src.size(0), cols = src.size(1);
  View nat = k.sbuf({128, ceil_div(rows, 128), 128}, DType::BF16, "nat");
  View pt = k.psum({128, 512}, DType::BF16, "transpose");
  for (int64_t r0 = 0, j = 0; r0 < rows; r0 += 128, ++j) {
    const int64_t rr = std::min<int64_t>(128, rows - r0);
    View chunk = nat(S(0, rr), j, S(0, cols));
    nki::dma_copy(chunk, src(S(r0, r0 + rr)));
    nki::nc_transpose(pt(S(0, cols), S(r0, r0 + rr)), chunk);
  }
  nki::tensor_copy(dst, pt(S(0, cols), S(0, rows)), (round++ % 2) ? Engine::ACT : Engine::DVE);
}

void matmul_kernel(Kernel& k, const MatmulParams& p) {
  View x = k.input("x", DType::BF16, {p.M, p.K});
  View w = k.input("w", DType::BF16, {p.N, p.K});
  View y = k.output("y", p.out_dtype, {p.M, p.N});

  const int64_t kt_count = ceil_div(p.K, 128), mt_count = ceil_div(p.M, 128),
                nt_count = ceil_div(p.N, p.tile_n);
  // LNC2 sharding by tiles.
  int64_t m_lo = 0, m_hi = mt_count, n_lo = 0, n_hi = nt_count;
  if (k.num_programs() == 2) {
    Shard mode = p.lnc_shard;
    if (mode == Shard::Auto) mode = nt_count >= mt_count ? Shard::N : Shard::M;
    const int c = k.program_id();
    if (mode == Shard::N) {
      const int64_t half = ceil_div(nt_count, 2);
      n_lo = std::min(nt_count, c * half), n_hi = std::min(nt_count, (c + 1) * half);
    } else if (mode == Shard::M) {
      const int64_t half = ceil_div(mt_count, 2);
      m_lo = std::min(mt_count, c * half), m_hi = std::min(mt_count, (c + 1) * half);
    } else if (c == 1) {
      return;  // "none": core 0 does all the work
    }
  }

  int round = 0;
  for (int64_t nt = n_lo; nt < n_hi; ++nt) {
    const int64_t n0 = nt * p.tile_n, nn = std::min(p.tile_n, p.N - n0);
    // W^T block [K (tiles of 128 on partitions), nn], resident for the whole M loop.
    View wt = k.sbuf({128, kt_count, p.tile_n}, DType::BF16, "wT");
    for (int64_t kt = 0; kt < kt_count; ++kt) {
      const int64_t k0 = kt * 128, kk = std::min<int64_t>(128, p.K - k0);
      load_transposed(k, wt(S(0, kk), kt, S(0, nn)), w(S(n0, n0 + nn), S(k0, k0 + kk)), p.pe_transpose,
                      round);
    }
    for (int64_t mt = m_lo; mt < m_hi; ++mt) {
      const int64_t m0 = mt * 128, mm = std::min<int64_t>(128, p.M - m0);
      View xt = k.sbuf({128, kt_count, 128}, DType::BF16, "xT");
      for (int64_t kt = 0; kt < kt_count; ++kt) {
        const int64_t k0 = kt * 128, kk = std::min<int64_t>(128, p.K - k0);
        load_transposed(k, xt(S(0, kk), kt, S(0, mm)), x(S(m0, m0 + mm), S(k0, k0 + kk)), p.pe_transpose,
                        round);
      }
      View acc = k.psum({128, p.tile_n}, DType::F32, "acc");
      for (int64_t kt = 0; kt < kt_count; ++kt) {
        const int64_t kk = std::min<int64_t>(128, p.K - kt * 128);
        nki::nc_matmul(acc(S(0, mm), S(0, nn)), xt(S(0, kk), kt, S(0, mm)), wt(S(0, kk), kt, S(0, nn)),
                       {.accumulate = kt > 0});
      }
      View out = k.sbuf({128, p.tile_n}, p.out_dtype, "y_tile");
      const bool act = p.copy_engine == CopyEngine::Act || (p.copy_engine == CopyEngine::Alternate && (round++ % 2));
      if (act)
        nki::activation(out(S(0, mm), S(0, nn)), nki::ActFunc::Copy, acc(S(0, mm), S(0, nn)));
      else
        nki::tensor_copy(out(S(0, mm), S(0, nn)), acc(S(0, mm), S(0, nn)));
      nki::dma_copy(y(S(m0, m0 + mm), S(n0, n0 + nn)), out(S(0, mm), S(0, nn)));
    }
  }
}

}  // namespace

std::unique_ptr<KernelDef> matmul_bf16_kernel() {
  KernelPackage<MatmulParams> k;
  k.name = "matmul_bf16";
  k.doc = "Y[M,N] = X[M,K] @ W[N,K]^T with BF16 inputs; PSUM accumulation over K; LNC2 sharding of N or M";
  k.kernel = matmul_kernel;
  k.useful_flops = [](const MatmulParams& p) { return 2.0 * p.M * p.N * p.K; };
  k.checks = [](const MatmulParams& p) {
    return std::vector{matmul_check("y", {"x", ref::Contract::Cols}, {"w", ref::Contract::Cols}, std::nullopt,
                                    2.0 * p.M * p.N * p.K)};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
