#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/ref/metrics.h"
#include "sim/base/error.h"

using namespace trnsim;

TEST_CASE("metrics on a known vector", "[ref]") {
  const std::vector<float> k = {1, 2, 3};
  const std::vector<double> g = {1, 2, 4};
  const ref::ErrorMetrics m = ref::compare(k.data(), g.data(), 3);
  CHECK(m.count == 3);
  CHECK(m.nonfinite == 0);
  CHECK(m.max_abs_err == 1.0);
  CHECK(m.max_abs_golden == 4.0);
  CHECK(m.rel_l2 == Approx(1.0 / std::sqrt(21.0)).epsilon(1e-12));
  CHECK(m.cosine == Approx(17.0 / std::sqrt(14.0 * 21.0)).epsilon(1e-12));
  CHECK(m.norm_euclidean == Approx(1.0 / (std::sqrt(14.0) + std::sqrt(21.0))).epsilon(1e-12));
  // atol = 0.2 * 4 = 0.8; the worst element has |k-g| - 1e-3 |g| = 1 - 0.004 = 0.996 > 0.8.
  CHECK(m.atol == Approx(0.8));
  CHECK(m.allclose_excess == Approx(0.996));
  CHECK_FALSE(m.allclose);
  CHECK_FALSE(ref::nkilib_pass(m));
}

TEST_CASE("allclose uses atol from max|golden| and rtol per element", "[ref]") {
  const std::vector<double> g = {1, 2, 4};
  const std::vector<float> close = {1, 2, 3.5f};  // excess 0.5 - 0.004 = 0.496 <= 0.8
  const ref::ErrorMetrics m = ref::compare(close.data(), g.data(), 3);
  CHECK(m.allclose);
  CHECK(m.allclose_excess == Approx(0.496));
  // Cosine 0.9975 passes, but the normalized Euclidean distance does not decide alone: check both.
  CHECK(m.cosine == Approx((1 + 4 + 14) / std::sqrt((1 + 4 + 12.25) * 21.0)).epsilon(1e-12));
  CHECK(ref::nkilib_pass(m) == (m.cosine >= 0.995 && m.norm_euclidean <= 0.10));
  // A tighter atol factor makes the same data fail.
  CHECK_FALSE(ref::compare(close.data(), g.data(), 3, 0.1).allclose);
}

TEST_CASE("metrics of identical and all-zero vectors", "[ref]") {
  const std::vector<float> k = {0.5f, -2.0f};
  const std::vector<double> g = {0.5, -2.0};
  const ref::ErrorMetrics same = ref::compare(k.data(), g.data(), 2);
  CHECK(same.max_abs_err == 0);
  CHECK(same.rel_l2 == 0);
  CHECK(same.cosine == Approx(1.0));
  CHECK(same.norm_euclidean == 0);
  CHECK(ref::nkilib_pass(same));

  const std::vector<float> z = {0, 0};
  const std::vector<double> gz = {0, 0};
  const ref::ErrorMetrics zero = ref::compare(z.data(), gz.data(), 2);
  CHECK(zero.rel_l2 == 0);
  CHECK(zero.cosine == 1);
  CHECK(zero.norm_euclidean == 0);
  CHECK(zero.allclose);

  const ref::ErrorMetrics one_zero = ref::compare(k.data(), gz.data(), 2);
  CHECK(std::isinf(one_zero.rel_l2));
  CHECK(one_zero.cosine == 0);
  CHECK(one_zero.norm_euclidean == 1);
}

TEST_CASE("a NaN kernel value is counted and fails allclose; the metrics are over the finite elements",
          "[ref]") {
  const std::vector<float> k = {1, std::numeric_limits<float>::quiet_NaN(), 3};
  const std::vector<double> g = {1, 2, 3};
  const ref::ErrorMetrics m = ref::compare(k.data(), g.data(), 3);
  CHECK(m.nonfinite == 1);
  CHECK(m.golden_nonfinite == 0);
  CHECK(m.rel_l2 == 0);  // elements 0 and 2 agree exactly
  CHECK(m.cosine == Approx(1.0));
  CHECK_FALSE(m.allclose);
  CHECK_FALSE(ref::nkilib_pass(m));
}

TEST_CASE("streaming accumulation equals one-shot", "[ref]") {
  std::vector<float> k(1000);
  std::vector<double> g(1000);
  for (int i = 0; i < 1000; ++i) {
    g[i] = std::sin(0.37 * i) * (1 + i % 7);
    k[i] = static_cast<float>(g[i] * (1 + 1e-3 * std::cos(1.3 * i)));
  }
  ref::MetricsAccumulator acc;
  acc.add(k.data(), g.data(), 300);
  acc.add(k.data() + 300, g.data() + 300, 700);
  const ref::ErrorMetrics a = acc.finish(), b = ref::compare(k.data(), g.data(), 1000);
  CHECK(a.rel_l2 == b.rel_l2);
  CHECK(a.cosine == b.cosine);
  CHECK(a.max_abs_err == b.max_abs_err);
  CHECK(a.rel_l2 > 1e-4);
  CHECK(a.rel_l2 < 1e-3);
}

TEST_CASE("chunks of any size fold to the one-shot metrics, every field exactly", "[ref]") {
  // k - g = (0, 0, 1, 0): sums dd 1, gg 25, kk 30, kg 27.
  const std::vector<float> k = {1, 2, 3, 4};
  const std::vector<double> g = {1, 2, 2, 4};
  ref::MetricsAccumulator acc;
  acc.add(k.data(), g.data(), 1);
  acc.add(k.data() + 1, g.data() + 1, 2);
  acc.add(k.data() + 3, g.data() + 3, 0);
  acc.add(k.data() + 3, g.data() + 3, 1);
  const ref::ErrorMetrics a = acc.finish(), b = ref::compare(k.data(), g.data(), 4);
  for (const ref::ErrorMetrics& m : {a, b}) {
    CHECK(m.count == 4);
    CHECK(m.max_abs_err == 1.0);
    CHECK(m.max_abs_golden == 4.0);
    CHECK(m.rel_l2 == 0.2);
    CHECK(m.cosine == 27.0 / (std::sqrt(30.0) * 5.0));
    CHECK(m.norm_euclidean == 1.0 / (std::sqrt(30.0) + 5.0));
    CHECK(m.allclose_excess == 1.0 - 1e-3 * 2.0);
    CHECK(m.atol == 0.2 * 4.0);
    CHECK_FALSE(m.allclose);
  }
}

TEST_CASE("non-finite golden values are counted, with finite kernel values where they are", "[ref]") {
  // Element 2: both infinite (propagation); element 3: golden NaN, kernel finite (a mismatch).
  const std::vector<float> k = {1, 2, std::numeric_limits<float>::infinity(), 4};
  const std::vector<double> g = {1, 2, std::numeric_limits<double>::infinity(),
                                 std::numeric_limits<double>::quiet_NaN()};
  const ref::ErrorMetrics m = ref::compare(k.data(), g.data(), 4);
  CHECK(m.nonfinite == 0);
  CHECK(m.golden_nonfinite == 2);
  CHECK(m.finite_where_golden_not == 1);
  CHECK(m.rel_l2 == 0);
  CHECK(m.allclose);
}
