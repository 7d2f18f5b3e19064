// PE dI/dt throttle (the hardware fact sheet §2.1, §6; Neuron Explorer glossary, "dI/dt throttling" [F S19,
// S20]): a peak-current protection that limits the Tensor Engine's utilisation when it ramps up from low
// utilisation. Plain C++; times in ps.
//
// The model, with the constants of config::PeConfig:
//   - Utilisation is the fraction of the array's peak MAC rate in use (the profiler's utilisation limit K/N
//   is
//     a fraction of peak Tensor Engine utilisation, S19). A MultiplyMoving running at full rate uses
//     `demand` = rows used / 128 x columns used / 128 x moving columns per cycle (timing::EngineCost::
//     array_utilization; FP32's four passes keep the array busy, so demand 1). With
//     throttle_count_array_utilization false every MultiplyMoving counts as demand 1 (utilisation = busy
//     time).
//   - The limit (cap) engages at the first MultiplyMoving at `cap` (50 %) and rises linearly to 100 % over
//     `ramp` (3 us). It re-engages at a MultiplyMoving's start when at least one `window` (3 us) has passed
//     since it last engaged and the utilisation achieved over the window before is below `rearm_utilization`
//     (50 %): an idle gap, or a stretch of small matmuls.
//   - A MultiplyMoving of demand u runs at min(1, cap(t) / u) of its full rate: one that uses less of the
//     array than the cap allows is not slowed.
// "Achieved" counts the MAC work done: a full-array MultiplyMoving at a 50 % cap achieves 50 % and does not
// re-arm the limit.
#pragma once

#include <cstdint>
#include <deque>

#include "sim/base/units.h"
#include "sim/config/hw_config.h"

namespace trnsim::timing {

class PeThrottle {
 public:
  explicit PeThrottle(const config::PeConfig& pe);

  // A MultiplyMoving needing `full_rate` ps at 100 % and using `demand` (0, 1] of the array starts at `start`
  // (>= the previous end). Returns its actual duration under the cap and records it.
  Picoseconds run(Picoseconds start, Picoseconds full_rate, double demand = 1.0);

  // Cap in force at time t (1 when disabled or after the ramp).
  double cap_at(Picoseconds t) const;
  // Total extra time the throttle added, ps.
  Picoseconds throttled() const { return throttled_; }
  // Number of times the cap engaged (first start counts).
  uint64_t engagements() const { return engagements_; }
  // Utilisation achieved over the window before t (0..1).
  double utilization_before(Picoseconds t) const {
    return utilization_before(static_cast<double>(t.count()));
  }

 private:
  double utilization_before(double t) const;

  bool enabled_, count_array_;
  double cap_, ramp_ps_, window_ps_, rearm_;
  bool engaged_once_ = false;
  double ramp_start_ = 0;  // ps
  struct Busy {
    double start, end, work;  // ps; work = peak-rate ps of MAC work done in [start, end]
  };
  std::deque<Busy> history_;
  Picoseconds throttled_;
  uint64_t engagements_ = 0;
};

}  // namespace trnsim::timing
