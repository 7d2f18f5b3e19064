// One engine's sequencer of one core (internal to the model; see run.h): runs the engine's instruction stream
// in program order. A thin SystemC module: one SC_METHOD that schedules its own next activation (no clock),
// over the plain timing classes (timing::CostModel for costs, timing::PePipeline for the PE's
// LoadStationary / MultiplyMoving units).
//
// Per instruction: wait until its semaphore conditions hold (woken by Semaphores), check it (generation
// features, isa::check unless the builder did under the same limits, DMA queue range and descriptor mode),
// then by kind:
//   - DMA (dma_copy, dma_transpose, sendrecv), by its descriptor mode (isa::DgeMode): none: occupy the
//     sequencer for dma.trigger_ns + dma.precomputed_issue_ns; hwdge (SP or ACT): wait until the sequencer's
//     DGE block is free, occupy the sequencer for dma.trigger_ns and the block for dma.hwdge_instruction_ns
//     (from ACT, with dma.hwdge_act_lookahead, the block may start once ACT reached the instruction before
//     it, ahead of the DMA's own waits); swdge (POOL): occupy GpSimd for dma.swdge_instruction_ns. The
//     transfer is handed to the DMA system when the descriptors are done, and the sequencer moves on at the
//     end of its own part;
//   - core_barrier: signal the peer core's barrier semaphore, wait for our own (see run.h);
//   - PE: LoadStationary then MultiplyMoving (timing::PePipeline): the LoadStationary issues once
//     `waits` hold and posts `ls_updates` at its end; the MultiplyMoving starts once `mm_waits` also hold;
//     the sequencer moves on at PePipeline::next_issue(); the instruction completes at its MM end (a second
//     SC_METHOD, pe_complete, completes PE instructions in order) with its latched stationary operand;
//   - else: occupy the engine for its cost, then complete.
// With another model bound in place of the core's SBUF or PSUM (RunOptions::bind_sbuf / bind_psum), an
// instruction with operands there sends it one timing transaction (memory_delay); the delay holds its start
// (the PE: its MultiplyMoving's).
// Completing applies isa::execute (numerics on) and posts the semaphore updates. Every instruction's
// record carries what it waited for last (InstructionRecord::cause), and the gap before it on its engine is
// charged to that cause in EngineStats::split.
//
// Errors: RuleError "at <t> ns, <file>:<line>: core <c> <ENGINE> #<i> <opcode>: <rule>"; the same prefix on
// an InputError when an event of the instruction would reach the run's time limit. Both stop the run
// (Lnc2::fail).
#pragma once

#include <tlm_utils/simple_initiator_socket.h>
#include <systemc>
#include <tlm>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "sim/base/ring_queue.h"
#include "sim/base/units.h"
#include "sim/isa/instruction.h"
#include "sim/isa/latch.h"
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
  // The engine's way to its core's memories (sim/model/memory): numerics read and write them through DMI.
  tlm_utils::simple_initiator_socket<Sequencer> sbuf{"sbuf"}, psum{"psum"};
  // Another model is bound in place of the core's SBUF or PSUM (RunOptions::bind_sbuf / bind_psum): each
  // instruction then waits the delay it annotates on its access (memory_delay).
  void time_memory_accesses() { memory_timed_ = true; }

  bool done() const { return idx_ >= stream_.size() && pe_pending_.empty(); }
  // PE: times the dI/dt throttle's cap engaged so far (0 elsewhere).
  uint64_t throttle_engagements() const { return pe_ ? pe_->throttle().engagements() : 0; }
  // "core 0 PE: instruction #3 (nc_matmul, kernel.cpp:12) waits for S[2] >= 1 (now 0)"
  std::string blocked_description() const;

 private:
  // What the sequencer is doing when its SC_METHOD next runs.
  enum class Phase {
    Fetch,        // take the next instruction
    Busy,         // a compute instruction occupies the engine until now
    Trigger,      // a DMA trigger occupied the sequencer until now
    PeMoveOn,     // the PE pipeline accepts the next instruction now
    PeMmWait,     // a PE MultiplyMoving waits for its mm_waits
    BarrierWait,  // a core_barrier waits for the peer
  };
  struct PePending {
    uint32_t index;
    InstructionRecord rec;
    isa::Latched latched;  // numerics on, with ls_updates: the stationary bytes at LoadStationary
    Cause wait, mm_wait;   // what its LoadStationary's and its MultiplyMoving's waits ended on
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
  bool issue_mm(Picoseconds now);  // the PE MultiplyMoving of cur_, once its mm_waits hold
  bool issue_compute(Picoseconds now, const timing::EngineCost& c);
  void enqueue_dma(Picoseconds now);
  // The delays the bound SBUF and PSUM models annotate on the instruction at idx_ (memory::access_delay).
  Picoseconds memory_delay();
  bool barrier_reached();
  bool waits_ok(const isa::SemWaits& waits);
  // What the current wait ended on: the writer of the semaphore it blocked on last, else program order.
  Cause wait_cause(Picoseconds since, Picoseconds now) const;
  // `wait` / `mm_wait`: what its waits (PE: the LoadStationary's / the MultiplyMoving's) ended on.
  void complete(uint32_t index, InstructionRecord& rec, const Cause& wait, const Cause& mm_wait,
                const isa::Latched* latched = nullptr);
  // Charges the gap between the engine's previous end and rec.start to its causes, and rec's occupancy.
  void charge(const InstructionRecord& rec, const Cause& wait, const Cause& mm_wait);
  void charge_gap(Picoseconds from, Picoseconds to, const Cause& c);

  // "at 12.345 ns, kernel.cpp:12: core 0 PE #3 nc_matmul"
  std::string context(uint32_t index) const;
  [[noreturn]] void rethrow_rule(const std::exception& e, uint32_t index) const;
  void fail_with_context(uint32_t index);  // the current exception, with context(index) on our own errors

  Lnc2& top_;
  int core_;
  isa::Engine engine_;
  const std::vector<isa::Instruction>& stream_;
  ClockDomain clock_;
  bool prechecked_;  // the builder checked every instruction under these limits (Program::checked_limits)
  bool memory_timed_ = false;  // time_memory_accesses (in prechecked_'s padding)
  // dma.trigger_ns, hwdge_instruction_ns, swdge_instruction_ns and the engine's completion_latency_cycles,
  // converted once.
  Picoseconds trigger_ps_, hwdge_ps_, swdge_ps_, precomputed_ps_, completion_ps_;
  size_t idx_ = 0;
  Phase phase_ = Phase::Fetch;
  bool waiting_ = false;
  bool launched_ = false;  // the kernel launch delay (sync.kernel_launch_ns) has passed
  Picoseconds wait_start_;
  Picoseconds prev_reached_;  // when the sequencer reached the previous instruction (its wait_start_)
  InstructionRecord cur_;     // the instruction in Busy / Trigger / BarrierWait / PeMmWait
  timing::EngineCost cost_;
  int blocked_sem_ = -1;         // the semaphore the current wait registered on last
  Cause fetch_cause_;            // what the current instruction's `waits` ended on
  Picoseconds last_end_;         // end of the engine's previous instruction (PE: its MultiplyMoving)
  Picoseconds dma_enqueue_;      // Trigger: when the descriptors are done and the transfer is queued
  timing::PePipeline::Load ls_;  // PeMmWait: the LoadStationary of cur_
  Picoseconds prev_mm_end_;      // PE: the previous MultiplyMoving's end
  isa::Latched latched_;
  int64_t barrier_target_ = 0;
  std::unique_ptr<timing::PePipeline> pe_;  // PE only
  RingQueue<PePending> pe_pending_;         // issued to the PE pipeline, not yet complete (MM end order)
  sc_core::sc_event pe_done_;
  sc_core::sc_event tick_;  // the end of what occupies the sequencer (step's timed activations)
  tlm::tlm_generic_payload memory_access_;  // reused by memory_delay
};

}  // namespace trnsim::model
