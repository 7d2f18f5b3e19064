#include "kernels/moe/bwd_reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/moe/moe_common.h"
#include "kernels/ref/gemm_f64.h"
#include "sim/base/error.h"

namespace trnsim::kernels::moe {
namespace {

// Operand values [rows, K] for numerics q: as they are (exact) or MX-quantized along K (kernel; the values
// are BF16-representable there, so the FP32 copy is exact).
std::vector<double> prep(const std::vector<double>& v, int64_t rows, int64_t K, int q, num::Fp8Format fmt,
                         num::QuantScheme scheme) {
  if (q == 0 || rows == 0) return v;
  std::vector<float> f(v.begin(), v.end());
  return as_f64(f, rows, K, true, fmt, scheme);
}

std::vector<double> widen(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// [cols, rows] of a row-major [rows, cols], in tiles that stay in the cache.
template <class T>
std::vector<T> transposed(const std::vector<T>& v, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  std::vector<T> o(v.size());
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) o[c * rows + r] = v[r * cols + c];
    }
  return o;
}

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

}  // namespace

BwdInputs BwdInputs::from(const BwdParams& p,
                          const std::function<const tensor::HostTensor*(const std::string&)>& lookup,
                          bool for_recipe) {
  const auto need = [&](const char* name) {
    const tensor::HostTensor* t = lookup(name);
    if (t == nullptr) throw Error(fmt::format("moe backward reference: input '{}' missing", name));
    return t;
  };
  BwdInputs in;
  in.hidden_states = need("hidden_states");
  in.expert_affinities_masked = need("expert_affinities_masked");
  in.gate_up_proj_weight = need("gate_up_proj_weight");
  in.token_position_to_id = need("token_position_to_id");
  in.block_to_expert = need("block_to_expert");
  if (p.num_valid_tokens) in.num_valid_tokens = need("num_valid_tokens");
  if (p.gate_up_weight_scales) in.gate_up_weight_scales = need("gate_up_weight_scales");
  // The recipe needs the down weight for down_proj_act_checkpoint only.
  if (for_recipe && !p.checkpoint_config.save_down_proj_act) return in;
  in.down_proj_weight = need("down_proj_weight");
  if (p.down_weight_scales) in.down_weight_scales = need("down_weight_scales");
  if (for_recipe) return in;
  in.output_hidden_states_grad = need("output_hidden_states_grad");
  const CheckpointConfig& c = p.checkpoint_config;
  if (c.save_gate_up_proj_act) in.gate_up_ckpt = need("gate_up_proj_act_checkpoint_T");
  if (c.save_scaled_intermediate) in.scaled_ckpt = need("scaled_intermediate_checkpoint_T");
  if (c.save_gate_act) in.gate_act_ckpt = need("gate_act_checkpoint_T");
  if (c.save_intermediate) in.inter_ckpt = need("intermediate_checkpoint_T");
  if (c.save_down_proj_act) in.down_act_ckpt = need("down_proj_act_checkpoint");
  return in;
}

BwdReference::BwdReference(const BwdParams& p, const BwdInputs& inputs) : p_(p), in_(inputs) {
  N_ = p.N(), B_ = p.block_size, I_ = p.I_TP, H_ = p.H;
  token_.assign(static_cast<size_t>(N_ * B_), -1);
  block_expert_.assign(static_cast<size_t>(N_), 0);
  by_row_.resize(static_cast<size_t>(p.rows()));
  by_expert_.resize(static_cast<size_t>(p.E));
  const auto& tp = *in_.token_position_to_id;
  const auto& be = *in_.block_to_expert;
  // Dense mode: block b holds tokens [b B, (b + 1) B), those from num_valid_tokens on skipped.
  const int64_t valid = in_.num_valid_tokens ? in_.num_valid_tokens->int_value(0) : p.T;
  for (int64_t b = 0; b < N_; ++b) {
    block_expert_[b] = p.single_expert_dense ? 0 : static_cast<int32_t>(be.int_value(b));
    by_expert_[block_expert_[b]].push_back(b);
  }
  for (int64_t s = 0; s < N_ * B_; ++s) {
    const int64_t t = p.single_expert_dense ? (s < valid ? s : -1) : tp.int_value(s);
    token_[s] = t >= 0 && t < p.rows() ? t : -1;
    if (token_[s] >= 0) by_row_[token_[s]].push_back(s);
  }
}

double BwdReference::slot_flops(bool with_dx) const {
  const double gu = in_.gate_up_ckpt ? 0.0 : 2.0 * H_ * 2 * I_;
  return 2.0 * (gu + 2.0 * I_ * H_ + (with_dx ? 2.0 * 2 * I_ * H_ : 0.0));
}

double BwdReference::expert_flops(int64_t e) const {
  const double blocks = static_cast<double>(by_expert_[e].size());
  return blocks * (static_cast<double>(B_) * slot_flops(false) + 2.0 * 2.0 * B_ * 3.0 * I_ * H_);
}

void BwdReference::weights(int64_t e, Weights& w) const {
  const int64_t H = H_, I = I_;
  w.gu = {nullptr, 0, {}, H, 2 * I};
  w.down = {nullptr, 0, {}, I, H};
  // Pre-quantized: x4 [E, K/4, F] one byte per element, scales [E, rows, F] (packed when rows != K/4);
  // dequantize_x4 gives [F, K] row-major: gate/up [H, 2I] (K = 2I), down [I, H] (K = H). BF16: read in place.
  if (const tensor::HostTensor* sc = in_.gate_up_weight_scales) {
    const int64_t rows = sc->shape[1];
    dequantize_x4(in_.gate_up_proj_weight->bytes.data() + e * 2 * I * H, sc->bytes.data() + e * rows * H,
                  2 * I, H, rows != 2 * I / 4, p_.fp8, w.gu.decoded, p_.quant_scheme());
  } else {
    w.gu.bf16 = in_.gate_up_proj_weight, w.gu.first = e * H * 2 * I;
  }
  if (!in_.down_proj_weight) return;
  if (const tensor::HostTensor* sc = in_.down_weight_scales) {
    const int64_t rows = sc->shape[1];
    dequantize_x4(in_.down_proj_weight->bytes.data() + e * H * I, sc->bytes.data() + e * rows * I, H, I,
                  rows != H / 4, p_.fp8, w.down.decoded, p_.quant_scheme());
  } else {
    w.down.bf16 = in_.down_proj_weight, w.down.first = e * I * H;
  }
}

double BwdReference::affinity(int64_t e, int64_t slot) const {
  const int64_t t = token_[slot];
  return t < 0 ? 0.0 : in_.expert_affinities_masked->value(t * p_.E + e);
}

std::vector<double> BwdReference::dy_rows(int64_t e, const std::vector<int64_t>& slots, int q) const {
  std::vector<double> dy = widen(rows_of(*in_.output_hidden_states_grad, slots));
  if (!p_.on_h()) return dy;
  const int64_t H = H_;
  for (size_t r = 0; r < slots.size(); ++r) {
    const double a = affinity(e, slots[r]);
    for (int64_t h = 0; h < H; ++h) {
      double& v = dy[r * H + h];
      v = q == 1 ? round_to(v * a, isa::DType::BF16) : v * a;
    }
  }
  return dy;
}

void BwdReference::forward_down(int64_t e, const std::vector<float>& inter, int64_t n,
                                std::vector<double>& out) const {
  Weights w;
  weights(e, w);
  const int64_t I = I_;
  // W_down^T [H, I], quantized along I.
  gemm_weight(as_f64(inter, n, I, true, p_.fp8), n, w.down, true, true, p_.fp8, num::QuantScheme::WrapX, out);
  for (double& v : out) v = round_to(v, p_.compute_dtype);
}

std::vector<float> BwdReference::rows_of(const tensor::HostTensor& t,
                                         const std::vector<int64_t>& slots) const {
  const int64_t n = static_cast<int64_t>(slots.size()), H = H_;
  std::vector<float> x(static_cast<size_t>(n * H), 0.f);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t tok = token_[slots[r]];
    if (tok < 0) continue;
    bf16_span(t, tok * H, H, &x[r * H]);
  }
  return x;
}

void BwdReference::forward_gate_up(int64_t e, const std::vector<int64_t>& slots, int q,
                                   std::vector<double>& gu) const {
  Weights w;
  weights(e, w);
  gate_up(e, slots, q, w, gu, num::QuantScheme::WrapX);
}

void BwdReference::gate_up(int64_t e, const std::vector<int64_t>& slots, int q, const Weights& w,
                           std::vector<double>& gu, num::QuantScheme scheme) const {
  const int64_t n = static_cast<int64_t>(slots.size()), I = I_, H = H_, B = B_;
  gu.assign(static_cast<size_t>(n * 2 * I), 0.0);
  if (in_.gate_up_ckpt) {
    for (int64_t r = 0; r < n; ++r) {
      const int64_t b = slots[r] / B, j = slots[r] % B;
      if (undefined(slots[r])) continue;
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < I; ++i)
          gu[r * 2 * I + h * I + i] = in_.gate_up_ckpt->value(((b * 2 + h) * I + i) * B + j);
    }
    return;
  }
  (void)e;
  // The forward's GEMMs: x [n, H] by W^T [2I, H], both quantized along H for the kernel numerics.
  const auto x = as_f64(rows_of(*in_.hidden_states, slots), n, H, q == 1, p_.fp8, scheme);
  gemm_weight(x, n, w.gu, true, q == 1, p_.fp8, scheme, gu);
  const ClampLimits& cl = p_.clamp_limits;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < I; ++i) {
      double& g = gu[r * 2 * I + i];
      double& u = gu[r * 2 * I + I + i];
      if (cl.non_linear_clamp_lower_limit) g = std::max(g, *cl.non_linear_clamp_lower_limit);
      if (cl.non_linear_clamp_upper_limit) g = std::min(g, *cl.non_linear_clamp_upper_limit);
      if (cl.linear_clamp_lower_limit) u = std::max(u, *cl.linear_clamp_lower_limit);
      if (cl.linear_clamp_upper_limit) u = std::min(u, *cl.linear_clamp_upper_limit);
      if (q == 1) g = round_to(g, p_.compute_dtype), u = round_to(u, p_.compute_dtype);
    }
}

void BwdReference::phase1(int64_t e, const std::vector<int64_t>& slots, int q, const Weights& w,
                          std::vector<double>& dgu, std::vector<double>& scaled,
                          std::vector<double>& dea) const {
  const int64_t n = static_cast<int64_t>(slots.size()), I = I_, H = H_, B = B_;
  const bool on_h = p_.on_h();
  const auto dy = prep(dy_rows(e, slots, q), n, H, q, p_.fp8, p_.quant_scheme());
  std::vector<double> dint, gu;
  gemm_weight(dy, n, w.down, false, q == 1 && !in_.down_weight_scales, p_.fp8, p_.quant_scheme(), dint);
  gate_up(e, slots, q, w, gu, p_.quant_scheme());
  dgu.assign(static_cast<size_t>(n * 2 * I), 0.0);
  scaled.assign(static_cast<size_t>(n * I), 0.0);
  dea.assign(static_cast<size_t>(n), 0.0);
  const ClampLimits& cl = p_.clamp_limits;
  const bool bf16_chain = q == 1 && p_.library();
  const auto ckpt = [&](const tensor::HostTensor* t, int64_t slot, int64_t i) {
    return undefined(slot) ? 0.0 : t->value(((slot / B) * I + i) * B + slot % B);
  };
  // AFFINITY_ON_H: dEA from the down output's checkpoint and the unscaled dY rows.
  const std::vector<float> dy_raw =
      on_h ? rows_of(*in_.output_hidden_states_grad, slots) : std::vector<float>{};
  for (int64_t r = 0; r < n; ++r) {
    const int64_t s = slots[r];
    const double a = affinity(e, s);
    double acc = 0;
    if (on_h && !undefined(s))
      for (int64_t h = 0; h < H; ++h) acc += in_.down_act_ckpt->value(s * H + h) * dy_raw[r * H + h];
    for (int64_t i = 0; i < I; ++i) {
      const double g = gu[r * 2 * I + i], u = gu[r * 2 * I + I + i], d = dint[r * I + i];
      const double sig = sigmoid(g);
      double silu = in_.gate_act_ckpt ? ckpt(in_.gate_act_ckpt, s, i) : g * sig;
      double dsilu = sig * (1.0 + g * (1.0 - sig));
      // nki_library in the kernel's numerics: silu and silu' by ACT in bfloat16, silu' up and silu up
      // rounded to bfloat16 too.
      if (bf16_chain) silu = round_to(silu, isa::DType::BF16), dsilu = round_to(dsilu, isa::DType::BF16);
      double inter = in_.inter_ckpt ? ckpt(in_.inter_ckpt, s, i) : silu * u;
      const double dsilu_u = bf16_chain ? round_to(dsilu * u, isa::DType::BF16) : dsilu * u;
      if (bf16_chain) inter = round_to(inter, isa::DType::BF16);
      if (!on_h) acc += d * inter;
      const double da = on_h ? d : d * a;
      double dg = da * dsilu_u, du = da * silu;
      if (cl.non_linear_clamp_lower_limit && !(g > *cl.non_linear_clamp_lower_limit)) dg = 0;
      if (cl.non_linear_clamp_upper_limit && !(g < *cl.non_linear_clamp_upper_limit)) dg = 0;
      if (cl.linear_clamp_lower_limit && !(u > *cl.linear_clamp_lower_limit)) du = 0;
      if (cl.linear_clamp_upper_limit && !(u < *cl.linear_clamp_upper_limit)) du = 0;
      double sc = on_h ? inter : in_.scaled_ckpt && !p_.library() ? ckpt(in_.scaled_ckpt, s, i) : inter * a;
      if (q == 1) {
        dg = round_to(dg, isa::DType::BF16), du = round_to(du, isa::DType::BF16);
        sc = round_to(sc, isa::DType::BF16);
      }
      dgu[r * 2 * I + i] = dg, dgu[r * 2 * I + I + i] = du, scaled[r * I + i] = sc;
    }
    // nki_library stores the affinity gradient through a bfloat16 tile.
    dea[r] = bf16_chain ? round_to(acc, isa::DType::BF16) : acc;
  }
}

std::map<int64_t, std::array<SlotGrad, 2>> BwdReference::evaluate(const std::vector<int64_t>& slots,
                                                                  bool with_dx) const {
  const int64_t H = H_, I = I_;
  std::map<int64_t, std::vector<int64_t>> by_e;
  for (int64_t s : slots) by_e[expert(s)].push_back(s);
  std::map<int64_t, std::array<SlotGrad, 2>> res;
  Weights w;
  for (const auto& [e, ss] : by_e) {
    const int64_t n = static_cast<int64_t>(ss.size());
    weights(e, w);
    for (int q = 0; q < 2; ++q) {
      std::vector<double> dgu, scaled, dea, dx;
      phase1(e, ss, q, w, dgu, scaled, dea);
      if (with_dx) {
        // The weight as it is (exact, or pre-quantized), else MX-quantized along 2I.
        const bool quantize = q == 1 && !in_.gate_up_weight_scales;
        gemm_weight(prep(dgu, n, 2 * I, q, p_.fp8, p_.quant_scheme()), n, w.gu, false, quantize, p_.fp8,
                    p_.quant_scheme(), dx);
      }
      for (int64_t r = 0; r < n; ++r) {
        SlotGrad& g = res[ss[r]][q];
        g.dea = dea[r];
        if (!with_dx) continue;
        g.dx.assign(dx.begin() + r * H, dx.begin() + (r + 1) * H);
        if (q == 1)
          for (double& v : g.dx) v = round_to(v, isa::DType::BF16);
      }
    }
  }
  return res;
}

void BwdReference::dx_row(int64_t r, const std::map<int64_t, std::array<SlotGrad, 2>>& v, double* exact,
                          double* kernel) const {
  const int64_t H = H_;
  std::fill(exact, exact + H, 0.0);
  std::fill(kernel, kernel + H, 0.0);
  for (int64_t s : by_row_[r]) {  // increasing slots: block order
    const auto it = v.find(s);
    if (it == v.end() || it->second[0].dx.empty())
      throw Error(fmt::format("moe backward reference: slot {} of row {} was not evaluated", s, r));
    for (int64_t h = 0; h < H; ++h) {
      exact[h] += it->second[0].dx[h];
      kernel[h] = p_.accumulate_hidden_states_grad
                      ? round_to(kernel[h] + it->second[1].dx[h], isa::DType::BF16)
                      : it->second[1].dx[h];
    }
  }
}

void BwdReference::expert_grads(int64_t e, std::array<std::vector<double>, 2>& dw_gu,
                                std::array<std::vector<double>, 2>& dw_down,
                                std::array<std::vector<double>, 2>* db_gu,
                                std::array<std::vector<double>, 2>* db_down) const {
  for (int q = 0; q < 2; ++q)
    expert_grads(e, q, dw_gu[q], dw_down[q], db_gu ? &(*db_gu)[q] : nullptr,
                 db_down ? &(*db_down)[q] : nullptr);
}

void BwdReference::expert_grads(int64_t e, int q, std::vector<double>& dw_gu, std::vector<double>& dw_down,
                                std::vector<double>* db_gu, std::vector<double>* db_down) const {
  const int64_t H = H_, I = I_, B = B_;
  dw_gu.assign(static_cast<size_t>(H * 2 * I), 0.0);
  dw_down.assign(static_cast<size_t>(I * H), 0.0);
  if (db_gu) db_gu->assign(static_cast<size_t>(2 * I), 0.0);
  if (db_down) db_down->assign(static_cast<size_t>(H), 0.0);
  if (by_expert_[e].empty()) return;
  Weights w;
  weights(e, w);
  std::vector<int64_t> ss(static_cast<size_t>(B));
  for (int64_t b : by_expert_[e]) {
    for (int64_t j = 0; j < B; ++j) ss[j] = b * B + j;
    const auto xt = transposed(widen(rows_of(*in_.hidden_states, ss)), B, H);  // [H, B]
    const auto dyt = transposed(dy_rows(e, ss, q), B, H);  // [H, B], as Phase 4 reads them
    std::vector<double> dgu, scaled, dea, y;
    phase1(e, ss, q, w, dgu, scaled, dea);
    // acc [rows, c] += a [rows, B] b [c, B]^T (kernel: the block's product rounded to bfloat16, then the
    // sum), a block of rows of the product at a time (each element summed as one product's).
    const auto add = [&](std::vector<double>& acc, const std::vector<double>& a, const std::vector<double>& b,
                         int64_t rows, int64_t c) {
      const int64_t step = weight_block_rows(c);
      for (int64_t r0 = 0; r0 < rows; r0 += step) {
        const int64_t rc = std::min(step, rows - r0);
        y.resize(static_cast<size_t>(rc * c));
        ref::gemm_nt_f64(a.data() + r0 * B, b.data(), rc, c, B, y.data());
        double* d = acc.data() + r0 * c;
        for (int64_t i = 0; i < rc * c; ++i)
          d[i] = q == 1 ? round_to(d[i] + round_to(y[i], isa::DType::BF16), isa::DType::BF16) : d[i] + y[i];
      }
    };
    // Phases 3 and 4 contract over the block's tokens: the operands quantized along B.
    add(dw_gu, prep(xt, H, B, q, p_.fp8, p_.quant_scheme()),
        prep(transposed(dgu, B, 2 * I), 2 * I, B, q, p_.fp8, p_.quant_scheme()), H, 2 * I);
    add(dw_down, prep(transposed(scaled, B, I), I, B, q, p_.fp8, p_.quant_scheme()),
        prep(dyt, H, B, q, p_.fp8, p_.quant_scheme()), I, H);
    if (db_gu) {
      std::vector<double> sum(static_cast<size_t>(2 * I), 0.0);
      for (int64_t r = 0; r < B; ++r)
        for (int64_t k = 0; k < 2 * I; ++k) sum[k] += dgu[r * 2 * I + k];
      for (int64_t k = 0; k < 2 * I; ++k) {
        double& acc = (*db_gu)[k];
        acc = q == 1 ? round_to(acc + sum[k], p_.compute_dtype) : acc + sum[k];
      }
    }
    if (db_down) {
      std::vector<double> sum(static_cast<size_t>(H), 0.0);
      for (int64_t r = 0; r < B; ++r) {
        if (token_[ss[r]] < 0) continue;
        const double a = affinity(e, ss[r]);  // bias with AFFINITY_ON_H is rejected
        for (int64_t h = 0; h < H; ++h) sum[h] += a * dyt[h * B + r];
      }
      for (int64_t h = 0; h < H; ++h) {
        double& acc = (*db_down)[h];
        acc = q == 1 ? round_to(acc + sum[h], p_.compute_dtype) : acc + sum[h];
      }
    }
  }
}

}  // namespace trnsim::kernels::moe
