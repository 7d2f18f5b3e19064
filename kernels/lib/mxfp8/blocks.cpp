#include "kernels/lib/mxfp8/blocks.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"

namespace trnsim::kernels::mxfp8 {

OperandBlocks::OperandBlocks(Kernel& k, const MatmulSpec& spec, const Operand& op, const Plan& plan,
                             int64_t F, int64_t f_lo, int64_t f_core, int64_t tile_f, int64_t block_f,
                             int64_t load_f, int nbuf, int n_kblocks, const std::string& tag)
    : spec_(spec),
      op_(op),
      K_(spec.K),
      kp_(plan.tile_k / 4),
      TK_(cdiv(spec.K, plan.tile_k)),
      f_lo_(f_lo),
      f_core_(f_core),
      block_f_(block_f * tile_f),
      load_f_(load_f * tile_f),
      bk_(plan.block_k),
      slots_(scale_slots(plan.block_k, TK_, spec.use_scale_packing)),
      loader_(spec, op, F, plan.tile_k, load_f * tile_f) {
  const isa::DType xdt = x4_dtype(spec.fp8);
  if (op.quantized()) packed_hbm_ = op.scales_shape != unpacked_scales(K_, F);
  for (int i = 0; i < nbuf; ++i) {
    slot_data_.push_back(k.sbuf({128, bk_, block_f_}, xdt, fmt::format("{}_{}_q{}", spec.scope, tag, i)));
    slot_scales_.push_back(
        k.sbuf({128, slots_, block_f_}, isa::DType::E8M0, fmt::format("{}_{}_s{}", spec.scope, tag, i)));
  }
  loader_.allocate(k, spec.scope, tag);
  if (spec.spill_reload && !op.quantized()) {
    const bool priv = k.num_programs() == 2;
    spill_data_ = k.scratch(fmt::format("{}_{}_spill_data", spec.scope, tag), xdt,
                            {n_kblocks * bk_ * 128, f_core}, priv);
    spill_scales_ = k.scratch(fmt::format("{}_{}_spill_scales", spec.scope, tag), isa::DType::E8M0,
                              {n_kblocks * slots_ * 128, f_core}, priv);
  }
}

std::vector<OperandBlocks::Use> OperandBlocks::schedule(
    const std::vector<std::pair<int64_t, int64_t>>& keys) const {
  std::vector<Use> uses;
  std::vector<std::pair<int64_t, int64_t>> held(slot_data_.size(), {-1, -1});
  std::set<std::pair<int64_t, int64_t>> seen;
  int prev = -1;
  for (const auto& key : keys) {
    int s = -1;
    for (size_t i = 0; i < held.size(); ++i)
      if (held[i] == key) s = static_cast<int>(i);
    Use u{s, s < 0, false, false};
    if (s < 0) {
      s = held.size() == 1 ? 0 : (prev == 0 ? 1 : 0);
      held[s] = key;
      u.slot = s;
      u.reload = spill_data_.valid() && seen.count(key);
      seen.insert(key);
    }
    uses.push_back(u);
    prev = s;
  }
  // Spill at a block's first miss if it misses again later.
  if (spill_data_.valid()) {
    std::set<std::pair<int64_t, int64_t>> later;
    for (size_t i = uses.size(); i-- > 0;) {
      if (!uses[i].miss) continue;
      if (!uses[i].reload && later.count(keys[i])) uses[i].spill = true;
      later.insert(keys[i]);
    }
  }
  return uses;
}

void OperandBlocks::prepare(PsumBanks& banks, int64_t fb, int64_t kb, const Use& u) {
  const int64_t f0 = f_lo_ + fb * block_f_, bf = std::min(block_f_, f_lo_ + f_core_ - f0);
  const int64_t kt0 = kb * bk_, kt1 = std::min(kt0 + bk_, TK_);
  const View& qd = slot_data_[u.slot];
  const View& qs = slot_scales_[u.slot];
  if (u.reload) {
    transfer_spill(qd, qs, f0 - f_lo_, bf, kb, kt1 - kt0, false);
    return;
  }
  for (int64_t kt = kt0; kt < kt1; ++kt) {
    const int64_t r0 = kt * kp_, kpt = std::min(kp_, K_ / 4 - r0), t = kt - kt0;
    const int64_t slot = spec_.use_scale_packing ? kt / 4 - kt0 / 4 : t;
    const uint8_t offset = spec_.use_scale_packing ? static_cast<uint8_t>(4 * (kt % 4)) : 0;
    for (int64_t c = f0; c < f0 + bf; c += load_f_) {
      const int64_t nf = std::min(load_f_, f0 + bf - c), cc = c - f0;
      if (op_.quantized()) {
        const nki::DmaOpts o{.scalar_offset = op_.scalar_offset};
        nki::dma_copy(qd(S(0, kpt), t, S(cc, cc + nf)), op_.data(S(r0, r0 + kpt), S(c, c + nf)), o);
        if (!packed_hbm_)
          nki::dma_copy(qs(S(0, kpt), slot, S(cc, cc + nf)), op_.scales(S(r0, r0 + kpt), S(c, c + nf)), o);
        else if (kt == kt0 || kt % 4 == 0)
          nki::dma_copy(qs(all, slot, S(cc, cc + nf)),
                        op_.scales(S((kt / 4) * 128, (kt / 4) * 128 + 128), S(c, c + nf)), o);
        continue;
      }
      const View src = loader_.load(banks, r0, kpt, c, nf);
      nki::quantize_mx(qd(S(0, kpt), t, S(cc, cc + nf)), src, qs(S(0, kpt), slot, S(cc, cc + nf)), offset);
    }
  }
  if (u.spill) transfer_spill(qd, qs, f0 - f_lo_, bf, kb, kt1 - kt0, true);
}

OperandBlocks::TileRef OperandBlocks::tile(int slot, int64_t kb, int64_t kt, int64_t f, int64_t n) const {
  const int64_t kt0 = kb * bk_, kpt = std::min(kp_, K_ / 4 - kt * kp_);
  const bool pk = spec_.use_scale_packing;
  const int64_t s = pk ? kt / 4 - kt0 / 4 : kt - kt0;
  return {slot_data_[slot](S(0, kpt), kt - kt0, S(f, f + n)), slot_scales_[slot](S(0, kpt), s, S(f, f + n)),
          static_cast<uint8_t>(pk ? 4 * (kt % 4) : 0)};
}

void OperandBlocks::transfer_spill(const View& qd, const View& qs, int64_t fc, int64_t bf, int64_t kb,
                                   int64_t nt, bool write) {
  View hd = spill_data_
                .reshape({spill_data_.size(0) / 128, 128, spill_data_.size(1)})(S(kb * bk_, kb * bk_ + nt),
                                                                                all, S(fc, fc + bf))
                .permute({1, 0, 2});
  const int64_t ns = spec_.use_scale_packing ? (kb * bk_ + nt - 1) / 4 - (kb * bk_) / 4 + 1 : nt;
  View hs = spill_scales_
                .reshape({spill_scales_.size(0) / 128, 128, spill_scales_.size(1)})(
                    S(kb * slots_, kb * slots_ + ns), all, S(fc, fc + bf))
                .permute({1, 0, 2});
  View sd = qd(all, S(0, nt), S(0, bf)), ss = qs(all, S(0, ns), S(0, bf));
  if (write) {
    nki::dma_copy(hd, sd, {.engine = isa::Engine::POOL});
    nki::dma_copy(hs, ss, {.engine = isa::Engine::POOL});
  } else {
    nki::dma_copy(sd, hd);
    nki::dma_copy(ss, hs);
  }
}

}  // namespace trnsim::kernels::mxfp8
