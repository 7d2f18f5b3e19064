// Public entry point of the SystemC model (plain C++ header: the CLI and the kernel layer call it without
// seeing SystemC).
//
// The model is one LNC=2 pair: two physical cores sharing one HBM stack. Per core, five sequencers (PE, DVE,
// ACT, POOL, SP) run their streams in program order. An instruction waits for its semaphore conditions,
// passes isa::check, occupies its engine for its cost (sim/timing/cost_model.h), then applies isa::execute
// (numerics on) and its semaphore updates at completion. DMA instructions pay the trigger on the issuing
// sequencer, then run on the core's DMA queue `dma_queue`: transfers of one queue move data one after the
// other (FIFO completion), all transfers in flight on both cores share the DMA engines and the HBM stack
// (max-min fair processor sharing). Semaphore updates become visible sync.semaphore_latency_ns later on the
// same core, sync.cross_core_latency_ns later on the peer.
//
// core_barrier: the engine adds 1 to the peer core's semaphore S[B] (B = hw.sync.barrier_semaphore(), the
// last semaphore, which isa::Limits::num_semaphores excludes so the builder never allocates it), then waits
// until its own S[B] >= the number of core_barriers this core has issued so far.
//
// Simulated time is bounded: no event (an instruction's, LoadStationary's or DMA setup's end, a transfer's
// last byte, a semaphore update's arrival) may fall at or beyond RunOptions::max_time (at most
// timing::kMaxSimTime = 2^62 ps, about 53 days; sim/timing/time_limit.h). Such an event stops the run with an
// InputError "at <t> ns, <file>:<line>: core <c> <ENGINE> #<i> <opcode>[ (DMA queue <q>)]: its MultiplyMoving
// would end at <t'> ps (...), at or beyond the simulated-time limit of ...", so a far out-of-scale hardware
// value ends the run with a message instead of a simulation that never ends.
//
// Errors: a RuleError from isa::check / isa::execute / generation features stops the run; it is rethrown as
// RuleError "at <t> ns, <file>:<line>: core <c> <ENGINE> #<i> <opcode>: <rule>". Streams that can never
// finish (semaphore waits never satisfied) end in an InputError naming every blocked engine, its pending
// instruction and the semaphore condition. A program built for another generation than the config:
// InputError.
//
// SystemC elaborates once per context; run_program installs a fresh simulation context for every call after
// the first, so several runs per process work (sequentially, never concurrently).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "sim/base/units.h"
#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"
#include "sim/isa/semantics.h"
#include "sim/model/observer.h"
#include "sim/timing/time_limit.h"

namespace sc_core {
class sc_module;
}

namespace trnsim::model {

struct HbmSockets;     // sim/model/memory/hbm.h
struct OnChipSockets;  // sim/model/memory/onchip_memory.h

struct RunOptions {
  bool numerics = true;  // false: timing only, isa::execute is never called
  ModelObserver* observer = nullptr;
  // Called every `progress_every` completed instructions: (simulated time, completed, total).
  std::function<void(Picoseconds, uint64_t, uint64_t)> progress;
  uint64_t progress_every = 100000;
  // No event at or beyond this simulated time (see above); values above timing::kMaxSimTime act as it.
  Picoseconds max_time = timing::kMaxSimTime;
  // Binds the DMA system to the HBM, during elaboration. Null: to trnsim's Hbm directly. Else another HBM
  // model: the function creates it (a SystemC module), binds HbmSockets::dma to it and it to HbmSockets::hbm,
  // and returns it; the model keeps it until the run ends. It must forward DMI (get_direct_mem_ptr) to the
  // Hbm: numerics use the Hbm's bytes. docs/architecture.md, "Binding another memory model";
  // tests/sim/model/alt_memory.h is an example.
  std::function<std::unique_ptr<sc_core::sc_module>(HbmSockets&)> bind_hbm;
  // Binds a core's SBUF (PSUM) to its initiators, the core's five engines and the DMA system, once per core
  // during elaboration. Null: to trnsim's Sbuf (Psum) directly, which adds no delay. Else another model, as
  // for bind_hbm: the function creates it, binds every OnChipSockets::initiators socket to it and it to
  // OnChipSockets::memory, and returns it; it must forward DMI. Each instruction and each DMA transfer of
  // the core with operands in that memory then sends it one timing transaction, whose delay holds the
  // instruction (before its execution; the PE: before its MultiplyMoving) or is added to the transfer's
  // setup. docs/architecture.md, "Binding another memory model"; tests/sim/model/alt_memory.h is an example.
  std::function<std::unique_ptr<sc_core::sc_module>(OnChipSockets&)> bind_sbuf, bind_psum;
};

// Where one engine's time went, from 0 to the end of the run: its parts sum to RunStats::total_time. Each
// gap before an instruction starts is charged to what the instruction waited for last (InstructionRecord::
// cause): a semaphore written by an instruction of an engine of this core, by a transfer of a DMA queue, or
// by the peer core; a busy DMA issue resource (DGE block or GpSimd); the PE pipeline (a MultiplyMoving
// waiting for its LoadStationary); the kernel launch delay. The time after its last instruction is
// `finished`; `other` is what no cause explains (0 unless a record is missing).
struct EngineTimeSplit {
  Picoseconds work;       // occupied, at full rate
  Picoseconds throttled;  // PE: occupied longer because of the dI/dt throttle
  Picoseconds launch;
  std::array<Picoseconds, isa::kNumEngines>
      engine{};                    // waiting for an instruction of that engine (this core)
  std::vector<Picoseconds> queue;  // waiting for a transfer of DMA queue q (this core)
  Picoseconds peer;                // waiting for the peer core
  Picoseconds dge;                 // waiting for the DMA issue resource
  Picoseconds pe_pipeline;         // PE: waiting for its own LoadStationary
  Picoseconds finished;            // after its last instruction
  Picoseconds other;
};

struct EngineStats {
  uint64_t instructions = 0;
  Picoseconds busy;            // engine occupancy (PE: MultiplyMoving phases), ps
  Picoseconds semaphore_wait;  // time the sequencer waited for semaphore conditions, ps
  Picoseconds last_end;        // end of its last instruction
  EngineTimeSplit split;
};

struct CoreStats {
  std::array<EngineStats, isa::kNumEngines> engines;
  Picoseconds pe_ls_busy;                // PE LoadStationary phases, ps
  Picoseconds pe_throttled;              // extra PE time due to the dI/dt throttle, ps
  uint64_t pe_throttle_engagements = 0;  // times the throttle's cap (re-)engaged
  uint64_t pe_flops = 0;
  uint64_t dma_transfers = 0;
  uint64_t dma_bytes = 0;  // payload bytes of this core's transfers
  uint64_t hbm_bytes_read = 0;
  uint64_t hbm_bytes_written = 0;
  uint64_t dma_triggers = 0;  // DMA instructions issued
};

struct RunStats {
  Picoseconds total_time;  // last completion, ps
  std::array<CoreStats, 2> cores;
  uint64_t instructions = 0;  // all engines, both cores (DMA instructions included)
  uint64_t hbm_bytes() const;
  double hbm_GBps() const;  // average over total_time, bytes per ns
};

struct RunResult {
  Picoseconds end_time;
  RunStats stats;
};

// Runs `program` on `hw`. With options.numerics, `state` holds the machine's memory
// (isa::make_machine_state(program, hw.limits())) and receives the results; if null, a private state is used.
// Throws InputError / RuleError as described above.
RunResult run_program(const isa::Program& program, const config::HwConfig& hw, const RunOptions& options = {},
                      isa::MachineState* state = nullptr);

}  // namespace trnsim::model
