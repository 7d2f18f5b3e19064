#include "kernels/lib/mxfp8/loaders.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"

namespace trnsim::kernels::mxfp8 {

PsumBanks::PsumBanks(Kernel& k, int n, const std::string& name, int64_t width) {
  for (int i = 0; i < n; ++i) banks_.push_back(k.psum({128, width}, isa::DType::F32, name));
}

Loader::Loader(const MatmulSpec& spec, const Operand& op, int64_t F, int64_t tile_k, int64_t load_f)
    : spec_(spec), op_(op), F_(F), K_(spec.K), tile_k_(tile_k), load_f_(load_f) {}

void Loader::allocate(Kernel& k, const std::string& scope, const std::string& tag) {
  if (op_.quantized()) return;
  for (int i = 0; i < 2; ++i)
    staging_.push_back(
        k.sbuf({128, 4 * load_f_}, isa::DType::BF16, fmt::format("{}_{}_bf16_{}", scope, tag, i)));
  if (op_.pe_rows_by_dma())
    for (int i = 0; i < 2; ++i)
      rows_.push_back(k.sbuf({128, cdiv(load_f_, 128), tile_k_}, isa::DType::BF16,
                             fmt::format("{}_{}_rows_{}", scope, tag, i)));
}

View Loader::load(PsumBanks& banks, int64_t r0, int64_t kpt, int64_t c, int64_t nf) {
  const View& st = staging_[stage_rr_++ % staging_.size()];
  const View& d = op_.data;
  if (op_.layout == Layout::Swizzled) {
    View dst = st(S(0, kpt), S(0, 4 * nf));
    nki::dma_copy(dst, d(S(r0, r0 + kpt), S(4 * c, 4 * (c + nf))), {.scalar_offset = op_.scalar_offset});
    return dst;
  }
  View s3 = st.reshape({128, 4, load_f_});
  if (op_.layout == Layout::FByK && !op_.uses_pe()) {
    // DGT: one outer-axes dma_transpose per swizzle segment writes [partition row][f][slot], the interleave
    // quantize_mx reads contiguously: src [slot j, f, row i] = data[f, k0 + j j_step + i row_step].
    View fj = st.reshape({128, load_f_, 4});
    for (const Segment& g : segments(r0, r0 + kpt, K_, spec_.scheme)) {
      const int64_t lp = g.row - r0;
      const View rows = d(S(c, c + nf), all);
      const int64_t i0 = g.k0 - g.sub_k0;
      const View src =
          g.row_step == 1
              ? rows(all, S(g.sub_k0, g.sub_k0 + 4 * g.j_step))
                    .reshape({nf, 4, g.j_step})(all, all, S(i0, i0 + g.n))
              : rows(all, S(g.k0, g.k0 + g.n * g.row_step)).reshape({nf, g.n, g.row_step}).permute({0, 2, 1});
      nki::dma_transpose(fj(S(lp, lp + g.n), S(0, nf), all), src.permute({1, 0, 2}),
                         {.scalar_offset = op_.scalar_offset, .axes = {2, 1, 0}});
    }
    return fj(S(0, kpt), S(0, nf), all);
  } else if (op_.layout == Layout::FByK) {  // PE
    View rows = op_.source == Source::Sbuf ? View() : pe_rows(r0, kpt, c, nf);
    for (int64_t f0 = 0; f0 < nf; f0 += 128) {
      const int64_t nfs = std::min<int64_t>(128, nf - f0);
      if (op_.source == Source::Sbuf)
        pe_interleave_resident(banks, s3, r0, kpt, c, f0, nfs);
      else
        pe_interleave(banks, s3, kpt, f0, nfs, rows(all, f0 / 128));
    }
  } else if (op_.source == Source::Hbm) {  // K-by-F rows from HBM
    for (const Segment& g : segments(r0, r0 + kpt, K_, spec_.scheme)) {
      const int64_t lp = g.row - r0;
      if (g.row_step == 1) {  // wrapX: slot j rows are j_step apart
        const int64_t q = g.j_step;
        View v =
            d.reshape({K_ / q, q, F_})(S(g.k0 / q, g.k0 / q + 4), S(g.k0 % q, g.k0 % q + g.n), S(c, c + nf));
        nki::dma_copy(s3(S(lp, lp + g.n), all, S(0, nf)), v.permute({1, 0, 2}),
                      {.scalar_offset = op_.scalar_offset});
      } else {  // 1x32: rows 4P..4P+3
        nki::dma_copy(s3(S(lp, lp + g.n), all, S(0, nf)),
                      d.reshape({K_ / 4, 4, F_})(S(g.row, g.row + g.n), all, S(c, c + nf)),
                      {.scalar_offset = op_.scalar_offset});
      }
    }
  } else if (op_.source == Source::Sbuf && resident_in_place(r0, kpt)) {
    // Slot j of a full 512-row sub-tile is row group k0/128 + j of the resident tile.
    const int64_t g0 = 4 * r0 / 128;
    return d(all, S(g0, g0 + 4), S(c, c + nf)).permute({0, 2, 1});
  } else {
    k_by_f_rows(s3, r0, kpt, c, nf);
  }
  return s3(S(0, kpt), all, S(0, nf)).permute({0, 2, 1});
}

bool Loader::resident_in_place(int64_t r0, int64_t kpt) const {
  // 1x32 interleaved rows: slot j of partition rows [r0, r0 + 128) is group 4 r0 / 128 + j.
  if (op_.interleaved_rows) return kpt == 128 && r0 % 128 == 0;
  const auto g = segments(r0, r0 + kpt, K_, spec_.scheme);
  return g.size() == 1 && g[0].n == 128 && g[0].j_step == 128 && g[0].row_step == 1;
}

namespace {

// Staging [kpt, 4, nfs] at F offset f0 <- the PSUM bank the transposes wrote: wrapX [p][j][f] BF16 (a plain
// copy); 1x32 [p][q][f] FP32, each holding K slots j = 2q and 2q + 1.
void pe_copy(const View& bank, const View& s3, num::QuantScheme s, int64_t kpt, int64_t f0, int64_t nfs) {
  View b16 = bank.bitcast(isa::DType::BF16)(all, S(0, 512));
  if (s == num::QuantScheme::WrapX) {
    nki::tensor_copy(s3(S(0, kpt), all, S(f0, f0 + nfs)),
                     b16.reshape({128, 4, 128})(S(0, kpt), all, S(0, nfs)), isa::Engine::ACT);
    return;
  }
  View src = b16.reshape({128, 2, 128, 2})(S(0, kpt), all, S(0, nfs), all).permute({0, 1, 3, 2});
  nki::tensor_copy(s3(S(0, kpt), all, S(f0, f0 + nfs)).reshape({kpt, 2, 2, nfs}), src, isa::Engine::ACT);
}

View psum_wrapx(const View& bank) {
  return bank.bitcast(isa::DType::BF16)(all, S(0, 512)).reshape({128, 4, 128});
}
View psum_1x32(const View& bank) {
  return bank(all, S(0, 256)).reshape({128, 2, 128});
}

}  // namespace

// Rows [c, c + nf) of the K tile's columns into a row tile [128, subs, tile_k]: sub-tile s holds row
// c + 128 s + p on partition p; wrapX columns slot-major ([j][partition row]), 1x32 in K order.
View Loader::pe_rows(int64_t r0, int64_t kpt, int64_t c, int64_t nf) {
  const View& rows = rows_[rows_rr_++ % rows_.size()];
  const View& d = op_.data;
  const int64_t subs = cdiv(nf, 128);
  const bool skip = op_.source == Source::Gather && op_.rows.padding == Padding::Skip;
  if (skip) nki::memset(rows(all, S(0, subs), S(0, 4 * kpt)), 0.0, isa::Engine::POOL);
  // Rows [f, f + n) of sub-tiles [s0, s0 + ns) (or, indexed, the n rows `index` picks) into partitions
  // [p, p + n).
  const auto copy = [&](int64_t s0, int64_t ns, int64_t p, int64_t n, int64_t f, const View* index) {
    const auto src_cols = [&](int64_t k0, int64_t width) {
      if (index) return d(S(0, n), S(k0, k0 + width));
      if (ns == 1) return d(S(f, f + n), S(k0, k0 + width));
      return d(S(f, f + ns * 128), S(k0, k0 + width))
          .reshape({ns, 128, width})(all, S(0, n))
          .permute({1, 0, 2});
    };
    const auto dma = [&](const View& dst, const View& src) {
      if (index)
        nki::dma_copy(dst, src,
                      {.vector_offset = *index, .oob_mode = skip ? nki::OobMode::Skip : nki::OobMode::Error});
      else
        nki::dma_copy(dst, src, {.scalar_offset = op_.scalar_offset});
    };
    View dst = rows(S(p, p + n), S(s0, s0 + ns), S(0, 4 * kpt));
    if (spec_.scheme == num::QuantScheme::OneX32) {
      dma(dst, src_cols(4 * r0, 4 * kpt));
      return;
    }
    for (const Segment& g : segments(r0, r0 + kpt, K_, spec_.scheme)) {
      const int64_t lp = g.row - r0, i0 = g.k0 - g.sub_k0;
      View src = src_cols(g.sub_k0, 4 * g.j_step);
      src = index ? src.reshape({n, 4, g.j_step})(all, all, S(i0, i0 + g.n))
                  : src.reshape({n, ns, 4, g.j_step})(all, all, all, S(i0, i0 + g.n));
      dma(dst.reshape({n, ns, 4, kpt})(all, all, all, S(lp, lp + g.n)), src);
    }
  };
  if (op_.source == Source::Gather) {
    for (int64_t s = 0; s < subs; ++s) {
      const int64_t n = std::min<int64_t>(128, nf - 128 * s);
      row_runs(c + 128 * s, n, 0, [&](int64_t p, int64_t cnt, int64_t grp, int64_t off) {
        const View index = op_.rows.index(S(p, p + cnt), S(grp, grp + 1));
        copy(s, 1, off, cnt, 0, &index);
      });
    }
  } else {
    const int64_t full = nf / 128, rest = nf % 128;
    if (full) copy(0, full, 0, 128, c, nullptr);
    if (rest) copy(full, 1, 0, rest, c + 128 * full, nullptr);
  }
  return rows;
}

void Loader::pe_interleave(PsumBanks& banks, const View& s3, int64_t kpt, int64_t f0, int64_t nfs,
                           const View& rows) {
  const View& bank = banks.next();
  if (spec_.scheme == num::QuantScheme::WrapX) {
    View ps = psum_wrapx(bank), r = rows(S(0, nfs), S(0, 4 * kpt)).reshape({nfs, 4, kpt});
    for (int64_t j = 0; j < 4; ++j) nki::nc_transpose(ps(S(0, kpt), j, S(0, nfs)), r(all, j, all));
  } else {
    View ps = psum_1x32(bank), r = rows(S(0, nfs), S(0, 4 * kpt)).bitcast(isa::DType::F32);
    for (int64_t q = 0; q < 2; ++q) nki::nc_transpose(ps(S(0, kpt), q, S(0, nfs)), r(all, S(q, 2 * kpt, 2)));
  }
  pe_copy(bank, s3, spec_.scheme, kpt, f0, nfs);
}

void Loader::pe_interleave_resident(PsumBanks& banks, const View& s3, int64_t r0, int64_t kpt, int64_t c,
                                    int64_t f0, int64_t nfs) {
  const View& bank = banks.next();
  const bool wrapx = spec_.scheme == num::QuantScheme::WrapX;
  View ps = wrapx ? psum_wrapx(bank) : psum_1x32(bank);
  row_runs(c + f0, nfs, 0, [&](int64_t p, int64_t cnt, int64_t grp, int64_t off) {
    View res = op_.data(S(p, p + cnt), grp, all);  // [cnt, K]
    if (!wrapx) {
      View r = res(all, S(4 * r0, 4 * r0 + 4 * kpt)).bitcast(isa::DType::F32);
      for (int64_t q = 0; q < 2; ++q)
        nki::nc_transpose(ps(S(0, kpt), q, S(off, off + cnt)), r(all, S(q, 2 * kpt, 2)));
      return;
    }
    for (const Segment& g : segments(r0, r0 + kpt, K_, spec_.scheme)) {
      const int64_t lp = g.row - r0;
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t kj = g.k0 + j * g.j_step;
        nki::nc_transpose(ps(S(lp, lp + g.n), j, S(off, off + cnt)), res(all, S(kj, kj + g.n)));
      }
    }
  });
  pe_copy(bank, s3, spec_.scheme, kpt, f0, nfs);
}

// K-by-F rows that a strided view cannot express: gathered rows (one indirect DMA per segment, slot and
// index run) or resident rows at other partitions (an SBUF-to-SBUF DMA). wrapX, or 1x32 with the rows in
// its interleave order (Operand::interleaved_rows; plan.cpp).
void Loader::k_by_f_rows(const View& s3, int64_t r0, int64_t kpt, int64_t c, int64_t nf) {
  const bool gather = op_.source == Source::Gather;
  const bool skip = gather && op_.rows.padding == Padding::Skip;
  if (skip) nki::memset(s3(S(0, kpt), all, S(0, nf)), 0.0, isa::Engine::POOL);
  const auto copy = [&](const View& dst, int64_t p, int64_t cnt, int64_t col) {
    if (gather)
      nki::dma_copy(dst, op_.data(S(0, cnt), S(c, c + nf)),
                    {.vector_offset = op_.rows.index(S(p, p + cnt), S(col, col + 1)),
                     .oob_mode = skip ? nki::OobMode::Skip : nki::OobMode::Error});
    else
      nki::dma_copy(dst, op_.data(S(p, p + cnt), col, S(c, c + nf)));
  };
  if (op_.interleaved_rows) {  // 1x32: partition row R of slot j at [R % 128, 4 (R / 128) + j]
    for (int64_t j = 0; j < 4; ++j)
      row_runs(r0, kpt, 0, [&](int64_t p, int64_t cnt, int64_t grp, int64_t off) {
        copy(s3(S(off, off + cnt), j, S(0, nf)), p, cnt, 4 * grp + j);
      });
    return;
  }
  for (const Segment& g : segments(r0, r0 + kpt, K_, spec_.scheme)) {
    const int64_t lp = g.row - r0;
    for (int64_t j = 0; j < 4; ++j)
      row_runs(g.k0 + j * g.j_step, g.n, lp, [&](int64_t p, int64_t cnt, int64_t grp, int64_t off) {
        copy(s3(S(lp + off, lp + off + cnt), j, S(0, nf)), p, cnt, grp);
      });
  }
}

}  // namespace trnsim::kernels::mxfp8
