#include "sim/timing/pe_throttle.h"

#include <algorithm>
#include <cmath>

namespace trnsim::timing {

PeThrottle::PeThrottle(const config::PeConfig& pe)
    : enabled_(pe.throttle_enabled),
      count_array_(pe.throttle_count_array_utilization),
      cap_(pe.throttle_cap),
      ramp_ps_(pe.throttle_ramp_ns * 1000.0),
      window_ps_(pe.throttle_window_ns * 1000.0),
      rearm_(pe.throttle_rearm_utilization) {}

double PeThrottle::cap_at(Picoseconds t) const {
  if (!enabled_ || !engaged_once_) return 1.0;
  double a = static_cast<double>(t.count()) - ramp_start_;
  if (ramp_ps_ <= 0 || a >= ramp_ps_) return 1.0;
  return cap_ + (1.0 - cap_) * std::max(0.0, a) / ramp_ps_;
}

double PeThrottle::utilization_before(double t) const {
  double lo = t - window_ps_, done = 0;
  for (const auto& b : history_) {
    double s = std::max(b.start, lo), e = std::min(b.end, t);
    if (e > s && b.end > b.start) done += b.work * (e - s) / (b.end - b.start);
  }
  return done / window_ps_;
}

Picoseconds PeThrottle::run(Picoseconds start, Picoseconds full_rate, double demand) {
  const double t = static_cast<double>(start.count());
  const double w = static_cast<double>(full_rate.count());
  if (!enabled_) return full_rate;
  const double u = count_array_ ? std::clamp(demand, 1e-6, 1.0) : 1.0;
  if (!engaged_once_ || (t - ramp_start_ >= window_ps_ && utilization_before(t) < rearm_)) {
    engaged_once_ = true;
    ramp_start_ = t;
    ++engagements_;
  }
  // Rate min(1, cap(tau) / u), cap(tau) = cap_ + s (tau - ramp_start) until it reaches 1. The rate is below 1
  // until the cap reaches u, at a_u = (u - cap_) / s after ramp_start; the duration d solves
  // integral of the rate over [t, t + d] = w.
  double d = w;
  const double a = t - ramp_start_;
  if (ramp_ps_ > 0 && u > cap_) {
    const double s = (1.0 - cap_) / ramp_ps_;  // cap slope per ps
    const double a_u = (u - cap_) / s;
    if (a < a_u) {
      const double slow_work = (cap_ * (a_u - a) + 0.5 * s * (a_u * a_u - a * a)) / u;
      if (w <= slow_work) {
        const double rhs = cap_ * a + 0.5 * s * a * a + u * w;
        const double x = (-cap_ + std::sqrt(cap_ * cap_ + 2.0 * s * rhs)) / s;
        d = x - a;
      } else {
        d = (a_u - a) + (w - slow_work);
      }
    }
  }
  Picoseconds dur(static_cast<uint64_t>(std::ceil(d - 1e-6)));
  if (dur < full_rate) dur = full_rate;
  const double end = t + static_cast<double>(dur.count());
  history_.push_back({t, end, w * u});
  while (!history_.empty() && history_.front().end < end - window_ps_) history_.pop_front();
  throttled_ += Picoseconds(dur.count() - full_rate.count());
  return dur;
}

}  // namespace trnsim::timing
