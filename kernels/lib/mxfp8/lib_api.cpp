#include "kernels/lib/mxfp8/lib_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/api/alloc_rule.h"
#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"
#include "kernels/lib/mxfp8/lib_load.h"

namespace trnsim::kernels::mxfp8::lib {
namespace {

constexpr int64_t kBankCols = 512;  // FP32 columns of one 2 KiB PSUM bank
constexpr int64_t kBanks = 8;

// quantize_mxfp8_block of a BF16 staging tile [kp, bk, 4 block_f]: F tiles outer, K tiles inner.
void quantize(Tiles& t, const Call& c, const OperandLoad& o, const char* role, View& data, View& scales) {
  const Geometry& g = c.g;
  const int64_t kp = g.tile_k / 4, block_f = o.block_tiles * o.tile_f, tf = o.tile_f;
  data = t.sbuf(fmt::format("{}_quantized", role), {kp, g.bk, block_f}, x4_dtype(c.fp8));
  scales =
      t.sbuf(fmt::format("{}_scales", role), {kp, c.packing ? cdiv(g.bk, 4) : g.bk, block_f}, DType::E8M0);
  for (int64_t f = 0; f < o.block_tiles; ++f)
    for (int64_t k = 0; k < g.bk; ++k)
      nki::quantize_mx(data(all, k, S(f * tf, (f + 1) * tf)),
                       o.staging(all, k, S(4 * f * tf, 4 * (f + 1) * tf)),
                       scales(all, c.packing ? packing_group(k) : k, S(f * tf, (f + 1) * tf)),
                       c.packing ? packing_offset(k) : 0);
}

// spill_block: per K tile the x4 data and its scales into the spill buffer at (kb, fb).
void spill(const Call& c, const Td& q, const View& data, const View& scales, int64_t fb, int64_t block_f) {
  const int64_t kp = c.g.tile_k / 4, f0 = fb * block_f;
  for (int64_t tk = 0; tk < c.g.bk; ++tk) {
    const int64_t gk = c.kb * c.g.bk + tk, row = gk * kp;
    nki::dma_copy(q.data(S(row, row + kp), S(f0, f0 + block_f)), data(all, tk, all));
    if (!c.packing) {
      nki::dma_copy(q.scales(S(row, row + kp), S(f0, f0 + block_f)), scales(all, tk, all));
      continue;
    }
    for (int64_t s = 0; s < kp / 32; ++s) {
      const int64_t part = packing_offset(gk) + 32 * s;
      if (part + 4 > kp) break;
      const int64_t hrow = packing_group(gk) * kp + part, srow = packing_offset(tk) + 32 * s;
      nki::dma_copy(q.scales(S(hrow, hrow + 4), S(f0, f0 + block_f)),
                    scales(S(srow, srow + 4), packing_group(tk), all));
    }
  }
}

// The scale slot and partition offset of K tile k of the block: pre-quantized or spilled scales that are
// packed carry the global tile's group and offset; scales quantized here, the block's.
std::pair<int64_t, uint8_t> scale_slot(const Call& c, const Td& eff, int64_t k) {
  if (eff.quantized() && eff.packed) {
    const int64_t g0 = c.kb * c.g.bk;
    return {packing_group(g0 + k) - packing_group(g0), packing_offset(g0 + k)};
  }
  if (c.packing && !eff.quantized()) return {packing_group(k), packing_offset(k)};
  return {k, 0};
}

}  // namespace

void SitePlan::declare(int core, int64_t bytes) {
  sites_[core].push_back({bytes});
}

void SitePlan::release(int core, size_t first) {
  const size_t now = sites_[core].size();
  for (size_t i = first; i < now; ++i)
    sites_[core][i].released_at = std::min(sites_[core][i].released_at, now);
}

void SitePlan::finish() {
  probing_ = false;
  for (int c = 0; c < 2; ++c) {
    const std::vector<Site>& s = sites_[c];
    reserve_[c].assign(s.size(), 0);
    for (size_t i = 0; i < s.size(); ++i)
      for (size_t t = i + 1; t < std::min(s[i].released_at, s.size()); ++t) {
        int64_t live = 0;  // later sites live when site t is declared
        for (size_t j = i + 1; j <= t; ++j)
          if (s[j].released_at > t) live += s[j].bytes;
        reserve_[c][i] = std::max(reserve_[c][i], live);
      }
  }
}

int64_t SitePlan::reserve(int core, size_t n, int64_t bytes) const {
  if (n >= sites_[core].size() || sites_[core][n].bytes != bytes)
    throw std::logic_error(
        fmt::format("lib::SitePlan: site {} of core {} ({} B) differs from the probe's", n, core, bytes));
  return reserve_[core][n];
}

Tiles::Tiles(Kernel& k, SitePlan* plan) : k_(k), plan_(plan) {}

View Tiles::sbuf(const std::string& site, const std::vector<int64_t>& shape, DType dtype) {
  auto key = std::make_tuple(site, shape, dtype);
  auto it = pools_.find(key);
  if (it == pools_.end()) {
    int64_t free = 1;
    for (size_t i = 1; i < shape.size(); ++i) free *= shape[i];
    const int64_t bytes = round_up(std::max<int64_t>(1, free * elem_bytes(dtype)), 64);  // SBUF granule
    InLoop loop{.trip_count = 2};
    if (plan_ && plan_->probing()) {
      plan_->declare(k_.program_id(), bytes);
      loop.bufs = 1;
    } else if (plan_) {
      loop.reserve_bytes_per_partition = plan_->reserve(k_.program_id(), declarations_, bytes);
    }
    it = pools_.emplace(key, k_.sbuf_pool(shape, dtype, site, loop)).first;
    order_.push_back(key);
    declared_.push_back(declarations_++);
  }
  return it->second.next();
}

void Tiles::release_from(size_t mark) {
  if (plan_ && plan_->probing() && mark < order_.size()) plan_->release(k_.program_id(), declared_[mark]);
  for (size_t i = mark; i < order_.size(); ++i) pools_.erase(order_[i]);
  order_.resize(mark);
  declared_.resize(mark);
}

View Tiles::psum(int64_t partitions, int64_t cols, DType dtype) {
  if (!ring_.valid()) ring_ = k_.psum({128, kBanks * kBankCols}, DType::F32, "psum_ring");
  const int64_t bytes = cols * elem_bytes(dtype), banks = cdiv(bytes, 4 * kBankCols);
  if (next_bank_ + banks > kBanks) next_bank_ = 0;
  View v = ring_(S(0, partitions), S(next_bank_ * kBankCols, (next_bank_ + banks) * kBankCols));
  next_bank_ = (next_bank_ + banks) % kBanks;
  return v.bitcast(dtype)(all, S(0, cols));
}

int64_t Td::K() const {
  switch (form) {
    case Form::FByK:
      return data.size(1);
    case Form::KByF:
      return data.size(0);
    case Form::Swizzled:
    case Form::Quantized:
      return 4 * data.size(0);
  }
  return 0;
}

int64_t Td::F() const {
  switch (form) {
    case Form::FByK:
      return data.size(0);
    case Form::Swizzled:
      return data.size(1) / 4;
    default:
      return data.size(1);
  }
}

Td spill_buffer(Kernel& k, const std::string& name, int64_t kblocks, int64_t fblocks, int64_t block_f,
                const Geometry& g, bool packing, num::Fp8Format fp8) {
  const int64_t kp = g.tile_k / 4, tiles = kblocks * g.bk;
  const bool priv = k.num_programs() == 2;
  Td q;
  q.form = Td::Form::Quantized;
  q.packed = packing;
  q.data = k.scratch(name + "_data", x4_dtype(fp8), {tiles * kp, fblocks * block_f}, priv);
  q.scales = k.scratch(name + "_scales", DType::E8M0,
                       {(packing ? cdiv(tiles, 4) : tiles) * kp, fblocks * block_f}, priv);
  return q;
}

void generic_matmul(Tiles& t, const Call& c) {
  const Geometry& g = c.g;
  const bool lhs_hbm = c.lhs->quantized() || !c.lhsq || c.nb == 0;
  const bool rhs_hbm = c.rhs->quantized() || !c.rhsq || c.mb == 0;
  const Td& eff_l = lhs_hbm ? *c.lhs : *c.lhsq;
  const Td& eff_r = rhs_hbm ? *c.rhs : *c.rhsq;
  const bool shared = c.lhs_sbuf && c.lhs_sbuf->data.valid();
  OperandLoad L, R;
  L.td = shared ? nullptr : &eff_l;
  L.tile_f = g.tile_m, L.load_tiles = g.load_m, L.block_tiles = g.bm, L.f_block = c.mb;
  L.f_offset = lhs_hbm ? c.lhs_m_offset : 0;
  R.td = &eff_r;
  R.tile_f = g.tile_n, R.load_tiles = g.load_n, R.block_tiles = g.bn, R.f_block = c.nb;
  R.f_offset = rhs_hbm ? c.rhs_n_offset : 0;
  load_operands(t, c, L, R);
  View ld = L.data, ls = L.scales, rd = R.data, rs = R.scales;
  if (shared) {
    ld = c.lhs_sbuf->data, ls = c.lhs_sbuf->scales;
  } else if (!eff_l.quantized()) {
    quantize(t, c, L, "lhs", ld, ls);
    if (c.lhsq) spill(c, *c.lhsq, ld, ls, c.mb, g.block_m());
    if (c.lhs_sbuf) c.lhs_sbuf->data = ld, c.lhs_sbuf->scales = ls;
  }
  if (!eff_r.quantized()) {
    quantize(t, c, R, "rhs", rd, rs);
    if (c.rhsq) spill(c, *c.rhsq, rd, rs, c.nb, g.block_n());
  }
  // matmul_mxfp8_blocks over the block's output tiles.
  const int64_t m_end = std::min(g.block_m(), c.lhs->F() - c.mb * g.block_m());
  const int64_t n_end = std::min(g.block_n(), c.rhs->F() - c.nb * g.block_n());
  const bool accumulate = !c.initialize;
  const bool prequantized = eff_l.quantized() || eff_r.quantized();
  int64_t iter = 0;
  const auto tile = [&](int64_t mt, int64_t nt) {
    const int64_t lf = mt * g.tile_m, rf = nt * g.tile_n;
    if (lf >= m_end || rf >= n_end) return;
    const int64_t nm = std::min(g.tile_m, m_end - lf), nn = std::min(g.tile_n, n_end - rf);
    View ps = t.psum(nm, nn, c.psum_dtype);
    View out = c.out(S(0, nm), S(mt * g.block_n() + rf, mt * g.block_n() + rf + nn));
    const bool copy_in =
        accumulate && !prequantized && c.psum_copy_in && iter % 3 == 1 && c.psum_dtype == DType::F32;
    if (copy_in) nki::tensor_copy(ps, out);
    for (int64_t k = 0; k < g.bk; ++k) {
      const auto [lslot, loff] = scale_slot(c, eff_l, k);
      const auto [rslot, roff] = scale_slot(c, eff_r, k);
      nki::nc_matmul_mx(
          ps, ld(all, k, S(lf, lf + nm)), rd(all, k, S(rf, rf + nn)), ls(all, lslot, S(lf, lf + nm)),
          rs(all, rslot, S(rf, rf + nn)),
          {.accumulate = k > 0 || copy_in, .stationary_scale_offset = loff, .moving_scale_offset = roff});
    }
    if (accumulate && !copy_in)
      nki::tensor_tensor(out, ps, out, nki::AluOp::Add);
    else
      nki::tensor_copy(out, ps);
  };
  if (c.nmk) {
    for (int64_t nt = 0; nt < g.bn; ++nt)
      for (int64_t mt = 0; mt < g.bm; ++mt, ++iter) tile(mt, nt);
  } else {
    for (int64_t mt = 0; mt < g.bm; ++mt)
      for (int64_t nt = 0; nt < g.bn; ++nt, ++iter) tile(mt, nt);
  }
}

}  // namespace trnsim::kernels::mxfp8::lib
