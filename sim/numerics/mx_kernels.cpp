// GCC 12's AVX-512 intrinsics start from a self-initialised "undefined" vector (GCC bug 105593): its
// uninitialised-use warnings in this file are false.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "sim/numerics/mx_kernels.h"

#include <algorithm>

namespace trnsim::num {

MxIsa mx_host_isa() {
  static const MxIsa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return MxIsa::Avx512;
    if (__builtin_cpu_supports("avx2")) return MxIsa::Avx2;
    return MxIsa::Scalar;
  }();
  return isa;
}

namespace mxk {
namespace {

namespace scalar {

template <Fp8Format F, ScaleRule R, class In>
uint8_t block(const In* v, uint8_t* out) {
  uint32_t key = 0;
  for (int i = 0; i < kMxBlock; ++i) key = std::max(key, abs_key<R>(load(v[i])));
  const uint8_t s = mx_scale_byte(key, F, R);
  // A NaN scale (0xFF, Trn3/Ocp block NaN) makes every product NaN, so every element becomes 0x7F.
  const float mult = e8m0_rcp_f32(s);
  for (int i = 0; i < kMxBlock; ++i) out[i] = detail::f32_to_fp8_satfinite<F>(load(v[i]) * mult);
  return s;
}

template <Fp8Format F, ScaleRule R, class In>
void blocks(const In* v, int64_t n, uint8_t* out, uint8_t* scales) {
  for (int64_t b = 0; b < n; ++b) scales[b] = block<F, R>(v + b * kMxBlock, out + b * kMxBlock);
}

template <ScaleRule R, class In>
void keys(const In* row, int64_t n, uint32_t* k) {
  for (int64_t c = 0; c < n; ++c) k[c] = std::max(k[c], abs_key<R>(load(row[c])));
}

template <Fp8Format F, class In>
void encode_row(const In* row, const float* mult, int64_t n, uint8_t* out) {
  for (int64_t c = 0; c < n; ++c) out[c] = detail::f32_to_fp8_satfinite<F>(load(row[c]) * mult[c]);
}

}  // namespace scalar

// Every function of the namespace built for avx2: GCC's target pragma, clang's attribute push (the sanitizer
// and fuzz builds use clang, which ignores the GCC pragma).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif
namespace avx2 {

struct V {
  using F = __m256;
  using I = __m256i;
  static constexpr int kLanes = 8;
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F load(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static I load(const uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static void store(uint32_t* p, I v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  // The low byte of each lane (each lane holds 0..255) to out[0, 8).
  static void store_bytes(I c, uint8_t* out) {
    const __m256i w = _mm256_packus_epi32(c, c);  // per 128-bit half: c0-3 c0-3 | c4-7 c4-7 as 16 bits
    const __m256i b = _mm256_packus_epi16(w, w);
    const __m128i lo = _mm256_castsi256_si128(b), hi = _mm256_extracti128_si256(b, 1);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi32(lo, hi));
  }
  static I set1(uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
  static F set1f(float v) { return _mm256_set1_ps(v); }
  static I bits(F x) { return _mm256_castps_si256(x); }
  static F floats(I x) { return _mm256_castsi256_ps(x); }
  static I and_(I a, I b) { return _mm256_and_si256(a, b); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  static I add(I a, I b) { return _mm256_add_epi32(a, b); }
  static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  template <int k>
  static I srl(I a) {
    return _mm256_srli_epi32(a, k);
  }
  static F addf(F a, F b) { return _mm256_add_ps(a, b); }
  static F mulf(F a, F b) { return _mm256_mul_ps(a, b); }
  static I minu(I a, I b) { return _mm256_min_epu32(a, b); }
  static I maxu(I a, I b) { return _mm256_max_epu32(a, b); }
  // a < b ? x : y and a > b ? x : y, signed.
  static I select_lt(I a, I b, I x, I y) { return _mm256_blendv_epi8(y, x, _mm256_cmpgt_epi32(b, a)); }
  static I select_gt(I a, I b, I x, I y) { return _mm256_blendv_epi8(y, x, _mm256_cmpgt_epi32(a, b)); }
  static uint32_t hmax(I a) {
    __m128i m = _mm_max_epu32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0x4E));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0xB1));
    return static_cast<uint32_t>(_mm_cvtsi128_si32(m));
  }
};

#include "sim/numerics/mx_kernels_body.inc"

}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// Every function of the namespace built for avx512f: GCC's target pragma, clang's attribute push (the
// sanitizer and fuzz builds use clang, which ignores the GCC pragma).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif
namespace avx512 {

struct V {
  using F = __m512;
  using I = __m512i;
  static constexpr int kLanes = 16;
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F load(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static I load(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static void store(uint32_t* p, I v) { _mm512_storeu_si512(p, v); }
  // The low byte of each lane (each lane holds 0..255) to out[0, 16).
  static void store_bytes(I c, uint8_t* out) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(c));
  }
  static I set1(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  static F set1f(float v) { return _mm512_set1_ps(v); }
  static I bits(F x) { return _mm512_castps_si512(x); }
  static F floats(I x) { return _mm512_castsi512_ps(x); }
  static I and_(I a, I b) { return _mm512_and_si512(a, b); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  static I add(I a, I b) { return _mm512_add_epi32(a, b); }
  static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  template <int k>
  static I srl(I a) {
    return _mm512_srli_epi32(a, k);
  }
  static F addf(F a, F b) { return _mm512_add_ps(a, b); }
  static F mulf(F a, F b) { return _mm512_mul_ps(a, b); }
  static I minu(I a, I b) { return _mm512_min_epu32(a, b); }
  static I maxu(I a, I b) { return _mm512_max_epu32(a, b); }
  // a < b ? x : y and a > b ? x : y, signed.
  static I select_lt(I a, I b, I x, I y) {
    return _mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(a, b), y, x);
  }
  static I select_gt(I a, I b, I x, I y) {
    return _mm512_mask_blend_epi32(_mm512_cmpgt_epi32_mask(a, b), y, x);
  }
  static uint32_t hmax(I a) { return _mm512_reduce_max_epu32(a); }
};

#include "sim/numerics/mx_kernels_body.inc"

}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

}  // namespace

template <Fp8Format F, ScaleRule R, class In>
Kernels<In> kernels(MxIsa isa) {
  switch (std::min(isa, mx_host_isa())) {
    case MxIsa::Avx512:
      return {avx512::block<F, R, In>, avx512::blocks<F, R, In>, avx512::keys<R, In>,
              avx512::encode_row<F, In>};
    case MxIsa::Avx2:
      return {avx2::block<F, R, In>, avx2::blocks<F, R, In>, avx2::keys<R, In>, avx2::encode_row<F, In>};
    case MxIsa::Scalar:
      break;
  }
  return {scalar::block<F, R, In>, scalar::blocks<F, R, In>, scalar::keys<R, In>, scalar::encode_row<F, In>};
}

#define TRNSIM_MX_KERNELS(F, R)                                              \
  template Kernels<float> kernels<Fp8Format::F, ScaleRule::R, float>(MxIsa); \
  template Kernels<uint16_t> kernels<Fp8Format::F, ScaleRule::R, uint16_t>(MxIsa);
TRNSIM_MX_KERNELS(E4M3FN, Trn3)
TRNSIM_MX_KERNELS(E4M3FN, Ocp)
TRNSIM_MX_KERNELS(E4M3FN, Te)
TRNSIM_MX_KERNELS(E5M2, Trn3)
TRNSIM_MX_KERNELS(E5M2, Ocp)
TRNSIM_MX_KERNELS(E5M2, Te)
#undef TRNSIM_MX_KERNELS

}  // namespace mxk
}  // namespace trnsim::num
