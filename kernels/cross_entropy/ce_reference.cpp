#include "kernels/cross_entropy/ce_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>

#include "kernels/cross_entropy/ce_lib.h"
#include "sim/isa/alu.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/host_threads.h"

namespace trnsim::kernels::ce {

using isa::ActFunc;
using isa::AluOp;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double shift_of(double m) {
  return m == -kInf ? 0.0 : m;
}

// The row's statistics in FP64: max, sum of exp relative to the shift, argmax, NaN presence, sum of logits.
struct RowStats {
  double m = -kInf, d = 0, sx = 0;
  int32_t argmax = 0;
  bool nan = false;
};

// e (optional, V values) receives exp(x_i - shift), the terms of the sum. bits (optional): the row as BF16
// bits (x their exact FP32 values), to take each distinct value's exp once from `memo`.
RowStats row_stats(const float* x, int64_t V, double* e = nullptr, const uint16_t* bits = nullptr,
                   Bf16Memo<double>* memo = nullptr) {
  RowStats r;
  double best = -kInf;
  for (int64_t i = 0; i < V; ++i) {
    const double v = x[i];
    if (std::isnan(v)) {
      r.nan = true;
      continue;
    }
    if (v > best) {
      best = v;
      r.argmax = static_cast<int32_t>(i);
    }
    r.sx += v;
  }
  r.m = r.nan ? std::numeric_limits<double>::quiet_NaN() : best;
  const double s = shift_of(r.m);
  if (bits != nullptr && memo != nullptr) {
    memo->next_row();
    const auto f = [s](uint16_t b) { return std::exp(static_cast<double>(num::bf16_to_f32(b)) - s); };
    for (int64_t i = 0; i < V; ++i) {
      const double t = memo->get(bits[i], f);
      if (e != nullptr) e[i] = t;
      r.d += t;
    }
  } else {
    for (int64_t i = 0; i < V; ++i) {
      const double t = std::exp(static_cast<double>(x[i]) - s);
      if (e != nullptr) e[i] = t;
      r.d += t;
    }
  }
  if (r.nan) r.sx = r.m;
  return r;
}

bool is_valid(int32_t t, const CommonParams& p) {
  return t != p.ignore_idx;
}

// Row r of BF16 logits as bits, or null for FP32 logits.
const uint16_t* bf16_row(const tensor::HostTensor& logits, int64_t r) {
  if (logits.dtype != isa::DType::BF16) return nullptr;
  return reinterpret_cast<const uint16_t*>(logits.bytes.data()) + r * logits.shape[1];
}

}  // namespace

void parallel_rows(int64_t n, int threads, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t k = std::max<int64_t>(1, std::min<int64_t>(threads, n));
  if (k <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  num::run_parts(static_cast<int>(k), [&](int t) { fn(n * t / k, n * (t + 1) / k); });
}

int reference_threads() {
  return static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 16));
}

void logits_row(const tensor::HostTensor& logits, int64_t r, float* out) {
  const int64_t V = logits.shape[1];
  if (logits.dtype == isa::DType::BF16) {
    const auto* b = reinterpret_cast<const uint16_t*>(logits.bytes.data()) + r * V;
    for (int64_t j = 0; j < V; ++j) out[j] = num::bf16_to_f32(b[j]);
  } else {
    std::memcpy(out, logits.bytes.data() + r * V * 4, static_cast<size_t>(V) * 4);
  }
}

FwdReference fwd_reference(const tensor::HostTensor& x, const std::vector<int32_t>& target,
                           const CommonParams& p, int threads) {
  FwdReference r;
  const int64_t R = p.rows, V = p.V;
  r.loss.resize(R);
  r.row_max.resize(R);
  r.row_sumexp.resize(R);
  r.argmax.resize(R);
  r.has_nan.resize(R);
  const double ls = p.label_smoothing;
  parallel_rows(R, threads, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(V));
    Bf16Memo<double> memo;
    for (int64_t i = r0; i < r1; ++i) {
      logits_row(x, i, row.data());
      const RowStats st = row_stats(row.data(), V, nullptr, bf16_row(x, i), &memo);
      r.row_max[i] = st.m;
      r.row_sumexp[i] = st.d;
      r.argmax[i] = st.argmax;
      r.has_nan[i] = st.nan;
      const int32_t t = target[i];
      if (!is_valid(t, p)) {
        r.loss[i] = 0;
        continue;
      }
      const double xy = t >= 0 && t < V ? static_cast<double>(row[t]) : -kInf;
      const double lse = shift_of(st.m) + std::log(st.d);
      double l = lse - (1.0 - ls) * xy;
      if (ls > 0) l -= ls / static_cast<double>(V) * st.sx;
      r.loss[i] = l;
    }
  });
  double sum = 0;
  for (int64_t i = 0; i < R; ++i) {
    sum += r.loss[i];
    r.valid += is_valid(target[i], p) ? 1 : 0;
  }
  r.mean = sum / static_cast<double>(std::max<int64_t>(r.valid, 1));
  return r;
}

void grad_reference(const tensor::HostTensor& x, const std::vector<int32_t>& target,
                    const std::vector<float>& grad_output, const CommonParams& p, int64_t r0, int64_t r1,
                    int threads, double* g) {
  const int64_t V = p.V;
  int64_t valid = 0;
  for (int64_t i = 0; i < p.rows; ++i) valid += is_valid(target[i], p) ? 1 : 0;
  const double c = p.reduce_loss ? 1.0 / static_cast<double>(std::max<int64_t>(valid, 1)) : 1.0;
  const double ls = p.label_smoothing, eps = ls / static_cast<double>(V);
  parallel_rows(r1 - r0, threads, [&](int64_t a, int64_t b) {
    std::vector<float> row(static_cast<size_t>(V));
    Bf16Memo<double> memo;
    for (int64_t i = r0 + a; i < r0 + b; ++i) {
      double* out = &g[(i - r0) * V];
      const int32_t t = target[i];
      logits_row(x, i, row.data());
      // out holds exp(x - shift) for the loop below.
      const RowStats st = row_stats(row.data(), V, out, bf16_row(x, i), &memo);
      if (!is_valid(t, p)) {
        // PyTorch's softmax backward with a zero upstream gradient: 0 for a finite row maximum, NaN for a
        // row holding NaN or +Inf and for an all -inf row (their softmax is NaN).
        std::fill(out, out + V, std::isfinite(st.m) ? 0.0 : std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      const double gc = static_cast<double>(grad_output.size() == 1 ? grad_output[0] : grad_output[i]) * c;
      for (int64_t j = 0; j < V; ++j) {
        const double sm = out[j] / st.d;
        out[j] = gc * (sm - eps - (j == t ? 1.0 - ls : 0.0));
      }
    }
  });
}

std::vector<double> grad_reference(const tensor::HostTensor& x, const std::vector<int32_t>& target,
                                   const std::vector<float>& grad_output, const CommonParams& p, int64_t r0,
                                   int64_t r1, int threads) {
  std::vector<double> g(static_cast<size_t>((r1 - r0) * p.V));
  grad_reference(x, target, grad_output, p, r0, r1, threads, g.data());
  return g;
}

GradEmulation::GradEmulation(const tensor::HostTensor& x, const std::vector<int32_t>& target,
                             const std::vector<float>& row_max, const std::vector<float>& row_sumexp,
                             const std::vector<float>& grad_output, const CommonParams& p)
    : x_(x), target_(target), row_max_(row_max), row_sumexp_(row_sumexp), grad_output_(grad_output), p_(p) {
  const auto alu = isa::alu_f32;
  // c: 1 / max(count, 1) through the kernel's ops (an exact count), or 1.
  if (p.reduce_loss) {
    float cnt = 0;
    for (int64_t i = 0; i < p.rows; ++i)
      cnt += alu(AluOp::NotEqual, static_cast<float>(target[i]), static_cast<float>(p.ignore_idx));
    c_ = alu(AluOp::Divide, 1.0f, alu(AluOp::Max, cnt, 1.0f));
  }
  // A scalar grad_output reaches every partition through a ones matmul: fma(1, g, +0).
  scalar_ = grad_output.size() == 1;
  g_scalar_ = scalar_ ? std::fma(1.0f, grad_output[0], 0.0f) : 0.0f;
}

void GradEmulation::rows(int64_t r0, int64_t r1, uint16_t* out) const {
  const CommonParams& p = p_;
  const int64_t V = p.V;
  const Consts cs = consts(p);
  const float inf = std::numeric_limits<float>::infinity();
  const auto alu = isa::alu_f32;
  const float c = c_;
  std::vector<float> row;
  Bf16Memo<uint16_t> memo;
  for (int64_t i = r0; i < r1; ++i) {
    const uint16_t* xb = bf16_row(x_, i);
    if (xb == nullptr) {
      row.resize(static_cast<size_t>(V));
      logits_row(x_, i, row.data());
    }
    // ce_lib.cpp row_factors, operation by operation.
    const float m = row_max_[i], d = row_sumexp_[i];
    const float s = alu(AluOp::NotEqual, m, -inf) != 0.f ? m : 0.0f;
    const float nb = alu(AluOp::Multiply, s, -1.0f);
    const float valid =
        alu(AluOp::NotEqual, static_cast<float>(target_[i]), static_cast<float>(p.ignore_idx));
    const float b = valid != 0.f ? nb : alu(AluOp::Add, alu(AluOp::Multiply, m, 0.0f), -inf);
    const float gi = scalar_ ? g_scalar_ : grad_output_[i];
    const float gc = valid != 0.f ? alu(AluOp::Multiply, gi, c) : 0.0f;
    const float gcd = valid != 0.f ? alu(AluOp::Multiply, gc, alu(AluOp::Divide, 1.0f, d)) : 0.0f;
    const float h = alu(AluOp::Multiply, gc, cs.neg_eps);
    const float hy = alu(AluOp::Add, h, alu(AluOp::Multiply, gc, -cs.one_minus_ls));
    const int64_t y = valid != 0.f ? target_[i] : -1;
    // q = exp(x * 1 + b) (act_f32's Exp), q * gcd, + h (hy at the target), rounded to BF16.
    uint16_t* o = out + (i - r0) * V;
    if (xb != nullptr) {
      // BF16 logits: every element but the target is a function of its logit's bits, taken once per
      // distinct value of the row.
      memo.next_row();
      const auto f = [&](uint16_t bits) {
        const float q = std::exp(num::bf16_to_f32(bits) * 1.0f + b);
        return num::f32_to_bf16(alu(AluOp::Add, alu(AluOp::Multiply, q, gcd), h));
      };
      for (int64_t j = 0; j < V; ++j) o[j] = memo.get(xb[j], f);
      if (y >= 0 && y < V) {
        const float q = std::exp(num::bf16_to_f32(xb[y]) * 1.0f + b);
        o[y] = num::f32_to_bf16(alu(AluOp::Add, alu(AluOp::Multiply, q, gcd), hy));
      }
      continue;
    }
    // FP32 logits: whole-row ALU loops, element for element the same operations.
    float* q = row.data();
    for (int64_t j = 0; j < V; ++j) q[j] = std::exp(q[j] * 1.0f + b);
    isa::alu_f32_row(AluOp::Multiply, q, gcd, false, static_cast<size_t>(V));
    const float qy = y >= 0 && y < V ? q[y] : 0.0f;
    isa::alu_f32_row(AluOp::Add, q, h, false, static_cast<size_t>(V));
    if (y >= 0 && y < V) q[y] = alu(AluOp::Add, qy, hy);
    for (int64_t j = 0; j < V; ++j) o[j] = num::f32_to_bf16(q[j]);
  }
}

std::vector<uint16_t> emulate_grad_bf16(const tensor::HostTensor& x, const std::vector<int32_t>& target,
                                        const std::vector<float>& row_max,
                                        const std::vector<float>& row_sumexp,
                                        const std::vector<float>& grad_output, const CommonParams& p,
                                        int threads) {
  const GradEmulation em(x, target, row_max, row_sumexp, grad_output, p);
  std::vector<uint16_t> out(static_cast<size_t>(p.rows * p.V));
  parallel_rows(p.rows, threads, [&](int64_t r0, int64_t r1) { em.rows(r0, r1, &out[r0 * p.V]); });
  return out;
}

}  // namespace trnsim::kernels::ce
