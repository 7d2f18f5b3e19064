#include "kernels/lib/mxfp8/lib_load.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "kernels/api/assume_written.h"
#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"
#include "sim/base/error.h"

namespace trnsim::kernels::mxfp8::lib {
namespace {

constexpr int64_t kPmax = 128;
constexpr int64_t kChunk = 32;  // nc_transpose on DVE: 32 x 32 at most

bool bf16(const Td& td) {
  return !td.quantized();
}
bool dgt(const Td& td) {
  return td.form == Td::Form::FByK && td.swizzle == Swizzle::Dgt && !td.fast_dma_transpose;
}

// Load tile K of an operand: logical tile_k for BF16, physical tile_k / 4 for x4.
int64_t load_k(const Td& td, const Geometry& g) {
  return bf16(td) ? g.tile_k : g.tile_k / 4;
}

// load_block's needs_masking: a physical dim (or the per-expert extent) that is no multiple of the block.
bool needs_masking(const Geometry& g, const OperandLoad& o) {
  if (!o.td) return false;
  const Td& td = *o.td;
  const int64_t block_k = g.bk * load_k(td, g), block_f = o.block_tiles * o.tile_f;
  const int64_t k_rows = bf16(td) ? td.K() : td.data.size(0), f = bf16(td) ? td.F() : td.data.size(1);
  if (k_rows % block_k != 0 || f % block_f != 0) return true;
  if (td.effective_f) return bf16(td) ? td.effective_f % block_f != 0 : td.effective_f % block_k != 0;
  return false;
}

[[noreturn]] void fail(const Call& c, const std::string& msg) {
  throw InputError(fmt::format("{}: {}", c.kernel, msg));
}

// _generate_vector_offset_pattern: [128, 4 tile_f / 128] uint32 whose entry r (at [r % 128, r / 128]) is the
// flattened row (tile_k / 4 elements each) of F row r / 4, K quarter r % 4, relative to the tile's first.
// `site`: the pattern's own allocation site (the descriptor keeps each pattern it makes live at once).
View vector_offset_pattern(Tiles& t, const Call& c, const Td& td, const char* site, int64_t tile_k,
                           int64_t tile_f) {
  const int64_t vs = tile_k / 4, skip_k = td.K() / vs, cols = 4 * tile_f / kPmax;
  if (cols > kChunk)
    fail(c, fmt::format("a DGT load of {} F rows needs {} vector-offset columns, at most {} (nki-library "
                        "_generate_vector_offset_pattern); use fewer TILES_IN_LOAD",
                        tile_f, cols, kChunk));
  View tmp = t.sbuf("vector_offsets_tmp", {cols, kPmax}, DType::U32);
  View vo = t.sbuf(site, {kPmax, cols}, DType::U32);
  nki::iota(tmp.reshape({cols, kPmax / 4, 4}), {static_cast<int32_t>(skip_k), 1}, 0.0,
            static_cast<double>(skip_k * (kPmax / 4)));
  for (int64_t q = 0; q < kPmax / kChunk; ++q)
    nki::nc_transpose(vo(S(q * kChunk, (q + 1) * kChunk), all), tmp(all, S(q * kChunk, (q + 1) * kChunk)),
                      Engine::DVE);
  return vo;
}

// The vector-offset patterns of one DGT operand (set_vector_offset_patterns): the load tile's, and the 256-
// and 128-row ones of a K remainder. The library keeps the three as separate tensors of the descriptor
// (vector_offset_pattern_512, _256, _128 in common_dataclasses.py), all live while the block loads, so each
// is its own site: in one site of two buffers the 128-row pattern took the main pattern's buffer before the
// main loads read it (K = 512 n + 384 read rows past the tensor).
struct Patterns {
  View main, p256, p128;
};

Patterns patterns(Tiles& t, const Call& c, const Td& td, int64_t load_f) {
  Patterns p;
  const int64_t K = td.K(), tile_k = c.g.tile_k, rem = K % tile_k;
  if (K >= tile_k) p.main = vector_offset_pattern(t, c, td, "vector_offsets", tile_k, load_f);
  if (rem >= 256) p.p256 = vector_offset_pattern(t, c, td, "vector_offsets_256", 256, load_f);
  if (rem % 256 >= 128) p.p128 = vector_offset_pattern(t, c, td, "vector_offsets_128", 128, load_f);
  return p;
}

// TileLocation.set_vector_offset: the tile's vector offsets, the pattern plus the tile's base (+ the expert's
// offset, scaled to the tile's vector size). The library makes them whenever it describes a tile of an
// unswizzled F-by-K operand in DGT mode (TileLocation.__post_init__), also when the 1x32 loader then reads
// the tile without them.
View tile_vector_offsets(Tiles& t, const Td& td, const View& pattern, int64_t tile_k, int64_t k0,
                         int64_t f0) {
  const int64_t vs = tile_k / 4, K = td.K();
  const int64_t cols = pattern.size(1);
  View vo = t.sbuf("vector_offsets_tile", {kPmax, cols}, DType::U32);
  nki::tensor_scalar(vo, pattern, nki::AluOp::Add, static_cast<double>(k0 / vs + f0 * (K / vs)));
  if (td.expert_vs.valid()) {
    View expert = td.expert_vs;
    if (tile_k < 512) {
      expert = t.sbuf("vector_offsets_expert_scaled", {kPmax, 1}, DType::F32);
      nki::tensor_scalar(expert, td.expert_vs, nki::AluOp::Multiply, static_cast<double>(512 / tile_k));
    }
    View with_expert = t.sbuf("vector_offsets_expert", {kPmax, cols}, DType::U32);
    nki::tensor_scalar(with_expert, vo, nki::AluOp::Add, nki::Operand(expert));
    vo = with_expert;
  }
  return vo;
}

// load_tile_dgt: the tile's vector offsets and one indirect dma_transpose of its 4 af rows; or, with
// fast_dma_transpose, one outer-axes transpose.
void load_dgt(Tiles& t, const Td& td, const View& pattern, const View& dst, int64_t tile_k, int64_t k0,
              int64_t f0, int64_t af) {
  const int64_t vs = tile_k / 4, K = td.K();
  if (td.fast_dma_transpose) {
    const View src = td.data(S(f0, f0 + af), S(k0, k0 + tile_k)).reshape({af, 4, vs}).permute({1, 0, 2});
    nki::dma_transpose(dst.reshape({vs, af, 4}), src, {.axes = {2, 1, 0}});
    return;
  }
  const View vo = tile_vector_offsets(t, td, pattern, tile_k, k0, f0);
  const View flat = td.data.reshape({td.F() * K / vs, vs});
  nki::dma_transpose(dst, flat(S(0, 4 * af), all), {.vector_offset = vo(all, S(0, cdiv(4 * af, kPmax)))});
}

// load_tile_PE_swizzle_wrapX from HBM (a K tile of `tile_k` rows: the load tile's, or a 256- or 128-row
// remainder sub-tile, each with its own row tile and PSUM shape): the F rows onto partitions (F-by-K: the
// 128-row groups by one DMA, a partial group by a second; K-by-F: one dma_transpose [tile_k, 128] -> [128,
// tile_k] per 128 F, the library's direct K-by-F branch), then per 128 F four nc_transposes into PSUM (each
// pair of F columns of one K quarter) and a copy out that puts [p][f][quarter] in the staging, on DVE and ACT
// alternately (psum_drain_engine_ratio (1, 1)).
void load_pe(Tiles& t, const Call& c, const Td& td, const View& dst, int64_t tile_k, int64_t k0, int64_t f0,
             int64_t tile_f, int64_t af) {
  const int64_t kp = tile_k / 4, subs = tile_f / kPmax;
  if (tile_f % kPmax != 0)
    fail(c, fmt::format("the PE swizzle loader needs tile_f % 128 == 0, got {}", tile_f));
  View rows = t.sbuf("pe_swizzle_rows", {kPmax, subs * tile_k}, DType::BF16);
  const int64_t full = af / kPmax, rem = af % kPmax;
  if (af < tile_f) nki::memset(rows, 0.0);
  if (td.form == Td::Form::KByF) {
    for (int64_t s = 0; s < cdiv(af, kPmax); ++s) {
      const int64_t f = f0 + s * kPmax, n = std::min(kPmax, af - s * kPmax);
      nki::dma_transpose(rows(S(0, n), S(s * tile_k, (s + 1) * tile_k)),
                         td.data(S(k0, k0 + tile_k), S(f, f + n)));
    }
  } else if (full > 0) {
    nki::dma_copy(rows(all, S(0, full * tile_k)).reshape({kPmax, full, tile_k}),
                  td.data(S(f0, f0 + full * kPmax), S(k0, k0 + tile_k))
                      .reshape({full, kPmax, tile_k})
                      .permute({1, 0, 2}));
  }
  if (rem > 0 && td.form != Td::Form::KByF)
    nki::dma_copy(rows(S(0, rem), S(full * tile_k, (full + 1) * tile_k)),
                  td.data(S(f0 + full * kPmax, f0 + af), S(k0, k0 + tile_k)));
  for (int64_t s = 0; s < subs; ++s) {
    View ps = t.psum(kp, 4 * kPmax, DType::BF16).reshape({kp, kPmax / 2, 4, 2});
    for (int64_t q = 0; q < 4; ++q)
      nki::nc_transpose(ps(all, all, q, all), rows(all, S(s * tile_k + q * kp, s * tile_k + (q + 1) * kp)));
    nki::tensor_copy(dst(all, S(4 * kPmax * s, 4 * kPmax * (s + 1))).reshape({kp, kPmax / 2, 2, 4}),
                     ps.permute({0, 1, 3, 2}), s % 2 == 0 ? Engine::DVE : Engine::ACT);
  }
}

// load_tile_PE_Swizzle_1x32 (load_apis.py; tile_k 512, checked by lib::unsupported): the tile's F rows
// into a row tile read as FP32 [128, 256 per 128 F] (one dma_copy per 4 sub-tiles of 128 F when the tile lies
// inside F, else one per sub-tile), then per sub-tile two stride-2 nc_transposes in FP32 into PSUM (FP32 K
// pair q of partition row p goes to column 2 f + q: as BF16, [p][f][slot] = row f's K 4 p + slot) and one
// tensor_copy of it, read as BF16, into the staging (engine left to the compiler: the NKI default).
// Sub-tiles past F are not read (the library's per-sub-tile DMAs read past the tensor; their columns are
// masked out of the output), nor are the rows of a partial sub-tile.
void load_pe_1x32(Tiles& t, const Call& c, const Td& td, const View& dst, int64_t k0, int64_t f0,
                  int64_t tile_f, int64_t af) {
  constexpr int64_t kHalf = 256;  // FP32 columns of a 512-row K tile
  const int64_t subs = tile_f / kPmax;
  if (tile_f % kPmax != 0)
    fail(c, fmt::format("the 1x32 PE swizzle loader needs tile_f % 128 == 0, got {}", tile_f));
  View rows = t.sbuf("pe_1x32_rows", {kPmax, subs * kHalf}, DType::F32);
  const auto src = [&](int64_t f, int64_t n) {
    return td.data(S(f, f + n), S(k0, k0 + 512)).bitcast(DType::F32);
  };
  if (af == tile_f) {
    for (int64_t s0 = 0; s0 < subs; s0 += 4) {
      const int64_t ns = std::min<int64_t>(4, subs - s0), f = f0 + s0 * kPmax;
      nki::dma_copy(rows(all, S(s0 * kHalf, (s0 + ns) * kHalf)).reshape({kPmax, ns, kHalf}),
                    src(f, ns * kPmax).reshape({ns, kPmax, kHalf}).permute({1, 0, 2}));
    }
  } else {
    for (int64_t s = 0; s < subs; ++s) {
      const int64_t n = std::clamp<int64_t>(af - s * kPmax, 0, kPmax);
      if (n > 0) nki::dma_copy(rows(S(0, n), S(s * kHalf, (s + 1) * kHalf)), src(f0 + s * kPmax, n));
      if (n < kPmax) assume_written(rows(S(n, kPmax), S(s * kHalf, (s + 1) * kHalf)));
    }
  }
  for (int64_t s = 0; s < subs; ++s) {
    View ps = t.psum(kPmax, kHalf, DType::F32);
    const View pairs = ps.reshape({kPmax, kPmax, 2});
    for (int64_t q = 0; q < 2; ++q)
      nki::nc_transpose(pairs(all, all, q), rows(all, S(s * kHalf + q, (s + 1) * kHalf, 2)));
    nki::tensor_copy(dst(all, S(4 * kPmax * s, 4 * kPmax * (s + 1))), ps.bitcast(DType::BF16));
  }
}

// _load_tile_dma_copy of x4 data or scales rows [k, k + n) and columns [f, f + nf) of `src` into `dst`; with
// the descriptor's expert, by the DMA's scalar_offset (hardware DGE), as the library asks.
void load_x4(const View& dst, const View& src, int64_t k, int64_t n, int64_t f, int64_t nf,
             const View& expert) {
  nki::DmaOpts o;
  if (expert.valid()) o.scalar_offset = expert, o.dge_mode = nki::DgeMode::Hwdge;
  nki::dma_copy(dst, src(S(k, k + n), S(f, f + nf)), o);
}

// _load_single_tensor: K tile `tk` of the block and the load at F offset `fs` inside it.
void load_one(Tiles& t, const Call& c, OperandLoad& o, const Patterns& pats, int64_t tk, int64_t fs) {
  const Td& td = *o.td;
  const Geometry& g = c.g;
  const int64_t kp = g.tile_k / 4, load_f = o.load_tiles * o.tile_f, block_f = o.block_tiles * o.tile_f;
  const int64_t f_global = o.f_block * block_f + fs + o.f_offset;
  if (bf16(td) && td.form != Td::Form::Swizzled) {
    const int64_t f_eff = td.effective_f ? td.effective_f : td.F();
    const int64_t k0 = (c.kb * g.bk + tk) * g.tile_k;
    int64_t rem = td.K() - k0;
    if (f_global >= f_eff || rem <= 0) {
      // No load past the tokens (an expert's effective_f) or K; the library still quantizes the whole
      // staging block, and what it makes of these bytes is never used.
      assume_written(o.staging(all, tk, S(4 * fs, 4 * (fs + load_f))));
      return;
    }
    const int64_t af = std::min(load_f, f_eff - f_global);
    const View dst = o.staging(all, tk, S(4 * fs, 4 * (fs + load_f)));
    if (td.scheme == num::QuantScheme::OneX32) {  // load_tile's 1x32 branch, ahead of the PE and DGT ones
      if (dgt(td)) tile_vector_offsets(t, td, pats.main, g.tile_k, k0, f_global);
      load_pe_1x32(t, c, td, dst, k0, f_global, load_f, af);
      return;
    }
    const bool pe = td.swizzle == Swizzle::Pe || td.form == Td::Form::KByF;
    // One K (sub-)tile of `rows` rows at k into partitions [0, rows / 4) of `to` ([rows / 4, 4 load_f]).
    const auto piece = [&](const View& pattern, const View& to, int64_t rows, int64_t k) {
      if (pe)
        load_pe(t, c, td, to, rows, k, f_global, load_f, af);
      else
        load_dgt(t, td, pattern, to(all, S(0, 4 * af)), rows, k, f_global, af);
    };
    if (rem >= g.tile_k || td.fast_dma_transpose) {  // a full tile, or the fast path's one remainder op
      const int64_t rows = std::min(rem, g.tile_k);
      piece(pats.main, dst(S(0, rows / 4), all), rows, k0);
      return;
    }
    // The remainder as a 256-row and a 128-row sub-tile, for the DGT and the PE loader alike (load_block.py
    // _load_single_tensor); the 128-row one at partition 64 goes through a 32-partition tile and a
    // tensor_copy (the library's workaround of dma_transpose's partition offset).
    int64_t k = k0, p0 = 0;
    if (rem >= 256) {
      piece(pats.p256, dst(S(0, 64), all), 256, k);
      k += 256, rem -= 256, p0 = 64;
    }
    if (rem >= 128) {
      if (p0 == 0) {
        piece(pats.p128, dst(S(0, 32), all), 128, k);
      } else {
        View tmp = t.sbuf("dgt_remainder_tile", {32, 4 * load_f}, DType::BF16);
        piece(pats.p128, tmp, 128, k);
        nki::tensor_copy(dst(S(p0, p0 + 32), all), tmp);
      }
    }
    return;
  }
  if (td.form ==
      Td::Form::Swizzled) {  // load_tile's pre-swizzled branch: one dma_copy, clamped to the tensor
    const int64_t r = (c.kb * g.bk + tk) * kp, n = std::min(kp, td.data.size(0) - r);
    const int64_t nf = std::min(load_f, td.F() - f_global);
    if (n <= 0 || nf <= 0) return;
    nki::dma_copy(o.staging(S(0, n), tk, S(4 * fs, 4 * (fs + nf))),
                  td.data(S(r, r + n), S(4 * f_global, 4 * (f_global + nf))));
    return;
  }
  const int64_t k = (c.kb * g.bk + tk) * kp, k_eff = td.data.size(0);
  const int64_t n = std::min(kp, k_eff - k), nf = std::min(load_f, td.data.size(1) - f_global);
  if (n <= 0 || nf <= 0) return;
  load_x4(o.data(S(0, n), tk, S(fs, fs + nf)), td.data, k, n, f_global, nf, td.expert_rows);
  const int64_t gk = c.kb * g.bk + tk;
  if (!td.packed) {
    load_x4(o.scales(S(0, n), tk, S(fs, fs + nf)), td.scales, k, n, f_global, nf, td.expert_scale_rows);
    return;
  }
  if (gk % 4 != 0 && tk != 0) return;  // packed scales load at group boundaries
  const int64_t groups = cdiv(cdiv(k_eff, kp), 4), rows = td.scales.size(0);
  const int64_t stride = rows == groups * kPmax ? kPmax : kp, kh = packing_group(gk) * stride;
  const int64_t ns = std::min(kp, rows - kh);
  load_x4(o.scales(S(0, ns), packing_group(gk) - packing_group(gk - tk), S(fs, fs + nf)), td.scales, kh, ns,
          f_global, nf, td.expert_scale_rows);
}

// _allocate_sbuf and _zero_sbuf of one operand.
void allocate(Tiles& t, const Call& c, OperandLoad& o, const char* role, bool masking) {
  const Td& td = *o.td;
  const Geometry& g = c.g;
  const int64_t kp = g.tile_k / 4, block_f = o.block_tiles * o.tile_f;
  if (bf16(td)) {
    o.staging = t.sbuf(fmt::format("{}_sbuf", role), {kp, g.bk, 4 * block_f}, DType::BF16);
    if (masking) nki::memset(o.staging, 0.0);
    return;
  }
  const int64_t k0 = c.kb * g.bk;
  const int64_t slots = td.packed ? packing_group(k0 + g.bk - 1) - packing_group(k0) + 1 : g.bk;
  o.data = t.sbuf(fmt::format("{}_data_sbuf", role), {kp, g.bk, block_f}, td.data.dtype());
  o.scales = t.sbuf(fmt::format("{}_scales_sbuf", role), {kp, slots, block_f}, DType::E8M0);
  if (masking) {
    nki::memset(o.data, 0.0);
    nki::memset(o.scales, 0.0);
  }
}

}  // namespace

void load_operands(Tiles& t, const Call& c, OperandLoad& lhs, OperandLoad& rhs) {
  const bool masking = needs_masking(c.g, lhs) || needs_masking(c.g, rhs);
  Patterns lpat, rpat;
  if (lhs.td) {
    allocate(t, c, lhs, "lhs", masking);
    if (bf16(*lhs.td) && dgt(*lhs.td)) lpat = patterns(t, c, *lhs.td, lhs.load_tiles * lhs.tile_f);
  }
  if (rhs.td) {
    allocate(t, c, rhs, "rhs", masking);
    if (bf16(*rhs.td) && dgt(*rhs.td)) rpat = patterns(t, c, *rhs.td, rhs.load_tiles * rhs.tile_f);
  }
  const auto loads = [](const OperandLoad& o) { return o.td ? o.block_tiles / o.load_tiles : 1; };
  for (int64_t tm = 0; tm < loads(lhs); ++tm)
    for (int64_t tn = 0; tn < loads(rhs); ++tn)
      for (int64_t tk = 0; tk < c.g.bk; ++tk) {
        if (lhs.td && tn == 0) load_one(t, c, lhs, lpat, tk, tm * lhs.load_tiles * lhs.tile_f);
        if (rhs.td && tm == 0) load_one(t, c, rhs, rpat, tk, tn * rhs.load_tiles * rhs.tile_f);
      }
}

}  // namespace trnsim::kernels::mxfp8::lib
