#include "kernels/ref/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/base/error.h"

namespace trnsim::ref {

void MetricsAccumulator::add(const float* kernel, const double* golden, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = golden[i];
    const double k = kernel[i];
    // Non-finite values are counted, not measured: the metrics are over the elements both sides hold finite.
    if (!std::isfinite(g)) {
      ++golden_nonfinite_;
      if (std::isfinite(k)) ++finite_where_not_;
      continue;
    }
    if (!std::isfinite(k)) {
      ++nonfinite_;
      continue;
    }
    const double ag = std::fabs(g);
    max_abs_golden_ = std::max(max_abs_golden_, ag);
    sum_gg_ += g * g;
    const double d = k - g;
    max_abs_err_ = std::max(max_abs_err_, std::fabs(d));
    excess_ = std::max(excess_, std::fabs(d) - rtol_ * ag);
    sum_dd_ += d * d;
    sum_kk_ += k * k;
    sum_kg_ += k * g;
  }
  count_ += n;
}

ErrorMetrics MetricsAccumulator::finish(double atol_factor) const {
  ErrorMetrics m;
  m.count = count_;
  m.nonfinite = nonfinite_;
  m.golden_nonfinite = golden_nonfinite_;
  m.finite_where_golden_not = finite_where_not_;
  m.max_abs_golden = max_abs_golden_;
  m.atol = atol_factor * max_abs_golden_;
  const double nd = std::sqrt(sum_dd_), ng = std::sqrt(sum_gg_), nk = std::sqrt(sum_kk_);
  m.max_abs_err = max_abs_err_;
  m.rel_l2 = ng > 0 ? nd / ng : (nd > 0 ? std::numeric_limits<double>::infinity() : 0.0);
  if (nk > 0 && ng > 0)
    m.cosine = sum_kg_ / (nk * ng);
  else
    m.cosine = (nk == 0 && ng == 0) ? 1.0 : 0.0;
  m.norm_euclidean = (nk + ng) > 0 ? nd / (nk + ng) : 0.0;
  m.allclose_excess = count_ > 0 ? excess_ : 0.0;
  m.allclose = m.allclose_excess <= m.atol && nonfinite_ == 0;
  return m;
}

ErrorMetrics compare(const float* kernel, const double* golden, int64_t n, double atol_factor, double rtol) {
  MetricsAccumulator acc(rtol);
  acc.add(kernel, golden, n);
  return acc.finish(atol_factor);
}

bool nkilib_pass(const ErrorMetrics& m) {
  return m.allclose && m.cosine >= kNkilibMinCosine && m.norm_euclidean <= kNkilibMaxNormEuclidean;
}

}  // namespace trnsim::ref
