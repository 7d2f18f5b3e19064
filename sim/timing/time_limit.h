// The model's bound on simulated time, and the error raised when an event would reach it.
//
// Simulated time is a uint64 count of ps (SystemC's time resolution); it wraps at 2^64 ps (about 213 days),
// after which an event loop can spin forever. The model therefore refuses any event at or beyond a bound:
// kMaxSimTime = 2^62 ps (about 53 days of simulated time, far beyond any kernel, and low enough that the sum
// of two in-bound times cannot wrap). A run may set a lower bound (model::RunOptions::max_time).
//
// The plain timing classes (PePipeline, DmaQueues) check every time they compute against the bound they were
// given and throw TimeLimitError; the SystemC model rethrows it as an InputError naming the instruction or
// DMA transfer. Plain C++; times in ps.
#pragma once

#include <cstdint>
#include <string>

#include "sim/base/error.h"
#include "sim/base/units.h"

namespace trnsim::timing {

inline constexpr Picoseconds kMaxSimTime{uint64_t{1} << 62};

// "<event> at 4.8e+18 ps (55.6 days), at or beyond the simulated-time limit of 4.61169e+18 ps (53.4 days)...",
// with `event` a phrase such as "its MultiplyMoving would end". `tag` identifies the subject in the
// thrower's terms (DmaQueues: the transfer's tag; else 0).
class TimeLimitError : public InputError {
 public:
  TimeLimitError(const std::string& event, double at_ps, Picoseconds limit, uint64_t tag = 0);
  double at_ps() const { return at_ps_; }
  uint64_t tag() const { return tag_; }

 private:
  double at_ps_;
  uint64_t tag_;
};

[[noreturn]] void throw_time_limit(const char* event, double at_ps, Picoseconds limit);

// start + d. Throws TimeLimitError(event) if that is at or beyond `limit`. (Inline: called per instruction.)
inline Picoseconds end_after(Picoseconds start, Picoseconds d, Picoseconds limit, const char* event) {
  if (d.count() >= limit.count() || start.count() >= limit.count() - d.count()) [[unlikely]]
    throw_time_limit(event, static_cast<double>(start.count()) + static_cast<double>(d.count()), limit);
  return start + d;
}

// start + clock.to_time(c), checked before the conversion (a huge cycle count never reaches the cast).
inline Picoseconds end_after(Picoseconds start, const ClockDomain& clock, Cycles c, Picoseconds limit,
                             const char* event) {
  const double d = static_cast<double>(c.count()) * clock.period_ps();
  if (!(d < 0x1p63)) [[unlikely]]
    throw_time_limit(event, static_cast<double>(start.count()) + d, limit);
  return end_after(start, clock.to_time(c), limit, event);
}

}  // namespace trnsim::timing
