// nki_tutorial_matmul: result[M, N] = lhsT[K, M]^T @ rhs[K, N], the four steps of the public NKI matrix
// multiplication tutorial, written from its algorithm description. Tiles: 128 (M, stationary free size) x
// 128 (K, partitions) x 512 (N, moving free size, one FP32 PSUM bank); PSUM accumulates over K.
//   tiled             both operand tiles loaded inside the K loop (loop m, n, k)
//   hoisted           the lhsT column of an m-tile loaded once per m, the rhs column once per (m, n)
//   free_dim_blocked  blocks of block_m x 128 rows and block_n x 512 columns share their loads
//   fully_optimized   3-D blocking (block_m, block_n, block_k tiles); each K block is accumulated into an
//                     SBUF result with a DVE tensor_tensor add; stores after the last K block
// Buffering stands in for the NKI compiler's allocation and scheduling: operand tiles rotate through small
// rings, so a load waits only for the matmul that last read its slot (the builder's region tracking orders
// it); a hoisted lhsT column (block) is double-buffered and the next one streams in a slice per n. Loads are
// triggered from SP, stores from ACT (both hardware-DGE sequencers), so a store waiting for its PSUM drain
// never holds up the next loads.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/package.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

constexpr int64_t kTileM = 128, kTileK = 128, kTileN = 512;

struct Params {
  int64_t M = 0, N = 0, K = 0;
  DType dtype = DType::F32;
  std::string variant = "fully_optimized";
  int64_t block_m = 16, block_n = 2, block_k = 8;
  int64_t bufs = 8;

  static void describe(Schema<Params>& s) {
    s.dim(&Params::M, "M", "rows of the result (columns of lhsT), a multiple of 128 x block_m");
    s.dim(&Params::N, "N", "columns of the result and rhs, a multiple of 512 x block_n");
    s.dim(&Params::K, "K", "contraction (rows of lhsT and rhs), a multiple of 128 x block_k");
    s.choice(&Params::dtype, "dtype", "dtype of lhsT, rhs and the result",
             {{"float32", DType::F32}, {"bfloat16", DType::BF16}}, DType::F32);
    s.choice(&Params::variant, "variant", "tutorial step",
             {{"tiled", std::string("tiled")},
              {"hoisted", std::string("hoisted")},
              {"free_dim_blocked", std::string("free_dim_blocked")},
              {"fully_optimized", std::string("fully_optimized")}},
             std::string("fully_optimized"));
    s.add(&Params::block_m, "block_m", "m-tiles per block (free_dim_blocked, fully_optimized)", 16).range(1, 64);
    s.add(&Params::block_n, "block_n", "n-tiles per block (free_dim_blocked, fully_optimized)", 2).range(1, 64);
    s.add(&Params::block_k, "block_k", "k-tiles per block (fully_optimized)", 8).range(1, 64);
    s.add(&Params::bufs, "bufs", "slots of the rotating operand-tile ring (tiled, hoisted, free_dim_blocked)", 8)
        .range(1, 256);
  }
};

// Tiles handed out round-robin.
class Ring {
 public:
  Ring(Kernel& k, int64_t n, const std::vector<int64_t>& shape, DType t, const std::string& name,
       bool psum = false) {
    for (int64_t i = 0; i < n; ++i) tiles_.push_back(psum ? k.psum(shape, t, name) : k.sbuf(shape, t, name));
  }
  const View& next() { return tiles_[i_++ % tiles_.size()]; }

 private:
  std::vector<View> tiles_;
  size_t i_ = 0;
};

// PSUM accumulators (two sets of `per_set` banks) and the SBUF tiles they drain into.
struct Drain {
  Drain(Kernel& k, int64_t per_set, DType t)
      : psum(k, 2 * per_set, {kTileM, kTileN}, DType::F32, "res_psum", true),
        sb(k, 4, {kTileM, kTileN}, t, "res_sb") {}
  // Copies a PSUM tile into SBUF (cast to the result dtype) and stores it.
  void store(const View& acc, const View& dst) {
    const View& t = sb.next();
    nki::tensor_copy(t, acc);
    nki::dma_copy(dst, t, {.engine = Engine::ACT});
  }
  Ring psum, sb;
};

void tiled(Kernel& k, const Params& p, const View& lhsT, const View& rhs, const View& res) {
  Ring lt(k, p.bufs, {kTileK, kTileM}, p.dtype, "lhsT_tile");
  Ring rt(k, p.bufs, {kTileK, kTileN}, p.dtype, "rhs_tile");
  Drain d(k, 1, p.dtype);
  for (int64_t m = 0; m < p.M / kTileM; ++m)
    for (int64_t n = 0; n < p.N / kTileN; ++n) {
      const View& acc = d.psum.next();
      for (int64_t kt = 0; kt < p.K / kTileK; ++kt) {
        const View& a = lt.next();
        const View& b = rt.next();
        nki::dma_copy(a, lhsT(S(kt * kTileK, (kt + 1) * kTileK), S(m * kTileM, (m + 1) * kTileM)));
        nki::dma_copy(b, rhs(S(kt * kTileK, (kt + 1) * kTileK), S(n * kTileN, (n + 1) * kTileN)));
        nki::nc_matmul(acc, a, b, {.accumulate = kt > 0});
      }
      d.store(acc, res(S(m * kTileM, (m + 1) * kTileM), S(n * kTileN, (n + 1) * kTileN)));
    }
}

// Loads k-tiles [k0, k1) of the lhsT columns [c0, c0 + cols) into dst (one DMA per k-tile).
void load_lhsT(const View& dst, const View& lhsT, int64_t k0, int64_t k1, int64_t c0, int64_t cols) {
  for (int64_t kt = k0; kt < k1; ++kt)
    nki::dma_copy(dst(all, kt), lhsT(S(kt * kTileK, (kt + 1) * kTileK), S(c0, c0 + cols)));
}

void hoisted(Kernel& k, const Params& p, const View& lhsT, const View& rhs, const View& res) {
  const int64_t kts = p.K / kTileK, nn = p.N / kTileN, nm = p.M / kTileM;
  // rhs k-tiles rotate through a ring of bufs slots (the compiler frees each after its matmul).
  Ring rt(k, p.bufs, {kTileK, kTileN}, p.dtype, "rhs_tile");
  View lcol[2] = {k.sbuf({kTileK, kts, kTileM}, p.dtype, "lhsT_col"),
                  k.sbuf({kTileK, kts, kTileM}, p.dtype, "lhsT_col")};
  Drain d(k, 1, p.dtype);
  load_lhsT(lcol[0], lhsT, 0, kts, 0, kTileM);
  for (int64_t m = 0; m < nm; ++m) {
    const View& lt = lcol[m % 2];
    for (int64_t n = 0; n < nn; ++n) {
      // The next m's lhsT column streams in, a slice per n, behind this m's rhs loads.
      if (m + 1 < nm)
        load_lhsT(lcol[(m + 1) % 2], lhsT, n * kts / nn, (n + 1) * kts / nn, (m + 1) * kTileM, kTileM);
      const View& acc = d.psum.next();
      for (int64_t kt = 0; kt < kts; ++kt) {
        const View& b = rt.next();
        nki::dma_copy(b, rhs(S(kt * kTileK, (kt + 1) * kTileK), S(n * kTileN, (n + 1) * kTileN)));
        nki::nc_matmul(acc, lt(all, kt), b, {.accumulate = kt > 0});
      }
      d.store(acc, res(S(m * kTileM, (m + 1) * kTileM), S(n * kTileN, (n + 1) * kTileN)));
    }
  }
}

// Blocks of block_m m-tiles x block_n n-tiles: one lhsT block and one rhs block load per k serve all
// block_m x block_n accumulators (one PSUM bank each), K outermost inside the block.
void free_dim_blocked(Kernel& k, const Params& p, const View& lhsT, const View& rhs, const View& res) {
  const int64_t kts = p.K / kTileK, bm_rows = p.block_m * kTileM, bn_cols = p.block_n * kTileN;
  const int64_t nm = p.M / bm_rows, nn = p.N / bn_cols;
  Ring rt(k, p.bufs, {kTileK, bn_cols}, p.dtype, "rhs_block_tile");
  View lblk[2] = {k.sbuf({kTileK, kts, bm_rows}, p.dtype, "lhsT_block"),
                  k.sbuf({kTileK, kts, bm_rows}, p.dtype, "lhsT_block")};
  Drain d(k, p.block_m * p.block_n, p.dtype);
  load_lhsT(lblk[0], lhsT, 0, kts, 0, bm_rows);
  for (int64_t m = 0; m < nm; ++m) {
    const View& lt = lblk[m % 2];
    for (int64_t n = 0; n < nn; ++n) {
      if (m + 1 < nm)
        load_lhsT(lblk[(m + 1) % 2], lhsT, n * kts / nn, (n + 1) * kts / nn, (m + 1) * bm_rows, bm_rows);
      std::vector<View> acc;
      for (int64_t i = 0; i < p.block_m * p.block_n; ++i) acc.push_back(d.psum.next());
      for (int64_t kt = 0; kt < kts; ++kt) {
        const View& b = rt.next();
        nki::dma_copy(b, rhs(S(kt * kTileK, (kt + 1) * kTileK), S(n * bn_cols, (n + 1) * bn_cols)));
        for (int64_t bm = 0; bm < p.block_m; ++bm)
          for (int64_t bn = 0; bn < p.block_n; ++bn)
            nki::nc_matmul(acc[bm * p.block_n + bn], lt(all, kt, S(bm * kTileM, (bm + 1) * kTileM)),
                           b(all, S(bn * kTileN, (bn + 1) * kTileN)), {.accumulate = kt > 0});
      }
      for (int64_t bm = 0; bm < p.block_m; ++bm)
        for (int64_t bn = 0; bn < p.block_n; ++bn) {
          const int64_t r0 = m * bm_rows + bm * kTileM, c0 = n * bn_cols + bn * kTileN;
          d.store(acc[bm * p.block_n + bn], res(S(r0, r0 + kTileM), S(c0, c0 + kTileN)));
        }
    }
  }
}

void fully_optimized(Kernel& k, const Params& p, const View& lhsT, const View& rhs, const View& res) {
  const int64_t BM = p.block_m * kTileM, BN = p.block_n * kTileN, BK = p.block_k * kTileK;
  const int64_t nbm = p.M / BM, nbn = p.N / BN, nbk = p.K / BK;
  // One SBUF result tile per (m block, m tile): [128, block_n * 512], accumulated over the K blocks.
  std::vector<View> result;
  for (int64_t i = 0; i < nbm * p.block_m; ++i) result.push_back(k.sbuf({kTileM, BN}, p.dtype, "result"));
  View rhs_tiles = k.sbuf({kTileK, p.block_k, BN}, p.dtype, "rhs_tiles");
  View lhsT_tiles = k.sbuf({kTileK, p.block_k, BM}, p.dtype, "lhsT_tiles");
  std::vector<View> banks;
  for (int i = 0; i < 8; ++i) banks.push_back(k.psum({kTileM, kTileN}, DType::F32, "res_tile"));
  int bank = 0;
  for (int64_t n = 0; n < nbn; ++n) {
    for (const View& r : result) nki::memset(r, 0.0);
    for (int64_t kb = 0; kb < nbk; ++kb) {
      for (int64_t bk = 0; bk < p.block_k; ++bk) {
        const int64_t k0 = kb * BK + bk * kTileK;
        nki::dma_copy(rhs_tiles(all, bk), rhs(S(k0, k0 + kTileK), S(n * BN, (n + 1) * BN)));
      }
      for (int64_t m = 0; m < nbm; ++m) {
        for (int64_t bk = 0; bk < p.block_k; ++bk) {
          const int64_t k0 = kb * BK + bk * kTileK;
          nki::dma_copy(lhsT_tiles(all, bk), lhsT(S(k0, k0 + kTileK), S(m * BM, (m + 1) * BM)));
        }
        for (int64_t bn = 0; bn < p.block_n; ++bn)
          for (int64_t bm = 0; bm < p.block_m; ++bm) {
            const View& acc = banks[bank++ % banks.size()];
            for (int64_t bk = 0; bk < p.block_k; ++bk)
              nki::nc_matmul(acc, lhsT_tiles(all, bk, S(bm * kTileM, (bm + 1) * kTileM)),
                             rhs_tiles(all, bk, S(bn * kTileN, (bn + 1) * kTileN)), {.accumulate = bk > 0});
            View r = result[m * p.block_m + bm](all, S(bn * kTileN, (bn + 1) * kTileN));
            nki::tensor_tensor(r, r, acc, nki::AluOp::Add);
          }
      }
    }
    for (int64_t m = 0; m < nbm; ++m)
      for (int64_t bm = 0; bm < p.block_m; ++bm) {
        const int64_t r0 = m * BM + bm * kTileM;
        nki::dma_copy(res(S(r0, r0 + kTileM), S(n * BN, (n + 1) * BN)), result[m * p.block_m + bm],
                      {.engine = Engine::ACT});
      }
  }
}

void kernel(Kernel& k, const Params& p) {
  View lhsT = k.input("lhsT", p.dtype, {p.K, p.M});
  View rhs = k.input("rhs", p.dtype, {p.K, p.N});
  View res = k.output("result", p.dtype, {p.M, p.N});
  const bool blocked = p.variant == "free_dim_blocked", full = p.variant == "fully_optimized";
  const int64_t bm = (blocked || full) ? p.block_m : 1, bn = (blocked || full) ? p.block_n : 1,
                bk = full ? p.block_k : 1;
  if (p.M % (bm * kTileM) || p.N % (bn * kTileN) || p.K % (bk * kTileK))
    throw InputError(
        fmt::format("kernel 'nki_tutorial_matmul' ({}): M, N, K = {}, {}, {} must be multiples of {}, {}, {}",
                    p.variant, p.M, p.N, p.K, bm * kTileM, bn * kTileN, bk * kTileK));
  if (p.variant == "tiled")
    tiled(k, p, lhsT, rhs, res);
  else if (p.variant == "hoisted")
    hoisted(k, p, lhsT, rhs, res);
  else if (blocked)
    free_dim_blocked(k, p, lhsT, rhs, res);
  else
    fully_optimized(k, p, lhsT, rhs, res);
}

}  // namespace

std::unique_ptr<KernelDef> nki_tutorial_matmul_kernel() {
  KernelPackage<Params> k;
  k.name = "nki_tutorial_matmul";
  k.doc =
      "result[M,N] = lhsT[K,M]^T @ rhs[K,N], the NKI tutorial steps (tiled, hoisted, free_dim_blocked, "
      "fully_optimized); calibration kernel";
  k.kernel = kernel;
  k.useful_flops = [](const Params& p) { return 2.0 * p.M * p.N * p.K; };
  k.checks = [](const Params& p) {
    return std::vector{matmul_check("result", {"lhsT", ref::Contract::Rows}, {"rhs", ref::Contract::Rows},
                                    std::nullopt, 2.0 * p.M * p.N * p.K)};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
