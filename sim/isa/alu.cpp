#include "sim/isa/alu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

namespace trnsim::isa {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

int32_t wrap32(int64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
}

int64_t to_i64(float v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2e18f) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2e18f) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

}  // namespace

bool alu_is_bitwise(AluOp op) {
  return op == AluOp::BitwiseAnd || op == AluOp::BitwiseOr || op == AluOp::BitwiseXor ||
         op == AluOp::ShiftLeft || op == AluOp::ShiftRight;
}

namespace {

// The bodies of alu_f32 / alu_i32, inlined where the op is a constant (the row loops below).
[[gnu::always_inline]] inline int64_t alu_i32_body(AluOp op, int64_t a64, int64_t b64);

[[gnu::always_inline]] inline float alu_f32_body(AluOp op, float a, float b) {
  switch (op) {
    case AluOp::Bypass:
      return a;
    case AluOp::Add:
      return a + b;
    case AluOp::Subtract:
      return a - b;
    case AluOp::Multiply:
      return a * b;
    case AluOp::Divide:
      return a / b;
    case AluOp::Max:
      return std::isnan(a) || std::isnan(b) ? kNaN : (a > b ? a : b);
    case AluOp::Min:
      return std::isnan(a) || std::isnan(b) ? kNaN : (a < b ? a : b);
    case AluOp::AbsMax:
      return std::isnan(a) || std::isnan(b) ? kNaN : std::fabs(std::fabs(a) > std::fabs(b) ? a : b);
    case AluOp::Pow:
      // FP64 pow rounded once to FP32: the correctly rounded power (x * x for b = 2, as NumPy's square), not
      // the host's powf (glibc 2.36's is one ulp off x * x for some x, and its x86_64 build picks one by
      // CPU).
      return static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b)));
    case AluOp::IsEqual:
      return a == b ? 1.f : 0.f;
    case AluOp::NotEqual:
      return a != b ? 1.f : 0.f;
    case AluOp::IsGt:
      return a > b ? 1.f : 0.f;
    case AluOp::IsGe:
      return a >= b ? 1.f : 0.f;
    case AluOp::IsLt:
      return a < b ? 1.f : 0.f;
    case AluOp::IsLe:
      return a <= b ? 1.f : 0.f;
    case AluOp::LogicalAnd:
      return (a != 0.f && b != 0.f) ? 1.f : 0.f;
    case AluOp::LogicalOr:
      return (a != 0.f || b != 0.f) ? 1.f : 0.f;
    case AluOp::Abs:
      return std::fabs(a);
    default:
      return static_cast<float>(alu_i32_body(op, to_i64(a), to_i64(b)));
  }
}

// The ops that only order or test a and b (maximum, minimum, comparisons, logical and/or), on int32 values
// (alu_i32) or on the exact values of int32/uint32 elements (alu_int_exact); other ops give 0.
template <typename T>
[[gnu::always_inline]] inline int64_t alu_order_body(AluOp op, T a, T b) {
  switch (op) {
    case AluOp::Max:
      return a > b ? a : b;
    case AluOp::Min:
      return a < b ? a : b;
    case AluOp::IsEqual:
      return a == b;
    case AluOp::NotEqual:
      return a != b;
    case AluOp::IsGt:
      return a > b;
    case AluOp::IsGe:
      return a >= b;
    case AluOp::IsLt:
      return a < b;
    case AluOp::IsLe:
      return a <= b;
    case AluOp::LogicalAnd:
      return a != 0 && b != 0;
    case AluOp::LogicalOr:
      return a != 0 || b != 0;
    default:
      return 0;
  }
}

[[gnu::always_inline]] inline int64_t alu_i32_body(AluOp op, int64_t a64, int64_t b64) {
  const int32_t a = wrap32(a64), b = wrap32(b64);
  const auto ua = static_cast<uint32_t>(a), ub = static_cast<uint32_t>(b);
  switch (op) {
    case AluOp::Bypass:
      return a;
    case AluOp::Add:
      return wrap32(int64_t{a} + b);
    case AluOp::Subtract:
      return wrap32(int64_t{a} - b);
    case AluOp::Multiply:
      return wrap32(int64_t{a} * b);
    case AluOp::Divide:
      return b == 0 ? 0 : wrap32(int64_t{a} / b);
    case AluOp::AbsMax:
      return wrap32(std::max(std::llabs(a), std::llabs(b)));
    case AluOp::Abs:
      return wrap32(std::llabs(a));
    case AluOp::Pow:
      return wrap32(to_i64(static_cast<float>(std::pow(static_cast<double>(a), b))));
    case AluOp::BitwiseAnd:
      return static_cast<int32_t>(ua & ub);
    case AluOp::BitwiseOr:
      return static_cast<int32_t>(ua | ub);
    case AluOp::BitwiseXor:
      return static_cast<int32_t>(ua ^ ub);
    case AluOp::ShiftLeft:
      return b < 0 || b >= 32 ? 0 : static_cast<int32_t>(ua << b);
    case AluOp::ShiftRight:
      return b < 0 || b >= 32 ? 0 : static_cast<int32_t>(ua >> b);
    default:
      return alu_order_body(op, a, b);
  }
}

}  // namespace

float alu_f32(AluOp op, float a, float b) {
  return alu_f32_body(op, a, b);
}

int64_t alu_i32(AluOp op, int64_t a64, int64_t b64) {
  return alu_i32_body(op, a64, b64);
}

int64_t alu_int_exact(AluOp op, int64_t a, int64_t b) {
  // Products and powers modulo 2^64: their low 32 bits are the wrapped 32-bit result.
  const auto mul = [](int64_t x, int64_t y) {
    return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
  };
  switch (op) {
    case AluOp::Bypass:
      return a;
    case AluOp::Add:
      return a + b;
    case AluOp::Subtract:
      return a - b;
    case AluOp::Multiply:
      return mul(a, b);
    case AluOp::Divide:
      return b == 0 ? 0 : a / b;
    case AluOp::AbsMax:
      return std::max(std::llabs(a), std::llabs(b));
    case AluOp::Abs:
      return std::llabs(a);
    case AluOp::Pow: {
      if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;  // 1 / a^|b| truncated
      int64_t r = 1;
      for (int64_t e = b, x = a; e > 0; e >>= 1, x = mul(x, x))
        if (e & 1) r = mul(r, x);
      return r;
    }
    default:
      // the bitvec ops work on the 32-bit patterns
      return alu_is_bitwise(op) ? alu_i32_body(op, a, b) : alu_order_body(op, a, b);
  }
}

namespace {

// Runs body(op constant) for the ops the row loops specialise; others get the generic call.
template <typename Fast, typename Slow>
inline void dispatch(AluOp op, Fast&& fast, Slow&& slow) {
  switch (op) {
    case AluOp::Bypass:
      return fast(std::integral_constant<AluOp, AluOp::Bypass>{});
    case AluOp::Add:
      return fast(std::integral_constant<AluOp, AluOp::Add>{});
    case AluOp::Subtract:
      return fast(std::integral_constant<AluOp, AluOp::Subtract>{});
    case AluOp::Multiply:
      return fast(std::integral_constant<AluOp, AluOp::Multiply>{});
    case AluOp::Max:
      return fast(std::integral_constant<AluOp, AluOp::Max>{});
    case AluOp::Min:
      return fast(std::integral_constant<AluOp, AluOp::Min>{});
    case AluOp::BitwiseAnd:
      return fast(std::integral_constant<AluOp, AluOp::BitwiseAnd>{});
    case AluOp::ShiftRight:
      return fast(std::integral_constant<AluOp, AluOp::ShiftRight>{});
    default:
      return slow();
  }
}

}  // namespace

void alu_f32_row(AluOp op, float* x, float s, bool reverse, size_t n) {
  if (op == AluOp::Bypass) return;
  dispatch(
      op,
      [&](auto c) {
        if (reverse)
          for (size_t i = 0; i < n; ++i) x[i] = alu_f32_body(c(), s, x[i]);
        else
          for (size_t i = 0; i < n; ++i) x[i] = alu_f32_body(c(), x[i], s);
      },
      [&] {
        for (size_t i = 0; i < n; ++i) x[i] = reverse ? alu_f32(op, s, x[i]) : alu_f32(op, x[i], s);
      });
}

void alu_f32_rows(AluOp op, float* x, const float* y, size_t n) {
  dispatch(
      op,
      [&](auto c) {
        for (size_t i = 0; i < n; ++i) x[i] = alu_f32_body(c(), x[i], y[i]);
      },
      [&] {
        for (size_t i = 0; i < n; ++i) x[i] = alu_f32(op, x[i], y[i]);
      });
}

namespace {

// Max / Min folds without the sequential chain: kLanes running extremes, then the lanes in order. The
// result is the fold's whenever it is not a zero: a NaN anywhere makes both NaN (kNaN), and only +0 and -0
// compare equal with different bits (the fold keeps the last of equal elements), so a zero result is
// recomputed in order. Returns false for a short row (the caller folds it in order).
template <AluOp kOp>
bool fold_extreme(const float* x, size_t n, float& out) {
  constexpr size_t kLanes = 8;
  if (n < 2 * kLanes) return false;
  const auto pick = [](float v, float a) {
    if constexpr (kOp == AluOp::Max)
      return v > a ? v : a;
    else
      return v < a ? v : a;
  };
  float acc[kLanes];
  uint32_t nan[kLanes];
  for (size_t k = 0; k < kLanes; ++k) {
    acc[k] = x[k];
    nan[k] = x[k] != x[k];
  }
  size_t i = kLanes;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t k = 0; k < kLanes; ++k) {
      const float v = x[i + k];
      nan[k] |= v != v;
      acc[k] = pick(v, acc[k]);
    }
  for (; i < n; ++i) {
    nan[0] |= x[i] != x[i];
    acc[0] = pick(x[i], acc[0]);
  }
  float m = acc[0];
  uint32_t any_nan = nan[0];
  for (size_t k = 1; k < kLanes; ++k) {
    m = pick(acc[k], m);
    any_nan |= nan[k];
  }
  if (any_nan) {
    out = kNaN;
    return true;
  }
  if (m == 0.f) return false;
  out = m;
  return true;
}

}  // namespace

float alu_f32_fold(AluOp op, const float* x, size_t n) {
  float r;
  if (op == AluOp::Max && fold_extreme<AluOp::Max>(x, n, r)) return r;
  if (op == AluOp::Min && fold_extreme<AluOp::Min>(x, n, r)) return r;
  float acc = x[0];
  dispatch(
      op,
      [&](auto c) {
        for (size_t i = 1; i < n; ++i) acc = alu_f32_body(c(), acc, x[i]);
      },
      [&] {
        for (size_t i = 1; i < n; ++i) acc = alu_f32(op, acc, x[i]);
      });
  return acc;
}

void alu_i32_row(AluOp op, int64_t* x, int64_t s, bool reverse, size_t n) {
  if (op == AluOp::Bypass) {
    for (size_t i = 0; i < n; ++i) x[i] = alu_i32_body(AluOp::Bypass, x[i], s);
    return;
  }
  dispatch(
      op,
      [&](auto c) {
        if (reverse)
          for (size_t i = 0; i < n; ++i) x[i] = alu_i32_body(c(), s, x[i]);
        else
          for (size_t i = 0; i < n; ++i) x[i] = alu_i32_body(c(), x[i], s);
      },
      [&] {
        for (size_t i = 0; i < n; ++i) x[i] = reverse ? alu_i32(op, s, x[i]) : alu_i32(op, x[i], s);
      });
}

namespace {

// log(1 + e^x) without overflow for large x (e^x is inf in FP64 from x = 710: tester23i).
double softplus_f64(double x) {
  return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x)));
}

// The functions added for NKI's tutorials (sin, cos, arctan, erf, erf_dx, softplus, mish, gelu_dx) and gelu:
// FP64 libm, rounded once to FP32, so the result is the FP32 value nearest the exact one except in the rare
// case where the FP64 result sits within an FP64 ulp of an FP32 rounding boundary.
double act_f64(ActFunc f, double x) {
  constexpr double kTwoOverSqrtPi = 1.1283791670955126;  // 2 / sqrt(pi)
  constexpr double kInvSqrt2 = 0.70710678118654752;      // 1 / sqrt(2)
  constexpr double kInvSqrt2Pi = 0.3989422804014327;     // 1 / sqrt(2 pi)
  constexpr double kSqrt2OverPi = 0.7978845608028654;    // sqrt(2 / pi)
  switch (f) {
    case ActFunc::Sin:
      return std::sin(x);
    case ActFunc::Cos:
      return std::cos(x);
    case ActFunc::Arctan:
      return std::atan(x);
    case ActFunc::Erf:
      return std::erf(x);
    // gelu and its tanh form without the cancellation of 1 + erf / 1 + tanh for x < -3 (FP32 lost every bit
    // there, giving -0.0 from x = -5.6: tester23p): x Phi(x) = 0.5 x erfc(-x / sqrt2), 0.5 x (1 + tanh u) =
    // x / (1 + e^(-2u)).
    case ActFunc::Gelu:
      return 0.5 * x * std::erfc(-x * kInvSqrt2);
    case ActFunc::GeluApproxTanh:
      return x / (1.0 + std::exp(-2.0 * kSqrt2OverPi * (x + 0.044715 * x * x * x)));
    case ActFunc::ErfDx:
      return kTwoOverSqrtPi * std::exp(-x * x);
    case ActFunc::Softplus:
      return softplus_f64(x);
    case ActFunc::Mish:
      return x * std::tanh(softplus_f64(x));
    case ActFunc::GeluDx:
      return 0.5 * (1.0 + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
    default:
      return x;
  }
}

}  // namespace

float act_f32(ActFunc f, float x) {
  switch (f) {
    case ActFunc::Identity:
    case ActFunc::Copy:
      return x;
    case ActFunc::Exp:
      return std::exp(x);
    case ActFunc::Log:
      return std::log(x);
    case ActFunc::Silu:
      return x / (1.f + std::exp(-x));
    case ActFunc::Sigmoid:
      return 1.f / (1.f + std::exp(-x));
    case ActFunc::Tanh:
      return std::tanh(x);
    case ActFunc::Relu:
      return std::isnan(x) ? x : (x > 0.f ? x : 0.f);
    case ActFunc::Square:
      return x * x;
    case ActFunc::Sqrt:
      return std::sqrt(x);
    case ActFunc::Rsqrt:
      return 1.f / std::sqrt(x);
    case ActFunc::Reciprocal:
      return 1.f / x;
    case ActFunc::Abs:
      return std::fabs(x);
    case ActFunc::Sign:
      return std::isnan(x) ? x : (x > 0.f ? 1.f : (x < 0.f ? -1.f : 0.f));
    case ActFunc::SiluDx: {
      const float s = 1.f / (1.f + std::exp(-x));
      return s * (1.f + x * (1.f - s));
    }
    case ActFunc::Floor:
      return std::floor(x);
    case ActFunc::Ceil:
      return std::ceil(x);
    case ActFunc::Trunc:
      return std::trunc(x);
    default:
      return static_cast<float>(act_f64(f, static_cast<double>(x)));
  }
  return x;
}

}  // namespace trnsim::isa
