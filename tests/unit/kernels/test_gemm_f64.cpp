#include <cblas.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/ref/gemm_f64.h"
#include "sim/base/error.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/mx.h"

using namespace trnsim;

namespace {

std::vector<double> blas(const std::vector<double>& a, const std::vector<double>& b, int64_t n, int64_t c,
                         int64_t K) {
  std::vector<double> out(static_cast<size_t>(n * c), -1.0);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(c),
              static_cast<int>(K), 1.0, a.data(), static_cast<int>(K), b.data(), static_cast<int>(K), 0.0,
              out.data(), static_cast<int>(c));
  return out;
}

std::vector<double> ours(const std::vector<double>& a, const std::vector<double>& b, int64_t n, int64_t c,
                         int64_t K, int threads) {
  std::vector<double> out(static_cast<size_t>(n * c), -1.0);
  ref::gemm_nt_f64(a.data(), b.data(), n, c, K, out.data(), threads);
  return out;
}

bool same_bytes(const std::vector<double>& x, const std::vector<double>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
}

// [rows, K] normal values of std `sd`, MX-quantized (E4M3, trn3 rule) along K and dequantized exactly.
std::vector<double> mx_values(int64_t rows, int64_t K, double sd, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, static_cast<float>(sd));
  std::vector<float> x(static_cast<size_t>(rows * K));
  for (float& v : x) v = d(g);
  std::vector<uint8_t> q(x.size()), s(x.size() / 32);
  num::quantize(x.data(), rows, K, num::MxAxis::Row, num::Fp8Format::E4M3FN, num::ScaleRule::Trn3, q.data(),
                s.data());
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = static_cast<double>(num::fp8_to_f32(q[i], num::Fp8Format::E4M3FN)) *
             static_cast<double>(num::e8m0_to_f32(s[i / 32]));
  return out;
}

std::vector<double> normal_values(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = d(g);
  return v;
}

}  // namespace

TEST_CASE("gemm_nt_f64: MX-quantized operands take the exact path and give OpenBLAS's bytes", "[ref]") {
  // Shapes around the 8 x 24 register tile and the 256-deep K block, and the MoE references' shapes.
  const int64_t shapes[][3] = {{1, 1, 32}, {8, 24, 128}, {13, 50, 320}, {9, 25, 2048}, {64, 96, 768}};
  uint32_t seed = 1;
  for (const auto& sh : shapes) {
    const int64_t n = sh[0], c = sh[1], K = sh[2];
    const auto a = mx_values(n, K, 1.0, seed++), b = mx_values(c, K, 0.05, seed++);
    CAPTURE(n, c, K);
    REQUIRE(ref::gemm_nt_is_exact(a.data(), b.data(), n, c, K));
    const auto want = blas(a, b, n, c, K);
    CHECK(same_bytes(ours(a, b, n, c, K, 1), want));
    CHECK(same_bytes(ours(a, b, n, c, K, 2), want));
    CHECK(same_bytes(ours(a, b, n, c, K, 3), want));
  }
}

// The documented order (kernels/ref/gemm_f64.h): per block of 256 along K, an FMA chain from zero, then the
// block's sum added to the element.
std::vector<double> in_order(const std::vector<double>& a, const std::vector<double>& b, int64_t n, int64_t c,
                             int64_t K) {
  std::vector<double> out(static_cast<size_t>(n * c), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j)
      for (int64_t k0 = 0; k0 < K; k0 += 256) {
        double acc = 0.0;
        for (int64_t k = k0; k < std::min(K, k0 + 256); ++k) acc = std::fma(a[i * K + k], b[j * K + k], acc);
        out[i * c + j] += acc;
      }
  return out;
}

TEST_CASE("gemm_nt_f64: operands whose sums round: the same bytes on every thread count", "[ref]") {
  // OpenBLAS, which the references once used here, gives other bytes with 1 and 2 threads at this shape
  // (OPENBLAS_NUM_THREADS changed stats.json).
  const int64_t n = 256, c = 250, K = 300;
  const auto a = normal_values(n * K, 7), b = normal_values(c * K, 8);
  REQUIRE_FALSE(ref::gemm_nt_is_exact(a.data(), b.data(), n, c, K));
  const auto want = in_order(a, b, n, c, K);
  CHECK(same_bytes(ours(a, b, n, c, K, 1), want));
  CHECK(same_bytes(ours(a, b, n, c, K, 2), want));
  CHECK(same_bytes(ours(a, b, n, c, K, 4), want));
  CHECK(same_bytes(ours(a, b, n, c, K, 7), want));
}

TEST_CASE("gemm_nt_f64: wide outputs split by columns, tall ones by rows: the bytes of the one order",
          "[ref]") {
  // Threads split the larger side (c > n here: 24-column panels; n > c: 8-row tiles), and more than 512 rows
  // go in 512-row chunks: neither changes any element's order.
  for (const auto& [n, c, K] : {std::tuple<int64_t, int64_t, int64_t>{20, 300, 600}, {1100, 30, 270}}) {
    CAPTURE(n, c, K);
    const auto a = normal_values(n * K, 11), b = normal_values(c * K, 12);
    const auto want = in_order(a, b, n, c, K);
    for (const int threads : {1, 2, 5}) {
      CAPTURE(threads);
      CHECK(same_bytes(ours(a, b, n, c, K, threads), want));
    }
  }
}

TEST_CASE("gemm_f64: every transpose of the operands gives the bytes of the one order", "[ref]") {
  const int64_t n = 37, c = 29, K = 530;
  const auto a = normal_values(n * K, 3), bt = normal_values(c * K, 4);  // A [n, K], B^T [c, K]
  const auto want = in_order(a, bt, n, c, K);
  std::vector<double> at(a.size()), b(bt.size());  // A^T [K, n], B [K, c]
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < K; ++k) at[k * n + i] = a[i * K + k];
  for (int64_t j = 0; j < c; ++j)
    for (int64_t k = 0; k < K; ++k) b[k * c + j] = bt[j * K + k];
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      CAPTURE(ta, tb);
      std::vector<double> out(static_cast<size_t>(n * c), -1.0);
      ref::gemm_f64(ta, tb, n, c, K, ta ? at.data() : a.data(), ta ? n : K, tb ? bt.data() : b.data(),
                    tb ? K : c, out.data(), 3);
      CHECK(same_bytes(out, want));
    }
}

TEST_CASE("gemm_f64 with B in FP32 gives the bytes of gemm_f64 on B's FP64 copy", "[ref]") {
  // Both B layouts, an edge of the 24-column panels and of the 256-long K blocks, one and three threads.
  for (auto [n, c, K] : {std::tuple{37, 53, 300}, {5, 200, 17}}) {
    const auto a = normal_values(n * K, 7);
    const auto b64 = normal_values(c * K, 8);
    std::vector<float> b32(b64.size());
    for (size_t i = 0; i < b64.size(); ++i) b32[i] = static_cast<float>(b64[i]);
    const std::vector<double> widened(b32.begin(), b32.end());
    for (bool tb : {false, true})
      for (int threads : {1, 3}) {
        std::vector<double> want(static_cast<size_t>(n * c)), got(want.size(), -1.0);
        const int64_t ldb = tb ? K : c;
        ref::gemm_f64(false, tb, n, c, K, a.data(), K, widened.data(), ldb, want.data(), threads);
        ref::gemm_f64(false, tb, n, c, K, a.data(), K, b32.data(), ldb, got.data(), threads);
        INFO("n=" << n << " c=" << c << " K=" << K << " trans_b=" << tb << " threads=" << threads);
        CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(double)) == 0);
      }
  }
}

TEST_CASE("gemm_nt_f64: the bound", "[ref]") {
  // 1 and 2^-52 in one row: 53 bits wide; with the other row 1 bit and K = 2 (2 bits): 56 > 53.
  std::vector<double> a{1.0, std::ldexp(1.0, -52)}, b{1.0, 1.0};
  CHECK_FALSE(ref::gemm_nt_is_exact(a.data(), b.data(), 1, 1, 2));
  // Integers below 2^20 and K = 4: 20 + 20 + 3 <= 53.
  std::vector<double> x{1.0, 3.0, 1048575.0, -7.0}, y{2.0, 1048575.0, 5.0, 1.0};
  CHECK(ref::gemm_nt_is_exact(x.data(), y.data(), 1, 1, 4));
  double out = 0;
  ref::gemm_nt_f64(x.data(), y.data(), 1, 1, 4, &out);
  CHECK(out == 2.0 + 3.0 * 1048575.0 + 5.0 * 1048575.0 - 7.0);
  // Zero rows and zeros are fine; NaN and Inf are not.
  std::vector<double> z(4, 0.0);
  CHECK(ref::gemm_nt_is_exact(z.data(), y.data(), 1, 1, 4));
  x[2] = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(ref::gemm_nt_is_exact(x.data(), y.data(), 1, 1, 4));
  x[2] = std::numeric_limits<double>::infinity();
  CHECK_FALSE(ref::gemm_nt_is_exact(x.data(), y.data(), 1, 1, 4));
  // Products below the FP64 subnormal range.
  std::vector<double> tiny{std::ldexp(1.0, -600)};
  CHECK_FALSE(ref::gemm_nt_is_exact(tiny.data(), tiny.data(), 1, 1, 1));
}

TEST_CASE("gemm_nt_f64: an exact cancellation gives +0 as OpenBLAS does", "[ref]") {
  std::vector<double> a{1.0, 1.0, -0.0}, b{2.0, -2.0, 5.0};
  double out = -1.0;
  ref::gemm_nt_f64(a.data(), b.data(), 1, 1, 3, &out);
  CHECK(out == 0.0);
  CHECK_FALSE(std::signbit(out));
  CHECK(same_bytes({out}, blas(a, b, 1, 1, 3)));
}

TEST_CASE("gemm_nt_f64: bad arguments", "[ref]") {
  double v = 0;
  CHECK_THROWS_WITH(ref::gemm_nt_f64(&v, &v, -1, 1, 1, &v), "gemm_nt_f64: negative shape [-1, 1, 1]");
  CHECK_THROWS_WITH(ref::gemm_nt_f64(&v, &v, 1, 1, 1, &v, 0), "gemm_nt_f64: threads = 0 must be at least 1");
}

TEST_CASE("gemm_nt_f64: a zero operand with a non-finite other is not exact", "[ref]") {
  std::vector<double> z(3, 0.0), b{1.0, std::numeric_limits<double>::infinity(), 2.0};
  CHECK_FALSE(ref::gemm_nt_is_exact(z.data(), b.data(), 1, 1, 3));
  CHECK(ref::gemm_nt_is_exact(z.data(), z.data(), 1, 1, 3));
}
