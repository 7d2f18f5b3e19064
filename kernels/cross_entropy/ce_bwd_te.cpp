// cross_entropy_bwd's MXFP8 gradient under quantize_rule te, natural layout (cross_entropy_bwd.cpp describes
// the method): each BF16 tile g [128, W] (valid rows rr, columns w, w % 32 == 0) quantized rowwise and
// columnwise in a four-stage pipeline over the chunks.
#include <algorithm>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/cross_entropy/ce_bwd_state.h"

namespace trnsim::kernels::ce::bwd {
namespace {

using isa::AluOp;

struct TeBuffers {
  // Block maxima, scale bytes and multipliers of chunk it in slot it % 4 of [128, 4, 2 nb] tiles: two
  // consecutive chunks (an even one and the next) are adjacent, so one scale chain covers both.
  View small_all, bytes_all, mult_all;
  View small(int64_t it) const { return small_all(all, it % 4); }
  View bytes(int64_t it) const { return bytes_all(all, it % 4); }
  View mult(int64_t it) const { return mult_all(all, it % 4); }
  std::vector<View> keys, kpre, rq, cqT;
  std::vector<View> gT, kT, cq;  // PSUM
  std::vector<View> gTs;         // SBUF copies of the transposed tile's last kPoolColBlocks blocks
  // Scale accumulators of a row tile (alternating): rowwise [128, nB], columnwise [128, nblk, 4].
  std::vector<View> rs_acc, cs_acc;
  std::vector<ChainTemps> temps;
  // The orientations in use (rowwise_usage / columnwise_usage) and where each chunk's slot holds them: sw
  // entries, rowwise blocks from roff, columnwise from coff.
  bool row = true, col = true;
  int64_t sw = 0, roff = 0, coff = 0;
};

// The columnwise FP8 multiply is DVE's fourth pass over each chunk; POOL, which cannot read PSUM, takes the
// last kPoolColBlocks of its 128-column blocks from an SBUF copy ACT makes (2x mode: BF16 to BF16). Per
// 1024-column chunk: DVE 100 + 128 x 5, POOL 150 + 2 x 128 x 3, ACT 64 + 64 x 3 (the cost model's rates).
constexpr int64_t kPoolColBlocks = 3;

TeBuffers te_buffers(Ctx& c) {
  Kernel& k = c.k;
  TeBuffers b;
  const int64_t W = c.W, nb = W / 32, nblk = W / 128;
  b.row = c.bp.rowwise_usage, b.col = c.bp.columnwise_usage;
  b.sw = (b.row ? nb : 0) + (b.col ? nb : 0), b.coff = b.row ? nb : 0;
  // PSUM (2 KiB banks, at most 1024 columns per tile): the transposed tile lives from stage 1 to stage 3
  // (four chunks in flight), the transposed keys through stage 1, the FP8 columnwise result through its DMA:
  // 8 banks (columnwise only).
  if (b.col)
    for (int i = 0; i < 4; ++i) b.gT.push_back(k.psum({kP, nblk, kP}, DType::BF16, "te_grad_t"));
  b.small_all = k.sbuf({kP, 4, b.sw}, DType::F32, "te_kmax");
  b.bytes_all = k.sbuf({kP, 4, b.sw}, DType::U8, "te_bytes");
  b.mult_all = k.sbuf({kP, 4, b.sw}, DType::BF16, "te_mult");
  for (int i = 0; i < 2; ++i) b.temps.push_back(chain_temps(k, {kP, 2 * b.sw}));
  for (int i = 0; i < 2; ++i) {
    b.keys.push_back(k.sbuf({kP, W}, DType::I16, "te_keys"));
    b.kpre.push_back(k.sbuf({kP, W}, DType::I32, "te_keys_t"));
    if (b.row) {
      b.rq.push_back(k.sbuf({kP, W}, c.bp.fp8_dtype(), "te_row_fp8"));
      b.rs_acc.push_back(k.sbuf({kP, ceil_div(c.cr.size(), 32)}, DType::U8, "te_row_scales"));
    }
    if (b.col) {
      b.cqT.push_back(k.sbuf({kP, nblk, 4, 32}, c.bp.fp8_dtype(), "te_col_fp8_t"));
      b.gTs.push_back(k.sbuf({kP, kPoolColBlocks, kP}, DType::BF16, "te_grad_t_sbuf"));
      b.kT.push_back(k.psum({kP, nblk, kP}, DType::I16, "te_keys_t"));
      b.cq.push_back(k.psum({kP, nblk, kP}, c.bp.fp8_dtype(), "te_col_fp8"));
      b.cs_acc.push_back(k.sbuf({kP, ceil_div(c.cr.size(), 128), 4}, DType::U8, "te_col_scales"));
    }
  }
  return b;
}

// Stage 1 of a chunk: the key's add (ACT), transposes of the tile.
void te_stage1(TeBuffers& tb, const View& g, int64_t w, int64_t it) {
  const int64_t nblk = ceil_div(w, 128);
  mx_keys_te_add(tb.kpre[it % 2](all, S(0, w)), g(all, S(0, w)), Engine::ACT);
  if (!tb.col) return;
  const View gT = tb.gT[it % 4];
  for (int64_t j = 0; j < nblk; ++j) {
    const int64_t wb = std::min<int64_t>(128, w - 128 * j);
    nki::nc_transpose(gT(S(0, wb), j), g(all, S(128 * j, 128 * j + wb)));
  }
}

// Stage 1b (emitted a step after stage 1, so DVE does not wait on the chunk ACT has just started): the key's
// bitwise and (DVE only: a bitvec operator), the transposes of the keys, the rowwise and columnwise maxima.
void te_stage1b(TeBuffers& tb, int64_t w, int64_t it) {
  const int64_t nblk = ceil_div(w, 128), nbw = w / 32;
  const View keys = tb.keys[it % 2];
  mx_keys_te_mask(keys(all, S(0, w)), tb.kpre[it % 2](all, S(0, w)));
  if (tb.col) {
    const View kT = tb.kT[it % 2];
    for (int64_t j = 0; j < nblk; ++j) {
      const int64_t wb = std::min<int64_t>(128, w - 128 * j);
      nki::nc_transpose(kT(S(0, wb), j), keys(all, S(128 * j, 128 * j + wb)));
    }
  }
  if (tb.row)
    nki::tensor_reduce(tb.small(it)(all, S(tb.roff, tb.roff + nbw)), AluOp::Max,
                       keys(all, S(0, w)).reshape({kP, nbw, 32}), {2});
  if (tb.col)
    nki::tensor_reduce(tb.small(it)(all, S(tb.coff, tb.coff + 4 * nblk)), AluOp::Max,
                       tb.kT[it % 2](all, S(0, nblk)).reshape({kP, nblk, 4, 32}), {3});
}

// Stage 2: the chain from block maxima to scale bytes and multipliers (ce_quant.h) of chunks [it, it + n)
// (n = 1, or 2 from an even it: adjacent slots, one chain, half the instructions' fixed cost), and each
// chunk's bytes copied into its row tile's accumulators, on POOL.
void te_chain(Ctx& c, TeBuffers& tb, const Item* items, int n) {
  const int64_t it = items[0].it, sl = it % 4, ns = n * tb.sw;
  const auto slots = [&](const View& all_slots) { return all_slots(all, S(sl, sl + n)).reshape({kP, ns}); };
  const ChainTemps& tmp = tb.temps[(it / 2) % 2];
  const ChainTemps t{tmp.i1(all, S(0, ns)), tmp.i2(all, S(0, ns)), tmp.f1(all, S(0, ns)),
                     tmp.f2(all, S(0, ns)), tmp.u(all, S(0, ns))};
  mx_scale_chain(t, slots(tb.small_all), slots(tb.bytes_all), slots(tb.mult_all), QuantizeRule::Te,
                 c.bp.fp8(), Engine::POOL);
  for (int i = 0; i < n; ++i) {
    const Item& a = items[i];
    const int64_t nbw = a.w / 32, nblk = ceil_div(a.w, 128), acc = a.t % 2;
    const int64_t b0 = (a.c0 - c.cr.lo) / 32, j0 = (a.c0 - c.cr.lo) / 128;
    const View bytes = tb.bytes(a.it);
    if (tb.row)
      nki::tensor_copy(tb.rs_acc[acc](all, S(b0, b0 + nbw)), bytes(all, S(tb.roff, tb.roff + nbw)),
                       Engine::POOL);
    if (tb.col)
      nki::tensor_copy(tb.cs_acc[acc](all, S(j0, j0 + nblk)),
                       bytes(all, S(tb.coff, tb.coff + 4 * nblk)).reshape({kP, nblk, 4}), Engine::POOL);
  }
}

void te_copy_t(TeBuffers& tb, int64_t w, int64_t it) {
  if (!tb.col) return;
  const int64_t nblk = ceil_div(w, 128), nd = std::max<int64_t>(nblk - kPoolColBlocks, 0);
  if (nblk > nd)
    nki::tensor_copy(tb.gTs[it % 2](all, S(0, nblk - nd)), tb.gT[it % 4](all, S(nd, nblk)), Engine::ACT);
}

// Stage 3: FP8 elements (rowwise on the tile, columnwise on the transposed tile, then back) and their DMAs.
void te_stage3(Ctx& c, TeBuffers& tb, const View& g, int64_t r0, int64_t rr, int64_t c0, int64_t w,
               int64_t it) {
  const int64_t W = c.W, nbw = w / 32, nblk = ceil_div(w, 128);
  const View mult = tb.mult(it);
  if (tb.row) {
    const View rq = tb.rq[it % 2];
    nki::tensor_tensor(rq(all, S(0, w)).reshape({kP, nbw, 32}), g(all, S(0, w)).reshape({kP, nbw, 32}),
                       mult(all, S(tb.roff, tb.roff + nbw)).reshape({kP, nbw, 1}).broadcast(2, 32),
                       AluOp::Multiply, Engine::POOL);
    // Stores from SP: an ACT trigger would hold the next chunk's exp behind this chunk's results.
    nki::dma_copy(c.rdata(S(r0, r0 + rr), S(c0, c0 + w)), rq(S(0, rr), S(0, w)));
  }
  if (!tb.col) return;
  const View cqT = tb.cqT[it % 2], gT = tb.gT[it % 4], cq = tb.cq[it % 2];
  const int64_t nd = std::max<int64_t>(nblk - kPoolColBlocks, 0), np = nblk - nd;
  const auto col_mult = [&](int64_t j0, int64_t j1) {
    return mult(all, S(tb.coff + 4 * j0, tb.coff + 4 * j1)).reshape({kP, j1 - j0, 4, 1}).broadcast(3, 32);
  };
  if (nd > 0)
    nki::tensor_tensor(cqT(all, S(0, nd)), gT(all, S(0, nd)).reshape({kP, nd, 4, 32}), col_mult(0, nd),
                       AluOp::Multiply);
  if (np > 0)
    nki::tensor_tensor(cqT(all, S(nd, nblk)), tb.gTs[it % 2](all, S(0, np)).reshape({kP, np, 4, 32}),
                       col_mult(nd, nblk), AluOp::Multiply, Engine::POOL);
  for (int64_t j = 0; j < nblk; ++j) {
    const int64_t wb = std::min<int64_t>(128, w - 128 * j);
    nki::nc_transpose(cq(all, j, S(0, wb)), cqT(S(0, wb), j).reshape({wb, kP}));
  }
  nki::dma_copy(c.cdata(S(r0, r0 + rr), S(c0, c0 + w)), cq.reshape({kP, W})(S(0, rr), S(0, w)));
}

void te_flush(Ctx& c, TeBuffers& tb, int64_t r0, int64_t rr, int acc) {
  if (tb.row) write_row_scales(c.rscale, c.geom, tb.rs_acc[acc], r0, rr, c.cr.lo / 32, c.cr.hi / 32);
  if (tb.col) write_col_scales(c.cscale, c.geom, tb.cs_acc[acc], r0 / 32, rr / 32, c.cr.lo, c.cr.hi);
}

}  // namespace

// The TE pipeline over every (row tile, chunk). Chunk n's stage 1 is emitted with chunk n-1's maxima, the
// chain of chunks n-3 and n-2 (every other step) and chunk n-3's stage 3, so every engine's in-order stream
// interleaves four chunks and none waits for a result of a chunk it started recently (the DVE and POOL
// streams would otherwise hold each other up). Per 1024-column chunk (engine cycles, as the cost
// model charges them): ACT exp, gradient and the key's add 3 x (64 + 1024) and the copy of 3 transposed
// blocks 64 + 192; DVE the key's and (bitvec: DVE only) and two int16 max-reduces 3 x (100 + 1024), 5 blocks
// of the columnwise multiply (PSUM operand) 100 + 640; POOL the rowwise multiply 150 + 2 x 1024, 3 blocks of
// the columnwise one 150 + 768 and half a 5-op chain on [128, 128] plus two byte copies. DVE 4112 and POOL
// about 4190 cycles (3.5 us at 1.2 GHz) bound the fused path at 2016 chunks per core x 3.5 us = 7.0 ms for
// llama3_ce_mxfp8_4096.
void te_pipeline(Ctx& c, const std::vector<View>& gs, const Producer& prod) {
  TeBuffers tb = te_buffers(c);
  const std::vector<Item> items = chunk_items(c, kP);
  const int64_t n = static_cast<int64_t>(items.size());
  const size_t ng = gs.size();
  for (int64_t s = 0; s < std::min(n, kPrefetch); ++s) prod.load(items[s]);
  for (int64_t s = 0; s < n + 3; ++s) {
    if (s + kPrefetch < n) prod.load(items[s + kPrefetch]);
    // Stage 1b of the previous chunk first: the PE transposes its keys before this chunk's tile.
    if (s >= 1 && s - 1 < n) te_stage1b(tb, items[s - 1].w, items[s - 1].it);
    // ACT's SBUF copy of the last transposed blocks of chunk s - 2, for POOL's share of its stage 3.
    if (s >= 2 && s - 2 < n) te_copy_t(tb, items[s - 2].w, items[s - 2].it);
    if (s < n) {
      const Item& a = items[s];
      prod.compute(a, gs[a.it % ng]);
      te_stage1(tb, gs[a.it % ng], a.w, a.it);
    }
    // Chains of chunk pairs (2m, 2m + 1) at step 2m + 3; a lone last chunk at its own step + 3.
    if (s >= 3 && s - 3 < n && (s - 3) % 2 == 0) te_chain(c, tb, &items[s - 3], s - 2 < n ? 2 : 1);
    if (s >= 3) {
      const Item& a = items[s - 3];
      te_stage3(c, tb, gs[a.it % ng], a.r0, a.rr, a.c0, a.w, a.it);
      if (a.last) te_flush(c, tb, a.r0, a.rr, static_cast<int>(a.t % 2));
    }
  }
}

}  // namespace trnsim::kernels::ce::bwd
