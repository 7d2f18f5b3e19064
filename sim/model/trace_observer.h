// A ModelObserver that writes a run's trace to a trace::TraceSink, in the layout traces/README.md promises.
//
// One process per physical core (pid core + 1). Slice tracks, in this order: "PE matmul" (MultiplyMoving,
// Neuron's TensorMatrixE row), "PE LoadStationary" (LDWEIGHTS, Neuron's TensorE row), "DVE", "ACT", "POOL",
// "SP", then one track per DMA queue in use, named like Neuron profiles: q<issuing engine>IO<queue>, e.g.
// qSyncIO0 (the engine of the queue's first transfer). A transfer spans trigger end -> completion; transfers
// of one queue that overlap go on sub-tracks of the same name under the queue's track. Counters per core:
// "HBM read" and "HBM write" (GB/s of the core's transfers), "DMA outstanding" (transfers triggered and not
// done moving data), "PE throttle" (utilisation cap at each matmul start, %), "SBUF occupancy" and "PSUM
// occupancy" (bytes per partition in use, its largest quadrant: memory_occupancy.h, the same figures as the
// stats' peaks; written at the end of the run, as a range is in use until its last access, so a trace of a
// run that failed has none).
//
// Every instruction is one slice on its engine track (DMA instructions: the trigger; the transfer is a second
// slice on its queue track) with annotations opcode, operands, cycles, clock_ghz, bytes, flops, sem_waits,
// wait_ns, source, index. Flows: for each semaphore condition an instruction waited for, an arrow from the
// slice whose update made the condition true (the instruction, the DMA transfer, or the peer's core_barrier)
// to the waiting instruction's slice; the update is attributed through on_semaphore_update.
//
// Slices are written when their instruction completes, except that a slice with outgoing flows is held until
// all its semaphore updates have landed (a few ns of simulated time), and a waiting slice until the slices
// releasing it are written, so a flow's source precedes its destination in the file (core_barriers excepted:
// two cores arriving together release each other). Held slices keep their track's order. Memory: the held
// slices, the pending semaphore claims and flows, 13 bytes per instruction of the program, its wait index
// and a cache of up to 65536 distinct operand texts. Limits: with semaphores that go down (negative deltas) a
// crossing that did not release anyone may leave a flow without an end; core_barrier targets assume one
// barrier-issuing engine per core. The occupancy counters keep one record per distinct on-chip byte range.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/base/ring_queue.h"
#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"
#include "sim/model/memory_occupancy.h"
#include "sim/model/observer.h"
#include "sim/trace/trace_sink.h"

namespace trnsim::model {

class TraceObserver final : public ModelObserver {
 public:
  // `sink`, `program` and `hw` must outlive the observer. Creates the process and counter tracks.
  TraceObserver(trace::TraceSink& sink, const isa::Program& program, const config::HwConfig& hw);

  void on_instruction(const InstructionRecord& r) override;
  void on_dma(const DmaRecord& r) override;
  void on_semaphore_update(int core, uint16_t sem, int64_t old_value, int64_t new_value, Picoseconds t,
                           const SemaphoreSource& source) override;
  void on_counter(int core, std::string_view name, Picoseconds t, double value) override;
  void on_finish(const RunStats& stats) override;

  // Writes every held slice (on_finish does this; call it after a failed run to keep a partial trace).
  void flush();

  struct Counts {
    uint64_t slices = 0;  // instruction, LoadStationary and transfer slices
    uint64_t flows = 0;   // flow arrows started
    uint64_t counter_samples = 0;
  };
  const Counts& counts() const { return counts_; }

 private:
  // A completed instruction (or DMA transfer) whose slice is not written yet.
  struct Held {
    bool is_dma = false;  // DmaRecord: a transfer; InstructionRecord otherwise
    InstructionRecord inst;
    DmaRecord dma;
  };
  struct Claim {  // a semaphore update that made one of an instruction's wait conditions true
    uint16_t sem;
    uint64_t t_ps;
    uint64_t flow;
    uint32_t source;  // gid of the releasing instruction
  };
  struct SourceState {
    uint32_t remaining = 0;  // semaphore updates not yet applied
    std::vector<uint64_t> flows;
    std::vector<uint64_t> barrier_flows;  // to core_barriers: kept only if the barrier was still waiting
    void clear() {
      remaining = 0;
      flows.clear();
      barrier_flows.clear();
    }
  };
  // An optional T per gid, in recycled storage: after warm-up, adding and erasing entries allocates nothing.
  // References stay valid until the next get() of a new gid.
  template <typename T>
  class GidPool {
   public:
    void resize(size_t gids) { slot_.assign(gids, 0); }
    T* find(uint32_t g) { return slot_[g] == 0 ? nullptr : &pool_[slot_[g] - 1]; }
    const T* find(uint32_t g) const { return slot_[g] == 0 ? nullptr : &pool_[slot_[g] - 1]; }
    T& get(uint32_t g, bool& fresh) {
      fresh = slot_[g] == 0;
      if (fresh) {
        if (free_.empty()) {
          pool_.emplace_back();
          slot_[g] = static_cast<uint32_t>(pool_.size());
        } else {
          slot_[g] = free_.back();
          free_.pop_back();
        }
      }
      return pool_[slot_[g] - 1];
    }
    void erase(uint32_t g) {
      if (slot_[g] == 0) return;
      pool_[slot_[g] - 1].clear();
      free_.push_back(slot_[g]);
      slot_[g] = 0;
    }

   private:
    std::vector<uint32_t> slot_;  // by gid: 1 + index into pool_, 0 for none
    std::vector<T> pool_;
    std::vector<uint32_t> free_;
  };
  struct WaitRef {
    uint32_t value;
    uint32_t gid;
  };
  struct Lane {
    trace::TrackId track;
    uint64_t last_end_ps = 0;
  };
  struct Queue {
    trace::TrackId track;
    std::string name;
    std::vector<Lane> lanes;
  };
  struct Core {
    trace::TrackId process;
    std::array<trace::TrackId, isa::kNumEngines + 1> engine{};  // PE matmul, DVE, ACT, POOL, SP, PE LS
    std::vector<Queue> queues;
    trace::TrackId hbm_read, hbm_write, dma_outstanding, pe_throttle, sbuf_use, psum_use;
    int64_t outstanding = 0;
    double throttle = -1;
  };

  uint32_t gid(int core, isa::Engine e, uint32_t index) const {
    return base_[core][static_cast<int>(e)] + index;
  }
  uint32_t expected_updates(const isa::Instruction& inst) const;
  trace::TrackId engine_track(int core, int slot);
  trace::TrackId lane_for(int core, const DmaRecord& r, uint64_t begin_ps, uint64_t end_ps);

  void hold_or_write(size_t fifo, Held&& h);
  bool ready(const Held& h);
  bool source_ready(uint32_t g, const isa::Instruction& inst) const;
  void collect_out_flows(uint32_t g);  // fills out_flows_ and forgets the source
  void write(const Held& h);
  void write_instruction(const InstructionRecord& r);
  void write_transfer(const DmaRecord& r);
  void drain(bool force);
  void chosen_claims(uint32_t g, const InstructionRecord& r);  // fills chosen_
  void sample(trace::TrackId track, Picoseconds t, double value);

  // Text annotations, built into reused buffers.
  void format_operands(const isa::Instruction& inst);
  std::string_view operands_text(const isa::Instruction& inst);  // format_operands, cached by content
  void format_waits(const isa::Instruction& inst, uint32_t barrier_target);
  void format_source(const isa::Instruction& inst);

  trace::TraceSink& sink_;
  const isa::Program& program_;
  const config::HwConfig& hw_;
  std::array<double, isa::kNumEngines> clock_ghz_{};
  uint32_t num_sems_ = 0;
  uint32_t barrier_sem_ = 0;
  std::array<std::array<uint32_t, isa::kNumEngines>, 2> base_{};
  std::vector<uint8_t> flags_;               // by gid: kWaiterWritten, kSourceWritten
  std::vector<uint32_t> barrier_target_;     // by gid: core_barrier's own-semaphore target (0: none)
  std::vector<std::vector<WaitRef>> waits_;  // by core * num_sems_ + sem, sorted by value
  GidPool<std::vector<Claim>> claims_;       // by waiter gid
  GidPool<SourceState> sources_;             // by source gid
  std::unordered_map<uint64_t, bool> barrier_decision_;  // barrier flow -> kept, once the barrier completed
  std::vector<RingQueue<Held>> fifos_;                   // per core: engines, then queues
  std::vector<uint32_t> busy_fifos_;                     // fifos_ indices that hold slices
  size_t held_ = 0;
  uint64_t next_flow_ = 1;
  std::array<Core, 2> cores_;
  std::vector<const Claim*> chosen_;
  std::vector<uint64_t> in_flows_, out_flows_;
  std::string operands_, waits_text_, source_text_;
  struct KeyHash {
    using is_transparent = void;
    uint64_t operator()(std::string_view s) const;
  };
  static constexpr size_t kMaxOperandTexts = size_t{1} << 16;  // bounds the cache; it restarts when full
  std::unordered_map<std::string, std::string, KeyHash, std::equal_to<>>
      operand_texts_;  // key: operand fields
  Counts counts_;
  MemoryOccupancy occupancy_;  // for the SBUF/PSUM occupancy counters
};

}  // namespace trnsim::model
