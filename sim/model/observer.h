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

// A node of the run's dependency graph, one part of the instruction at `index` of core `core`'s `engine`
// stream: the instruction itself (for a DMA instruction, its trigger and descriptor generation), the DMA
// transfer of a DMA instruction, or the LoadStationary of a PE instruction.
enum class Part : uint8_t { Instruction, Transfer, LoadStationary };
struct NodeRef {
  int8_t core = -1;  // -1: no node
  isa::Engine engine = isa::Engine::SP;
  Part part = Part::Instruction;
  uint32_t index = 0;
  bool valid() const { return core >= 0; }
  bool operator==(const NodeRef&) const = default;
};

// What an instruction or a transfer waited for last before it could start (its binding constraint): one
// link of the run's critical path (trnsim stats --critical-path) and the cause its engine's idle time is
// charged to.
enum class CauseKind : uint8_t {
  None,          // nothing held it back (the first instruction of a stream without a launch delay)
  Launch,        // the kernel launch delay (sync.kernel_launch_ns)
  ProgramOrder,  // the previous instruction of its engine (PE: the previous MultiplyMoving or this one's
                 // LoadStationary)
  Semaphore,     // a semaphore update by `from`: an instruction, a DMA transfer or the peer core's barrier
  DgeBusy,       // its DMA issue resource (a DGE block, or GpSimd for software DGE) was busy with `from`
  QueueOrder,    // transfers only: the earlier transfer `from` of its DMA queue (FIFO)
  Trigger,       // transfers only: its DMA instruction `from` (trigger, descriptor generation, setup)
};
const char* cause_kind_name(CauseKind k);  // "none", "launch", "program_order", ...

struct Cause {
  CauseKind kind = CauseKind::None;
  NodeRef from;      // the node that released it (invalid for None and Launch)
  uint16_t sem = 0;  // Semaphore: the semaphore whose update released it
};

// One compute (or barrier) instruction, reported at completion.
struct InstructionRecord {
  int core = 0;
  isa::Engine engine = isa::Engine::SP;
  uint32_t index = 0;  // position in the engine's stream
  const isa::Instruction* inst = nullptr;
  Picoseconds wait_start;        // the sequencer reached the instruction (semaphore wait began)
  Picoseconds issue;             // all semaphore waits satisfied (PE: the LoadStationary's)
  Picoseconds mm_issue;          // PE: the MultiplyMoving's own waits satisfied (>= issue)
  Picoseconds start, end;        // engine occupancy (PE: the MultiplyMoving phase)
  Picoseconds complete;          // results and semaphore updates posted (>= end; DVE/ACT/POOL: end + the
                                 // engine's completion latency)
  Picoseconds ls_start, ls_end;  // PE LoadStationary phase (equal to start when there is none)
  uint64_t cycles = 0;           // engine cycles of the cost formula (before the PE throttle)
  uint64_t ls_cycles = 0;
  uint32_t perf_mode = 1;   // DVE/ACT performance mode (1, 2, 4)
  double throttle_cap = 1;  // PE cap at start (1 = unthrottled)
  Picoseconds throttled;    // PE: time the dI/dt throttle added to the MultiplyMoving
  // DMA instructions: the DMA issue resource's occupancy (hardware DGE block or GpSimd descriptor generation;
  // equal to end when there is none); the transfer is queued at dge_end.
  Picoseconds dge_start, dge_end;
  Cause cause;       // what held its start back last (see CauseKind)
  Cause wait_cause;  // what its waits ended on (PE: the LoadStationary's waits)
  isa::Work work;    // only work.flops unless an observer needs work_bytes (ModelObserver::needs)
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
  // When the next transfer of its hardware queue could start (its queue occupancy end): data_end, or earlier
  // with dma.queue_sets (a queue's transfers pipeline).
  Picoseconds queue_release;
  Picoseconds complete;  // completion semaphore written
  uint64_t bytes = 0, hbm_bytes = 0;
  uint32_t engines = 0;
  double efficiency = 1;
  Cause cause;  // Trigger (its DMA instruction) or QueueOrder (the transfer ahead of it in its queue)
};

// What wrote a semaphore update: the instruction at `index` of core `core`'s `engine` stream (for a DMA
// instruction, its transfer's completion: part Transfer, on DMA queue `queue`; for a PE instruction's
// ls_updates, part LoadStationary; for a core_barrier, its signal to the peer).
struct SemaphoreSource {
  int core = 0;
  isa::Engine engine = isa::Engine::SP;
  uint32_t index = 0;
  Part part = Part::Instruction;
  int queue = -1;  // transfers: the DMA queue
  NodeRef node() const { return {static_cast<int8_t>(core), engine, part, index}; }
};

class ModelObserver {
 public:
  virtual ~ModelObserver() = default;
  // What the observer reads beyond the records' times and causes, asked once before the run: the model skips
  // computing what no observer reads (the default: everything).
  struct Needs {
    bool work_bytes = true;  // InstructionRecord::work's byte counts (else only work.flops is filled)
    bool counters = true;    // on_counter
    bool semaphores = true;  // on_semaphore, on_semaphore_update
  };
  virtual Needs needs() const { return {}; }
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
