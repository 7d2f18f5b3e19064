// The PE of one core as two pipelined units (reference §2.1): LoadStationary (LS) loads the stationary
// operand into the systolic array, MultiplyMoving (MM) streams the moving operand through it. Plain C++, no
// SystemC; times in ps, costs in PE cycles (timing::CostModel::engine_cost), converted once here at the PE
// clock.
//
// For each PE instruction, in program order, whose semaphore waits were satisfied at `ready`:
//   LS start = max(ready, previous LS end, previous MM start if pe.ls_overlap else previous MM end)
//              (with ls_overlap, the next stationary loads in the background of the current MM)
//   LS end   = LS start + ls_cycles
//   MM start = max(LS end, previous MM end)
//   MM end   = MM start + mm_cycles stretched by the dI/dt throttle (timing::PeThrottle)
// The sequencer may take the next PE instruction at next_issue(): the MM start with ls_overlap (the LS unit
// is free for the next stationary), else the MM end.
//
// matmul() is load_stationary() then multiply_moving(). Both are public so that LoadStationary and
// MultiplyMoving can become two instructions with their own waits: each then passes its own `ready`.
//
// Errors: TimeLimitError when an LS or MM end would reach `limit` (sim/timing/time_limit.h).
#pragma once

#include "sim/base/units.h"
#include "sim/config/hw_config.h"
#include "sim/timing/pe_throttle.h"
#include "sim/timing/time_limit.h"

namespace trnsim::timing {

class PePipeline {
 public:
  explicit PePipeline(const config::PeConfig& pe, Picoseconds limit = kMaxSimTime);

  struct Load {
    Picoseconds start, end;
  };
  struct Multiply {
    Picoseconds start, end;   // end includes the throttle's stretch
    Picoseconds full_rate;    // mm_cycles at the PE clock, unthrottled
    double throttle_cap = 1;  // cap in force at start (1 = unthrottled)
  };
  struct Matmul {
    Load ls;
    Multiply mm;
  };

  // LS of an instruction ready at `ready`; occupies the LS unit until its end.
  Load load_stationary(Picoseconds ready, Cycles ls_cycles);
  // MM of an instruction whose stationary is loaded at `ready`; occupies the MM unit until its end.
  Multiply multiply_moving(Picoseconds ready, Cycles mm_cycles);
  // Both, for an instruction ready at `ready`.
  Matmul matmul(Picoseconds ready, Cycles ls_cycles, Cycles mm_cycles);

  // Earliest time the sequencer may take the next PE instruction (see above).
  Picoseconds next_issue() const { return ls_overlap_ ? mm_start_prev_ : mm_end_prev_; }
  const ClockDomain& clock() const { return clock_; }
  const PeThrottle& throttle() const { return throttle_; }

 private:
  ClockDomain clock_;
  bool ls_overlap_;
  PeThrottle throttle_;
  Picoseconds limit_;
  Picoseconds ls_free_, mm_start_prev_, mm_end_prev_;
};

}  // namespace trnsim::timing
