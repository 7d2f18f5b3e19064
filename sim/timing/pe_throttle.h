// PE dI/dt throttle (reference §2.1, §6 [F S19, S20]): when PE work starts after idle, utilisation is capped
// at `cap` (50 %) and ramps linearly to 100 % over `ramp` (3 us); the cap re-engages when a MultiplyMoving
// starts after a gap and the work done in the preceding `window` (3 us) is below `rearm_utilization` (50 %)
// of it. "Work done" counts full-rate time, so a PE busy at a 50 % cap is at 50 % utilisation and does not
// re-arm. Plain C++; times in ps.
#pragma once

#include <cstdint>
#include <deque>

#include "sim/base/units.h"
#include "sim/config/hw_config.h"

namespace trnsim::timing {

class PeThrottle {
 public:
  explicit PeThrottle(const config::PeConfig& pe);

  // A MultiplyMoving needing `full_rate` ps at 100 % starts at `start` (>= the previous end). Returns its
  // actual duration under the cap and records it.
  Picoseconds run(Picoseconds start, Picoseconds full_rate);

  // Cap in force at time t (1 when disabled or after the ramp).
  double cap_at(Picoseconds t) const;
  // Total extra time the throttle added, ps.
  Picoseconds throttled() const { return throttled_; }
  // Number of times the cap engaged (first start counts).
  uint64_t engagements() const { return engagements_; }

 private:
  double utilization_before(double t) const;

  bool enabled_;
  double cap_, ramp_ps_, window_ps_, rearm_;
  bool engaged_once_ = false;
  double ramp_start_ = 0;  // ps
  double last_end_ = -1;
  struct Busy {
    double start, end, work;  // ps; work = full-rate ps done in [start, end]
  };
  std::deque<Busy> history_;
  Picoseconds throttled_;
  uint64_t engagements_ = 0;
};

}  // namespace trnsim::timing
