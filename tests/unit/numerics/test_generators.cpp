#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "sim/base/error.h"
#include "sim/io/generators.h"

using namespace trnsim::io;
using trnsim::InputError;

namespace {

struct Moments {
  double mean, std;
};

Moments moments(const std::vector<float>& v) {
  double s = 0, s2 = 0;
  for (float x : v) s += x;
  double mean = s / static_cast<double>(v.size());
  for (float x : v) s2 += (x - mean) * (x - mean);
  return {mean, std::sqrt(s2 / static_cast<double>(v.size()))};
}

std::vector<uint32_t> bits(const std::vector<float>& v, size_t n) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < n; ++i) out.push_back(std::bit_cast<uint32_t>(v[i]));
  return out;
}

}  // namespace

TEST_CASE("splitmix64 matches the reference sequence for seed 1234567", "[generators]") {
  SplitMix64 r(1234567);
  CHECK(r.next() == 6457827717110365317ull);
  CHECK(r.next() == 3203168211198807973ull);
  CHECK(r.next() == 9817491932198370423ull);
  CHECK(r.next() == 4593380528125082431ull);
  CHECK(r.next() == 16408922859458223821ull);
}

TEST_CASE("deterministic log, exp and sincos agree with libm to a few ulp", "[generators]") {
  for (double x : {1e-300, 1e-10, 0.1, 0.5, 0.7071, 1.0, 1.5, 2.0, 10.0, 12345.678, 1e300, 4.9e-324}) {
    INFO("x = " << x);
    CHECK(det_log(x) == Approx(std::log(x)).epsilon(1e-15).margin(1e-300));
  }
  CHECK(det_log(1.0) == 0.0);
  for (double x : {-745.0, -100.0, -1.0, -1e-8, 0.0, 0.3, 1.0, 20.0, 709.0}) {
    INFO("x = " << x);
    CHECK(det_exp(x) == Approx(std::exp(x)).epsilon(1e-15));
  }
  CHECK(det_exp(0.0) == 1.0);
  CHECK(det_exp(800.0) == HUGE_VAL);
  CHECK(det_exp(-800.0) == 0.0);
  for (double t = 0.0; t < 1.0; t += 1.0 / 1031) {
    double s, c;
    det_sincos_turns(t, s, c);
    CHECK(std::abs(s - std::sin(2 * M_PI * t)) < 2e-15);
    CHECK(std::abs(c - std::cos(2 * M_PI * t)) < 2e-15);
  }
  double s, c;
  det_sincos_turns(0.25, s, c);
  CHECK(s == 1.0);
  CHECK(c == 0.0);
}

TEST_CASE("generators give these exact first values for seed 42", "[generators]") {
  // Pinned: a change here changes every generated workload input.
  CHECK(bits(normal(5, 0.0, 1.0, 42), 4) ==
        std::vector<uint32_t>{0x3F261A25, 0x3E623509, 0xBF3C5D05, 0x3FB792E6});
  CHECK(bits(uniform(5, -1.0, 1.0, 42), 4) ==
        std::vector<uint32_t>{0xBF68FF92, 0xBF0B657C, 0x3C0058E8, 0x3E36EE28});
  CHECK(bits(student_t(5, 3.0, 1.0, 42), 4) ==
        std::vector<uint32_t>{0xBE89BC8F, 0x3F277252, 0x3FF0C880, 0xBF2D397F});
  CHECK(outlier_columns(64, 2, 42) == std::vector<int64_t>{7, 49});
  // Activations are the normal stream, with the outlier columns scaled.
  OutlierActivations p;
  p.outlier_channels = 2;
  p.outlier_scale = 100.0;
  std::vector<float> a = activations_with_outliers(2, 64, p, 42);
  std::vector<float> z = normal(128, 0.0, 1.0, 42);
  for (int64_t i = 0; i < 128; ++i) {
    INFO("i = " << i);
    int64_t c = i % 64;
    if (c == 7 || c == 49)
      CHECK(a[i] == Approx(z[i] * 100.0).epsilon(1e-6));  // scaled before rounding to float
    else
      CHECK(a[i] == z[i]);
  }
}

TEST_CASE("the 8-pair AVX-512 path of normal gives the one-pair path's bits", "[generators]") {
  // 200,003 pairs from an odd start (the vector batches and the one-by-one tail both run), two seeds: every
  // z0/z1 double equal bit for bit, so the generated inputs do not depend on the host's vector width.
  for (uint64_t seed : {1ull, 0xDEADBEEFull}) {
    const int64_t n = 200003, first = 12345;
    std::vector<double> a0(n), a1(n), b0(n), b1(n);
    normal_pairs(seed, first, n, a0.data(), a1.data(), true);
    normal_pairs(seed, first, n, b0.data(), b1.data(), false);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i)
      differ += std::bit_cast<uint64_t>(a0[i]) != std::bit_cast<uint64_t>(b0[i]) ||
                std::bit_cast<uint64_t>(a1[i]) != std::bit_cast<uint64_t>(b1[i]);
    CHECK(differ == 0);
    // The pairs are the normal stream's samples: pair k is elements 2k and 2k + 1 of normal(.., 0, 1, seed).
    const std::vector<float> z = normal(2 * (first + 4), 0.0, 1.0, seed);
    CHECK(z[2 * first] == static_cast<float>(0.0 + 1.0 * a0[0]));
    CHECK(z[2 * first + 7] == static_cast<float>(0.0 + 1.0 * a1[3]));
  }
}

TEST_CASE("generator statistics on 1e6 samples", "[generators]") {
  const int64_t n = 1000000;
  SECTION("normal") {
    Moments m = moments(normal(n, 2.0, 3.0, 7, 2));
    CHECK(m.mean == Approx(2.0).margin(0.015));  // standard error 0.003
    CHECK(m.std == Approx(3.0).margin(0.01));    // standard error 0.002
    std::vector<float> z = normal(n, 0.0, 1.0, 8, 2);
    int64_t beyond3 = 0;
    for (float x : z) beyond3 += std::abs(x) > 3.0f;
    CHECK(beyond3 == Approx(2700).margin(300));  // P(|Z| > 3) = 0.0027
  }
  SECTION("uniform") {
    std::vector<float> u = uniform(n, -1.0, 3.0, 7, 2);
    Moments m = moments(u);
    CHECK(m.mean == Approx(1.0).margin(0.006));
    CHECK(m.std == Approx(4.0 / std::sqrt(12.0)).margin(0.003));
    CHECK(std::all_of(u.begin(), u.end(), [](float x) { return x >= -1.0f && x <= 3.0f; }));
  }
  SECTION("student_t") {
    Moments m = moments(student_t(n, 10.0, 2.0, 7, 2));
    CHECK(m.mean == Approx(0.0).margin(0.012));
    CHECK(m.std == Approx(2.0 * std::sqrt(10.0 / 8.0)).margin(0.01));
    // Heavier tails than a normal of the same spread: P(|T3| > 5) = 0.0154 vs 6e-7 for N(0,1).
    std::vector<float> t = student_t(n, 3.0, 1.0, 9, 2);
    int64_t beyond5 = 0;
    for (float x : t) beyond5 += std::abs(x) > 5.0f;
    CHECK(beyond5 == Approx(15400).margin(800));
  }
  SECTION("activations_with_outliers") {
    OutlierActivations p;
    p.std = 0.5;
    p.outlier_channels = 4;
    p.outlier_scale = 20.0;
    const int64_t rows = 4096, cols = 256;
    std::vector<float> a = activations_with_outliers(rows, cols, p, 11, 2);
    std::vector<int64_t> oc = outlier_columns(cols, 4, 11);
    REQUIRE(oc.size() == 4);
    for (int64_t c = 0; c < cols; c += 1) {
      std::vector<float> col;
      for (int64_t r = 0; r < rows; ++r) col.push_back(a[r * cols + c]);
      bool outlier = std::find(oc.begin(), oc.end(), c) != oc.end();
      INFO("column " << c);
      CHECK(moments(col).std == Approx(outlier ? 10.0 : 0.5).epsilon(0.06));
    }
  }
}

TEST_CASE("generators are reproducible and independent of the thread count", "[generators]") {
  const int64_t n = 100001;  // odd: the last Box-Muller pair is split
  CHECK(normal(n, 0, 1, 5, 1) == normal(n, 0, 1, 5, 4));
  CHECK(normal(n, 0, 1, 5, 3) == normal(n, 0, 1, 5, 1));
  CHECK(uniform(n, 0, 1, 5, 1) == uniform(n, 0, 1, 5, 4));
  CHECK(student_t(n, 4, 1, 5, 1) == student_t(n, 4, 1, 5, 4));
  OutlierActivations p;
  p.outlier_channels = 3;
  p.outlier_scale = 30;
  CHECK(activations_with_outliers(391, 256, p, 5, 1) == activations_with_outliers(391, 256, p, 5, 4));
  CHECK(normal(1000, 0, 1, 5) != normal(1000, 0, 1, 6));
  // Prefixes agree: element i does not depend on n.
  std::vector<float> a = normal(11, 0, 1, 5), b = normal(100, 0, 1, 5);
  CHECK(std::equal(a.begin(), a.end(), b.begin()));
  CHECK(normal(0, 0, 1, 5).empty());
}

TEST_CASE("chunks of normal and uniform hold the whole stream's elements, bit for bit", "[generators]") {
  // 10001 elements (odd: normal's last pair is half used), chunks at even offsets, one and two threads.
  const std::vector<float> n = normal(10001, 0.5, 2.0, 7), u = uniform(10001, -0.1, 0.1, 8);
  for (const auto& [first, count] : {std::pair<int64_t, int64_t>{0, 10001}, {4096, 5905}, {10000, 1}, {2, 3}})
    for (int threads : {1, 2}) {
      INFO("first " << first << ", count " << count << ", threads " << threads);
      std::vector<float> cn(static_cast<size_t>(count)), cu(cn.size());
      normal_chunk(cn.data(), first, count, 0.5, 2.0, 7, threads);
      uniform_chunk(cu.data(), first, count, -0.1, 0.1, 8, threads);
      CHECK(std::equal(cn.begin(), cn.end(), n.begin() + first, [](float a, float b) {
        return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
      }));
      CHECK(std::equal(cu.begin(), cu.end(), u.begin() + first, [](float a, float b) {
        return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
      }));
    }
  float x[2];
  CHECK_THROWS_WITH(normal_chunk(x, 3, 2, 0.0, 1.0, 1),
                    "normal: a chunk starts at an even element >= 0 (got 3)");
  CHECK_THROWS_WITH(uniform_chunk(x, -1, 2, 0.0, 1.0, 1),
                    "uniform: a chunk starts at an element >= 0 (got -1)");
  CHECK_THROWS_WITH(uniform_chunk(x, 0, 2, 1.0, 1.0, 1), "uniform: needs finite lo < hi (got lo 1, hi 1)");
}

TEST_CASE("chunks of activations_with_outliers hold the whole tensor's elements, bit for bit",
          "[generators]") {
  OutlierActivations p;
  p.mean = 0.25;
  p.std = 1.5;
  p.outlier_channels = 9;
  p.outlier_scale = -20.0;
  const std::vector<float> whole = activations_with_outliers(97, 103, p, 3);  // 9991 elements, odd
  for (const auto& [first, count] : {std::pair<int64_t, int64_t>{0, 9991}, {4096, 5895}, {9990, 1}, {2, 3}})
    for (int threads : {1, 2}) {
      INFO("first " << first << ", count " << count << ", threads " << threads);
      std::vector<float> c(static_cast<size_t>(count));
      activations_with_outliers_chunk(c.data(), first, count, 97, 103, p, 3, threads);
      CHECK(std::equal(c.begin(), c.end(), whole.begin() + first, [](float a, float b) {
        return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
      }));
    }
  float x[2];
  CHECK_THROWS_WITH(
      activations_with_outliers_chunk(x, 3, 2, 97, 103, p, 3),
      "activations_with_outliers: a chunk starts at an even element and lies in the tensor (got "
      "[3, +2) of 9991)");
  CHECK_THROWS_WITH(
      activations_with_outliers_chunk(x, 9990, 2, 97, 103, p, 3),
      "activations_with_outliers: a chunk starts at an even element and lies in the tensor (got "
      "[9990, +2) of 9991)");
}

TEST_CASE("generators reject bad parameters", "[generators]") {
  CHECK_THROWS_WITH(normal(10, 0.0, 0.0, 1), "normal: std must be > 0 and finite (got 0)");
  CHECK_THROWS_WITH(normal(10, 0.0, -1.5, 1), "normal: std must be > 0 and finite (got -1.5)");
  CHECK_THROWS_WITH(normal(10, NAN, 1.0, 1), "normal: mean must be finite (got nan)");
  CHECK_THROWS_WITH(normal(-1, 0.0, 1.0, 1), "normal: the element count must be >= 0 (got -1)");
  CHECK_THROWS_WITH(normal(10, 0.0, 1.0, 1, 0), "normal: threads must be >= 1 (got 0)");
  CHECK_THROWS_WITH(uniform(10, 1.0, 1.0, 1), "uniform: needs finite lo < hi (got lo 1, hi 1)");
  CHECK_THROWS_WITH(uniform(10, 2.0, -1.0, 1), "uniform: needs finite lo < hi (got lo 2, hi -1)");
  CHECK_THROWS_WITH(uniform(10, 0.0, INFINITY, 1), "uniform: needs finite lo < hi (got lo 0, hi inf)");
  CHECK_THROWS_WITH(student_t(10, 0.0, 1.0, 1), "student_t: nu must be > 0 and finite (got 0)");
  CHECK_THROWS_WITH(student_t(10, 3.0, -2.0, 1), "student_t: scale must be > 0 and finite (got -2)");
  OutlierActivations p;
  p.outlier_channels = 65;
  CHECK_THROWS_WITH(activations_with_outliers(2, 64, p, 1),
                    "activations_with_outliers: outlier_channels must be in [0, cols = 64] (got 65)");
  p.outlier_channels = 1;
  p.outlier_scale = 0.0;
  CHECK_THROWS_WITH(activations_with_outliers(2, 64, p, 1),
                    "activations_with_outliers: outlier_scale must be finite and non-zero (got 0)");
  CHECK_THROWS_WITH(activations_with_outliers(-2, 64, OutlierActivations{}, 1),
                    "activations_with_outliers: bad shape [-2, 64]");
  CHECK_THROWS_AS(normal(1, 0, 0, 1), InputError);
}
