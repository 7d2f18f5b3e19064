// Error metrics of a kernel output against a host reference (golden), as nki-library's matmul tests compute
// them (docs/facts/nkilib-kernels.md §3), plus max-abs and relative L2 error.
//
// For kernel values k and golden values g (same length n, any shape, compared element by element):
//   max_abs_err     max |k_i - g_i|
//   rel_l2          ||k - g|| / ||g||  (0 if both norms are 0, +inf if only ||g|| is 0)
//   cosine          <k, g> / (||k|| ||g||)  (1 if both are all-zero, 0 if exactly one is)
//   norm_euclidean  ||k - g|| / (||k|| + ||g||)  (0 if both are all-zero)
//   allclose        numpy.allclose(k, g, rtol, atol) with atol = atol_factor * max|g|: every element has
//                   |k_i - g_i| <= atol + rtol * |g_i|. nkilib: atol_factor 0.2, rtol 1e-3.
// Non-finite values are counted, not measured: a NaN or Inf in k where g is finite counts in `nonfinite` (and
// makes allclose false); a non-finite g (the inputs held NaN or Inf) counts in `golden_nonfinite`, and a
// finite k there in `finite_where_golden_not`. Every other metric is over the elements both hold finite.
//
// Sums are accumulated in FP64 in element order, so results are identical for any thread count.
#pragma once

#include <cstdint>

namespace trnsim::ref {

inline constexpr double kNkilibAtolFactor = 0.2;
inline constexpr double kNkilibRtol = 1e-3;
inline constexpr double kNkilibMinCosine = 0.995;
inline constexpr double kNkilibMaxNormEuclidean = 0.10;

struct ErrorMetrics {
  int64_t count = 0;                    // elements compared
  int64_t nonfinite = 0;                // NaN or Inf kernel values where the golden value is finite
  int64_t golden_nonfinite = 0;         // NaN or Inf golden values
  int64_t finite_where_golden_not = 0;  // finite kernel values where the golden value is not
  double max_abs_err = 0;
  double rel_l2 = 0;
  double cosine = 1;
  double norm_euclidean = 0;
  double max_abs_golden = 0;
  // max_i (|k_i - g_i| - rtol |g_i|): allclose holds iff this is <= atol.
  double allclose_excess = 0;
  double atol = 0;
  bool allclose = true;
};

// Streaming accumulation: add() chunks in a fixed order, then finish().
class MetricsAccumulator {
 public:
  explicit MetricsAccumulator(double rtol = kNkilibRtol) : rtol_(rtol) {}
  // kernel[i] against golden[i], i < n. Throws InputError if a golden value is not finite.
  void add(const float* kernel, const double* golden, int64_t n);
  ErrorMetrics finish(double atol_factor = kNkilibAtolFactor) const;

 private:
  double rtol_;
  int64_t count_ = 0, nonfinite_ = 0, golden_nonfinite_ = 0, finite_where_not_ = 0;
  double max_abs_err_ = 0, max_abs_golden_ = 0, excess_ = -1e308;
  double sum_dd_ = 0, sum_gg_ = 0, sum_kk_ = 0, sum_kg_ = 0;
};

// One-shot form of the accumulator.
ErrorMetrics compare(const float* kernel, const double* golden, int64_t n,
                     double atol_factor = kNkilibAtolFactor, double rtol = kNkilibRtol);

// nkilib's three-way check (allclose, cosine >= 0.995, normalized Euclidean <= 0.10) on metrics computed with
// atol_factor 0.2 and rtol 1e-3.
bool nkilib_pass(const ErrorMetrics& m);

}  // namespace trnsim::ref
