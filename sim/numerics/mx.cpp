#include "sim/numerics/mx.h"

#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "sim/base/error.h"
#include "sim/numerics/host_threads.h"
#include "sim/numerics/mx_isa.h"
#include "sim/numerics/mx_kernels.h"
#include "sim/numerics/pair_range.h"

namespace trnsim::num {

std::string_view scale_rule_name(ScaleRule r) {
  switch (r) {
    case ScaleRule::Trn3:
      return "trn3";
    case ScaleRule::Ocp:
      return "ocp";
    case ScaleRule::Te:
      return "te";
  }
  return "?";
}

ScaleRule parse_scale_rule(std::string_view s) {
  if (s == "trn3") return ScaleRule::Trn3;
  if (s == "ocp") return ScaleRule::Ocp;
  if (s == "te") return ScaleRule::Te;
  throw InputError(fmt::format("unknown MX scale rule '{}' (expected trn3, ocp or te)", s));
}

std::string_view mx_axis_name(MxAxis a) {
  return a == MxAxis::Row ? "row" : "col";
}

namespace {

using mxk::abs_key;

// FP8 codes of every BF16 value times 2^(127 - s), one 64 KiB table per scale byte s, built on first use. For
// large BF16 arrays a lookup replaces each element's multiply and encoding; the tables hold exactly those
// results, so the bytes are the same.
template <Fp8Format F>
class Bf16Fp8Tables {
 public:
  const uint8_t* get(uint8_t s) {
    std::unique_ptr<uint8_t[]>& t = tables_[s];
    if (!t) {
      t = std::make_unique<uint8_t[]>(65536);
      const float mult = e8m0_rcp_f32(s);
      for (uint32_t b = 0; b < 65536; ++b)
        t[b] = detail::f32_to_fp8_satfinite<F>(bf16_to_f32(static_cast<uint16_t>(b)) * mult);
    }
    return t.get();
  }

 private:
  std::array<std::unique_ptr<uint8_t[]>, 256> tables_;
};

// Elements per thread from which the tables pay for themselves (a table costs 65536 encodings).
constexpr int64_t kTableElements = int64_t{1} << 22;

template <Fp8Format F, ScaleRule R>
uint8_t block_table(const uint16_t* v, uint8_t* out, Bf16Fp8Tables<F>& tables) {
  uint32_t key = 0;
  for (int i = 0; i < kMxBlock; ++i) key = std::max(key, abs_key<R>(bf16_to_f32(v[i])));
  const uint8_t s = mx_scale_byte(key, F, R);
  const uint8_t* t = tables.get(s);
  for (int i = 0; i < kMxBlock; ++i) out[i] = t[v[i]];
  return s;
}

// Runs fn(begin, end) over [0, units) split into at most `threads` contiguous chunks, on the process's helper
// threads (host_split), so a caller that quantizes many small arrays starts no thread per array.
template <class Fn>
void parallel_for(int64_t units, int threads, Fn fn) {
  const int64_t n = std::min<int64_t>(threads, units);
  if (n <= 1) {
    if (units > 0) fn(int64_t{0}, units);
    return;
  }
  host_split(static_cast<int>(n), [&](int t) { fn(units * t / n, units * (t + 1) / n); });
}

// col_blocks for large BF16 arrays: the elements by table lookup (one table pointer per column).
template <Fp8Format F, ScaleRule R>
void col_blocks_table(const uint16_t* x, const int64_t cols, uint8_t* data, uint8_t* scales, int64_t b0,
                      int64_t b1, uint32_t* kp) {
  Bf16Fp8Tables<F> tables;
  std::vector<const uint8_t*> table(static_cast<size_t>(cols));
  const uint8_t** const tp = table.data();
  for (int64_t rb = b0; rb < b1; ++rb) {
    std::fill(kp, kp + cols, 0u);
    const uint16_t* blk = x + rb * kMxBlock * cols;
    uint8_t* out = data + rb * kMxBlock * cols;
    for (int i = 0; i < kMxBlock; ++i) {
      const uint16_t* row = blk + i * cols;
      for (int64_t c = 0; c < cols; ++c) kp[c] = std::max(kp[c], abs_key<R>(bf16_to_f32(row[c])));
    }
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t s = mx_scale_byte(kp[c], F, R);
      scales[rb * cols + c] = s;
      tp[c] = tables.get(s);
    }
    for (int i = 0; i < kMxBlock; ++i) {
      const uint16_t* row = blk + i * cols;
      uint8_t* orow = out + i * cols;
      for (int64_t c = 0; c < cols; ++c) orow[c] = tp[c][row[c]];
    }
  }
}

// Col axis, block-rows [b0, b1): 32 rows at a time, all columns at once (row-contiguous).
template <Fp8Format F, ScaleRule R, class In>
void col_blocks(const In* x, const int64_t cols, uint8_t* data, uint8_t* scales, int64_t b0, int64_t b1,
                const mxk::Kernels<In>& k, bool tables) {
  std::vector<uint32_t> key(static_cast<size_t>(cols));
  std::vector<float> mult(static_cast<size_t>(cols));
  uint32_t* const kp = key.data();
  float* const mp = mult.data();
  if constexpr (std::is_same_v<In, uint16_t>) {
    if (tables) {
      col_blocks_table<F, R>(x, cols, data, scales, b0, b1, kp);
      return;
    }
  }
  for (int64_t rb = b0; rb < b1; ++rb) {
    std::fill(key.begin(), key.end(), 0u);
    const In* blk = x + rb * kMxBlock * cols;
    uint8_t* out = data + rb * kMxBlock * cols;
    for (int i = 0; i < kMxBlock; ++i) k.keys(blk + i * cols, cols, kp);
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t s = mx_scale_byte(kp[c], F, R);
      scales[rb * cols + c] = s;
      mp[c] = e8m0_rcp_f32(s);
    }
    for (int i = 0; i < kMxBlock; ++i) k.encode(blk + i * cols, mp, cols, out + i * cols);
  }
}

// The scalar code's BF16 path takes the per-scale tables from kTableElements per thread; vector code needs
// none.
template <Fp8Format F, ScaleRule R, class In>
void quantize_impl(const In* x, int64_t rows, int64_t cols, MxAxis axis, uint8_t* data, uint8_t* scales,
                   int threads, MxIsa isa) {
  const mxk::Kernels<In> k = mxk::kernels<F, R, In>(isa);
  const bool scalar = std::min(isa, mx_host_isa()) == MxIsa::Scalar;
  if (axis == MxAxis::Row) {
    const int64_t nb = cols / kMxBlock;
    parallel_for(rows, threads, [=](int64_t r0, int64_t r1) {
      if constexpr (std::is_same_v<In, uint16_t>) {
        if (scalar && (r1 - r0) * cols >= kTableElements) {
          Bf16Fp8Tables<F> tables;
          for (int64_t r = r0; r < r1; ++r)
            for (int64_t b = 0; b < nb; ++b) {
              const int64_t off = r * cols + b * kMxBlock;
              scales[r * nb + b] = block_table<F, R>(x + off, data + off, tables);
            }
          return;
        }
      }
      // Rows [r0, r1) are (r1 - r0) x nb contiguous blocks.
      k.blocks(x + r0 * cols, (r1 - r0) * nb, data + r0 * cols, scales + r0 * nb);
    });
    return;
  }
  parallel_for(rows / kMxBlock, threads, [=](int64_t b0, int64_t b1) {
    const bool tables = scalar && (b1 - b0) * kMxBlock * cols >= kTableElements;
    col_blocks<F, R>(x, cols, data, scales, b0, b1, k, tables);
  });
}

void check_args(const char* fn, int64_t rows, int64_t cols, MxAxis axis, int threads, bool null_ptr) {
  if (rows < 0 || cols < 0) throw InputError(fmt::format("{}: negative shape [{}, {}]", fn, rows, cols));
  if (threads < 1) throw InputError(fmt::format("{}: threads = {} must be at least 1", fn, threads));
  const bool row = axis == MxAxis::Row;
  const int64_t blocked = row ? cols : rows;
  if (blocked % kMxBlock != 0)
    throw InputError(fmt::format("{}: {} = {} is not a multiple of 32 (axis {} puts MX blocks along {})", fn,
                                 row ? "cols" : "rows", blocked, mx_axis_name(axis), row ? "cols" : "rows"));
  if (null_ptr && rows * cols != 0)
    throw InputError(fmt::format("{}: null buffer for a non-empty [{}, {}] array", fn, rows, cols));
}

// fn(format tag, rule tag) for the run-time pair, each tag a std::integral_constant naming the value.
template <class Fn>
decltype(auto) with_format_rule(Fp8Format fmt, ScaleRule rule, const char* what, Fn fn) {
  using E4 = std::integral_constant<Fp8Format, Fp8Format::E4M3FN>;
  using E5 = std::integral_constant<Fp8Format, Fp8Format::E5M2>;
  using Trn3 = std::integral_constant<ScaleRule, ScaleRule::Trn3>;
  using Ocp = std::integral_constant<ScaleRule, ScaleRule::Ocp>;
  using Te = std::integral_constant<ScaleRule, ScaleRule::Te>;
  const bool e4 = fmt == Fp8Format::E4M3FN;
  if (e4 || fmt == Fp8Format::E5M2) {
    if (rule == ScaleRule::Trn3) return e4 ? fn(E4{}, Trn3{}) : fn(E5{}, Trn3{});
    if (rule == ScaleRule::Ocp) return e4 ? fn(E4{}, Ocp{}) : fn(E5{}, Ocp{});
    if (rule == ScaleRule::Te) return e4 ? fn(E4{}, Te{}) : fn(E5{}, Te{});
  }
  throw InputError(fmt::format("{}: invalid format or scale rule", what));
}

template <class In>
void quantize_dispatch(const In* x, int64_t rows, int64_t cols, MxAxis axis, Fp8Format fmt, ScaleRule rule,
                       uint8_t* data, uint8_t* scales, int threads, MxIsa isa) {
  check_args("mx quantize", rows, cols, axis, threads, !x || !data || !scales);
  if (rows * cols == 0) return;
  with_format_rule(fmt, rule, "mx quantize", [&](auto f, auto r) {
    quantize_impl<decltype(f)::value, decltype(r)::value>(x, rows, cols, axis, data, scales, threads, isa);
  });
}

template <class In>
uint8_t block_dispatch(const In* v, uint8_t* out, Fp8Format fmt, ScaleRule rule, MxIsa isa) {
  return with_format_rule(fmt, rule, "mx quantize_block", [&](auto f, auto r) {
    return mxk::kernels<decltype(f)::value, decltype(r)::value, In>(isa).block(v, out);
  });
}

template <Fp8Format F, ScaleRule R, class In>
void x4_groups_impl(const In* x, int64_t ld, int64_t groups, uint8_t* data, int64_t ld_data, uint8_t* scales,
                    MxIsa isa) {
  const mxk::Kernels<In> k = mxk::kernels<F, R, In>(isa);
  const int64_t n = 4 * groups;
  // Scratch per calling thread (quantize_mx calls this once per 8-row group).
  static thread_local std::vector<uint32_t> key;
  static thread_local std::vector<float> mult;
  key.assign(static_cast<size_t>(n), 0u);
  mult.resize(static_cast<size_t>(n));
  for (int r = 0; r < 8; ++r) k.keys(x + r * ld, n, key.data());
  for (int64_t f = 0; f < groups; ++f) {
    const uint32_t* kf = &key[static_cast<size_t>(4 * f)];
    const uint8_t s = mx_scale_byte(std::max(std::max(kf[0], kf[1]), std::max(kf[2], kf[3])), F, R);
    scales[f] = s;
    std::fill_n(&mult[static_cast<size_t>(4 * f)], 4, e8m0_rcp_f32(s));
  }
  for (int r = 0; r < 8; ++r) k.encode(x + r * ld, mult.data(), n, data + r * ld_data);
}

template <class In>
void x4_groups_dispatch(const In* x, int64_t ld, int64_t groups, Fp8Format fmt, ScaleRule rule, uint8_t* data,
                        int64_t ld_data, uint8_t* scales, MxIsa isa) {
  with_format_rule(fmt, rule, "mx quantize_x4_groups", [&](auto f, auto r) {
    x4_groups_impl<decltype(f)::value, decltype(r)::value>(x, ld, groups, data, ld_data, scales, isa);
  });
}

template <Fp8Format F>
void x4_row_scalar(const uint8_t* bytes, const float* scale, int64_t c0, int64_t cols, float* const out[4]) {
  const float* table = F == Fp8Format::E4M3FN ? detail::kE4M3ToF32.data() : detail::kE5M2ToF32.data();
  for (int64_t c = c0; c < cols; ++c)
    for (int j = 0; j < 4; ++j) out[j][c] = table[bytes[4 * c + j]] * scale[c];
}

// Byte j of 16 x4 elements (w) as FP32. A code's magnitude bits shifted to the top of an FP32 significand
// read as the FP8 value times 2^-(FP32 bias - FP8 bias) (subnormal codes as FP32 subnormals), so one exact
// multiply by that power of two decodes it; the sign bit is copied. Codes without a finite value take the
// table's.
template <Fp8Format F>
[[gnu::target("avx512f"), gnu::always_inline]] inline __m512 x4_decode16(__m512i w, int j) {
  constexpr bool e4m3 = F == Fp8Format::E4M3FN;
  const float* table = e4m3 ? detail::kE4M3ToF32.data() : detail::kE5M2ToF32.data();
  const __m512i u = _mm512_and_si512(_mm512_srli_epi32(w, 8 * j), _mm512_set1_epi32(0xFF));
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7F));
  __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(mag, e4m3 ? 20 : 21)),
                           _mm512_set1_ps(e4m3 ? 0x1p120f : 0x1p112f));
  v = _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(v), _mm512_slli_epi32(_mm512_and_si512(u, _mm512_set1_epi32(0x80)), 24)));
  // NaN (E4M3FN), Inf and NaN (E5M2)
  if (const __mmask16 odd = _mm512_cmpge_epi32_mask(mag, _mm512_set1_epi32(e4m3 ? 0x7F : 0x7C)))
    v = _mm512_mask_i32gather_ps(v, odd, u, table, 4);
  return v;
}

// 16 elements at a time.
template <Fp8Format F>
[[gnu::target("avx512f")]] void x4_row_avx512(const uint8_t* bytes, const float* scale, int64_t cols,
                                              float* const out[4]) {
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    const __m512i w = _mm512_loadu_si512(bytes + 4 * c);
    const __m512 s = _mm512_loadu_ps(scale + c);
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(out[j] + c, _mm512_mul_ps(x4_decode16<F>(w, j), s));
  }
  x4_row_scalar<F>(bytes, scale, c, cols, out);
}

// Two rows as pairs (dequantize_x4_pairs), 16 elements at a time; the tail through x4_row_scalar.
template <Fp8Format F>
[[gnu::target("avx512f")]] PairRange x4_pairs_avx512(const uint8_t* hi, const uint8_t* lo, const float* scale,
                                                     int64_t cols, uint32_t* const out[4],
                                                     int64_t panel_step) {
  PairRangeAcc acc;
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    const __m512i wh = _mm512_loadu_si512(hi + 4 * c), wl = _mm512_loadu_si512(lo + 4 * c);
    const __m512 s = _mm512_loadu_ps(scale + c);
    const int64_t at = c / 32 * panel_step + c % 32;
    for (int j = 0; j < 4; ++j) {
      const __m512i h = _mm512_castps_si512(_mm512_mul_ps(x4_decode16<F>(wh, j), s));
      const __m512i l = _mm512_castps_si512(_mm512_mul_ps(x4_decode16<F>(wl, j), s));
      acc.add(h);
      acc.add(l);
      _mm512_storeu_si512(out[j] + at, _mm512_or_si512(_mm512_and_si512(h, high), _mm512_srli_epi32(l, 16)));
    }
  }
  PairRange r = acc.get();
  if (c < cols) {
    std::vector<float> v(static_cast<size_t>(8 * (cols - c)));
    const int64_t n = cols - c;
    float* o[4] = {v.data(), v.data() + n, v.data() + 2 * n, v.data() + 3 * n};
    float* o2[4] = {v.data() + 4 * n, v.data() + 5 * n, v.data() + 6 * n, v.data() + 7 * n};
    x4_row_scalar<F>(hi + 4 * c, scale + c, 0, n, o);
    x4_row_scalar<F>(lo + 4 * c, scale + c, 0, n, o2);
    r.add(pair_range_scalar(v.data(), static_cast<int>(8 * n)));
    for (int j = 0; j < 4; ++j)
      for (int64_t i = 0; i < n; ++i) {
        uint32_t h, l;
        std::memcpy(&h, &o[j][i], 4);
        std::memcpy(&l, &o2[j][i], 4);
        out[j][(c + i) / 32 * panel_step + (c + i) % 32] = (h & 0xFFFF0000u) | (l >> 16);
      }
  }
  return r;
}

bool host_has_avx512f() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return yes;
}

}  // namespace

void dequantize_x4_row(const uint8_t* bytes, const float* scale, int64_t cols, Fp8Format fmt,
                       float* const out[4]) {
  const bool e4m3 = fmt == Fp8Format::E4M3FN;
  if (host_has_avx512f())
    return e4m3 ? x4_row_avx512<Fp8Format::E4M3FN>(bytes, scale, cols, out)
                : x4_row_avx512<Fp8Format::E5M2>(bytes, scale, cols, out);
  return e4m3 ? x4_row_scalar<Fp8Format::E4M3FN>(bytes, scale, 0, cols, out)
              : x4_row_scalar<Fp8Format::E5M2>(bytes, scale, 0, cols, out);
}

PairRange dequantize_x4_pairs(const uint8_t* hi, const uint8_t* lo, const float* scale, int64_t cols,
                              Fp8Format fmt, uint32_t* const out[4], int64_t panel_step) {
  return fmt == Fp8Format::E4M3FN ? x4_pairs_avx512<Fp8Format::E4M3FN>(hi, lo, scale, cols, out, panel_step)
                                  : x4_pairs_avx512<Fp8Format::E5M2>(hi, lo, scale, cols, out, panel_step);
}

uint8_t quantize_block(const float* v, uint8_t* out, Fp8Format fmt, ScaleRule rule, MxIsa isa) {
  return block_dispatch(v, out, fmt, rule, isa);
}

uint8_t quantize_block_bf16(const uint16_t* v, uint8_t* out, Fp8Format fmt, ScaleRule rule, MxIsa isa) {
  return block_dispatch(v, out, fmt, rule, isa);
}

void quantize_x4_groups(const float* x, int64_t ld, int64_t F, Fp8Format fmt, ScaleRule rule, uint8_t* data,
                        int64_t ld_data, uint8_t* scales, MxIsa isa) {
  x4_groups_dispatch(x, ld, F, fmt, rule, data, ld_data, scales, isa);
}

void quantize_x4_groups(const uint16_t* x, int64_t ld, int64_t F, Fp8Format fmt, ScaleRule rule,
                        uint8_t* data, int64_t ld_data, uint8_t* scales, MxIsa isa) {
  x4_groups_dispatch(x, ld, F, fmt, rule, data, ld_data, scales, isa);
}

void quantize(const float* x, int64_t rows, int64_t cols, MxAxis axis, Fp8Format fmt, ScaleRule rule,
              uint8_t* data, uint8_t* scales, int threads, MxIsa isa) {
  quantize_dispatch(x, rows, cols, axis, fmt, rule, data, scales, threads, isa);
}

void quantize(const uint16_t* x_bf16, int64_t rows, int64_t cols, MxAxis axis, Fp8Format fmt, ScaleRule rule,
              uint8_t* data, uint8_t* scales, int threads, MxIsa isa) {
  quantize_dispatch(x_bf16, rows, cols, axis, fmt, rule, data, scales, threads, isa);
}

uint8_t quantize_block(const float* v, uint8_t* out, Fp8Format fmt, ScaleRule rule) {
  return block_dispatch(v, out, fmt, rule, mx_host_isa());
}

uint8_t quantize_block_bf16(const uint16_t* v, uint8_t* out, Fp8Format fmt, ScaleRule rule) {
  return block_dispatch(v, out, fmt, rule, mx_host_isa());
}

void quantize(const float* x, int64_t rows, int64_t cols, MxAxis axis, Fp8Format fmt, ScaleRule rule,
              uint8_t* data, uint8_t* scales, int threads) {
  quantize_dispatch(x, rows, cols, axis, fmt, rule, data, scales, threads, mx_host_isa());
}

void quantize(const uint16_t* x_bf16, int64_t rows, int64_t cols, MxAxis axis, Fp8Format fmt, ScaleRule rule,
              uint8_t* data, uint8_t* scales, int threads) {
  quantize_dispatch(x_bf16, rows, cols, axis, fmt, rule, data, scales, threads, mx_host_isa());
}

void dequantize(const uint8_t* data, const uint8_t* scales, int64_t rows, int64_t cols, MxAxis axis,
                Fp8Format fmt, float* out, int threads) {
  check_args("mx dequantize", rows, cols, axis, threads, !data || !scales || !out);
  const float* table = fmt == Fp8Format::E4M3FN ? detail::kE4M3ToF32.data() : detail::kE5M2ToF32.data();
  const int64_t nb = cols / kMxBlock;
  parallel_for(rows, threads, [=](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* srow = axis == MxAxis::Row ? scales + r * nb : scales + (r / kMxBlock) * cols;
      for (int64_t c = 0; c < cols; ++c) {
        const uint8_t s = axis == MxAxis::Row ? srow[c / kMxBlock] : srow[c];
        out[r * cols + c] = table[data[r * cols + c]] * e8m0_to_f32(s);
      }
    }
  });
}

}  // namespace trnsim::num
