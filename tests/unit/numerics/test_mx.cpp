// MX quantization: scale rules at their boundaries (docs/facts/mx-numerics.md §2, trainium-hardware.md §2.2),
// the §2.5 worked examples, 2-D arrays on both axes with bytes known by construction, thread invariance and
// the input errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "sim/base/error.h"
#include "sim/numerics/mx.h"
#include "sim/numerics/mx_isa.h"
#include "sim/numerics/pair_range.h"

using namespace trnsim::num;
using trnsim::InputError;

namespace {

float f(uint32_t bits) {
  return std::bit_cast<float>(bits);
}
uint32_t bits(float x) {
  return std::bit_cast<uint32_t>(x);
}

const char* rule_str(ScaleRule r) {
  return r == ScaleRule::Trn3 ? "trn3" : r == ScaleRule::Ocp ? "ocp" : "te";
}

// Block: v[0] = a, v[1] = -a, v[2..31] = 0.
struct BlockResult {
  uint8_t scale;
  std::array<uint8_t, 32> out;
};
BlockResult run_pm(float a, Fp8Format fmt, ScaleRule rule) {
  std::array<float, 32> v{};
  v[0] = a;
  v[1] = -a;
  BlockResult r{};
  r.scale = quantize_block(v.data(), r.out.data(), fmt, rule);
  return r;
}

struct Case {
  const char* name;
  Fp8Format fmt;
  float amax;
  uint8_t trn3_scale, trn3_elem, ocp_scale, ocp_elem, te_scale, te_elem;
};

void check_case(const Case& c) {
  const std::array<std::array<uint8_t, 2>, 3> want = {
      {{c.trn3_scale, c.trn3_elem}, {c.ocp_scale, c.ocp_elem}, {c.te_scale, c.te_elem}}};
  const ScaleRule rules[3] = {ScaleRule::Trn3, ScaleRule::Ocp, ScaleRule::Te};
  for (int i = 0; i < 3; ++i) {
    INFO(c.name << " rule " << rule_str(rules[i]));
    const BlockResult r = run_pm(c.amax, c.fmt, rules[i]);
    CHECK(static_cast<int>(r.scale) == want[i][0]);
    CHECK(static_cast<int>(r.out[0]) == want[i][1]);
    CHECK(static_cast<int>(r.out[1]) == (want[i][1] | 0x80));
    for (int k = 2; k < 32; ++k) CHECK(r.out[k] == 0x00);
  }
}

}  // namespace

TEST_CASE("te max_norm reciprocals are TE's FP32 constants", "[numerics][mx]") {
  CHECK(bits(te_max_norm_rcp(Fp8Format::E4M3FN)) == 0x3B124925u);
  CHECK(bits(te_max_norm_rcp(Fp8Format::E5M2)) == 0x37924925u);
}

// mx-numerics.md §2.5 (OCP and TE columns as printed; Trn3 = twice the OCP scale, per trainium-hardware
// §2.2).
TEST_CASE("worked examples of mx-numerics 2.5", "[numerics][mx]") {
  const auto e4 = Fp8Format::E4M3FN;
  const auto e5 = Fp8Format::E5M2;
  const Case cases[] = {
      {"448", e4, 448.0f, 0x80, 0x76, 0x7F, 0x7E, 0x7F, 0x7E},
      {"1.0", e4, 1.0f, 0x78, 0x70, 0x77, 0x78, 0x77, 0x78},
      {"500", e4, 500.0f, 0x80, 0x78, 0x7F, 0x7E, 0x80, 0x78},
      {"3.5", e4, 3.5f, 0x79, 0x76, 0x78, 0x7E, 0x78, 0x7E},
      {"3.5+1ulp", e4, std::nextafter(3.5f, 4.0f), 0x79, 0x76, 0x78, 0x7E, 0x79, 0x76},
      {"2^-140", e4, std::ldexp(1.0f, -140), 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},
      {"E5M2 57344", e5, 57344.0f, 0x80, 0x77, 0x7F, 0x7B, 0x7F, 0x7B},
      {"E5M2 1.0", e5, 1.0f, 0x71, 0x74, 0x70, 0x78, 0x70, 0x78},
      {"E5M2 60000", e5, 60000.0f, 0x80, 0x77, 0x7F, 0x7B, 0x80, 0x77},
  };
  for (const Case& c : cases) check_case(c);
}

// amax exactly 1.75 * 2^k, one FP32 ulp above and below; the other format's maximum; the FP32 extremes.
TEST_CASE("scale rule boundaries", "[numerics][mx]") {
  const auto e4 = Fp8Format::E4M3FN;
  const auto e5 = Fp8Format::E5M2;
  const float a = std::ldexp(1.75f, -20);  // 1.75 * 2^-20: biased exponent 107
  const Case cases[] = {
      // E4M3FN: OCP byte 107-8 = 99 (0x63), Trn3 100 (0x64); 1.75 * 2^8 = 448 (0x7E), 1.75 * 2^7 = 224
      // (0x76).
      {"1.75*2^-20", e4, a, 0x64, 0x76, 0x63, 0x7E, 0x63, 0x7E},
      {"1.75*2^-20+ulp", e4, std::nextafter(a, 1.0f), 0x64, 0x76, 0x63, 0x7E, 0x64, 0x76},
      {"1.75*2^-20-ulp", e4, std::nextafter(a, 0.0f), 0x64, 0x76, 0x63, 0x7E, 0x63, 0x7E},
      // E5M2: OCP 107-15 = 92 (0x5C), Trn3 0x5D; 57344 (0x7B), 28672 (0x77).
      {"E5M2 1.75*2^-20", e5, a, 0x5D, 0x77, 0x5C, 0x7B, 0x5C, 0x7B},
      {"E5M2 1.75*2^-20+ulp", e5, std::nextafter(a, 1.0f), 0x5D, 0x77, 0x5C, 0x7B, 0x5D, 0x77},
      {"E5M2 1.75*2^-20-ulp", e5, std::nextafter(a, 0.0f), 0x5D, 0x77, 0x5C, 0x7B, 0x5C, 0x7B},
      // The other format's maximum: 57344 = 1.75*2^15 in E4M3FN, 448 = 1.75*2^8 in E5M2.
      {"E4M3 57344", e4, 57344.0f, 0x87, 0x76, 0x86, 0x7E, 0x86, 0x7E},
      {"E5M2 448", e5, 448.0f, 0x79, 0x77, 0x78, 0x7B, 0x78, 0x7B},
      // Largest FP32 (2 - 2^-23) * 2^127: OCP 254-8 = 0xF6 and 511.99 saturates; Trn3 0xF7, 255.99 -> 256;
      // TE: p = 1.143 * 2^119 -> ceil 2^120 -> 0xF7, element 256 (0x78).
      {"FP32 max", e4, f(0x7F7FFFFFu), 0xF7, 0x78, 0xF6, 0x7E, 0xF7, 0x78},
      // amax = 448 * 2^-127 * (1 + 2^-23): TE's FP32 product rounds to 2^-127 -> byte 0x00 and the maximum
      // saturates (the mismatch family of §2.4); exact floor rules give OCP 0x00 (448.00005 -> 448), Trn3
      // 0x01.
      {"0x04600001", e4, f(0x04600001u), 0x01, 0x76, 0x00, 0x7E, 0x00, 0x7E},
      // Subnormal FP32 amax 2^-140: every rule 0x00; the element 2^-13 is 0 in E4M3FN and 0x08 in E5M2.
      {"E5M2 2^-140", e5, std::ldexp(1.0f, -140), 0x00, 0x08, 0x00, 0x08, 0x00, 0x08},
      // Largest FP32 subnormal: floor rules clamp to 0x00; TE's p is an FP32 subnormal below 2^-127 -> 0x00.
      // Every rule then multiplies by 2^127: 2 - 2^-22 rounds to 2 (0x40).
      {"subnormal max", e4, f(0x007FFFFFu), 0x00, 0x40, 0x00, 0x40, 0x00, 0x40},
  };
  for (const Case& c : cases) check_case(c);
}

TEST_CASE("all-zero and negative-zero blocks", "[numerics][mx]") {
  for (Fp8Format fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2})
    for (ScaleRule rule : {ScaleRule::Trn3, ScaleRule::Ocp, ScaleRule::Te}) {
      INFO(rule_str(rule));
      std::array<float, 32> v{};
      for (int i = 0; i < 32; i += 2) v[i] = -0.0f;
      std::array<uint8_t, 32> out{};
      CHECK(quantize_block(v.data(), out.data(), fmt, rule) == 0x00);
      for (int i = 0; i < 32; ++i) CHECK(out[i] == (i % 2 == 0 ? 0x80 : 0x00));
    }
}

// Trn3 and Ocp: any NaN/Inf makes the block NaN. Te: NaN ignored in amax and becomes 0x7F; Inf gives 0xFE,
// Inf -> +-max, finite elements underflow to signed zero.
TEST_CASE("NaN and Inf in a block", "[numerics][mx]") {
  const float specials[] = {f(0x7FC00000u), f(0xFFC00001u), f(0x7F800000u), f(0xFF800000u)};
  for (Fp8Format fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2})
    for (int si = 0; si < 4; ++si) {
      std::array<float, 32> v{};
      v[0] = 1.0f;
      v[1] = -0.5f;
      v[7] = specials[si];
      const bool is_nan = si < 2;
      for (ScaleRule rule : {ScaleRule::Trn3, ScaleRule::Ocp}) {
        INFO(rule_str(rule) << " special " << si);
        std::array<uint8_t, 32> out{};
        CHECK(quantize_block(v.data(), out.data(), fmt, rule) == 0xFF);
        for (uint8_t b : out) CHECK(b == 0x7F);
      }
      INFO("te special " << si);
      std::array<uint8_t, 32> out{};
      const uint8_t s = quantize_block(v.data(), out.data(), fmt, ScaleRule::Te);
      const bool e4 = fmt == Fp8Format::E4M3FN;
      if (is_nan) {
        // amax 1.0: E4M3 0x77 with 1.0 -> 256 (0x78), -0.5 -> 0xF0; E5M2 0x70, 32768 (0x78), -16384 (0xF4).
        CHECK(s == (e4 ? 0x77 : 0x70));
        CHECK(out[0] == 0x78);
        CHECK(out[1] == (e4 ? 0xF0 : 0xF4));
        CHECK(out[7] == 0x7F);
      } else {
        CHECK(s == 0xFE);
        CHECK(out[0] == 0x00);
        CHECK(out[1] == 0x80);
        const uint8_t maxb = e4 ? 0x7E : 0x7B;
        CHECK(out[7] == (si == 2 ? maxb : (maxb | 0x80)));
      }
      for (int i = 2; i < 32; ++i)
        if (i != 7) CHECK(out[i] == 0x00);
    }
}

TEST_CASE("block of all NaN under te", "[numerics][mx]") {
  std::array<float, 32> v;
  v.fill(f(0x7FC00000u));
  std::array<uint8_t, 32> out{};
  CHECK(quantize_block(v.data(), out.data(), Fp8Format::E4M3FN, ScaleRule::Te) == 0x00);
  for (uint8_t b : out) CHECK(b == 0x7F);
}

namespace {

// Element value of magnitude code c, independent of the code under test.
float fp8_value(uint8_t c, Fp8Format fmt) {
  const int mant = fmt == Fp8Format::E4M3FN ? 3 : 2, bias = fmt == Fp8Format::E4M3FN ? 7 : 15;
  const int e = (c & 0x7F) >> mant, m = c & ((1 << mant) - 1);
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), 1 - bias - mant)
                           : std::ldexp(static_cast<float>((1 << mant) + m), e - bias - mant);
  return (c & 0x80) ? -mag : mag;
}

// A [rows, cols] array built from chosen scale bytes and element codes so the expected quantization is
// known exactly: each block holds one element at the rule's top binade (Trn3 [128, 256) or [2^14, 2^15);
// Ocp/Te [256, 448] or [2^15, 57344]) and others at or below it; x = value(code) * 2^(scale - 127).
struct Built {
  std::vector<float> x;
  std::vector<uint8_t> data, scales;
};
Built build(int64_t rows, int64_t cols, MxAxis axis, Fp8Format fmt, ScaleRule rule, uint32_t seed) {
  std::mt19937 gen(seed);
  const bool e4 = fmt == Fp8Format::E4M3FN;
  const int mant = e4 ? 3 : 2;
  const int top_binade_code = (rule == ScaleRule::Trn3 ? (e4 ? 14 : 29) : (e4 ? 15 : 30)) << mant;
  const int top_count = e4 && rule != ScaleRule::Trn3 ? 7 : (1 << mant);  // 0x7F is NaN in E4M3FN
  Built b;
  b.x.resize(rows * cols);
  b.data.resize(rows * cols);
  const int64_t nblocks = rows * cols / 32;
  b.scales.resize(nblocks);
  for (int64_t blk = 0; blk < nblocks; ++blk) {
    const uint8_t s = static_cast<uint8_t>(100 + gen() % 50);
    const uint8_t top = static_cast<uint8_t>(top_binade_code + gen() % top_count);
    const int where = static_cast<int>(gen() % 32);
    int64_t sr, sc;  // scale position in the compact layout
    if (axis == MxAxis::Row) {
      sr = blk / (cols / 32);
      sc = blk % (cols / 32);
      b.scales[sr * (cols / 32) + sc] = s;
    } else {
      sr = blk / cols;
      sc = blk % cols;
      b.scales[sr * cols + sc] = s;
    }
    for (int i = 0; i < 32; ++i) {
      uint8_t code = i == where ? top : static_cast<uint8_t>(gen() % (top + 1u));
      if (gen() % 2) code |= 0x80;
      const int64_t r = axis == MxAxis::Row ? sr : sr * 32 + i;
      const int64_t c = axis == MxAxis::Row ? sc * 32 + i : sc;
      b.data[r * cols + c] = code;
      b.x[r * cols + c] = std::ldexp(fp8_value(code, fmt), s - 127);
    }
  }
  return b;
}

}  // namespace

TEST_CASE("quantize and dequantize 2-D arrays on both axes", "[numerics][mx]") {
  for (MxAxis axis : {MxAxis::Row, MxAxis::Col})
    for (Fp8Format fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2})
      for (ScaleRule rule : {ScaleRule::Trn3, ScaleRule::Ocp, ScaleRule::Te}) {
        INFO(rule_str(rule) << " axis " << static_cast<int>(axis) << " fmt " << static_cast<int>(fmt));
        const int64_t rows = 64, cols = 96;
        const Built b = build(rows, cols, axis, fmt, rule, 7);
        std::vector<uint8_t> data(rows * cols), scales(b.scales.size());
        quantize(b.x.data(), rows, cols, axis, fmt, rule, data.data(), scales.data());
        CHECK(data == b.data);
        CHECK(scales == b.scales);
        std::vector<float> back(rows * cols);
        dequantize(data.data(), scales.data(), rows, cols, axis, fmt, back.data());
        CHECK(back == b.x);
      }
}

TEST_CASE("quantize a small array with literal bytes", "[numerics][mx]") {
  // [32, 32] E4M3FN OCP. Row 0: 1, 2, 3, ... (amax 32 -> byte 127+5-8 = 0x7C, elements v * 8).
  // Column axis: column c holds (c+1) at row 0 and -0.25 at row 1 (amax max(c+1, 0.25)).
  std::vector<float> x(32 * 32, 0.0f);
  for (int c = 0; c < 32; ++c) {
    x[c] = static_cast<float>(c + 1);
    x[32 + c] = -0.25f;
  }
  std::vector<uint8_t> data(32 * 32), scales(32);
  quantize(x.data(), 32, 32, MxAxis::Row, Fp8Format::E4M3FN, ScaleRule::Ocp, data.data(), scales.data());
  CHECK(scales[0] == 0x7C);
  CHECK(data[0] == 0x50);    // 8 = 2^3: exponent field 10
  CHECK(data[2] == 0x5C);    // 24 = 1.5 * 2^4
  CHECK(data[31] == 0x78);   // 256
  CHECK(data[30] == 0x78);   // 248 rounds to 256 (tie between 240 and 256 -> even mantissa 0)
  CHECK(scales[1] == 0x75);  // row 1: amax 0.25 -> 125 - 8
  CHECK(data[32] == 0xF8);   // -0.25 * 2^10 = -256
  CHECK(scales[2] == 0x00);  // zero rows
  CHECK(data[64] == 0x00);
  quantize(x.data(), 32, 32, MxAxis::Col, Fp8Format::E4M3FN, ScaleRule::Ocp, data.data(), scales.data());
  CHECK(scales[0] == 0x77);   // column 0: amax 1 -> 0x77, elements * 256
  CHECK(data[0] == 0x78);     // 1 * 256
  CHECK(data[32] == 0xE8);    // -0.25 * 256 = -64
  CHECK(scales[31] == 0x7C);  // column 31: amax 32
  CHECK(data[31] == 0x78);
  CHECK(data[63] == 0xC0);  // -0.25 * 8 = -2
}

TEST_CASE("bf16 input path equals the float path; threads do not change bytes", "[numerics][mx]") {
  const int64_t rows = 96, cols = 160;
  std::mt19937 gen(99);
  std::vector<uint16_t> xb(rows * cols);
  for (auto& v : xb) {
    const uint32_t r = gen();
    // Mostly normal values over a wide range, some zeros, NaN and Inf.
    if (r % 97 == 0)
      v = 0x7FC0;
    else if (r % 89 == 0)
      v = (r & 1) ? 0xFF80 : 0x7F80;
    else if (r % 31 == 0)
      v = 0x0000;
    else
      v = static_cast<uint16_t>((r & 0x807F) | ((90 + (r >> 8) % 80) << 7));
  }
  std::vector<float> xf(rows * cols);
  for (size_t i = 0; i < xb.size(); ++i) xf[i] = bf16_to_f32(xb[i]);
  for (MxAxis axis : {MxAxis::Row, MxAxis::Col})
    for (Fp8Format fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2})
      for (ScaleRule rule : {ScaleRule::Trn3, ScaleRule::Ocp, ScaleRule::Te}) {
        INFO(rule_str(rule) << " axis " << static_cast<int>(axis));
        const size_t ns = static_cast<size_t>(rows * cols / 32);
        std::vector<uint8_t> d1(rows * cols), s1(ns);
        quantize(xf.data(), rows, cols, axis, fmt, rule, d1.data(), s1.data(), 1);
        for (int t : {2, 3}) {
          std::vector<uint8_t> d(rows * cols), s(ns);
          quantize(xf.data(), rows, cols, axis, fmt, rule, d.data(), s.data(), t);
          CHECK(d == d1);
          CHECK(s == s1);
          quantize(xb.data(), rows, cols, axis, fmt, rule, d.data(), s.data(), t);
          CHECK(d == d1);
          CHECK(s == s1);
          std::vector<float> o1(rows * cols), o(rows * cols);
          dequantize(d1.data(), s1.data(), rows, cols, axis, fmt, o1.data(), 1);
          dequantize(d1.data(), s1.data(), rows, cols, axis, fmt, o.data(), t);
          CHECK(std::memcmp(o.data(), o1.data(), o.size() * sizeof(float)) == 0);
        }
        // Row blocks equal quantize_block on the same 32 values.
        if (axis == MxAxis::Row) {
          std::array<uint8_t, 32> q{};
          CHECK(quantize_block(xf.data() + 5 * cols + 64, q.data(), fmt, rule) == s1[5 * (cols / 32) + 2]);
          CHECK(std::equal(q.begin(), q.end(), d1.begin() + 5 * cols + 64));
          CHECK(quantize_block_bf16(xb.data() + 5 * cols + 64, q.data(), fmt, rule) ==
                s1[5 * (cols / 32) + 2]);
        }
      }
}

TEST_CASE("large bf16 arrays (the table path) equal the float path, every rule, both axes",
          "[numerics][mx]") {
  // 2048 x 2048 BF16 values (2^22, the size from which one thread builds per-scale tables): every bit pattern
  // (NaN, Inf, subnormals, both signs) in the first 32 rows, then random patterns over the whole range.
  const int64_t rows = 2048, cols = 2048;
  std::mt19937 gen(7);
  std::vector<uint16_t> xb(rows * cols);
  for (size_t i = 0; i < xb.size(); ++i) xb[i] = i < 65536 ? static_cast<uint16_t>(i) : gen() & 0xFFFF;
  std::vector<float> xf(rows * cols);
  for (size_t i = 0; i < xb.size(); ++i) xf[i] = bf16_to_f32(xb[i]);
  const size_t ns = static_cast<size_t>(rows * cols / 32);
  for (MxAxis axis : {MxAxis::Row, MxAxis::Col})
    for (Fp8Format fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2})
      for (ScaleRule rule : {ScaleRule::Trn3, ScaleRule::Ocp, ScaleRule::Te}) {
        INFO(rule_str(rule) << " axis " << static_cast<int>(axis));
        std::vector<uint8_t> d1(rows * cols), s1(ns), d(rows * cols), s(ns);
        quantize(xf.data(), rows, cols, axis, fmt, rule, d1.data(), s1.data(), 1);
        quantize(xb.data(), rows, cols, axis, fmt, rule, d.data(), s.data(), 1);
        CHECK(d == d1);
        CHECK(s == s1);
      }
}

TEST_CASE("quantize input errors", "[numerics][mx]") {
  std::vector<float> x(64 * 64);
  std::vector<uint8_t> d(64 * 64), s(64 * 64);
  const auto e4 = Fp8Format::E4M3FN;
  CHECK_THROWS_MATCHES(
      quantize(x.data(), 2, 40, MxAxis::Row, e4, ScaleRule::Te, d.data(), s.data()), InputError,
      Catch::Message("mx quantize: cols = 40 is not a multiple of 32 (axis row puts MX blocks "
                     "along cols)"));
  CHECK_THROWS_MATCHES(
      quantize(x.data(), 48, 32, MxAxis::Col, e4, ScaleRule::Te, d.data(), s.data()), InputError,
      Catch::Message("mx quantize: rows = 48 is not a multiple of 32 (axis col puts MX blocks "
                     "along rows)"));
  CHECK_THROWS_MATCHES(quantize(x.data(), 32, 32, MxAxis::Col, e4, ScaleRule::Te, d.data(), s.data(), 0),
                       InputError, Catch::Message("mx quantize: threads = 0 must be at least 1"));
  CHECK_THROWS_MATCHES(quantize(x.data(), -1, 32, MxAxis::Row, e4, ScaleRule::Te, d.data(), s.data()),
                       InputError, Catch::Message("mx quantize: negative shape [-1, 32]"));
  CHECK_THROWS_MATCHES(quantize(x.data(), 32, 32, MxAxis::Row, e4, ScaleRule::Te, nullptr, s.data()),
                       InputError, Catch::Message("mx quantize: null buffer for a non-empty [32, 32] array"));
  CHECK_THROWS_MATCHES(
      dequantize(d.data(), s.data(), 33, 64, MxAxis::Col, e4, x.data()), InputError,
      Catch::Message("mx dequantize: rows = 33 is not a multiple of 32 (axis col puts MX blocks "
                     "along rows)"));
  CHECK_THROWS_MATCHES(parse_scale_rule("rceil"), InputError,
                       Catch::Message("unknown MX scale rule 'rceil' (expected trn3, ocp or te)"));
  CHECK(parse_scale_rule("trn3") == ScaleRule::Trn3);
  CHECK(parse_scale_rule("ocp") == ScaleRule::Ocp);
  CHECK(parse_scale_rule("te") == ScaleRule::Te);
  CHECK(scale_rule_name(ScaleRule::Te) == "te");
  // Empty arrays are fine and touch nothing.
  CHECK_NOTHROW(quantize(x.data(), 0, 64, MxAxis::Row, e4, ScaleRule::Te, d.data(), s.data(), 4));
}

TEST_CASE("dequantize_x4_row: every FP8 code times every scale, the bits of the table and one multiply",
          "[numerics][mx]") {
  // The vector path decodes codes arithmetically: each of the 256 codes of both formats, in each of the 4
  // byte positions, times scales from 0x00 (the subnormal 2^-127) through 0xFE and 0xFF (NaN), must give
  // fp8_to_f32(code) * scale's bits; 37 columns leave a tail for the scalar path.
  constexpr int64_t cols = 37;
  for (const auto fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2})
    for (int s = 0; s < 256; s += 3) {
      CAPTURE(static_cast<int>(fmt), s);
      for (int first = 0; first < 256; first += 4 * cols) {
        std::vector<uint8_t> bytes(4 * cols);
        std::vector<float> scale(cols);
        for (int64_t c = 0; c < cols; ++c) {
          scale[c] = e8m0_to_f32(static_cast<uint8_t>((s + c) % 256));
          for (int j = 0; j < 4; ++j) bytes[4 * c + j] = static_cast<uint8_t>((first + 4 * c + j) % 256);
        }
        std::vector<float> out(4 * cols);
        float* const o[4] = {&out[0], &out[cols], &out[2 * cols], &out[3 * cols]};
        dequantize_x4_row(bytes.data(), scale.data(), cols, fmt, o);
        for (int64_t c = 0; c < cols; ++c)
          for (int j = 0; j < 4; ++j) {
            const float v = fp8_to_f32(bytes[4 * c + j], fmt);
            const float want = v * scale[c];
            CAPTURE(c, j, static_cast<int>(bytes[4 * c + j]));
            // Two NaN operands (a NaN code under the NaN scale 0xFF): x86 keeps the first operand's NaN, and
            // which one is first is the compiler's choice (the scalar code before this path took the code's
            // NaN for bytes 0-2 and the scale's for byte 3): only NaN is required there.
            if (std::isnan(v) && std::isnan(scale[c]))
              CHECK(std::isnan(o[j][c]));
            else
              CHECK(std::bit_cast<uint32_t>(o[j][c]) == std::bit_cast<uint32_t>(want));
          }
      }
    }
}

TEST_CASE("dequantize_x4_pairs: dequantize_x4_row's values, high halves paired, in panels; their range",
          "[numerics][mx]") {
  if (!__builtin_cpu_supports("avx512f")) return;  // dequantize_x4_pairs needs AVX-512
  // 40 columns: two vectors of 16 and a scalar tail of 8, across the panel boundary at column 32 (panels
  // panel_step = 100 apart). Row hi's codes step by 3, row lo's by 7, scales 2^(c % 5 - 2).
  constexpr int64_t cols = 40, step = 100;
  for (const auto fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2}) {
    CAPTURE(static_cast<int>(fmt));
    std::vector<uint8_t> hi(4 * cols), lo(4 * cols);
    std::vector<float> scale(cols);
    for (int64_t c = 0; c < cols; ++c) {
      scale[c] = e8m0_to_f32(static_cast<uint8_t>(125 + c % 5));
      for (int j = 0; j < 4; ++j) {
        hi[4 * c + j] = static_cast<uint8_t>((3 * (4 * c + j) + 1) % 120);  // finite codes of both formats
        lo[4 * c + j] = static_cast<uint8_t>(0x80 | (7 * (4 * c + j) + 2) % 120);
      }
    }
    std::vector<float> fh(4 * cols), fl(4 * cols);
    float* const oh[4] = {&fh[0], &fh[cols], &fh[2 * cols], &fh[3 * cols]};
    float* const ol[4] = {&fl[0], &fl[cols], &fl[2 * cols], &fl[3 * cols]};
    dequantize_x4_row(hi.data(), scale.data(), cols, fmt, oh);
    dequantize_x4_row(lo.data(), scale.data(), cols, fmt, ol);
    std::vector<uint32_t> out(4 * 2 * step, 0xDEADBEEFu);
    uint32_t* const o[4] = {&out[0], &out[32], &out[64], &out[2 * step]};
    const PairRange r = dequantize_x4_pairs(hi.data(), lo.data(), scale.data(), cols, fmt, o, step);
    PairRange want;
    for (int j = 0; j < 4; ++j)
      for (int64_t c = 0; c < cols; ++c) {
        CAPTURE(j, c);
        REQUIRE(o[j][c / 32 * step + c % 32] == ((bits(oh[j][c]) & 0xFFFF0000u) | (bits(ol[j][c]) >> 16)));
        want.add(pair_range_scalar(&oh[j][c], 1));
        want.add(pair_range_scalar(&ol[j][c], 1));
      }
    CHECK(r.low == want.low);
    CHECK(r.emin == want.emin);
    CHECK(r.emax == want.emax);
    CHECK(want.emin < 127 - 2);          // the codes reach small values: the range is not the trivial one
    CHECK(out[96] == 0xDEADBEEFu);  // between j = 2's first panel and j = 0's second: untouched
  }
}

namespace {

// Values meant to break a vector encoder: NaN (any payload, both signs), +-Inf, +-0, FP32 subnormals, the
// FP32 maximum, exact ties of E4M3 and E5M2 at any exponent (mantissas with few bits set also tie in the FP8
// subnormal range after scaling), random bit patterns, and values near a per-block exponent. Rows 0-3 hold
// whole blocks of one kind: zeros, NaN, FP32 maxima, subnormals.
std::vector<float> adversarial(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) {
    const uint32_t r = gen(), sign = r & 0x80000000u, pick = gen() % 12;
    const uint32_t base = 127 + static_cast<uint32_t>((i / 32 * 37) % 60) - 30;
    uint32_t b = 0;
    switch (pick) {
      case 0:
        b = sign | 0x7F800000u | std::max<uint32_t>(1, r & 0x7FFFFFu);
        break;
      case 1:
        b = sign | 0x7F800000u;
        break;
      case 2:
        b = sign;
        break;
      case 3:
        b = sign | (r & 0x7FFFFFu);
        break;
      case 4:
        b = sign | (r % 2 ? 0x7F7FFFFFu : 0x7F000000u);
        break;
      case 5:
        b = sign | ((base + r % 9 - 4) << 23) | ((r >> 8 & 7u) << 20) | 0x80000u;
        break;  // E4M3 tie
      case 6:
        b = sign | ((base + r % 9 - 4) << 23) | ((r >> 8 & 3u) << 21) | 0x100000u;
        break;  // E5M2 tie
      case 7:
        b = sign | ((base - r % 24) << 23) | ((r >> 8 & 15u) << 19);
        break;  // subnormal-range ties
      case 8:
        b = gen();
        break;
      default:
        b = sign | ((base + r % 5 - 2) << 23) | (gen() & 0x7FFFFFu);
        break;
    }
    x[static_cast<size_t>(i)] = f(b);
  }
  for (int64_t c = 0; c < cols && rows >= 4; ++c) {
    x[static_cast<size_t>(c)] = c % 2 ? -0.0f : 0.0f;
    x[static_cast<size_t>(cols + c)] = f(0x7FC00000u | static_cast<uint32_t>(c));
    x[static_cast<size_t>(2 * cols + c)] = f(0x7F7FFFFFu | (c % 3 ? 0x80000000u : 0u));
    x[static_cast<size_t>(3 * cols + c)] = f(static_cast<uint32_t>(c * 977 + 1) & 0x807FFFFFu);
  }
  return x;
}

// The bytes by definition, element by element from the scalar conversions (mx.h: e = f32_to_fp8(x *
// 2^(127-byte), satfinite), byte = mx_scale_byte of the block's largest key).
void reference(const std::vector<float>& x, int64_t rows, int64_t cols, MxAxis axis, Fp8Format fmt,
               ScaleRule rule, std::vector<uint8_t>& data, std::vector<uint8_t>& scales) {
  data.assign(x.size(), 0);
  scales.assign(x.size() / 32, 0);
  const bool row = axis == MxAxis::Row;
  for (int64_t b = 0; b < rows * cols / 32; ++b) {
    // Block b: row axis -> row b / (cols/32), columns 32 * (b % (cols/32)) + i; col axis -> column b % cols,
    // rows 32 * (b / cols) + i.
    auto at = [&](int i) {
      return row ? (b / (cols / 32)) * cols + 32 * (b % (cols / 32)) + i
                 : (32 * (b / cols) + i) * cols + b % cols;
    };
    uint32_t key = 0;
    for (int i = 0; i < 32; ++i) {
      const uint32_t a = bits(x[static_cast<size_t>(at(i))]) & 0x7FFFFFFFu;
      key = std::max(key, rule == ScaleRule::Te && a > 0x7F800000u ? 0u : a);
    }
    const uint8_t s = mx_scale_byte(key, fmt, rule);
    scales[static_cast<size_t>(b)] = s;
    for (int i = 0; i < 32; ++i)
      data[static_cast<size_t>(at(i))] = f32_to_fp8(x[static_cast<size_t>(at(i))] * e8m0_rcp_f32(s), fmt);
  }
}

// Index of the first differing byte, -1 if none (a whole-vector CHECK would print 80 k elements).
int64_t first_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return -2;
  const auto m = std::mismatch(a.begin(), a.end(), b.begin());
  return m.first == a.end() ? -1 : m.first - a.begin();
}

}  // namespace

TEST_CASE("every instruction-set level gives the bytes of the scalar definition on adversarial inputs",
          "[numerics][mx]") {
  // Row axis on [512, 160]; col axis also on [512, 165] (a column tail after the 16- and 8-lane vectors).
  // The BF16 input holds every BF16 bit pattern in its first 65536 elements.
  for (const int64_t cols : {int64_t{160}, int64_t{165}}) {
    const int64_t rows = 512;
    const std::vector<float> x = adversarial(rows, cols, 2024 + static_cast<uint32_t>(cols));
    std::vector<uint16_t> xb(x.size());
    for (size_t i = 0; i < xb.size(); ++i) xb[i] = i < 65536 ? static_cast<uint16_t>(i) : bits(x[i]) >> 16;
    std::vector<float> xbf(x.size());
    for (size_t i = 0; i < xb.size(); ++i) xbf[i] = bf16_to_f32(xb[i]);
    for (MxAxis axis : {MxAxis::Row, MxAxis::Col}) {
      if (axis == MxAxis::Row && cols % 32 != 0) continue;
      for (Fp8Format fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2})
        for (ScaleRule rule : {ScaleRule::Trn3, ScaleRule::Ocp, ScaleRule::Te}) {
          std::vector<uint8_t> want_d, want_s, want_bd, want_bs;
          reference(x, rows, cols, axis, fmt, rule, want_d, want_s);
          reference(xbf, rows, cols, axis, fmt, rule, want_bd, want_bs);
          for (MxIsa isa : {MxIsa::Scalar, MxIsa::Avx2, MxIsa::Avx512}) {
            INFO(rule_str(rule) << " axis " << mx_axis_name(axis) << " cols " << cols << " isa "
                                << static_cast<int>(isa) << " (host " << static_cast<int>(mx_host_isa())
                                << ")");
            std::vector<uint8_t> d(x.size()), s(x.size() / 32);
            quantize(x.data(), rows, cols, axis, fmt, rule, d.data(), s.data(), 1, isa);
            CHECK(first_diff(d, want_d) == -1);
            CHECK(first_diff(s, want_s) == -1);
            quantize(xb.data(), rows, cols, axis, fmt, rule, d.data(), s.data(), 2, isa);
            CHECK(first_diff(d, want_bd) == -1);
            CHECK(first_diff(s, want_bs) == -1);
            if (axis == MxAxis::Row) {  // quantize_mx's entry: one block at a time
              bool same = true;
              std::array<uint8_t, 32> q{};
              for (size_t b = 0; b < x.size() / 32; ++b) {
                same &= quantize_block(x.data() + 32 * b, q.data(), fmt, rule, isa) == want_s[b];
                same &= std::equal(q.begin(), q.end(), want_d.begin() + static_cast<int64_t>(32 * b));
                same &= quantize_block_bf16(xb.data() + 32 * b, q.data(), fmt, rule, isa) == want_bs[b];
                same &= std::equal(q.begin(), q.end(), want_bd.begin() + static_cast<int64_t>(32 * b));
              }
              CHECK(same);
            }
          }
        }
    }
  }
}

TEST_CASE("large BF16 arrays give the same bytes with and without vectors (the scalar code's tables)",
          "[numerics][mx]") {
  // 2^22 elements: the size from which the scalar code takes per-scale tables; vector code takes none.
  const int64_t rows = 2048, cols = 2048;
  const std::vector<float> x = adversarial(rows, cols, 5);
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < xb.size(); ++i) xb[i] = i < 65536 ? static_cast<uint16_t>(i) : bits(x[i]) >> 16;
  for (MxAxis axis : {MxAxis::Row, MxAxis::Col})
    for (ScaleRule rule : {ScaleRule::Trn3, ScaleRule::Te}) {
      INFO(rule_str(rule) << " axis " << mx_axis_name(axis));
      std::vector<uint8_t> d0(x.size()), s0(x.size() / 32), d(x.size()), s(x.size() / 32);
      quantize(xb.data(), rows, cols, axis, Fp8Format::E4M3FN, rule, d0.data(), s0.data(), 1, MxIsa::Scalar);
      quantize(xb.data(), rows, cols, axis, Fp8Format::E4M3FN, rule, d.data(), s.data(), 1);
      CHECK(first_diff(d, d0) == -1);
      CHECK(first_diff(s, s0) == -1);
    }
}

TEST_CASE("quantize_x4_groups (quantize_mx's groups) gives quantize_block's bytes at every level",
          "[numerics][mx]") {
  // 8 rows of 4F = 164 values with a leading dimension of 170 (F = 41: a tail after the vectors); group f
  // is the 4 values [4f, 4f + 4) of each row.
  const int64_t F = 41, ld = 170;
  const std::vector<float> x = adversarial(8, ld, 31);
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < xb.size(); ++i) xb[i] = bits(x[i]) >> 16;
  for (Fp8Format fmt : {Fp8Format::E4M3FN, Fp8Format::E5M2})
    for (ScaleRule rule : {ScaleRule::Trn3, ScaleRule::Ocp, ScaleRule::Te}) {
      std::vector<uint8_t> want(8 * ld, 0), want_s(F), want_b(8 * ld, 0), want_bs(F);
      for (int64_t f = 0; f < F; ++f) {
        std::array<float, 32> v{};
        std::array<uint16_t, 32> vb{};
        for (int r = 0; r < 8; ++r)
          for (int j = 0; j < 4; ++j) {
            v[r * 4 + j] = x[r * ld + 4 * f + j];
            vb[r * 4 + j] = xb[r * ld + 4 * f + j];
          }
        std::array<uint8_t, 32> q{}, qb{};
        want_s[f] = quantize_block(v.data(), q.data(), fmt, rule, MxIsa::Scalar);
        want_bs[f] = quantize_block_bf16(vb.data(), qb.data(), fmt, rule, MxIsa::Scalar);
        for (int r = 0; r < 8; ++r)
          for (int j = 0; j < 4; ++j) {
            want[r * ld + 4 * f + j] = q[r * 4 + j];
            want_b[r * ld + 4 * f + j] = qb[r * 4 + j];
          }
      }
      for (MxIsa isa : {MxIsa::Scalar, MxIsa::Avx2, MxIsa::Avx512}) {
        INFO(rule_str(rule) << " isa " << static_cast<int>(isa));
        std::vector<uint8_t> d(8 * ld, 0), s(F);
        quantize_x4_groups(x.data(), ld, F, fmt, rule, d.data(), ld, s.data(), isa);
        CHECK(first_diff(d, want) == -1);
        CHECK(first_diff(s, want_s) == -1);
        std::fill(d.begin(), d.end(), 0);
        quantize_x4_groups(xb.data(), ld, F, fmt, rule, d.data(), ld, s.data(), isa);
        CHECK(first_diff(d, want_b) == -1);
        CHECK(first_diff(s, want_bs) == -1);
      }
    }
}
