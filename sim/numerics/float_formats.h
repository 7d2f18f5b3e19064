// Scalar float formats: FP32 <-> BF16, FP16 (IEEE binary16), OCP FP8 (E4M3FN, E5M2) and E8M0 scales.
// All conversions are bit-exact and independent of the host FP environment except that they assume the
// default round-to-nearest-even mode without flush-to-zero (never build with -ffast-math).
// Formats and NaN/Inf rules: docs/facts/mx-numerics.md §1 (bit layouts) and §3.1 (satfinite conversion).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

namespace trnsim::num {

// OCP 8-bit floats. E4M3FN: bias 7, no Inf, NaN = S.1111.111, max 448 (0x7E).
// E5M2: bias 15, IEEE-like, Inf = S.11111.00, max 57344 (0x7B).
enum class Fp8Format : uint8_t { E4M3FN, E5M2 };

// Largest finite value: 448 (E4M3FN), 57344 (E5M2). Both are 1.75 * 2^emax.
constexpr float fp8_max_finite(Fp8Format f) {
  return f == Fp8Format::E4M3FN ? 448.0f : 57344.0f;
}
// Exponent of the largest power of two in the format ("emax_elem" of OCP MX): 8 (E4M3FN), 15 (E5M2).
constexpr int fp8_emax(Fp8Format f) {
  return f == Fp8Format::E4M3FN ? 8 : 15;
}

// Canonical bytes.
inline constexpr uint8_t kFp8NaN = 0x7F;  // canonical NaN of both FP8 formats (satfinite output)
inline constexpr uint8_t kE8M0NaN = 0xFF;
inline constexpr uint16_t kBf16QuietNaN = 0x7FC0;
inline constexpr uint16_t kFp16QuietNaN = 0x7E00;

// ---- BF16 ----

// FP32 -> BF16, round to nearest even; overflow gives +-Inf; NaN -> 0x7FC0 with the input's sign.
inline uint16_t f32_to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>(((u >> 16) & 0x8000u) | kBf16QuietNaN);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// BF16 -> FP32, exact.
inline float bf16_to_f32(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

namespace detail {

// Round-to-nearest-even encoding of |x| (abs FP32 bits `a`, not NaN) into a small binary float with kMant
// mantissa bits and bias kBias, IEEE-style subnormals. Returns the magnitude code, which may exceed the
// format's largest finite code when |x| overflows (the caller saturates or maps to Inf/NaN).
// Normal range: integer rounding of the FP32 bits. Subnormal range: adding 2^(emin - kMant + 23) makes the
// FP32 adder round |x| to the subnormal grid (its ulp is exactly the subnormal step), RNE by IEEE rules.
template <int kMant, int kBias>
inline uint32_t encode_magnitude(uint32_t a) {
  constexpr int kShift = 23 - kMant;
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  constexpr uint32_t kMagicBits = static_cast<uint32_t>(127 + 1 - kBias - kMant + 23) << 23;
  constexpr uint32_t kRebias = static_cast<uint32_t>(127 - kBias) << kMant;
  const uint32_t normal = ((a + ((1u << (kShift - 1)) - 1u) + ((a >> kShift) & 1u)) >> kShift) - kRebias;
  const float sum = std::bit_cast<float>(a) + std::bit_cast<float>(kMagicBits);
  const uint32_t sub = std::bit_cast<uint32_t>(sum) - kMagicBits;
  const uint32_t is_sub =
      0u - static_cast<uint32_t>(a < kMinNormalBits);  // mask select: keeps the loop branch-free
  return (sub & is_sub) | (normal & ~is_sub);
}

template <Fp8Format F>
struct Fp8Traits;
template <>
struct Fp8Traits<Fp8Format::E4M3FN> {
  static constexpr int kMant = 3, kBias = 7;
  static constexpr uint32_t kMaxCode = 0x7E;
  static constexpr uint32_t kOverflowCode = 0x7F;  // non-saturating overflow: NaN (no Inf in E4M3FN)
};
template <>
struct Fp8Traits<Fp8Format::E5M2> {
  static constexpr int kMant = 2, kBias = 15;
  static constexpr uint32_t kMaxCode = 0x7B;
  static constexpr uint32_t kOverflowCode = 0x7C;  // non-saturating overflow: Inf
};

// satfinite encoding, branch-free so that block loops vectorize (docs/facts/mx-numerics.md §3.1).
template <Fp8Format F>
inline uint8_t f32_to_fp8_satfinite(float x) {
  using T = Fp8Traits<F>;
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t a = u & 0x7FFFFFFFu;
  uint32_t code = encode_magnitude<T::kMant, T::kBias>(a);
  code = std::min(code, T::kMaxCode) | ((u >> 24) & 0x80u);
  const uint32_t is_nan = 0u - static_cast<uint32_t>(a > 0x7F800000u);
  return static_cast<uint8_t>((kFp8NaN & is_nan) | (code & ~is_nan));
}

// Non-saturating encoding, as PyTorch's float8 casts (docs/facts/mx-numerics.md §3.3).
template <Fp8Format F>
inline uint8_t f32_to_fp8_overflow(float x) {
  using T = Fp8Traits<F>;
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t a = u & 0x7FFFFFFFu;
  const uint32_t sign = (u >> 24) & 0x80u;
  if (a > 0x7F800000u) return static_cast<uint8_t>(kFp8NaN | sign);
  const uint32_t code = encode_magnitude<T::kMant, T::kBias>(a);
  return static_cast<uint8_t>((code > T::kMaxCode ? T::kOverflowCode : code) | sign);
}

constexpr uint32_t fp8_decode_bits(uint8_t b, int mant, int bias, bool has_inf) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80) << 24;
  const uint32_t mag = b & 0x7Fu;
  const uint32_t m = mag & ((1u << mant) - 1u);
  const uint32_t e = mag >> mant;
  const uint32_t emax_field = (1u << (7 - mant)) - 1u;
  if (has_inf && e == emax_field) return sign | (m == 0 ? 0x7F800000u : 0x7FC00000u);
  if (!has_inf && mag == 0x7Fu) return sign | 0x7FC00000u;
  if (e == 0) {
    if (m == 0) return sign;
    // Subnormal m * 2^(1 - bias - mant): normalise into an FP32 normal.
    int exp = 1 - bias;
    uint32_t mm = m;
    while ((mm & (1u << mant)) == 0) {
      mm <<= 1;
      --exp;
    }
    mm &= (1u << mant) - 1u;
    return sign | (static_cast<uint32_t>(exp + 127) << 23) | (mm << (23 - mant));
  }
  return sign | ((e - bias + 127) << 23) | (m << (23 - mant));
}

constexpr std::array<float, 256> make_fp8_table(int mant, int bias, bool has_inf) {
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b)
    t[b] = std::bit_cast<float>(fp8_decode_bits(static_cast<uint8_t>(b), mant, bias, has_inf));
  return t;
}

inline constexpr std::array<float, 256> kE4M3ToF32 = make_fp8_table(3, 7, false);
inline constexpr std::array<float, 256> kE5M2ToF32 = make_fp8_table(2, 15, true);

}  // namespace detail

// ---- FP8 ----

// FP32 -> FP8, round to nearest even (normal and subnormal ranges alike).
// saturate = true is CUDA/TE satfinite (docs/facts/mx-numerics.md §3.1): |x| beyond the largest finite value,
// and +-Inf, give +-max (0x7E/0xFE E4M3FN, 0x7B/0xFB E5M2); NaN gives 0x7F (sign dropped); values that
// round to zero keep their sign (-0 and -tiny give 0x80).
// saturate = false follows PyTorch's casts (§3.3): overflow and Inf give NaN 0x7F|sign (E4M3FN) or
// Inf 0x7C|sign (E5M2); NaN gives 0x7F|sign.
inline uint8_t f32_to_fp8(float x, Fp8Format f, bool saturate = true) {
  if (f == Fp8Format::E4M3FN)
    return saturate ? detail::f32_to_fp8_satfinite<Fp8Format::E4M3FN>(x)
                    : detail::f32_to_fp8_overflow<Fp8Format::E4M3FN>(x);
  return saturate ? detail::f32_to_fp8_satfinite<Fp8Format::E5M2>(x)
                  : detail::f32_to_fp8_overflow<Fp8Format::E5M2>(x);
}

// FP8 -> FP32, exact. NaN codes give a quiet FP32 NaN carrying the byte's sign; E5M2 Inf gives +-Inf.
inline float fp8_to_f32(uint8_t b, Fp8Format f) {
  return f == Fp8Format::E4M3FN ? detail::kE4M3ToF32[b] : detail::kE5M2ToF32[b];
}

// ---- E8M0 ----

// E8M0 scale byte -> FP32: 2^(b-127); 0x00 is the FP32 subnormal 2^-127 (not zero); 0xFF is NaN (§1).
inline float e8m0_to_f32(uint8_t b) {
  if (b == 0) return std::bit_cast<float>(0x00400000u);
  if (b == 0xFF) return std::bit_cast<float>(0x7FC00000u);
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 23);
}

// 2^(127-b) as FP32 built from bits, the reciprocal of e8m0_to_f32 (TE's exp2f_rcp, §2.3): b = 254 gives the
// subnormal 2^-127, b = 255 gives NaN. Exact for every b.
inline float e8m0_rcp_f32(uint8_t b) {
  if (b == 0xFF) return std::bit_cast<float>(0x7FC00000u);
  if (b == 0xFE) return std::bit_cast<float>(0x00400000u);
  return std::bit_cast<float>(static_cast<uint32_t>(254 - b) << 23);
}

// FP32 -> E8M0 rounding up to a power of two with saturation, TE's float_to_e8m0 / PTX
// cvt.rp.satfinite.ue8m0x2.f32 (docs/facts/mx-numerics.md §2.3): NaN -> 0xFF, +-Inf -> 0xFE, 0 -> 0x00;
// otherwise the exponent field, plus one if the mantissa is non-zero, except at 0xFE (saturate) and for
// subnormals <= 2^-127 (stay 0x00). The sign is ignored (callers pass magnitudes).
inline uint8_t f32_to_e8m0_ceil(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x) & 0x7FFFFFFFu;
  if (u > 0x7F800000u) return kE8M0NaN;
  if (u == 0x7F800000u) return 0xFE;
  uint32_t e = u >> 23;
  const uint32_t m = u & 0x7FFFFFu;
  if (m != 0 && e != 0xFE && !(e == 0 && m <= 0x400000u)) ++e;
  return static_cast<uint8_t>(e);
}

// ---- FP16 (IEEE binary16) ----

// FP32 -> FP16, round to nearest even; overflow (|x| >= 65520) gives +-Inf; NaN -> 0x7E00 with the sign.
inline uint16_t f32_to_fp16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t a = u & 0x7FFFFFFFu;
  const uint32_t sign = (u >> 16) & 0x8000u;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | kFp16QuietNaN);
  const uint32_t code = detail::encode_magnitude<10, 15>(a);
  return static_cast<uint16_t>((code > 0x7BFFu ? 0x7C00u : code) | sign);
}

// FP16 -> FP32, exact; NaN payloads are kept (shifted into the FP32 mantissa).
inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  const uint32_t m = h & 0x3FFu;
  if (e == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (m << 13));
  if (e == 0) {
    const float v = static_cast<float>(m) * std::bit_cast<float>(0x33800000u);  // m * 2^-24, exact
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
}

}  // namespace trnsim::num
