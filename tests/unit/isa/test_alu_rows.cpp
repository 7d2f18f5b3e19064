// The row forms of the ALU (alu_f32_row, alu_f32_rows, alu_f32_fold, alu_i32_row) against the scalar
// alu_f32 / alu_i32 they stand for in execute(): every op, both operand orders, special values, bit for bit.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sim/isa/alu.h"

using namespace trnsim::isa;

namespace {

constexpr AluOp kOps[] = {AluOp::Bypass,    AluOp::Add,        AluOp::Subtract,  AluOp::Multiply,
                          AluOp::Divide,    AluOp::Max,        AluOp::Min,       AluOp::AbsMax,
                          AluOp::Pow,       AluOp::IsEqual,    AluOp::NotEqual,  AluOp::IsGt,
                          AluOp::IsGe,      AluOp::IsLt,       AluOp::IsLe,      AluOp::LogicalAnd,
                          AluOp::LogicalOr, AluOp::BitwiseAnd, AluOp::BitwiseOr, AluOp::BitwiseXor,
                          AluOp::ShiftLeft, AluOp::ShiftRight};

// Finite values of every sign and size, signed zeros, infinities and NaN.
std::vector<float> values() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v = {0.0f,  -0.0f,  1.0f, -1.0f, 2.5f, -3.75f, 127.0f, 32767.0f, 1e-40f, -1e-40f,
                          3e38f, -3e38f, inf,  -inf,  nan,  5.0f,   31.0f,  0.5f,     -7.0f,  65535.0f};
  uint32_t h = 12345;
  for (int i = 0; i < 200; ++i) {
    h = h * 1664525u + 1013904223u;
    v.push_back(std::bit_cast<float>(h & 0xBFFFFFFFu));  // no NaN patterns from the hash's exponent
  }
  return v;
}

bool same(float a, float b) {
  return std::isnan(a) ? std::isnan(b) : std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

}  // namespace

TEST_CASE("row ALU forms equal the scalar alu_f32 / alu_i32 element for element", "[isa]") {
  const std::vector<float> x = values();
  const size_t n = x.size();
  for (AluOp op : kOps) {
    INFO("op " << static_cast<int>(op));
    int64_t bad = 0;
    for (float s : {0.0f, 1.0f, -2.0f, 127.0f, 23.0f, std::numeric_limits<float>::quiet_NaN()})
      for (bool rev : {false, true}) {
        std::vector<float> r = x;
        alu_f32_row(op, r.data(), s, rev, n);
        for (size_t i = 0; i < n; ++i) {
          const float want = op == AluOp::Bypass ? x[i] : (rev ? alu_f32(op, s, x[i]) : alu_f32(op, x[i], s));
          bad += same(r[i], want) ? 0 : 1;
        }
      }
    std::vector<float> r = x;
    std::vector<float> y(x.rbegin(), x.rend());
    alu_f32_rows(op, r.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) bad += same(r[i], alu_f32(op, x[i], y[i])) ? 0 : 1;
    for (size_t len : {size_t{1}, size_t{2}, size_t{32}, n}) {
      float acc = x[0];
      for (size_t i = 1; i < len; ++i) acc = alu_f32(op, acc, x[i]);
      bad += same(alu_f32_fold(op, x.data(), len), acc) ? 0 : 1;
    }
    for (int64_t s : {int64_t{0}, int64_t{7}, int64_t{-3}, int64_t{127}, int64_t{0x7FFF}, int64_t{33}})
      for (bool rev : {false, true}) {
        std::vector<int64_t> xi;
        for (int64_t k = -70000; k <= 70000; k += 997) xi.push_back(k);
        xi.push_back(int64_t{1} << 40);
        std::vector<int64_t> ri = xi;
        alu_i32_row(op, ri.data(), s, rev, ri.size());
        for (size_t i = 0; i < xi.size(); ++i) {
          const int64_t want = op == AluOp::Bypass ? alu_i32(op, xi[i], s)
                                                   : (rev ? alu_i32(op, s, xi[i]) : alu_i32(op, xi[i], s));
          bad += ri[i] == want ? 0 : 1;
        }
      }
    CHECK(bad == 0);
  }
}

TEST_CASE("alu_f32_fold Max and Min equal the left-to-right fold bit for bit (signed zeros, NaN, Inf)",
          "[isa]") {
  // Rows of 1..100 values from a small pool, so that ties of +0 and -0 at the extreme are common (the fold
  // keeps the last of equal elements), and rows holding NaN (the fold's kNaN) or infinities.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float pool[] = {0.0f, -0.0f, 0.0f, -0.0f, -1.0f, 1.0f, -2.5f, 3.0f, -inf, inf, nan, 1e-40f, -1e-40f};
  uint32_t h = 777;
  int64_t bad = 0, zero_results = 0;
  for (int t = 0; t < 20000; ++t) {
    h = h * 1664525u + 1013904223u;
    const size_t n = 1 + (h >> 8) % 100;
    // Pool prefix: NaN and the infinities in a third of the rows only.
    const uint32_t kinds = t % 3 == 0 ? 13 : (t % 3 == 1 ? 8 : 4);
    std::vector<float> x(n);
    for (float& v : x) {
      h = h * 1664525u + 1013904223u;
      v = pool[(h >> 16) % kinds];
    }
    for (AluOp op : {AluOp::Max, AluOp::Min}) {
      float acc = x[0];
      for (size_t i = 1; i < n; ++i) acc = alu_f32(op, acc, x[i]);
      const float got = alu_f32_fold(op, x.data(), n);
      bad += std::bit_cast<uint32_t>(got) == std::bit_cast<uint32_t>(acc) ? 0 : 1;
      zero_results += acc == 0.f && n >= 16;
    }
  }
  CHECK(bad == 0);
  CHECK(zero_results > 1000);  // the zero-sign case is exercised
}

TEST_CASE("alu_f32 Pow is the FP32 rounding of the FP64 power, not the host's powf", "[isa]") {
  // 0x403c4a75 (2.9420445f): x * x rounds to 0x410a7d71; glibc 2.36's powf(x, 2) gives 0x410a7d72 (one ulp
  // off), so the ALU's power depended on the host's libm. NumPy's `t ** 2` (its square) gives 0x410a7d71.
  const float x = std::bit_cast<float>(0x403c4a75u);
  CHECK(std::bit_cast<uint32_t>(alu_f32(AluOp::Pow, x, 2.f)) == 0x410a7d71u);
  CHECK(std::bit_cast<uint32_t>(alu_f32(AluOp::Pow, x, 2.f)) == std::bit_cast<uint32_t>(x * x));
  // 2^-3 and 10^0.5 (the FP64 power 3.1622776601683795 rounded once: 0x404a62c2).
  CHECK(alu_f32(AluOp::Pow, 2.f, -3.f) == 0.125f);
  CHECK(std::bit_cast<uint32_t>(alu_f32(AluOp::Pow, 10.f, 0.5f)) == 0x404a62c2u);
}
