#include "kernels/moe/fwd_reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/moe/moe_common.h"
#include "kernels/ref/matmul_ref.h"
#include "sim/base/error.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/scale_layout.h"

namespace trnsim::kernels::moe {
FwdInputs FwdInputs::from(const FwdParams& p,
                          const std::function<const tensor::HostTensor*(const std::string&)>& lookup) {
  const auto need = [&](const char* name) {
    const tensor::HostTensor* t = lookup(name);
    if (t == nullptr) throw Error(fmt::format("moe reference: input '{}' missing", name));
    return t;
  };
  FwdInputs in;
  in.hidden_states = need("hidden_states");
  in.expert_affinities_masked = need("expert_affinities_masked");
  in.gate_up_proj_weight = need("gate_up_proj_weight");
  in.down_proj_weight = need("down_proj_weight");
  in.token_position_to_id = need("token_position_to_id");
  in.block_to_expert = need("block_to_expert");
  if (p.gate_up_weight_scales) in.gate_up_weight_scales = need("gate_up_weight_scales");
  if (p.down_weight_scales) in.down_weight_scales = need("down_weight_scales");
  if (p.bias) {
    in.gate_and_up_proj_bias = need("gate_and_up_proj_bias");
    in.down_proj_bias = need("down_proj_bias");
  }
  return in;
}

FwdReference::FwdReference(const FwdParams& p, const FwdInputs& inputs) : p_(p), in_(inputs) {
  N_ = p.N(), B_ = p.block_size, I_ = p.I_TP, H_ = p.H;
  token_.assign(static_cast<size_t>(N_ * B_), -1);
  block_expert_.assign(static_cast<size_t>(N_), 0);
  by_row_.resize(static_cast<size_t>(p.rows()));
  if (p.no_indirect_load) {
    for (int64_t s = 0; s < N_ * B_; ++s) token_[s] = s;
  } else {
    const auto& tp = *in_.token_position_to_id;
    const auto& be = *in_.block_to_expert;
    for (int64_t b = 0; b < N_; ++b) block_expert_[b] = static_cast<int32_t>(be.int_value(b));
    for (int64_t s = 0; s < N_ * B_; ++s) {
      const int64_t t = tp.int_value(s);
      token_[s] = t >= 0 && t < p.rows() ? t : -1;
    }
  }
  for (int64_t s = 0; s < N_ * B_; ++s)
    if (token_[s] >= 0) by_row_[token_[s]].push_back(s);
}

double FwdReference::slot_flops(bool with_out) const {
  return 2.0 * (2.0 * H_ * 2 * I_ + (with_out ? 2.0 * I_ * H_ : 0.0));
}

void FwdReference::expert_weights(int64_t e, ExpertWeight& gu, ExpertWeight& down) const {
  const int64_t H = H_, I = I_;
  const auto& wg = *in_.gate_up_proj_weight;
  const auto& wd = *in_.down_proj_weight;
  // gate/up as [2I, H] (gate rows then up rows), down as [H, I]; BF16 read in place.
  gu = {nullptr, 0, {}, 2 * I, H};
  down = {nullptr, 0, {}, H, I};
  if (p_.gate_up_weight_scales) {
    const auto& sc = *in_.gate_up_weight_scales;
    const int64_t srows = sc.shape[1];
    dequantize_x4(wg.bytes.data() + e * (H / 4) * 2 * I * 4, sc.bytes.data() + e * srows * 2 * I, H, 2 * I,
                  srows != H / 4, p_.fp8, gu.decoded);
  } else if (p_.gate_up_weight_is_swizzled) {
    unswizzle_bf16(wg.bytes.data() + e * H * 2 * I * 2, H, 2 * I, gu.decoded);
  } else {
    gu.bf16 = &wg, gu.first = e * 2 * I * H;
  }
  if (p_.down_weight_scales) {
    const auto& sc = *in_.down_weight_scales;
    const int64_t srows = sc.shape[1];
    dequantize_x4(wd.bytes.data() + e * (I / 4) * H * 4, sc.bytes.data() + e * srows * H, I, H,
                  srows != I / 4, p_.fp8, down.decoded);
  } else if (p_.down_weight_is_swizzled) {
    unswizzle_bf16(wd.bytes.data() + e * I * H * 2, I, H, down.decoded);
  } else {
    down.bf16 = &wd, down.first = e * H * I;
  }
}

std::map<int64_t, std::array<SlotValues, 2>> FwdReference::evaluate(const std::vector<int64_t>& slots,
                                                                    const std::set<int64_t>& with_out) const {
  const int64_t H = H_, I = I_, E = p_.E;
  const auto& hidden = *in_.hidden_states;
  const auto& ea = *in_.expert_affinities_masked;
  const tensor::HostTensor* bias_gu = in_.gate_and_up_proj_bias;
  const tensor::HostTensor* bias_d = in_.down_proj_bias;
  const isa::DType cdt = p_.compute_dtype;
  const ClampLimits& cl = p_.clamp_limits;
  const bool pq_gu = p_.gate_up_weight_scales.has_value(), pq_d = p_.down_weight_scales.has_value();
  const bool on_h = p_.affinity_option == AffinityOption::OnH;

  std::map<int64_t, std::vector<int64_t>> by_expert;
  for (int64_t s : slots) by_expert[expert(s)].push_back(s);
  std::map<int64_t, std::array<SlotValues, 2>> res;
  ExpertWeight wgu, wd;
  for (const auto& [e, ss] : by_expert) {
    const int64_t n = static_cast<int64_t>(ss.size());
    expert_weights(e, wgu, wd);
    // The slots' hidden rows (zero for a skipped slot) and affinities.
    std::vector<float> x(static_cast<size_t>(n * H), 0.f);
    std::vector<double> a(static_cast<size_t>(n), 0.0);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t t = token_[ss[r]];
      if (t < 0) continue;
      bf16_span(hidden, t * H, H, &x[r * H]);
      a[r] = ea.value(p_.no_indirect_load ? t : t * E + e);
    }
    std::array<std::vector<double>, 2> xs{as_f64(x, n, H, false, p_.fp8), as_f64(x, n, H, true, p_.fp8)};
    // gate/up [n, 2I], the weight read in blocks of rows.
    std::array<std::vector<double>, 2> gu;
    for (int q = 0; q < 2; ++q)
      gemm_weight(xs[q], n, wgu, false, q == 1 && !pq_gu, p_.fp8, num::QuantScheme::WrapX, gu[q]);
    std::vector<int64_t> outs;  // rows (of ss) that need the down GEMM
    for (int64_t r = 0; r < n; ++r)
      if (with_out.count(ss[r])) outs.push_back(r);
    std::array<std::vector<float>, 2> sc_in{std::vector<float>(outs.size() * I),
                                            std::vector<float>(outs.size() * I)};
    for (int q = 0; q < 2; ++q) {
      for (int64_t r = 0; r < n; ++r) {
        SlotValues& v = res[ss[r]][q];
        v.gate.resize(I), v.up.resize(I), v.act.resize(I), v.inter.resize(I), v.scaled.resize(I);
        for (int64_t i = 0; i < I; ++i) {
          double g = gu[q][r * 2 * I + i], u = gu[q][r * 2 * I + I + i];
          if (bias_gu) g += bf16_at(*bias_gu, e * 2 * I + i), u += bf16_at(*bias_gu, e * 2 * I + I + i);
          if (cl.non_linear_clamp_lower_limit) g = std::max(g, *cl.non_linear_clamp_lower_limit);
          if (cl.non_linear_clamp_upper_limit) g = std::min(g, *cl.non_linear_clamp_upper_limit);
          if (cl.linear_clamp_lower_limit) u = std::max(u, *cl.linear_clamp_lower_limit);
          if (cl.linear_clamp_upper_limit) u = std::min(u, *cl.linear_clamp_upper_limit);
          if (q == 1) g = round_to(g, cdt), u = round_to(u, cdt);
          const double act = silu(g);
          double inter = act * u;
          if (q == 1) inter = round_to(inter, cdt);
          double scaled = on_h ? inter : inter * a[r];
          if (q == 1) scaled = round_to(scaled, cdt);
          v.gate[i] = g, v.up[i] = u, v.act[i] = q == 1 ? round_to(act, cdt) : act, v.inter[i] = inter,
          v.scaled[i] = scaled;
        }
      }
      for (size_t o = 0; o < outs.size(); ++o) {
        const SlotValues& v = res[ss[outs[o]]][q];
        for (int64_t i = 0; i < I; ++i)
          sc_in[q][o * I + i] = q == 1 ? static_cast<float>(round_to(v.scaled[i], isa::DType::BF16))
                                       : static_cast<float>(v.scaled[i]);
      }
    }
    if (outs.empty()) continue;
    const int64_t no = static_cast<int64_t>(outs.size());
    // The exact reference multiplies the FP64 scaled intermediate, not its FP32 copy.
    std::array<std::vector<double>, 2> ss64{std::vector<double>(static_cast<size_t>(no * I)),
                                            as_f64(sc_in[1], no, I, true, p_.fp8)};
    for (int64_t o = 0; o < no; ++o) std::copy_n(res[ss[outs[o]]][0].scaled.data(), I, &ss64[0][o * I]);
    std::vector<double> down;
    for (int q = 0; q < 2; ++q) {
      gemm_weight(ss64[q], no, wd, false, q == 1 && !pq_d, p_.fp8, num::QuantScheme::WrapX, down);
      for (int64_t o = 0; o < no; ++o)
        res[ss[outs[o]]][q].out.assign(down.begin() + o * H, down.begin() + (o + 1) * H);
    }
    for (int q = 0; q < 2; ++q)
      for (int64_t o = 0; o < no; ++o) {
        SlotValues& v = res[ss[outs[o]]][q];
        std::vector<double>& out = v.out;
        const double ar = a[outs[o]];
        if (on_h) v.down.resize(static_cast<size_t>(H));
        for (int64_t h = 0; h < H; ++h) {
          // AFFINITY_ON_H: the checkpoint is the down output cast to compute_dtype; the kernel multiplies
          // the FP32 accumulator by the affinity.
          if (on_h) v.down[h] = q == 1 ? round_to(out[h], cdt) : out[h], out[h] *= ar;
          if (bias_d) out[h] += ar * bf16_at(*bias_d, e * H + h);
          if (q == 1) out[h] = round_to(out[h], isa::DType::BF16);
        }
      }
  }
  return res;
}

void FwdReference::output_row(int64_t r, const std::map<int64_t, std::array<SlotValues, 2>>& v, double* exact,
                              double* kernel) const {
  const int64_t H = H_;
  const bool slabs = !p_.no_indirect_load && p_.cores() == 2;
  const bool accumulate = p_.is_tensor_update_accumulating && !p_.no_indirect_load;
  // [numerics][slab][h]: each core's slab takes its blocks in order (added, or overwritten).
  std::vector<double> slab(static_cast<size_t>(2 * 2 * H), 0.0);
  for (int64_t s : by_row_[r]) {
    const auto it = v.find(s);
    if (it == v.end() || it->second[0].out.empty())
      throw Error(fmt::format("moe reference: slot {} of row {} was not evaluated", s, r));
    const int64_t sl = slabs ? (s / B_) % 2 : 0;
    for (int q = 0; q < 2; ++q) {
      double* d = slab.data() + (2 * q + sl) * H;
      const std::vector<double>& c = it->second[q].out;
      for (int64_t h = 0; h < H; ++h) {
        const double x = accumulate ? d[h] + c[h] : c[h];
        d[h] = q == 1 ? round_to(x, isa::DType::BF16) : x;
      }
    }
  }
  for (int64_t h = 0; h < H; ++h) {
    exact[h] = slab[h] + slab[H + h];
    kernel[h] = slabs ? round_to(slab[2 * H + h] + slab[3 * H + h], isa::DType::BF16) : slab[2 * H + h];
  }
}

}  // namespace trnsim::kernels::moe
