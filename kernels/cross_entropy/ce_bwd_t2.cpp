// cross_entropy_bwd's MXFP8 gradient under quantize_rule trn3, T2 layout (cross_entropy_bwd.cpp describes
// the method): g2 [128, W, 4] BF16 holds rows r0 + 4p + j (r0 % 512 == 0) on pp = rr / 4 partitions; the
// columnwise blocks are quantize_mx's groups, the rowwise ones come from PE transposes.
#include <algorithm>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/cross_entropy/ce_bwd_state.h"

namespace trnsim::kernels::ce::bwd {
namespace {

using isa::AluOp;

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

}  // namespace

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

}  // namespace trnsim::kernels::ce::bwd
