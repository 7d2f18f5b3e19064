#include "kernels/lib/mxfp8/epilogue.h"

#include <algorithm>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"

namespace trnsim::kernels::mxfp8 {
namespace {

constexpr int64_t kChunk = 512;  // columns per read-modify-write (bounds the epilogue's SBUF scratch)

nki::OobMode oob(const RowIndex& r) {
  return r.padding == Padding::Skip ? nki::OobMode::Skip : nki::OobMode::Error;
}

// Indirect DMA of SBUF rows [0, n) of `v` <-> tensor rows index[r..r+n) of `hbm` (whole rows, columns
// [c0, c0 + v's columns)): a scatter (to_hbm) or a gather, split into index runs.
void indirect(const View& v, const View& hbm, const RowIndex& rows, int64_t r, int64_t c0, bool to_hbm,
              bool accumulate = false) {
  const int64_t n = v.partitions(), w = v.free_elements();
  row_runs(r, n, 0, [&](int64_t p, int64_t cnt, int64_t grp, int64_t off) {
    const View idx = rows.index(S(p, p + cnt), S(grp, grp + 1));
    const View h = hbm(S(0, cnt), S(c0, c0 + w));
    const View s = v(S(off, off + cnt), all);
    if (to_hbm)
      nki::dma_copy(
          h, s,
          {.vector_offset = idx, .indirect_dst = true, .oob_mode = oob(rows), .accumulate = accumulate});
    else
      nki::dma_copy(s, h, {.vector_offset = idx, .oob_mode = oob(rows)});
  });
}

}  // namespace

void StoreRows::emit(EpilogueContext&, const OutTile& t) {
  const int64_t n = t.tile.partitions(), w = t.tile.free_elements();
  nki::dma_copy(dst_(S(t.row, t.row + n), S(t.col, t.col + w)), t.tile, {.engine = isa::Engine::ACT});
}

void ScatterRows::emit(EpilogueContext&, const OutTile& t) {
  indirect(t.tile, dst_, rows_, t.row, col0_ + t.col, true);
}

void AccumulateRows::emit(EpilogueContext&, const OutTile& t) {
  accumulate(t.tile, t.row, t.col);
}

void AccumulateRows::accumulate(const View& v, int64_t r, int64_t c) {
  const int64_t n = v.partitions(), w = v.free_elements();
  const isa::DType dt = dst_.dtype();
  if (mode_ == AccumulateMode::ReadModifyWrite && !existing_.valid()) {
    Kernel& k = *Kernel::current();
    cast_ = k.sbuf({128, kChunk}, dt, "epilogue_cast");
    existing_ = k.sbuf({128, kChunk}, dt, "epilogue_existing");
  }
  for (int64_t j = 0; j < w; j += kChunk) {
    const int64_t cw = std::min(kChunk, w - j), dc = col0_ + c + j;
    View src = v(all, S(j, j + cw));
    if (mode_ == AccumulateMode::DmaAccumulate) {
      if (rows_)
        indirect(src, dst_, *rows_, r, dc, true, true);
      else
        nki::dma_copy(dst_(S(r, r + n), S(dc, dc + cw)), src,
                      {.accumulate = true, .engine = isa::Engine::ACT});
      continue;
    }
    if (src.dtype() != dt) {
      nki::tensor_copy(cast_(S(0, n), S(0, cw)), src);
      src = cast_(S(0, n), S(0, cw));
    }
    View ex = existing_(S(0, n), S(0, cw));
    if (rows_) {
      if (rows_->padding == Padding::Skip) nki::memset(ex, 0.0, isa::Engine::POOL);
      indirect(ex, dst_, *rows_, r, dc, false);
    } else {
      nki::dma_copy(ex, dst_(S(r, r + n), S(dc, dc + cw)));
    }
    nki::tensor_tensor(src, src, ex, nki::AluOp::Add);
    if (rows_)
      indirect(src, dst_, *rows_, r, dc, true);
    else
      nki::dma_copy(dst_(S(r, r + n), S(dc, dc + cw)), src, {.engine = isa::Engine::ACT});
  }
}

void TransposeAccumulate::emit(EpilogueContext& ctx, const OutTile& t) {
  const int64_t tm = t.tile.partitions(), w = t.tile.free_elements();
  if (!piece_.valid()) {
    cast_ = ctx.kernel.sbuf({128, 128}, dtype_, "epilogue_cast_t");
    piece_ = ctx.kernel.sbuf({128, 128}, dtype_, "epilogue_transposed");
  }
  for (int64_t j = 0; j < w; j += 128) {
    const int64_t pw = std::min<int64_t>(128, w - j);
    View src = t.tile(all, S(j, j + pw));
    if (src.dtype() != dtype_) {
      nki::tensor_copy(cast_(S(0, tm), S(0, pw)), src);
      src = cast_(S(0, tm), S(0, pw));
    }
    View ps = ctx.banks.next().bitcast(dtype_)(S(0, pw), S(0, tm));
    nki::nc_transpose(ps, src);
    View piece = piece_(S(0, pw), S(0, tm));
    nki::tensor_copy(piece, ps, isa::Engine::ACT);
    acc_.accumulate(piece, t.col + j, t.row);
  }
}

}  // namespace trnsim::kernels::mxfp8
