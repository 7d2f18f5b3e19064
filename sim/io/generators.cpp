#include "sim/io/generators.h"

#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "sim/base/error.h"
#include "sim/numerics/host_threads.h"

// Bit-identical results need a*b+c evaluated as two rounded operations, never a fused multiply-add
// (sim/CMakeLists.txt also compiles this file with -ffp-contract=off: the AVX-512 path has FMA at hand).
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

// GCC 12's AVX-512 headers seed some intrinsics with a self-initialized "undefined" vector and then warn
// about it where they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// bits_at(key, c) for the 8 counters of `c`.
[[gnu::target("avx512f,avx512dq")]] __m512i bits_at8(uint64_t key, __m512i c) {
  const __m512i gamma = _mm512_set1_epi64(static_cast<int64_t>(kGamma));
  c = _mm512_add_epi64(c, _mm512_set1_epi64(1));
  __m512i z = _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(key)), _mm512_mullo_epi64(c, gamma));
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
                         _mm512_set1_epi64(static_cast<int64_t>(0xBF58476D1CE4E5B9ull)));
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
                         _mm512_set1_epi64(static_cast<int64_t>(0x94D049BB133111EBull)));
  return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

// bits_at(key, 2k + odd) for the 8 pair indices k.
[[gnu::target("avx512f,avx512dq")]] __m512i bits8(uint64_t key, __m512i k, uint64_t odd) {
  return bits_at8(key,
                  _mm512_add_epi64(_mm512_slli_epi64(k, 1), _mm512_set1_epi64(static_cast<int64_t>(odd))));
}

// normal_pair for 8 consecutive pairs k0 .. k0 + 7, operation for operation (every step is one IEEE
// operation, rounded as the scalar one is), so the same bits.
[[gnu::target("avx512f,avx512dq")]] void normal_pairs8(uint64_t key, uint64_t k0, double* z0, double* z1) {
  const __m512i lane = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i k = _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(k0)), lane);
  const __m512d one = _mm512_set1_pd(1.0), two_m53 = _mm512_set1_pd(kTwoPowM53);
  const __m512d u1 = _mm512_mul_pd(
      _mm512_cvtepu64_pd(_mm512_add_epi64(_mm512_srli_epi64(bits8(key, k, 0), 11), _mm512_set1_epi64(1))),
      two_m53);
  const __m512d t = _mm512_mul_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64(bits8(key, k, 1), 11)), two_m53);

  // det_log(u1): frexp by the bit fields (u1 is a normal number), then the same series.
  const __m512i ub = _mm512_castpd_si512(u1);
  __m512i e = _mm512_sub_epi64(_mm512_srli_epi64(ub, 52), _mm512_set1_epi64(1022));
  __m512d m =
      _mm512_castsi512_pd(_mm512_or_si512(_mm512_and_si512(ub, _mm512_set1_epi64(0x000FFFFFFFFFFFFFll)),
                                          _mm512_set1_epi64(0x3FE0000000000000ll)));
  const __mmask8 low = _mm512_cmp_pd_mask(m, _mm512_set1_pd(kSqrtHalf), _CMP_LT_OQ);
  m = _mm512_mask_mul_pd(m, low, m, _mm512_set1_pd(2.0));
  e = _mm512_mask_sub_epi64(e, low, e, _mm512_set1_epi64(1));
  const __m512d s = _mm512_div_pd(_mm512_sub_pd(m, one), _mm512_add_pd(m, one));
  const __m512d s2 = _mm512_mul_pd(s, s);
  __m512d p = _mm512_set1_pd(1.0 / 21);
  for (int j = 19; j >= 1; j -= 2) p = _mm512_add_pd(_mm512_mul_pd(p, s2), _mm512_set1_pd(1.0 / j));
  const __m512d de = _mm512_cvtepi64_pd(e);
  const __m512d lg = _mm512_add_pd(_mm512_mul_pd(de, _mm512_set1_pd(kLn2Hi)),
                                   _mm512_add_pd(_mm512_mul_pd(de, _mm512_set1_pd(kLn2Lo)),
                                                 _mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(2.0), s), p)));
  const __m512d r = _mm512_sqrt_pd(_mm512_mul_pd(_mm512_set1_pd(-2.0), lg));

  // det_sincos_turns(t).
  const __m512d t4 = _mm512_mul_pd(t, _mm512_set1_pd(4.0));
  const __m512d q = _mm512_roundscale_pd(t4, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m512d f = _mm512_sub_pd(t4, q);
  const __mmask8 upper = _mm512_cmp_pd_mask(f, _mm512_set1_pd(0.5), _CMP_GT_OQ);
  const __m512d x = _mm512_mul_pd(_mm512_mask_sub_pd(f, upper, one, f), _mm512_set1_pd(kHalfPi));
  const __m512d x2 = _mm512_mul_pd(x, x);
  __m512d ps = one, pc = one;
  for (int n = 17; n >= 3; n -= 2)
    ps = _mm512_sub_pd(one, _mm512_div_pd(_mm512_mul_pd(ps, x2), _mm512_set1_pd(n * (n - 1))));
  for (int n = 18; n >= 2; n -= 2)
    pc = _mm512_sub_pd(one, _mm512_div_pd(_mm512_mul_pd(pc, x2), _mm512_set1_pd(n * (n - 1))));
  const __m512d sx = _mm512_mul_pd(x, ps);
  const __m512d s0 = _mm512_mask_blend_pd(upper, sx, pc), c0 = _mm512_mask_blend_pd(upper, pc, sx);
  // Quadrant q: 1 and 3 swap sin and cos; 2 and 3 negate sin, 1 and 2 negate cos.
  const __m512i qi = _mm512_and_si512(_mm512_cvttpd_epi64(q), _mm512_set1_epi64(3));
  const __mmask8 swap = _mm512_test_epi64_mask(qi, _mm512_set1_epi64(1));
  const __mmask8 neg_s = _mm512_cmpge_epi64_mask(qi, _mm512_set1_epi64(2));
  const __mmask8 neg_c =
      _mm512_cmpeq_epi64_mask(qi, _mm512_set1_epi64(1)) | _mm512_cmpeq_epi64_mask(qi, _mm512_set1_epi64(2));
  const __m512d sign = _mm512_set1_pd(-0.0);
  __m512d sn = _mm512_mask_blend_pd(swap, s0, c0), cs = _mm512_mask_blend_pd(swap, c0, s0);
  sn = _mm512_mask_xor_pd(sn, neg_s, sn, sign);
  cs = _mm512_mask_xor_pd(cs, neg_c, cs, sign);
  _mm512_storeu_pd(z0, _mm512_mul_pd(r, cs));
  _mm512_storeu_pd(z1, _mm512_mul_pd(r, sn));
}

// uniform's elements c0 .. c0 + 7 of a stream, operation for operation: lo + (hi - lo) * unit(bits), in
// FP64 without fusing, then rounded to FP32 as static_cast<float> rounds (to nearest even).
[[gnu::target("avx512f,avx512dq")]] void uniform8(uint64_t key, uint64_t c0, double lo, double span,
                                                  float* out) {
  const __m512i z = bits_at8(key, _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(c0)),
                                                   _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0)));
  const __m512d u = _mm512_mul_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64(z, 11)), _mm512_set1_pd(kTwoPowM53));
  const __m512d v = _mm512_add_pd(_mm512_set1_pd(lo), _mm512_mul_pd(_mm512_set1_pd(span), u));
  _mm256_storeu_ps(out, _mm512_cvt_roundpd_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

#pragma GCC diagnostic pop

bool host_has_avx512dq() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  }();
  return has;
}

// Pairs [k0, k0 + n): 8 at a time where the host has AVX-512 and `simd`, the rest one by one.
void pairs(uint64_t key, uint64_t k0, int64_t n, double* z0, double* z1, bool simd) {
  int64_t i = 0;
  if (simd && host_has_avx512dq())
    for (; i + 8 <= n; i += 8) normal_pairs8(key, k0 + static_cast<uint64_t>(i), z0 + i, z1 + i);
  for (; i < n; ++i) normal_pair(key, k0 + static_cast<uint64_t>(i), z0[i], z1[i]);
}

// Fills out[i - first] = f(i, N(0,1) sample i) for i in [first, first + n); `first` is even (a pair's first).
template <typename F>
void fill_normal(float* out, int64_t first, int64_t n, uint64_t seed, int threads, F f) {
  uint64_t key = stream_key(seed, kNormal);
  parallel_units((n + 1) / 2, threads, [&](int64_t b, int64_t e) {
    constexpr int64_t kBatch = 64;
    double z0[kBatch], z1[kBatch];
    for (int64_t k = b; k < e; k += kBatch) {
      const int64_t m = std::min(kBatch, e - k);
      pairs(key, static_cast<uint64_t>(first / 2 + k), m, z0, z1, true);
      for (int64_t j = 0; j < m; ++j) {
        const int64_t i = 2 * (k + j);
        out[i] = f(first + i, z0[j]);
        if (i + 1 < n) out[i + 1] = f(first + i + 1, z1[j]);
      }
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

void normal_pairs(uint64_t seed, int64_t first_pair, int64_t n, double* z0, double* z1, bool simd) {
  if (first_pair < 0 || n < 0) bad("normal", fmt::format("bad pair range [{}, +{})", first_pair, n));
  pairs(stream_key(seed, kNormal), static_cast<uint64_t>(first_pair), n, z0, z1, simd);
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
  const bool simd = host_has_avx512dq();
  parallel_units(n, threads, [&](int64_t b, int64_t e) {
    int64_t i = b;
    if (simd)
      for (; i + 8 <= e; i += 8) uniform8(key, static_cast<uint64_t>(first + i), lo, hi - lo, out + i);
    for (; i < e; ++i)
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

namespace {

// The element count of activations_with_outliers(rows, cols, p, ..., threads), its arguments checked.
int64_t checked_outliers(int64_t rows, int64_t cols, const OutlierActivations& p, int threads) {
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
  return n;
}

void fill_outliers(float* out, int64_t first, int64_t n, int64_t cols, const OutlierActivations& p,
                   uint64_t seed, int threads) {
  std::vector<double> col_scale(static_cast<size_t>(cols), 1.0);
  for (int64_t c : outlier_columns(cols, p.outlier_channels, seed)) col_scale[c] = p.outlier_scale;
  fill_normal(out, first, n, seed, threads, [&](int64_t i, double z) {
    return to_finite_float((p.mean + p.std * z) * col_scale[static_cast<size_t>(i % cols)]);
  });
}

}  // namespace

std::vector<float> activations_with_outliers(int64_t rows, int64_t cols, const OutlierActivations& p,
                                             uint64_t seed, int threads) {
  const int64_t n = checked_outliers(rows, cols, p, threads);
  std::vector<float> out(static_cast<size_t>(n));
  fill_outliers(out.data(), 0, n, cols, p, seed, threads);
  return out;
}

void activations_with_outliers_chunk(float* out, int64_t first, int64_t n, int64_t rows, int64_t cols,
                                     const OutlierActivations& p, uint64_t seed, int threads) {
  const int64_t total = checked_outliers(rows, cols, p, threads);
  if (first < 0 || first % 2 != 0 || n < 0 || n > total - first)
    bad("activations_with_outliers",
        fmt::format("a chunk starts at an even element and lies in the tensor (got [{}, +{}) of {})", first,
                    n, total));
  fill_outliers(out, first, n, cols, p, seed, threads);
}

}  // namespace trnsim::io
