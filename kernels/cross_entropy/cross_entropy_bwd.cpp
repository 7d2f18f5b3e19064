// cross_entropy_bwd: the logits gradient, as BF16 or as TransformerEngine's MXFP8 tensors (ce_params.h).
//
// Gradient (every path): per row tile and vocab chunk, q = exp(x + b) (ACT activation with the per-row bias
// b = -shift), g = bf16(q * gcd + h) (one tensor_scalar; gcd = g c / row_sumexp, ce_lib.h row_factors). The
// target column is not corrected in this pass; it differs from the rest of its row only in its additive term
// (hy = h - g c (1 - ls) instead of h), so:
//   - BF16 output (grad_quantizer none, or the unfused path's HBM scratch): after all chunks, the corrected
//     value of each row's target element is computed from the gathered x_y and written over it by an
//     element-indexed indirect DMA (index r * V + y).
//   - fused MXFP8: the chunks quantize the uncorrected gradient on chip; then for each row the two MXFP8
//     blocks holding its target (the rowwise block of 32 columns and the columnwise block of 32 rows) are
//     recomputed from gathered logits with the correction and written over the first result (data bytes
//     and scale byte) by indirect DMA.
// Rows with an ignored target have b = -inf and gcd = h = 0: a zero gradient row (b = NaN, a NaN row, when
// their row_max is not finite, as PyTorch).
//
// MXFP8, quantize_rule te (natural layout: row r on partition r % 128): keys (an add on ACT, a bitwise and
// on DVE) and the rowwise max-reduce on the BF16 tile; PE transposes of the BF16 tile and of its keys per
// 128 x 128 block; the columnwise max-reduce on the transposed keys (PSUM); one ALU chain (ce_quant.h) for
// all of a chunk's rowwise and columnwise blocks; the FP8 elements by one multiply each way; the columnwise
// FP8 tile transposed back on the PE and written from PSUM. quantize_rule trn3 (T2 layout: 512-row tiles,
// partition p holds rows 4p .. 4p + 3 interleaved): the columnwise blocks (32 rows of a column = 8 partitions
// x 4) are exactly quantize_mx's groups; the rowwise blocks come from PE transposes of every 4th column
// (T[p', 4p + j'] = g[4p + j, v0 + 4p' + j']) into the same group shape, and the x4 result is transposed back
// (as 32-bit words) to row-major bytes. Unfused: the BF16 gradient (patched) goes to an HBM scratch, then
// each 128- or 512-row tile is loaded back in the layout its rule needs and quantized as above.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/package.h"
#include "kernels/cross_entropy/ce_check.h"
#include "kernels/cross_entropy/ce_lib.h"
#include "kernels/cross_entropy/ce_params.h"
#include "kernels/cross_entropy/ce_quant.h"
#include "kernels/cross_entropy/ce_recipes.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

using namespace ce;
using isa::AluOp;
using nki::ActFunc;

constexpr const char* kName = "kernel 'cross_entropy_bwd'";

struct Ctx {
  Ctx(Kernel& k_, const BwdParams& bp_) : k(k_), bp(bp_), p(bp_.c) {}
  Kernel& k;
  const BwdParams& bp;
  const CommonParams& p;
  Consts cs;
  ColRange cr;
  int64_t W = 0;   // chunk columns
  int64_t nt = 0;  // 128-row tiles
  View logits, target, row_max, row_sumexp, grad_output;
  View grad_dst;  // BF16 destination (input_grad or the scratch)
  View rdata, cdata, rscale, cscale;
  ScaleGeom geom;
  // Natural-layout per-row tiles [128, nt].
  View tgt, b, gcd, h, hy, valid, cvec, gvec;
  int it = 0;  // chunk counter (buffer rotation, engine alternation)
};

// ---- Per-row factors

void load_factors(Ctx& c) {
  Kernel& k = c.k;
  const CommonParams& p = c.p;
  const int64_t nt = c.nt;
  View m = k.sbuf({kP, nt}, DType::F32, "bwd_row_max");
  View d = k.sbuf({kP, nt}, DType::F32, "bwd_row_sumexp");
  c.tgt = k.sbuf({kP, nt}, DType::I32, "bwd_target");
  nki::memset(m, 0.0);
  nki::memset(d, 1.0);
  nki::memset(c.tgt, static_cast<double>(p.ignore_idx));
  load_rows(m, c.row_max, p.rows);
  load_rows(d, c.row_sumexp, p.rows);
  load_rows(c.tgt, c.target, p.rows);
  c.valid = k.sbuf({kP, nt}, DType::F32, "bwd_valid");
  nki::tensor_scalar(c.valid, c.tgt, AluOp::NotEqual, static_cast<double>(p.ignore_idx));
  // c = 1 / max(count, 1) with reduce_loss, else 1.
  c.cvec = k.sbuf({kP, 1}, DType::F32, "bwd_c");
  if (p.reduce_loss) {
    View cnt = count_valid(k, c.valid);
    nki::tensor_scalar(c.cvec, cnt, AluOp::Max, 1.0, false, AluOp::Divide, 1.0, true);
  } else {
    nki::memset(c.cvec, 1.0);
  }
  View g;
  if (c.bp.grad_output == GradOutput::Scalar) {
    View one = k.sbuf({1, 1}, DType::F32, "bwd_grad_output");
    nki::dma_copy(one, c.grad_output.reshape({1, 1}));
    c.gvec = broadcast_partitions(k, one);
    g = c.gvec.broadcast(1, nt);
  } else {
    g = k.sbuf({kP, nt}, DType::F32, "bwd_grad_output_rows");
    nki::memset(g, 0.0);
    load_rows(g, c.grad_output, p.rows);
  }
  c.b = k.sbuf({kP, nt}, DType::F32, "bwd_b");
  c.gcd = k.sbuf({kP, nt}, DType::F32, "bwd_gcd");
  c.h = k.sbuf({kP, nt}, DType::F32, "bwd_h");
  c.hy = k.sbuf({kP, nt}, DType::F32, "bwd_hy");
  row_factors(k, {c.b, c.gcd, c.h, c.hy, c.valid}, m, d, c.tgt, g, c.cvec, p, c.cs);
}

// In-range mask (valid and the target in this core's columns), [128, nt] FP32.
View target_in_range(Ctx& c) {
  Kernel& k = c.k;
  View in = k.sbuf({kP, c.nt}, DType::F32, "bwd_in_range");
  View tmp = k.sbuf({kP, c.nt}, DType::F32, "bwd_tmp");
  nki::tensor_scalar(in, c.tgt, AluOp::IsGe, static_cast<double>(c.cr.lo));
  nki::tensor_scalar(tmp, c.tgt, AluOp::IsLt, static_cast<double>(c.cr.hi));
  nki::tensor_tensor(in, in, tmp, AluOp::Multiply);
  nki::tensor_tensor(in, in, c.valid, AluOp::Multiply);
  return in;
}

// ---- Gradient of one chunk: g = bf16(exp(x + b) * gcd + h), natural layout.

void gradient_chunk(Ctx& c, const View& g, const View& x, const View& q, int64_t t, Engine scale_engine) {
  nki::activation(q, ActFunc::Exp, x, c.b(all, S(t, t + 1)));
  nki::tensor_scalar(g, q, AluOp::Multiply, c.gcd(all, S(t, t + 1)), false, AluOp::Add, c.h(all, S(t, t + 1)),
                     false, scale_engine);
}

Engine alternate(int i) {
  return i % 2 ? Engine::POOL : Engine::DVE;
}

// A chunk of work: row tile t (rows [r0, r0 + rr)), columns [c0, c0 + w), sequence number it.
struct Item {
  int64_t t, r0, rr, c0, w, it;
  bool last;  // the last chunk of its row tile
};

std::vector<Item> chunk_items(const Ctx& c, int64_t rows_per_tile) {
  std::vector<Item> items;
  for (int64_t r0 = 0, t = 0; r0 < c.p.rows; r0 += rows_per_tile, ++t) {
    const int64_t rr = std::min(rows_per_tile, c.p.rows - r0);
    for (int64_t c0 = c.cr.lo; c0 < c.cr.hi; c0 += c.W)
      items.push_back({t, r0, rr, c0, std::min(c.W, c.cr.hi - c0), static_cast<int64_t>(items.size()),
                       c0 + c.W >= c.cr.hi});
  }
  return items;
}

// How a pipeline gets each chunk's BF16 tile: load(item) issues its input DMA (kPrefetch chunks ahead, from
// the ACT queue, so no store waits in front of it); compute(item, g) turns the loaded data into the tile g.
inline constexpr int64_t kPrefetch = 2;
struct Producer {
  std::function<void(const Item&)> load;
  std::function<void(const Item&, const View& g)> compute;
};

// ---- BF16 path: all chunks to grad_dst, then the target elements.

void bf16_gradient(Ctx& c) {
  Kernel& k = c.k;
  const CommonParams& p = c.p;
  // Loads kPrefetch chunks ahead from the ACT queue (ACT runs the exp next), stores from SP.
  constexpr int kX = 4, kG = 3;
  std::vector<View> xs, gs, qs;
  for (int i = 0; i < kX; ++i) xs.push_back(k.sbuf({kP, c.W}, p.logits_dtype, "bwd_x"));
  for (int i = 0; i < kG; ++i) {
    gs.push_back(k.sbuf({kP, c.W}, DType::BF16, "bwd_g"));
    qs.push_back(k.sbuf({kP, c.W}, DType::F32, "bwd_q"));
  }
  const std::vector<Item> items = chunk_items(c, kP);
  const int64_t n = static_cast<int64_t>(items.size());
  auto load = [&](const Item& a) {
    nki::dma_copy(xs[a.it % kX](S(0, a.rr), S(0, a.w)), c.logits(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w)),
                  {.engine = Engine::ACT});
  };
  for (int64_t i = 0; i < std::min(n, kPrefetch); ++i) load(items[i]);
  for (int64_t i = 0; i < n; ++i) {
    if (i + kPrefetch < n) load(items[i + kPrefetch]);
    const Item& a = items[i];
    const View g = gs[a.it % kG](all, S(0, a.w));
    gradient_chunk(c, g, xs[a.it % kX](all, S(0, a.w)), qs[a.it % kG](all, S(0, a.w)), a.t, alternate(a.it));
    nki::dma_copy(c.grad_dst(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w)), g(S(0, a.rr)));
  }
  // Target elements: g_y = bf16(exp(x_y + b) * gcd + hy), written at r * V + y.
  View in = target_in_range(c);
  View offs = row_offsets(k, c.nt, p.V);
  View idx = k.sbuf({kP, c.nt}, DType::I32, "bwd_y_index");
  add_i32(k, idx, offs, c.tgt);
  nki::select(idx, in, idx, -1.0);
  View raw = k.sbuf({kP, c.nt}, p.logits_dtype, "bwd_xy_raw");
  nki::memset(raw, 0.0);
  const View flat = c.logits.reshape({p.rows * p.V, 1});
  const View gflat = c.grad_dst.reshape({p.rows * p.V, 1});
  for (int64_t t = 0; t < c.nt; ++t) {
    const int64_t rr = std::min(kP, p.rows - t * kP);
    nki::dma_copy(raw(S(0, rr), S(t, t + 1)), flat(S(0, rr)),
                  {.vector_offset = idx(S(0, rr), S(t, t + 1)), .oob_mode = nki::OobMode::Skip});
  }
  View q = k.sbuf({kP, c.nt}, DType::F32, "bwd_qy");
  nki::tensor_tensor(q, raw, c.b, AluOp::Add);
  nki::activation(q, ActFunc::Exp, q);
  nki::tensor_tensor(q, q, c.gcd, AluOp::Multiply);
  View gy = k.sbuf({kP, c.nt}, DType::BF16, "bwd_gy");
  nki::tensor_tensor(gy, q, c.hy, AluOp::Add);
  for (int64_t t = 0; t < c.nt; ++t) {
    const int64_t rr = std::min(kP, p.rows - t * kP);
    nki::dma_copy(
        gflat(S(0, rr)), gy(S(0, rr), S(t, t + 1)),
        {.vector_offset = idx(S(0, rr), S(t, t + 1)), .indirect_dst = true, .oob_mode = nki::OobMode::Skip});
  }
}

// ---- TE rule, natural layout: quantize one BF16 tile g [128, W] (valid rows rr, columns w, w % 32 == 0).

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

// ---- Trn3 rule, T2 layout: g2 [128, W, 4] BF16, rows r0 + 4p + j (r0 % 512 == 0), pp = rr / 4 partitions.

struct T2Buffers {
  std::vector<View> cq, cs, rq, rs;  // SBUF: columnwise x4 data and scales (per chunk), rowwise (per step)
  std::vector<View> T;               // PSUM, 3 banks
  View rqT, rsT;                     // PSUM [128, 16 steps, 128]: 4 banks + 1 (stores read them a while)
  View rs_acc;                       // [128, 4, nB + 16]: rowwise scales of rows 4p + j
  View rs_nat;                       // [128, nB + 16]: the same rows in natural order, for the writer
};

T2Buffers t2_buffers(Ctx& c) {
  Kernel& k = c.k;
  T2Buffers b;
  const DType x4 = c.bp.fp8() == num::Fp8Format::E5M2 ? DType::FP8_E5M2_X4 : DType::FP8_E4M3FN_X4;
  if (c.bp.columnwise_usage)
    for (int i = 0; i < 2; ++i) {
      b.cq.push_back(k.sbuf({kP, c.W}, x4, "t2_col_x4"));
      b.cs.push_back(k.sbuf({kP, c.W}, DType::U8, "t2_col_scales"));
    }
  if (!c.bp.rowwise_usage) return b;
  for (int i = 0; i < 4; ++i) {
    b.rq.push_back(k.sbuf({kP, kP}, x4, "t2_row_x4"));
    b.rs.push_back(k.sbuf({kP, kP}, DType::U8, "t2_row_scales"));
  }
  for (int i = 0; i < 3; ++i) {
    b.T.push_back(k.psum({kP, 4 * kP}, DType::BF16, "t2_rows_t"));
  }
  b.rqT = k.psum({kP, 16, kP}, DType::F32, "t2_row_x4_t");
  b.rsT = k.psum({kP, 16, kP}, DType::U8, "t2_row_scales_t");
  b.rs_acc = k.sbuf({kP, 4, ceil_div(c.cr.size(), 32) + 16}, DType::U8, "t2_row_scale_acc");
  b.rs_nat = k.sbuf({kP, ceil_div(c.cr.size(), 32) + 16}, DType::U8, "t2_row_scale_nat");
  return b;
}

// Rowwise blocks of row phase j (rows 4p + j) and columns [v0, v0 + 512) of a T2 tile: step n of a chunk.
// Part a: T[p', 4p + j'] = g2[p, v0 + 4p' + j', j] by 4 strided PE transposes; quantize_mx groups are then
// the 32-column blocks of one row.
void t2_row_a(T2Buffers& tb, const View& g2, int64_t pp, int64_t j, int64_t v0, int n) {
  const View T = tb.T[n % 3];
  for (int64_t jp = 0; jp < 4; ++jp)
    nki::nc_transpose(T(all, S(jp, 4 * pp, 4)), g2(S(0, pp), S(v0 + jp, v0 + 512, 4), j));
  nki::quantize_mx(tb.rq[n % 4](all, S(0, pp)), T(all, S(0, 4 * pp)), tb.rs[n % 4](all, S(0, pp)));
}

// Part b: the x4 result transposed back (as 32-bit words) into row-major bytes and stored; the scales of
// group g' (columns v0 + 32 g', at partition 32 (g' / 4) + g' % 4) transposed and kept in the row tile's
// accumulator.
void t2_row_b(Ctx& c, T2Buffers& tb, const Item& a, int64_t j, int64_t v0, int n) {
  const int64_t pp = a.rr / 4, vw = std::min<int64_t>(512, a.w - v0);
  const View rqT = tb.rqT(all, n % 16), rsT = tb.rsT(all, n % 16);
  nki::nc_transpose(rqT(S(0, pp)), tb.rq[n % 4](all, S(0, pp)).bitcast(DType::F32));
  nki::dma_copy(c.rdata(S(a.r0 + j, a.r0 + a.rr, 4), S(a.c0 + v0, a.c0 + v0 + vw)),
                rqT(S(0, pp)).bitcast(c.bp.fp8_dtype())(all, S(0, vw)));
  nki::nc_transpose(rsT(S(0, pp)), tb.rs[n % 4](all, S(0, pp)));
  const int64_t b0 = (a.c0 + v0 - c.cr.lo) / 32;
  nki::tensor_copy(tb.rs_acc(S(0, pp), j, S(b0, b0 + 16)).reshape({pp, 4, 4}),
                   rsT(S(0, pp)).reshape({pp, 4, 32})(all, all, S(0, 4)));
}

// Quantizes one T2 tile g2 [128, W, 4] (rows a.r0 + 4p + j, pp = a.rr / 4 partitions). Columnwise:
// quantize_mx groups are exactly the 32-row blocks; byte j of each x4 word belongs to row 4p + j. Rowwise: 4
// x ceil(w / 512) steps, part a of step n emitted before part b of step n - 2 so the PE never waits on the
// quantize it just fed.
void t2_quantize(Ctx& c, T2Buffers& tb, const View& g2, const Item& a) {
  const int64_t pp = a.rr / 4, i = a.it % 2;
  if (c.bp.columnwise_usage) {
    nki::quantize_mx(tb.cq[i], g2.reshape({kP, 4 * c.W}), tb.cs[i]);
    const View cq8 = tb.cq[i].bitcast(DType::U8).reshape({kP, c.W, 4});
    for (int64_t j = 0; j < 4; ++j)
      nki::dma_copy(c.cdata(S(a.r0 + j, a.r0 + a.rr, 4), S(a.c0, a.c0 + a.w)),
                    cq8(S(0, pp), S(0, a.w), j).bitcast(c.bp.fp8_dtype()));
    write_col_scales_mx(c.cscale, c.geom, tb.cs[i], a.r0 / 32, a.rr / 32, a.c0, a.c0 + a.w);
  }
  if (!c.bp.rowwise_usage) return;
  std::vector<std::pair<int64_t, int64_t>> steps;
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t v0 = 0; v0 < a.w; v0 += 512) steps.emplace_back(j, v0);
  for (size_t n = 0; n < steps.size() + 2; ++n) {
    if (n < steps.size()) t2_row_a(tb, g2, pp, steps[n].first, steps[n].second, static_cast<int>(n));
    if (n >= 2) t2_row_b(c, tb, a, steps[n - 2].first, steps[n - 2].second, static_cast<int>(n - 2));
  }
}

void t2_flush(Ctx& c, T2Buffers& tb, int64_t r0, int64_t rr) {
  if (!c.bp.rowwise_usage) return;
  // Rows 4p + j of 32 partitions are rows 0..127 of a natural tile in the same element order: an SBUF -> SBUF
  // DMA regroups them, then the natural writer runs.
  const int64_t nb = c.cr.hi / 32 - c.cr.lo / 32;
  for (int64_t a = 0; 128 * a < rr; ++a) {
    const int64_t m = std::min<int64_t>(32, (rr - 128 * a) / 4);
    nki::dma_copy(tb.rs_nat(S(0, 4 * m), S(0, nb)), tb.rs_acc(S(32 * a, 32 * a + m), all, S(0, nb)));
    write_row_scales(c.rscale, c.geom, tb.rs_nat, r0 + 128 * a, 4 * m, c.cr.lo / 32, c.cr.hi / 32);
  }
}

// The Trn3-rule pipeline over every (512-row tile, chunk): chunk n is loaded kPrefetch ahead, computed, and
// quantized one chunk later, so the PE and DVE work of chunk n - 1 follows chunk n's exp in every stream.
void t2_pipeline(Ctx& c, const std::vector<View>& g2s, const Producer& prod) {
  T2Buffers tb = t2_buffers(c);
  const std::vector<Item> items = chunk_items(c, 512);
  const int64_t n = static_cast<int64_t>(items.size());
  const size_t ng = g2s.size();
  for (int64_t s = 0; s < std::min(n, kPrefetch); ++s) prod.load(items[s]);
  for (int64_t s = 0; s < n + 1; ++s) {
    if (s + kPrefetch < n) prod.load(items[s + kPrefetch]);
    if (s < n) prod.compute(items[s], g2s[items[s].it % ng]);
    if (s >= 1) {
      const Item& a = items[s - 1];
      t2_quantize(c, tb, g2s[a.it % ng], a);
      if (a.last) t2_flush(c, tb, a.r0, a.rr);
    }
  }
}

// Loads [rows] values of `src` into the T2 tile [128, nt2, 4] (row 512 t + 4 p + j).
void load_rows_t2(const View& dst, const View& src, int64_t rows) {
  const int64_t full = rows / 512, rest = rows % 512;
  if (full > 0)
    nki::dma_copy(dst(all, S(0, full)), src(S(0, full * 512)).reshape({full, kP, 4}).permute({1, 0, 2}));
  if (rest > 0) nki::dma_copy(dst(S(0, rest / 4), full), src(S(full * 512, rows)).reshape({rest / 4, 4}));
}

// ---- Fix-up of the fused path: recompute the two MXFP8 blocks holding each row's target.

void fixup(Ctx& c) {
  Kernel& k = c.k;
  const CommonParams& p = c.p;
  const QuantizeRule rule = c.bp.quantize_rule;
  const num::Fp8Format fmt = c.bp.fp8();
  const DType f8 = c.bp.fp8_dtype();
  const int64_t V = p.V, nb32 = V / 32;
  View in = target_in_range(c);
  const bool row = c.bp.rowwise_usage, col = c.bp.columnwise_usage;
  // Rowwise block of row r: index r * V/32 + y/32 into logits / rowwise data seen as [rows * V/32, 32].
  View ymod, ridx, rsidx;
  if (row) {
    View offs = row_offsets(k, c.nt, nb32);
    View blk = k.sbuf({kP, c.nt}, DType::I32, "fix_block");
    nki::tensor_scalar(blk, c.tgt, AluOp::ShiftRight, 5.0);
    ymod = k.sbuf({kP, c.nt}, DType::I32, "fix_ymod");
    nki::tensor_scalar(ymod, c.tgt, AluOp::BitwiseAnd, 31.0);
    ridx = k.sbuf({kP, c.nt}, DType::I32, "fix_row_index");
    add_i32(k, ridx, offs, blk);
    nki::select(ridx, in, ridx, -1.0);
    // Scale byte indices.
    rsidx = k.sbuf({kP, c.nt}, DType::I32, "fix_row_scale_index");
    View rowi = k.sbuf({kP, c.nt}, DType::I32, "fix_row");
    nki::iota(rowi, {static_cast<int32_t>(kP)}, 0.0, 1.0);
    if (c.geom.swizzled) {
      swizzled_index(k, rsidx, rowi, blk, c.geom.row_cols() / 4);
    } else {
      View ro = row_offsets(k, c.nt, c.geom.row_cols());
      add_i32(k, rsidx, ro, blk);
    }
    nki::select(rsidx, in, rsidx, -1.0);
  }
  // Columnwise scale byte indices: row r's block-row rb = r / 32 (element (p, t): rb = 4 t + p / 32, one iota
  // per 32-partition quadrant) at column y_r.
  View cidx, csidx;
  if (col) {
    cidx = k.sbuf({kP, c.nt}, DType::I32, "fix_col_index");
    nki::select(cidx, in, c.tgt, -1.0);
    csidx = k.sbuf({kP, c.nt}, DType::I32, "fix_col_scale_index");
    View rb = k.sbuf({kP, c.nt}, DType::I32, "fix_block_row");
    for (int64_t q = 0; q < 4; ++q) nki::iota(rb(S(32 * q, 32 * q + 32)), {4}, static_cast<double>(q));
    if (c.geom.swizzled) {
      swizzled_index(k, csidx, c.tgt, rb, c.geom.col_rows() / 4);
    } else {
      // rb * roundup(V, 128) may exceed 2^24: an integer iota step keeps it exact.
      View base = k.sbuf({kP, c.nt}, DType::I32, "fix_col_scale_base");
      for (int64_t q = 0; q < 4; ++q)
        nki::iota(base(S(32 * q, 32 * q + 32)), {static_cast<int32_t>(4 * c.geom.col_cols())},
                  static_cast<double>(q * c.geom.col_cols()));
      add_i32(k, csidx, base, c.tgt);
    }
    nki::select(csidx, in, csidx, -1.0);
  }

  const View xr_all = c.logits.reshape({p.rows * nb32, 32});
  const View rd_all = row ? c.rdata.reshape({p.rows * nb32, 32}) : View();
  const View rs_flat = row ? c.rscale.reshape({c.geom.row_rows() * c.geom.row_cols(), 1}) : View();
  const View cs_flat = col ? c.cscale.reshape({c.geom.col_rows() * c.geom.col_cols(), 1}) : View();
  View iota32;
  if (row) {
    iota32 = k.sbuf({kP, 32}, DType::F32, "fix_iota");
    nki::iota(iota32, {1});
  }
  const nki::DmaOpts gather_opts{.oob_mode = nki::OobMode::Skip};
  auto gather = [&](const View& dst, const View& src, const View& idx) {
    nki::DmaOpts o = gather_opts;
    o.vector_offset = idx;
    nki::dma_copy(dst, src, o);
  };
  auto scatter = [&](const View& dst, const View& src, const View& idx) {
    nki::DmaOpts o = gather_opts;
    o.vector_offset = idx;
    o.indirect_dst = true;
    nki::dma_copy(dst, src, o);
  };
  for (int64_t t = 0; t < c.nt; ++t) {
    const int64_t r0 = t * kP, rr = std::min(kP, p.rows - r0);
    auto vec = [&](const View& v) { return v(all, S(t, t + 1)); };
    // Rowwise block.
    if (row) {
      View xr = k.sbuf({kP, 32}, p.logits_dtype, "fix_x_row");
      nki::memset(xr, 0.0);
      gather(xr(S(0, rr)), xr_all(S(0, rr)), ridx(S(0, rr), S(t, t + 1)));
      View q = k.sbuf({kP, 32}, DType::F32, "fix_q_row");
      nki::activation(q, ActFunc::Exp, xr, vec(c.b));
      // Additive term: hy at the target column y % 32, h elsewhere.
      View mask = k.sbuf({kP, 32}, DType::F32, "fix_mask_row");
      nki::tensor_scalar(mask, iota32, AluOp::IsEqual, vec(ymod));
      View add = k.sbuf({kP, 32}, DType::F32, "fix_add_row");
      nki::select(add, mask, vec(c.hy).broadcast(1, 32), vec(c.h).broadcast(1, 32));
      nki::tensor_scalar(q, q, AluOp::Multiply, vec(c.gcd));
      View g = k.sbuf({kP, 1, 32}, DType::BF16, "fix_g_row");
      nki::tensor_tensor(g.reshape({kP, 32}), q, add, AluOp::Add);
      View q8 = k.sbuf({kP, 1, 32}, f8, "fix_q8_row");
      View byte = k.sbuf({kP, 1}, DType::U8, "fix_byte_row");
      mx_quantize_free(k, q8, byte, g, rule, fmt, Engine::DVE);
      scatter(rd_all(S(0, rr)), q8.reshape({kP, 32})(S(0, rr)), ridx(S(0, rr), S(t, t + 1)));
      scatter(rs_flat(S(0, rr)), byte.bitcast(DType::E8M0)(S(0, rr)), rsidx(S(0, rr), S(t, t + 1)));
    }
    // Columnwise block of row r: rows 32(r/32) .. +32 at column y_r, per 32-row quadrant.
    if (col) {
      View xc = k.sbuf({kP, 32}, p.logits_dtype, "fix_x_col");
      nki::memset(xc, 0.0);
      // Factors of the block's rows along the free dim: element (p, i) = factor of row 32(p/32) + i.
      View bT = k.sbuf({kP, 32}, DType::F32, "fix_b_t");
      View gcT = k.sbuf({kP, 32}, DType::F32, "fix_gcd_t");
      View hT = k.sbuf({kP, 32}, DType::F32, "fix_h_t");
      View hyT = k.sbuf({kP, 32}, DType::F32, "fix_hy_t");
      View tT = k.sbuf({kP, 32}, DType::I32, "fix_t_t");
      const int64_t nq = ceil_div(rr, 32);
      for (int64_t q = 0; q < nq; ++q) {
        const int64_t m = std::min<int64_t>(32, rr - 32 * q);
        const auto Q = S(32 * q, 32 * q + 32);
        gather(xc(S(32 * q, 32 * q + m)), c.logits(S(r0 + 32 * q, r0 + 32 * q + 32)).permute({1, 0})(S(0, m)),
               cidx(S(32 * q, 32 * q + m), S(t, t + 1)));
        nki::nc_transpose(bT(Q), c.b(Q, S(t, t + 1)).broadcast(1, 32), Engine::DVE);
        nki::nc_transpose(gcT(Q), c.gcd(Q, S(t, t + 1)).broadcast(1, 32), Engine::DVE);
        nki::nc_transpose(hT(Q), c.h(Q, S(t, t + 1)).broadcast(1, 32), Engine::DVE);
        nki::nc_transpose(hyT(Q), c.hy(Q, S(t, t + 1)).broadcast(1, 32), Engine::DVE);
        nki::nc_transpose(tT(Q), c.tgt(Q, S(t, t + 1)).broadcast(1, 32), Engine::DVE);
      }
      View q = k.sbuf({kP, 32}, DType::F32, "fix_q_col");
      nki::tensor_tensor(q, xc, bT, AluOp::Add);
      nki::activation(q, ActFunc::Exp, q);
      // Rows of the block whose target is this column take hy.
      View mask = k.sbuf({kP, 32}, DType::F32, "fix_mask_col");
      nki::tensor_scalar(mask, tT, AluOp::IsEqual, vec(c.tgt));
      nki::select(hT, mask, hyT, hT);
      nki::tensor_tensor(q, q, gcT, AluOp::Multiply);
      View g = k.sbuf({kP, 1, 32}, DType::BF16, "fix_g_col");
      nki::tensor_tensor(g.reshape({kP, 32}), q, hT, AluOp::Add);
      View q8 = k.sbuf({kP, 1, 32}, f8, "fix_q8_col");
      View byte = k.sbuf({kP, 1}, DType::U8, "fix_byte_col");
      mx_quantize_free(k, q8, byte, g, rule, fmt, Engine::DVE);
      for (int64_t q = 0; q < nq; ++q) {
        const int64_t m = std::min<int64_t>(32, rr - 32 * q);
        scatter(c.cdata(S(r0 + 32 * q, r0 + 32 * q + 32)).permute({1, 0})(S(0, m)),
                q8.reshape({kP, 32})(S(32 * q, 32 * q + m)), cidx(S(32 * q, 32 * q + m), S(t, t + 1)));
        scatter(cs_flat(S(0, m)), byte.bitcast(DType::E8M0)(S(32 * q, 32 * q + m)),
                csidx(S(32 * q, 32 * q + m), S(t, t + 1)));
      }
    }
  }
}

// ---- The kernel

void bwd_kernel(Kernel& k, const BwdParams& bp) {
  const CommonParams& p = bp.c;
  // The logits come in from ACT's queues (ACT runs the exp next); the gradient goes out from SP's.
  k.set_store_engine(Engine::SP);
  const bool mx = bp.mxfp8();
  const bool trn3 = bp.quantize_rule == QuantizeRule::Trn3;
  if (mx && (p.rows % 32 != 0 || p.V % 32 != 0))
    throw InputError(
        fmt::format("{}: MXFP8 gradients need rows and V multiples of 32 (TransformerEngine's "
                    "MXFP8 tensors), got rows {} and V {}",
                    kName, p.rows, p.V));
  if (trn3 && !mx)
    throw InputError(
        fmt::format("{}: parameter 'quantize_rule': trn3 applies to an MXFP8 grad_quantizer", kName));
  if (bp.scale_layout == ScaleLayout::Swizzled && !mx)
    throw InputError(fmt::format(
        "{}: parameter 'scale_layout': swizzled applies to an MXFP8 grad_quantizer (grad_quantizer none "
        "writes no scales)",
        kName));
  if (!mx && (!bp.rowwise_usage || !bp.columnwise_usage))
    throw InputError(
        fmt::format("{}: parameters 'rowwise_usage' / 'columnwise_usage' apply to an MXFP8 grad_quantizer "
                    "(grad_quantizer "
                    "none writes one BF16 gradient)",
                    kName));
  if (mx && !bp.rowwise_usage && !bp.columnwise_usage)
    throw InputError(fmt::format(
        "{}: parameters 'rowwise_usage' and 'columnwise_usage' are both false: the MXFP8 gradient would have "
        "no tensor",
        kName));
  if (trn3 && k.generation() != Generation::Trn3)
    throw InputError(fmt::format(
        "{}: parameter 'quantize_rule': trn3 uses quantize_mx, which exists on Trn3 only", kName));
  Ctx c(k, bp);
  c.cs = consts(p);
  c.W = p.chunk.value_or(trn3 || !mx ? 2048 : 1024);
  if (c.W % 128 != 0 || (trn3 && c.W % 512 != 0))
    throw InputError(
        fmt::format("{}: parameter 'chunk': {} is not a multiple of {}", kName, c.W, trn3 ? 512 : 128));
  if (mx && !trn3 && c.W > 1024)
    throw InputError(
        fmt::format("{}: parameter 'chunk': {} columns; the TE-rule MXFP8 path keeps two chunks' "
                    "transposes in PSUM, which holds at most 1024 columns each",
                    kName, c.W));
  c.nt = ceil_div(p.rows, kP);
  c.cr = core_columns(p.V, k.program_id(), k.num_programs());

  c.logits = k.input("logits", p.logits_dtype, {p.rows, p.V});
  c.target = k.input("target", DType::I32, {p.rows});
  c.row_max = k.input("row_max", DType::F32, {p.rows});
  c.row_sumexp = k.input("row_sumexp", DType::F32, {p.rows});
  c.grad_output = k.input("grad_output", DType::F32, {bp.grad_output == GradOutput::Scalar ? 1 : p.rows});
  if (!mx) {
    c.grad_dst = k.output("input_grad", DType::BF16, {p.rows, p.V});
  } else {
    c.geom = {p.rows, p.V, bp.scale_layout == ScaleLayout::Swizzled};
    if (bp.rowwise_usage) {
      c.rdata = k.output("input_grad_rowwise_data", bp.fp8_dtype(), {p.rows, p.V});
      c.rscale =
          k.output("input_grad_rowwise_scale_inv", DType::E8M0, {c.geom.row_rows(), c.geom.row_cols()});
    }
    if (bp.columnwise_usage) {
      c.cdata = k.output("input_grad_columnwise_data", bp.fp8_dtype(), {p.rows, p.V});
      c.cscale =
          k.output("input_grad_columnwise_scale_inv", DType::E8M0, {c.geom.col_rows(), c.geom.col_cols()});
    }
    if (!bp.is_fused()) c.grad_dst = k.scratch("input_grad_bf16", DType::BF16, {p.rows, p.V}, false);
  }
  load_factors(c);
  if (!mx) {
    if (c.cr.size() > 0) bf16_gradient(c);
    return;
  }
  // Scale padding (0x00): core 0 writes it; a swizzled tensor is filled whole first, so both cores wait for
  // that fill at a barrier before writing scales.
  for (int rowwise = 0; rowwise < 2; ++rowwise) {
    const View& s = rowwise ? c.rscale : c.cscale;
    if (!bp.uses(rowwise ? 0 : 1) || !has_scale_padding(c.geom, rowwise)) continue;
    if (k.program_id() == 0) zero_scale_padding(k, s, c.geom, rowwise);
    if (c.geom.swizzled && k.num_programs() == 2) nki::core_barrier(s);
  }
  if (c.cr.size() == 0) return;
  if (!bp.is_fused()) {
    bf16_gradient(c);  // to the scratch, targets patched
    if (!trn3) {
      // Tiles load straight from the scratch: 2 ahead + 4 in the pipeline + 1.
      std::vector<View> gs;
      for (int i = 0; i < 7; ++i) gs.push_back(k.sbuf({kP, c.W}, DType::BF16, "te_g"));
      te_pipeline(c, gs,
                  {[&](const Item& a) {
                     nki::dma_copy(gs[a.it % 7](S(0, a.rr), S(0, a.w)),
                                   c.grad_dst(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w)),
                                   {.engine = Engine::ACT});
                   },
                   [](const Item&, const View&) {}});
    } else {
      std::vector<View> g2s;
      for (int i = 0; i < 5; ++i) g2s.push_back(k.sbuf({kP, c.W, 4}, DType::BF16, "t2_g_in"));
      t2_pipeline(c, g2s,
                  {[&](const Item& a) {
                     const int64_t pp = a.rr / 4;
                     nki::dma_copy(g2s[a.it % 5](S(0, pp), S(0, a.w)),
                                   c.grad_dst(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w))
                                       .reshape({pp, 4, a.w})
                                       .permute({0, 2, 1}),
                                   {.engine = Engine::ACT});
                   },
                   [](const Item&, const View&) {}});
    }
    return;
  }
  // Fused.
  if (!trn3) {
    std::vector<View> xs, gs;
    std::vector<View> qs;
    for (int i = 0; i < 4; ++i) xs.push_back(k.sbuf({kP, c.W}, DType::BF16, "bwd_x"));
    for (int i = 0; i < 2; ++i) qs.push_back(k.sbuf({kP, c.W}, DType::F32, "bwd_q"));
    for (int i = 0; i < 5; ++i) gs.push_back(k.sbuf({kP, c.W}, DType::BF16, "te_g"));
    te_pipeline(c, gs,
                {[&](const Item& a) {
                   nki::dma_copy(xs[a.it % 4](S(0, a.rr), S(0, a.w)),
                                 c.logits(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w)),
                                 {.engine = Engine::ACT});
                 },
                 [&](const Item& a, const View& g) {
                   gradient_chunk(c, g(all, S(0, a.w)), xs[a.it % 4](all, S(0, a.w)),
                                  qs[a.it % 2](all, S(0, a.w)), a.t, Engine::ACT);
                 }});
  } else {
    // T2 factors: [128, nt2, 4] for rows 512 t + 4 p + j.
    const int64_t nt2 = ceil_div(p.rows, 512);
    View m2 = k.sbuf({kP, nt2, 4}, DType::F32, "t2_row_max");
    View d2 = k.sbuf({kP, nt2, 4}, DType::F32, "t2_row_sumexp");
    View t2 = k.sbuf({kP, nt2, 4}, DType::I32, "t2_target");
    nki::memset(m2, 0.0);
    nki::memset(d2, 1.0);
    nki::memset(t2, static_cast<double>(p.ignore_idx));
    load_rows_t2(m2, c.row_max, p.rows);
    load_rows_t2(d2, c.row_sumexp, p.rows);
    load_rows_t2(t2, c.target, p.rows);
    View g2in;
    if (bp.grad_output == GradOutput::Scalar) {
      g2in = c.gvec.reshape({kP, 1, 1}).broadcast(1, nt2).broadcast(2, 4);
    } else {
      g2in = k.sbuf({kP, nt2, 4}, DType::F32, "t2_grad_output");
      nki::memset(g2in, 0.0);
      load_rows_t2(g2in, c.grad_output, p.rows);
    }
    RowFactors f2{k.sbuf({kP, nt2, 4}, DType::F32, "t2_b"), k.sbuf({kP, nt2, 4}, DType::F32, "t2_gcd"),
                  k.sbuf({kP, nt2, 4}, DType::F32, "t2_h"), k.sbuf({kP, nt2, 4}, DType::F32, "t2_hy"),
                  k.sbuf({kP, nt2, 4}, DType::F32, "t2_valid")};
    row_factors(k, f2, m2, d2, t2, g2in, c.cvec, p, c.cs);
    std::vector<View> xs, g2s, qs;
    for (int i = 0; i < 4; ++i) {
      xs.push_back(k.sbuf({kP, c.W, 4}, DType::BF16, "t2_x"));
      qs.push_back(k.sbuf({kP, c.W}, DType::F32, "t2_q"));
    }
    for (int i = 0; i < 4; ++i) g2s.push_back(k.sbuf({kP, c.W, 4}, DType::BF16, "t2_g"));
    t2_pipeline(
        c, g2s,
        {[&](const Item& a) {
           const int64_t pp = a.rr / 4;
           nki::dma_copy(
               xs[a.it % 4](S(0, pp), S(0, a.w)),
               c.logits(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w)).reshape({pp, 4, a.w}).permute({0, 2, 1}),
               {.engine = Engine::ACT});
         },
         [&](const Item& a, const View& g2) {
           const View& x2 = xs[a.it % 4];
           for (int64_t j = 0; j < 4; ++j) {
             const View& q = qs[j];
             nki::activation(q(all, S(0, a.w)), ActFunc::Exp, x2(all, S(0, a.w), j),
                             f2.b(all, a.t, S(j, j + 1)));
             nki::tensor_scalar(g2(all, S(0, a.w), j), q(all, S(0, a.w)), AluOp::Multiply,
                                f2.gcd(all, a.t, S(j, j + 1)), false, AluOp::Add, f2.h(all, a.t, S(j, j + 1)),
                                false, Engine::POOL);
           }
         }});
  }
  fixup(c);
}

}  // namespace

std::unique_ptr<KernelDef> cross_entropy_bwd_kernel() {
  KernelPackage<BwdParams> k;
  k.name = "cross_entropy_bwd";
  k.doc =
      "cross entropy backward: the logits gradient as BF16 or as TransformerEngine's MXFP8 tensors (TE rule "
      "bit for bit with ALU operations, or Trn3's quantize_mx), fused on chip or BF16 then quantize; LNC2 "
      "splits the vocabulary";
  k.cores = [](const BwdParams& p) { return p.c.run_with_lnc2 ? 2 : 1; };
  k.cores_param = "run_with_lnc2";
  k.kernel = bwd_kernel;
  k.checks = [](const BwdParams& p) { return ce::bwd_checks(p); };
  k.recipes = ce::bwd_recipes();
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
