#include "sim/timing/time_limit.h"

#include <cstdio>

namespace trnsim::timing {
namespace {

// "4.8e+18 ps (55.6 days)": the ps count and a human scale.
std::string describe_ps(double ps) {
  const double s = ps * 1e-12;
  char buf[96];
  if (s >= 86400)
    std::snprintf(buf, sizeof buf, "%g ps (%.3g days)", ps, s / 86400);
  else
    std::snprintf(buf, sizeof buf, "%g ps (%.3g s)", ps, s);
  return buf;
}

}  // namespace

TimeLimitError::TimeLimitError(const std::string& event, double at_ps, Picoseconds limit, uint64_t tag)
    : InputError(event + " at " + describe_ps(at_ps) + ", at or beyond the simulated-time limit of " +
                 describe_ps(static_cast<double>(limit.count())) +
                 (limit == kMaxSimTime
                      ? "; a hardware value is probably far out of scale (a bandwidth, clock or "
                        "efficiency)"
                      : "")),
      at_ps_(at_ps),
      tag_(tag) {}

void throw_time_limit(const char* event, double at_ps, Picoseconds limit) {
  throw TimeLimitError(event, at_ps, limit);
}

}  // namespace trnsim::timing
