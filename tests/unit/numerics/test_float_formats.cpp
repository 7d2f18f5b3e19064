// Scalar conversions against an independent reference: every FP8/E8M0/FP16 code, every BF16 pattern, and
// the satfinite rules of docs/facts/mx-numerics.md §3.1 and the PyTorch-style non-saturating rules of §3.3.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sim/numerics/float_formats.h"

using namespace trnsim::num;

namespace {

float f(uint32_t bits) {
  return std::bit_cast<float>(bits);
}
uint32_t bits(float x) {
  return std::bit_cast<uint32_t>(x);
}

struct Spec {
  int mant, bias;
  uint32_t max_code;       // largest finite magnitude code
  uint32_t overflow_code;  // non-saturating overflow magnitude code (NaN for E4M3FN, Inf for E5M2)
};
Spec spec(Fp8Format fmt) {
  return fmt == Fp8Format::E4M3FN ? Spec{3, 7, 0x7E, 0x7F} : Spec{2, 15, 0x7B, 0x7C};
}

// Value of magnitude code c by the textbook formula, also for c = max_code + 1 (480 / 65536).
long double code_value(uint32_t c, const Spec& s) {
  const uint32_t e = c >> s.mant, m = c & ((1u << s.mant) - 1);
  if (e == 0) return std::ldexp(static_cast<long double>(m), 1 - s.bias - s.mant);
  return std::ldexp(static_cast<long double>((1u << s.mant) + m), static_cast<int>(e) - s.bias - s.mant);
}

std::vector<long double> grid_of(const Spec& s) {
  std::vector<long double> grid;
  for (uint32_t c = 0; c <= s.max_code + 1; ++c) grid.push_back(code_value(c, s));
  return grid;
}

// Independent FP32 -> FP8: nearest grid value by exact comparison with the midpoint (midpoints of 4-bit
// values are exact in long double), ties to the even code; rounding to max_code + 1 or beyond is overflow.
uint8_t ref_to_fp8(float x, Fp8Format fmt, bool saturate) {
  const Spec s = spec(fmt);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return saturate ? 0x7F : static_cast<uint8_t>(0x7F | sign);
  const long double ax = std::fabs(static_cast<long double>(x));
  static const std::vector<long double> grids[2] = {grid_of(spec(Fp8Format::E4M3FN)),
                                                    grid_of(spec(Fp8Format::E5M2))};
  const std::vector<long double>& grid = grids[fmt == Fp8Format::E4M3FN ? 0 : 1];
  uint32_t code;
  if (ax >= grid.back()) {
    code = s.max_code + 1;
  } else {
    const auto it = std::upper_bound(grid.begin(), grid.end(), ax);
    const uint32_t lo = static_cast<uint32_t>(it - grid.begin()) - 1;
    const long double mid = (grid[lo] + grid[lo + 1]) / 2;
    code = ax < mid ? lo : ax > mid ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
  }
  if (code > s.max_code) code = saturate ? s.max_code : s.overflow_code;
  return static_cast<uint8_t>(code | sign);
}

}  // namespace

TEST_CASE("fp8 constants", "[numerics][fp8]") {
  CHECK(fp8_max_finite(Fp8Format::E4M3FN) == 448.0f);
  CHECK(fp8_max_finite(Fp8Format::E5M2) == 57344.0f);
  CHECK(fp8_emax(Fp8Format::E4M3FN) == 8);
  CHECK(fp8_emax(Fp8Format::E5M2) == 15);
  CHECK(fp8_to_f32(0x7E, Fp8Format::E4M3FN) == 448.0f);
  CHECK(fp8_to_f32(0x01, Fp8Format::E4M3FN) == std::ldexp(1.0f, -9));
  CHECK(fp8_to_f32(0x08, Fp8Format::E4M3FN) == std::ldexp(1.0f, -6));
  CHECK(fp8_to_f32(0xFE, Fp8Format::E4M3FN) == -448.0f);
  CHECK(fp8_to_f32(0x7B, Fp8Format::E5M2) == 57344.0f);
  CHECK(fp8_to_f32(0x01, Fp8Format::E5M2) == std::ldexp(1.0f, -16));
  CHECK(fp8_to_f32(0x04, Fp8Format::E5M2) == std::ldexp(1.0f, -14));
  CHECK(bits(fp8_to_f32(0x7C, Fp8Format::E5M2)) == 0x7F800000u);
  CHECK(bits(fp8_to_f32(0xFC, Fp8Format::E5M2)) == 0xFF800000u);
  CHECK(bits(fp8_to_f32(0x80, Fp8Format::E4M3FN)) == 0x80000000u);
}

// Every code decodes to the textbook value and re-encodes to itself. NaN codes re-encode to the canonical
// 0x7F when saturating (sign dropped, §3.1) and to 0x7F|sign otherwise (§3.3); E5M2 +-Inf saturates to
// +-57344 (0x7B/0xFB) and stays +-Inf without saturation.
TEST_CASE("fp8 every code round trips", "[numerics][fp8]") {
  for (Fp8Format fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2}) {
    const Spec s = spec(fmt);
    for (int b = 0; b < 256; ++b) {
      INFO("format " << static_cast<int>(fmt) << " code " << b);
      const uint8_t code = static_cast<uint8_t>(b);
      const uint32_t mag = code & 0x7F;
      const uint8_t sign = code & 0x80;
      const float v = fp8_to_f32(code, fmt);
      const bool is_nan = fmt == Fp8Format::E4M3FN ? mag == 0x7F : mag > 0x7C;
      const bool is_inf = fmt == Fp8Format::E5M2 && mag == 0x7C;
      if (is_nan) {
        CHECK(std::isnan(v));
        CHECK(std::signbit(v) == (sign != 0));
        CHECK(f32_to_fp8(v, fmt, true) == 0x7F);
        CHECK(f32_to_fp8(v, fmt, false) == (0x7F | sign));
      } else if (is_inf) {
        CHECK(std::isinf(v));
        CHECK(f32_to_fp8(v, fmt, true) == (0x7B | sign));
        CHECK(f32_to_fp8(v, fmt, false) == code);
      } else {
        const long double want = sign ? -code_value(mag, s) : code_value(mag, s);
        CHECK(static_cast<long double>(v) == want);
        CHECK(std::signbit(v) == (sign != 0));
        CHECK(f32_to_fp8(v, fmt, true) == code);
        CHECK(f32_to_fp8(v, fmt, false) == code);
      }
    }
  }
}

TEST_CASE("every BF16 pattern to fp8 matches the reference", "[numerics][fp8]") {
  for (Fp8Format fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2})
    for (bool sat : {true, false}) {
      int mismatches = 0;
      for (uint32_t b = 0; b < 65536; ++b) {
        const float x = bf16_to_f32(static_cast<uint16_t>(b));
        const uint8_t got = f32_to_fp8(x, fmt, sat), want = ref_to_fp8(x, fmt, sat);
        if (got != want && ++mismatches <= 5) {
          INFO("format " << static_cast<int>(fmt) << " sat " << sat << " bf16 0x" << std::hex << b);
          CHECK(static_cast<int>(got) == static_cast<int>(want));
        }
      }
      CHECK(mismatches == 0);
    }
}

TEST_CASE("random FP32 patterns to fp8 match the reference", "[numerics][fp8]") {
  std::mt19937 gen(12345);
  for (Fp8Format fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2})
    for (bool sat : {true, false}) {
      int mismatches = 0;
      for (int i = 0; i < 100000; ++i) {
        // Bias towards the interesting exponent range [2^-20, 2^17].
        uint32_t u = gen();
        if (i % 2) u = (u & 0x807FFFFFu) | ((107u + gen() % 38u) << 23);
        const float x = f(u);
        if (f32_to_fp8(x, fmt, sat) != ref_to_fp8(x, fmt, sat)) ++mismatches;
      }
      CHECK(mismatches == 0);
    }
}

TEST_CASE("fp8 satfinite edges of mx-numerics 3.1", "[numerics][fp8]") {
  const auto e4 = Fp8Format::E4M3FN;
  const auto e5 = Fp8Format::E5M2;
  CHECK(f32_to_fp8(464.0f, e4) == 0x7E);                        // tie -> even 448
  CHECK(f32_to_fp8(std::nextafter(464.0f, 1e9f), e4) == 0x7E);  // overflow saturates
  CHECK(f32_to_fp8(std::nextafter(464.0f, 1e9f), e4, false) == 0x7F);
  CHECK(f32_to_fp8(464.0f, e4, false) == 0x7E);
  CHECK(f32_to_fp8(-1e30f, e4) == 0xFE);
  CHECK(f32_to_fp8(-1e30f, e4, false) == 0xFF);
  CHECK(f32_to_fp8(f(0x7F800000u), e4) == 0x7E);
  CHECK(f32_to_fp8(f(0xFF800000u), e4) == 0xFE);
  CHECK(f32_to_fp8(f(0xFF800000u), e4, false) == 0xFF);
  CHECK(f32_to_fp8(f(0xFFC00000u), e4) == 0x7F);  // NaN sign dropped
  CHECK(f32_to_fp8(f(0xFFC00000u), e4, false) == 0xFF);
  CHECK(f32_to_fp8(std::ldexp(1.0f, -10), e4) == 0x00);  // half the min subnormal: tie -> 0
  CHECK(f32_to_fp8(-std::ldexp(1.0f, -10), e4) == 0x80);
  CHECK(f32_to_fp8(std::nextafter(std::ldexp(1.0f, -10), 1.0f), e4) == 0x01);
  CHECK(f32_to_fp8(3 * std::ldexp(1.0f, -10), e4) == 0x02);  // 1.5 * 2^-9 tie -> even 2
  CHECK(f32_to_fp8(-0.0f, e4) == 0x80);
  CHECK(f32_to_fp8(-1e-30f, e4) == 0x80);
  CHECK(f32_to_fp8(61440.0f, e5) == 0x7B);
  CHECK(f32_to_fp8(61440.0f, e5, false) == 0x7C);  // tie goes to Inf without saturation
  CHECK(f32_to_fp8(std::nextafter(61440.0f, 0.0f), e5, false) == 0x7B);
  CHECK(f32_to_fp8(f(0xFF800000u), e5) == 0xFB);
  CHECK(f32_to_fp8(f(0xFF800000u), e5, false) == 0xFC);
  CHECK(f32_to_fp8(f(0x7FC00000u), e5) == 0x7F);
  CHECK(f32_to_fp8(std::ldexp(1.0f, -17), e5) == 0x00);
  CHECK(f32_to_fp8(-std::ldexp(1.0f, -17), e5) == 0x80);
  CHECK(f32_to_fp8(std::ldexp(3.0f, -17), e5) == 0x02);
}

// E8M0: 0x00 is 2^-127 (FP32 subnormal 0x00400000), 0xFF NaN; the TE ceil encoder inverts every code.
TEST_CASE("e8m0 every code", "[numerics][e8m0]") {
  CHECK(bits(e8m0_to_f32(0x00)) == 0x00400000u);
  CHECK(bits(e8m0_to_f32(0x7F)) == 0x3F800000u);
  CHECK(bits(e8m0_to_f32(0xFE)) == 0x7F000000u);
  CHECK(std::isnan(e8m0_to_f32(0xFF)));
  for (int b = 0; b < 256; ++b) {
    INFO("code " << b);
    const uint8_t code = static_cast<uint8_t>(b);
    const float v = e8m0_to_f32(code);
    if (b == 255) {
      CHECK(std::isnan(v));
      CHECK(std::isnan(e8m0_rcp_f32(code)));
    } else {
      CHECK(static_cast<long double>(v) == std::ldexp(1.0L, b - 127));
      CHECK(static_cast<long double>(e8m0_rcp_f32(code)) == std::ldexp(1.0L, 127 - b));
    }
    CHECK(f32_to_e8m0_ceil(v) == code);
  }
}

TEST_CASE("e8m0 ceil rule of TE float_to_e8m0", "[numerics][e8m0]") {
  CHECK(f32_to_e8m0_ceil(0.0f) == 0x00);
  CHECK(f32_to_e8m0_ceil(f(0x7F800000u)) == 0xFE);
  CHECK(f32_to_e8m0_ceil(f(0x7FC00000u)) == 0xFF);
  CHECK(f32_to_e8m0_ceil(1.0f) == 0x7F);
  CHECK(f32_to_e8m0_ceil(std::nextafter(1.0f, 2.0f)) == 0x80);
  CHECK(f32_to_e8m0_ceil(std::nextafter(1.0f, 0.0f)) == 0x7F);
  CHECK(f32_to_e8m0_ceil(f(0x7F7FFFFFu)) == 0xFE);  // saturates instead of 0xFF
  CHECK(f32_to_e8m0_ceil(f(0x00400000u)) == 0x00);  // 2^-127 exactly
  CHECK(f32_to_e8m0_ceil(f(0x00400001u)) == 0x01);  // just above 2^-127
  CHECK(f32_to_e8m0_ceil(f(0x00000001u)) == 0x00);
}

TEST_CASE("bf16 conversions", "[numerics][bf16]") {
  CHECK(f32_to_bf16(1.0f) == 0x3F80);
  CHECK(f32_to_bf16(f(0x3F808000u)) == 0x3F80);  // tie -> even
  CHECK(f32_to_bf16(f(0x3F818000u)) == 0x3F82);  // tie -> even (up)
  CHECK(f32_to_bf16(f(0x3F808001u)) == 0x3F81);
  CHECK(f32_to_bf16(f(0x3F807FFFu)) == 0x3F80);
  CHECK(f32_to_bf16(f(0x7F7FFFFFu)) == 0x7F80);  // overflow -> Inf
  CHECK(f32_to_bf16(f(0x7F800001u)) == 0x7FC0);
  CHECK(f32_to_bf16(f(0xFF800001u)) == 0xFFC0);
  CHECK(f32_to_bf16(f(0x80000001u)) == 0x8000);
  CHECK(bits(bf16_to_f32(0xC0A0)) == 0xC0A00000u);
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const bool nan = (b & 0x7FFF) > 0x7F80;
    const uint16_t want = nan ? static_cast<uint16_t>((b & 0x8000) | 0x7FC0) : h;
    if (f32_to_bf16(bf16_to_f32(h)) != want) FAIL("bf16 round trip 0x" << std::hex << b);
  }
}

TEST_CASE("fp16 every code and rounding", "[numerics][fp16]") {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const uint32_t e = (b >> 10) & 0x1F, m = b & 0x3FF;
    const float v = fp16_to_f32(h);
    const bool neg = (b & 0x8000) != 0;
    if (e == 31) {
      if (m == 0 ? !std::isinf(v) : !std::isnan(v)) FAIL("fp16 special 0x" << std::hex << b);
      const uint16_t want = m == 0 ? h : static_cast<uint16_t>((b & 0x8000) | 0x7E00);
      if (f32_to_fp16(v) != want) FAIL("fp16 special round trip 0x" << std::hex << b);
      continue;
    }
    const long double mag = e == 0 ? std::ldexp(static_cast<long double>(m), -24)
                                   : std::ldexp(static_cast<long double>(1024 + m), static_cast<int>(e) - 25);
    if (static_cast<long double>(v) != (neg ? -mag : mag) || std::signbit(v) != neg)
      FAIL("fp16 decode 0x" << std::hex << b);
    if (f32_to_fp16(v) != h) FAIL("fp16 round trip 0x" << std::hex << b);
  }
  CHECK(f32_to_fp16(1.0f) == 0x3C00);
  CHECK(f32_to_fp16(65504.0f) == 0x7BFF);
  CHECK(f32_to_fp16(std::nextafter(65520.0f, 0.0f)) == 0x7BFF);
  CHECK(f32_to_fp16(65520.0f) == 0x7C00);  // tie -> even = Inf
  CHECK(f32_to_fp16(-1e10f) == 0xFC00);
  CHECK(f32_to_fp16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(f32_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);
  CHECK(f32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
  CHECK(f32_to_fp16(std::ldexp(3.0f, -25)) == 0x0002);
  CHECK(f32_to_fp16(-0.0f) == 0x8000);
  CHECK(f32_to_fp16(f(0xFFC00000u)) == 0xFE00);
  CHECK(f32_to_fp16(f(0x3F801000u)) == 0x3C00);  // 1 + 2^-11: tie -> even
  CHECK(f32_to_fp16(f(0x3F803000u)) == 0x3C02);  // 1 + 3*2^-11: tie -> even (up)
}
