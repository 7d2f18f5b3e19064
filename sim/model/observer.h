// Observer interface of the SystemC model: a trace writer or a stats collector attaches here (no #ifdefs).
// Plain C++. All times are simulated picoseconds. Callbacks run inside the simulation, in simulated-time
// order per engine / queue; an observer must not throw (an exception stops the run as an error).
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/base/units.h"
#include "sim/isa/instruction.h"
#include "sim/isa/semantics.h"

namespace trnsim::model {

struct RunStats;

// One compute (or barrier) instruction, reported at completion.
struct InstructionRecord {
  int core = 0;
  isa::Engine engine = isa::Engine::SP;
  uint32_t index = 0;  // position in the engine's stream
  const isa::Instruction* inst = nullptr;
  Picoseconds wait_start;        // the sequencer reached the instruction (semaphore wait began)
  Picoseconds issue;             // all semaphore waits satisfied
  Picoseconds start, end;        // engine occupancy (PE: the MultiplyMoving phase)
  Picoseconds ls_start, ls_end;  // PE LoadStationary phase (equal to start when there is none)
  uint64_t cycles = 0;           // engine cycles of the cost formula (before the PE throttle)
  uint64_t ls_cycles = 0;
  uint32_t perf_mode = 1;   // DVE/ACT performance mode (1, 2, 4)
  double throttle_cap = 1;  // PE cap at start (1 = unthrottled)
  isa::Work work;
};

// One DMA transfer (dma_copy, dma_transpose, sendrecv), reported at completion.
struct DmaRecord {
  int core = 0;  // issuing core
  int queue = 0;
  isa::Engine issuer = isa::Engine::SP;
  uint32_t index = 0;  // position in the issuer's stream
  const isa::Instruction* inst = nullptr;
  Picoseconds wait_start, trigger_start;  // sequencer side
  Picoseconds enqueue;                    // trigger done, transfer queued
  Picoseconds data_start;  // bytes start moving (setup done, earlier transfers of the queue finished)
  Picoseconds data_end;
  Picoseconds complete;  // completion semaphore written
  uint64_t bytes = 0, hbm_bytes = 0;
  uint32_t engines = 0;
  double efficiency = 1;
};

// What wrote a semaphore update: the instruction at `index` of core `core`'s `engine` stream (for a DMA
// instruction, its transfer's completion; for a core_barrier, its signal to the peer).
struct SemaphoreSource {
  int core = 0;
  isa::Engine engine = isa::Engine::SP;
  uint32_t index = 0;
};

class ModelObserver {
 public:
  virtual ~ModelObserver() = default;
  virtual void on_instruction(const InstructionRecord&) {}
  virtual void on_dma(const DmaRecord&) {}
  // Semaphore S[sem] of `core` took `value` at `t`.
  virtual void on_semaphore(int /*core*/, uint16_t /*sem*/, int64_t /*value*/, Picoseconds /*t*/) {}
  // The same update with its writer and the value before it (called right after on_semaphore).
  virtual void on_semaphore_update(int /*core*/, uint16_t /*sem*/, int64_t /*old_value*/,
                                   int64_t /*new_value*/, Picoseconds /*t*/,
                                   const SemaphoreSource& /*source*/) {}
  // A sampled quantity changed: "hbm_GBps" (core -1), "hbm_read_GBps" / "hbm_write_GBps" (per issuing core,
  // GB/s of HBM traffic of the core's transfers in flight), "pe_throttle_cap".
  virtual void on_counter(int /*core*/, std::string_view /*name*/, Picoseconds /*t*/, double /*value*/) {}
  virtual void on_finish(const RunStats&) {}
};

}  // namespace trnsim::model
