// One engine's sequencer of one core (internal to the model; see run.h): runs the engine's instruction stream
// in program order. A thin SystemC module: one SC_METHOD that schedules its own next activation (no clock),
// over the plain timing classes (timing::CostModel for costs, timing::PePipeline for the PE's
// LoadStationary / MultiplyMoving units).
//
// Per instruction: wait until its semaphore conditions hold (woken by Semaphores), check it (generation
// features, isa::check, DMA queue range), then by kind:
//   - DMA (dma_copy, dma_transpose, sendrecv): occupy the sequencer for dma.trigger_ns, then hand the
//     transfer to the DMA system and move on;
//   - core_barrier: signal the peer core's barrier semaphore, wait for our own (see run.h);
//   - PE: place it in the PE pipeline, move on at PePipeline::next_issue(); it completes at its MM end
//     (a second SC_METHOD, pe_complete, completes PE instructions in order);
//   - else: occupy the engine for its cost, then complete.
// Completing applies isa::execute (numerics on) and posts the semaphore updates.
//
// Errors: RuleError "at <t> ns, <file>:<line>: core <c> <ENGINE> #<i> <opcode>: <rule>"; the same prefix on
// an InputError when an event of the instruction would reach the run's time limit. Both stop the run
// (Lnc2::fail).
#pragma once

#include <systemc>

#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "sim/base/units.h"
#include "sim/isa/instruction.h"
#include "sim/model/observer.h"
#include "sim/timing/cost_model.h"
#include "sim/timing/pe_pipeline.h"

namespace trnsim::model {

class Lnc2;

class Sequencer : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Sequencer);
  Sequencer(sc_core::sc_module_name name, Lnc2& top, int core, isa::Engine engine);

  sc_core::sc_event wake;  // a semaphore this sequencer waits for changed

  bool done() const { return idx_ >= stream_.size() && pe_pending_.empty(); }
  // "core 0 PE: instruction #3 (nc_matmul, kernel.cpp:12) waits for S[2] >= 1 (now 0)"
  std::string blocked_description() const;

 private:
  // What the sequencer is doing when its SC_METHOD next runs.
  enum class Phase {
    Fetch,        // take the next instruction
    Busy,         // a compute instruction occupies the engine until now
    Trigger,      // a DMA trigger occupied the sequencer until now
    PeMoveOn,     // the PE pipeline accepts the next instruction now
    BarrierWait,  // a core_barrier waits for the peer
  };
  struct PePending {
    uint32_t index;
    InstructionRecord rec;
  };

  void step();         // SC_METHOD
  void pe_complete();  // SC_METHOD (PE only): completions at the end of each MultiplyMoving
  void run();
  // Finishes what `phase_` left in progress; false if the sequencer must keep waiting.
  bool resume(Picoseconds now);
  // Waits for and checks the instruction at idx_, fills cur_; false if its waits are not satisfied.
  bool fetch(Picoseconds now);
  // Issue the instruction in cur_ (fetched at `now`); each returns false when the sequencer must wait (its
  // next activation is scheduled), true when it moved on to the next instruction.
  bool issue_dma_trigger(Picoseconds now);
  bool issue_barrier(Picoseconds now);
  bool issue_pe(Picoseconds now, const timing::EngineCost& c);
  bool issue_compute(Picoseconds now, const timing::EngineCost& c);
  void enqueue_dma(Picoseconds now);
  bool barrier_reached();
  bool waits_ok(const isa::Instruction& inst);
  void complete(uint32_t index, InstructionRecord& rec);

  // "at 12.345 ns, kernel.cpp:12: core 0 PE #3 nc_matmul"
  std::string context(uint32_t index) const;
  [[noreturn]] void rethrow_rule(const std::exception& e, uint32_t index) const;
  void fail_with_context(uint32_t index);  // the current exception, with context(index) on our own errors

  Lnc2& top_;
  int core_;
  isa::Engine engine_;
  const std::vector<isa::Instruction>& stream_;
  ClockDomain clock_;
  size_t idx_ = 0;
  Phase phase_ = Phase::Fetch;
  bool waiting_ = false;
  bool launched_ = false;  // the kernel launch delay (sync.kernel_launch_ns) has passed
  Picoseconds wait_start_;
  InstructionRecord cur_;  // the instruction in Busy / Trigger / BarrierWait
  timing::EngineCost cost_;
  int64_t barrier_target_ = 0;
  std::unique_ptr<timing::PePipeline> pe_;  // PE only
  std::deque<PePending> pe_pending_;        // issued to the PE pipeline, not yet complete (MM end order)
  sc_core::sc_event pe_done_;
};

}  // namespace trnsim::model
