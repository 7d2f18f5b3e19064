#include "sim/io/generators.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "sim/base/error.h"
#include "sim/numerics/host_threads.h"

// Bit-identical results need a*b+c evaluated as two rounded operations, never a fused multiply-add.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__) && !defined(__STRICT_ANSI__)
#error "generators.cpp must be compiled in ISO mode (-std=c++20): GNU mode lets GCC contract into FMA"
#endif

namespace trnsim::io {
namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
constexpr double kTwoPowM53 = 1.0 / 9007199254740992.0;
constexpr double kLn2Hi = 6.93147180369123816490e-01;  // 0x3FE62E42FEE00000: trailing zeros, k*hi exact
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kInvLn2 = 1.44269504088896338700e+00;
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kHalfPi = 1.57079632679489661923;

// Independent streams per generator, so normal() and uniform() with one seed are not correlated.
enum Stream : uint64_t { kNormal = 1, kUniform = 2, kStudent = 3, kChannels = 4, kRandint = 5 };

uint64_t stream_key(uint64_t seed, Stream s) {
  return mix64(seed ^ mix64(static_cast<uint64_t>(s) * kGamma));
}

// The random bits number `counter` of a stream: splitmix64 jumped to position counter.
uint64_t bits_at(uint64_t key, uint64_t counter) {
  return mix64(key + (counter + 1) * kGamma);
}

// [0, 1) with 53 random bits.
double unit(uint64_t bits) {
  return static_cast<double>(bits >> 11) * kTwoPowM53;
}

[[noreturn]] void bad(const std::string& gen, const std::string& msg) {
  throw InputError(gen + ": " + msg);
}

void check_common(const std::string& gen, int64_t n, int threads) {
  if (n < 0) bad(gen, fmt::format("the element count must be >= 0 (got {})", n));
  if (threads < 1) bad(gen, fmt::format("threads must be >= 1 (got {})", threads));
}

// Runs fn(begin, end) over [0, units) in `threads` contiguous pieces. Units are independent, so the result
// does not depend on the split.
template <typename Fn>
void parallel_units(int64_t units, int threads, Fn fn) {
  int64_t t = std::min<int64_t>(threads, std::max<int64_t>(1, units / 4096));
  if (t <= 1) {
    fn(int64_t{0}, units);
    return;
  }
  num::run_parts(static_cast<int>(t), [&](int i) { fn(units * i / t, units * (i + 1) / t); });
}

// Box-Muller on pair k of the normal stream: two independent N(0, 1) values.
void normal_pair(uint64_t key, uint64_t k, double& z0, double& z1) {
  double u1 = static_cast<double>((bits_at(key, 2 * k) >> 11) + 1) * kTwoPowM53;  // (0, 1]
  double t = unit(bits_at(key, 2 * k + 1));
  double r = std::sqrt(-2.0 * det_log(u1));
  double s, c;
  det_sincos_turns(t, s, c);
  z0 = r * c;
  z1 = r * s;
}

// Fills out[i - first] = f(i, N(0,1) sample i) for i in [first, first + n); `first` is even (a pair's first).
template <typename F>
void fill_normal(float* out, int64_t first, int64_t n, uint64_t seed, int threads, F f) {
  uint64_t key = stream_key(seed, kNormal);
  parallel_units((n + 1) / 2, threads, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      double z0, z1;
      normal_pair(key, static_cast<uint64_t>(first / 2 + k), z0, z1);
      out[2 * k] = f(first + 2 * k, z0);
      if (2 * k + 1 < n) out[2 * k + 1] = f(first + 2 * k + 1, z1);
    }
  });
}

void check_normal(double mean, double std) {
  if (!std::isfinite(mean)) bad("normal", fmt::format("mean must be finite (got {})", mean));
  if (!(std > 0.0) || !std::isfinite(std))
    bad("normal", fmt::format("std must be > 0 and finite (got {})", std));
}

void check_uniform(double lo, double hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || !std::isfinite(hi - lo) || !(lo < hi))
    bad("uniform", fmt::format("needs finite lo < hi (got lo {}, hi {})", lo, hi));
}

float to_finite_float(double v) {
  return static_cast<float>(std::clamp(v, -static_cast<double>(FLT_MAX), static_cast<double>(FLT_MAX)));
}

}  // namespace

uint64_t SplitMix64::next() {
  return mix64(state += kGamma);
}

double det_log(double x) {
  int e = 0;
  double m = std::frexp(x, &e);  // exact: x = m * 2^e, m in [0.5, 1)
  if (m < kSqrtHalf) {
    m *= 2.0;
    --e;
  }
  // log(m) = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.172: the series to s^21 is below 1e-18.
  double s = (m - 1.0) / (m + 1.0);
  double s2 = s * s;
  double p = 1.0 / 21;
  for (int k = 19; k >= 1; k -= 2) p = p * s2 + 1.0 / k;
  double de = static_cast<double>(e);
  return de * kLn2Hi + (de * kLn2Lo + 2.0 * s * p);
}

double det_exp(double x) {
  if (std::isnan(x)) return x;
  if (x > 709.8) return HUGE_VAL;
  if (x < -745.2) return 0.0;
  double k = std::floor(x * kInvLn2 + 0.5);
  double r = (x - k * kLn2Hi) - k * kLn2Lo;  // |r| <= 0.35
  // Taylor series to r^14/14!: remainder below 1e-18.
  double p = 1.0;
  for (int i = 14; i >= 1; --i) p = 1.0 + p * r / i;
  return std::ldexp(p, static_cast<int>(k));
}

void det_sincos_turns(double t, double& s, double& c) {
  double q = std::floor(t * 4.0);
  double f = t * 4.0 - q;  // exact for t a multiple of 2^-53; the angle is (q + f) * pi/2
  // Reduce to x in [0, pi/4] so the series converge fast; swap sin and cos for the upper half.
  bool upper = f > 0.5;
  double x = (upper ? 1.0 - f : f) * kHalfPi;
  double x2 = x * x;
  double ps = 1.0, pc = 1.0;
  for (int n = 17; n >= 3; n -= 2) ps = 1.0 - ps * x2 / (n * (n - 1));
  for (int n = 18; n >= 2; n -= 2) pc = 1.0 - pc * x2 / (n * (n - 1));
  double sx = x * ps, cx = pc;
  double s0 = upper ? cx : sx, c0 = upper ? sx : cx;
  switch (static_cast<int>(q) & 3) {
    case 0:
      s = s0, c = c0;
      break;
    case 1:
      s = c0, c = -s0;
      break;
    case 2:
      s = -s0, c = -c0;
      break;
    default:
      s = -c0, c = s0;
      break;
  }
}

std::vector<float> normal(int64_t n, double mean, double std, uint64_t seed, int threads) {
  check_common("normal", n, threads);
  check_normal(mean, std);
  std::vector<float> out(static_cast<size_t>(n));
  normal_chunk(out.data(), 0, n, mean, std, seed, threads);
  return out;
}

void normal_chunk(float* out, int64_t first, int64_t n, double mean, double std, uint64_t seed, int threads) {
  check_common("normal", n, threads);
  check_normal(mean, std);
  if (first < 0 || first % 2 != 0)
    bad("normal", fmt::format("a chunk starts at an even element >= 0 (got {})", first));
  fill_normal(out, first, n, seed, threads,
              [=](int64_t, double z) { return static_cast<float>(mean + std * z); });
}

std::vector<float> uniform(int64_t n, double lo, double hi, uint64_t seed, int threads) {
  check_common("uniform", n, threads);
  check_uniform(lo, hi);
  std::vector<float> out(static_cast<size_t>(n));
  uniform_chunk(out.data(), 0, n, lo, hi, seed, threads);
  return out;
}

void uniform_chunk(float* out, int64_t first, int64_t n, double lo, double hi, uint64_t seed, int threads) {
  check_common("uniform", n, threads);
  check_uniform(lo, hi);
  if (first < 0) bad("uniform", fmt::format("a chunk starts at an element >= 0 (got {})", first));
  uint64_t key = stream_key(seed, kUniform);
  parallel_units(n, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      out[i] = static_cast<float>(lo + (hi - lo) * unit(bits_at(key, static_cast<uint64_t>(first + i))));
  });
}

std::vector<int64_t> randint(int64_t n, int64_t low, int64_t high, uint64_t seed, int threads) {
  check_common("randint", n, threads);
  if (!(low < high)) bad("randint", fmt::format("needs low < high (got low {}, high {})", low, high));
  const auto span = static_cast<unsigned __int128>(static_cast<uint64_t>(high) - static_cast<uint64_t>(low));
  std::vector<int64_t> out(static_cast<size_t>(n));
  uint64_t key = stream_key(seed, kRandint);
  parallel_units(n, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      // Multiply-high maps 64 random bits onto [0, span) (bias below span / 2^64).
      const auto r = static_cast<uint64_t>((span * bits_at(key, static_cast<uint64_t>(i))) >> 64);
      out[i] = static_cast<int64_t>(static_cast<uint64_t>(low) + r);
    }
  });
  return out;
}

std::vector<float> student_t(int64_t n, double nu, double scale, uint64_t seed, int threads) {
  check_common("student_t", n, threads);
  if (!(nu > 0.0) || !std::isfinite(nu))
    bad("student_t", fmt::format("nu must be > 0 and finite (got {})", nu));
  if (!(scale > 0.0) || !std::isfinite(scale))
    bad("student_t", fmt::format("scale must be > 0 and finite (got {})", scale));
  std::vector<float> out(static_cast<size_t>(n));
  uint64_t key = stream_key(seed, kStudent);
  parallel_units(n, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      // Bailey's polar method on element i's own stream; each try is accepted with probability pi/4.
      SplitMix64 rng(bits_at(key, static_cast<uint64_t>(i)));
      double t = 0.0;
      for (int tries = 0; tries < 200; ++tries) {
        double u = 2.0 * unit(rng.next()) - 1.0;
        double v = 2.0 * unit(rng.next()) - 1.0;
        double w = u * u + v * v;
        if (w > 0.0 && w <= 1.0) {
          t = u * std::sqrt(nu * (det_exp(-2.0 / nu * det_log(w)) - 1.0) / w);
          break;
        }
      }
      out[i] = to_finite_float(scale * t);
    }
  });
  return out;
}

std::vector<int64_t> outlier_columns(int64_t cols, int64_t count, uint64_t seed) {
  if (cols < 0) bad("activations_with_outliers", fmt::format("cols must be >= 0 (got {})", cols));
  if (count < 0 || count > cols)
    bad("activations_with_outliers",
        fmt::format("outlier_channels must be in [0, cols = {}] (got {})", cols, count));
  std::vector<int64_t> idx(static_cast<size_t>(cols));
  for (int64_t i = 0; i < cols; ++i) idx[i] = i;
  SplitMix64 rng(stream_key(seed, kChannels));
  for (int64_t j = 0; j < count; ++j) {  // partial Fisher-Yates
    int64_t r = j + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(cols - j));
    std::swap(idx[j], idx[r]);
  }
  idx.resize(static_cast<size_t>(count));
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<float> activations_with_outliers(int64_t rows, int64_t cols, const OutlierActivations& p,
                                             uint64_t seed, int threads) {
  const std::string gen = "activations_with_outliers";
  int64_t n = 0;
  if (rows < 0 || cols < 0 || __builtin_mul_overflow(rows, cols, &n))
    bad(gen, fmt::format("bad shape [{}, {}]", rows, cols));
  check_common(gen, n, threads);
  if (!std::isfinite(p.mean)) bad(gen, fmt::format("mean must be finite (got {})", p.mean));
  if (!(p.std > 0.0) || !std::isfinite(p.std))
    bad(gen, fmt::format("std must be > 0 and finite (got {})", p.std));
  if (!std::isfinite(p.outlier_scale) || p.outlier_scale == 0.0)
    bad(gen, fmt::format("outlier_scale must be finite and non-zero (got {})", p.outlier_scale));
  std::vector<double> col_scale(static_cast<size_t>(cols), 1.0);
  for (int64_t c : outlier_columns(cols, p.outlier_channels, seed)) col_scale[c] = p.outlier_scale;
  std::vector<float> out(static_cast<size_t>(n));
  fill_normal(out.data(), 0, n, seed, threads, [&](int64_t i, double z) {
    return to_finite_float((p.mean + p.std * z) * col_scale[static_cast<size_t>(i % cols)]);
  });
  return out;
}

}  // namespace trnsim::io
