// The outcome of checking one kernel output (a host tensor) against its host reference, whatever the kind of
// check. The kernel package decides how an output is checked (kernels/api/checks.h); the run's report prints
// whichever kind applies, and stats.json holds it under "numerics" (metric units and meanings:
// sim/run/stat_defs.cpp). It lives here, below both, so that the kernels layer and sim/run share the type
// without kernels/ depending on sim/run.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace trnsim::tensor {

// Check kinds and the metrics each reports (in print order):
//   tolerance  max_abs_err, rel_l2_vs_exact, rel_l2_vs_quantized, cosine_vs_exact,
//              normalized_euclidean_vs_exact, allclose_vs_exact, ... against FP64 references
//   bit_exact  bytes_total, bytes_differing, elements_differing, first_difference_index against the bytes
//              of a host emulation
//   scalar     value, expected, abs_err, rel_err, tolerance for one number
inline constexpr const char* kCheckTolerance = "tolerance";
inline constexpr const char* kCheckBitExact = "bit_exact";
inline constexpr const char* kCheckScalar = "scalar";

struct CheckMetric {
  std::string name;
  double value = 0;  // NaN and infinities are written to stats.json as null
};

struct CheckResult {
  std::string output;  // the kernel output checked
  std::string kind;    // kCheckTolerance, kCheckBitExact or kCheckScalar
  std::string dtype;   // the output's dtype name
  std::vector<CheckMetric> metrics;
  int64_t elements = 0;   // elements of the output
  int64_t nonfinite = 0;  // NaN or Inf elements in the kernel's output
  bool pass = false;
  std::vector<std::string> failures;  // one line per failed criterion
  std::vector<std::string> notes;     // e.g. "references on 256 of 4096 rows (evenly spaced blocks)"

  // The metric called `name`; NaN if absent.
  double metric(const std::string& name) const {
    for (const CheckMetric& m : metrics)
      if (m.name == name) return m.value;
    return std::numeric_limits<double>::quiet_NaN();
  }
};

}  // namespace trnsim::tensor
