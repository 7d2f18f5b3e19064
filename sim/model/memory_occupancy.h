// SBUF and PSUM use over simulated time, derived from the instruction operands (the builder's allocations are
// not in the program). Plain C++ (no SystemC); the stats (peak use) and the trace (occupancy counters) both
// read it, so the two always agree.
//
// Every on-chip byte range an operand touches (the extent of its access pattern inside a partition, on the
// partition quadrants it spans) is in use from the start of the first instruction or DMA transfer touching it
// to the end of the last one: an instruction from its LoadStationary (or its own) start to its end, a DMA
// transfer while its data moves (sendrecv's destination is the peer core's SBUF). A range reused after a gap
// counts as in use during the gap, so this is an upper bound of the live data, close to an allocator's
// high-water mark. Use is in bytes per partition: the sum of the in-use ranges of one quadrant (32
// partitions), and the largest quadrant where a figure is per core. Capacities are in the hardware config.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/base/units.h"
#include "sim/isa/instruction.h"
#include "sim/model/observer.h"

namespace trnsim::model {

struct MemoryPeak {
  uint64_t bytes_per_partition = 0;     // max over time, quadrants and cores
  std::array<uint64_t, 4> quadrant{};   // max over time and cores, per quadrant (partitions 0, 32, 64, 96)
  uint64_t capacity_per_partition = 0;  // from the hardware config
  Picoseconds at;                       // first time the peak is reached
};

// One change of a use figure: from `t` on, `bytes` per partition are in use.
struct UseStep {
  Picoseconds t;
  uint64_t bytes = 0;
};

class MemoryOccupancy {
 public:
  // Records the on-chip operands of a completed instruction (DMA instructions are skipped: their transfers
  // touch memory) or DMA transfer.
  void on_instruction(const InstructionRecord& r);
  void on_dma(const DmaRecord& r);

  // The peak of SBUF or PSUM over both cores; `capacity` is copied into the result.
  MemoryPeak peak(isa::MemSpace space, uint64_t capacity) const;
  // Bytes per partition in use on core `core` (its largest quadrant) at each time the figure changes, in time
  // order, starting with 0 at time 0. Empty when the core touched nothing of that memory.
  std::vector<UseStep> use_over_time(int core, isa::MemSpace space) const;

 private:
  struct Interval {
    uint64_t first = UINT64_MAX, last = 0;  // ps
  };
  void touch(int core, const isa::AccessPattern& a, uint64_t from_ps, uint64_t to_ps);
  // (time, use after every change at that time) of one quadrant, in time order.
  std::vector<std::pair<uint64_t, uint64_t>> quadrant_use(int core, isa::MemSpace space, uint32_t q) const;

  // key -> Interval, open addressing: every operand of every instruction looks its range up. Keys are never 0
  // (the byte range is not empty), which marks a free slot.
  class RangeTable {
   public:
    // Inline: one per operand of every record; a key seen before is found without a call.
    Interval& operator[](uint64_t key) {
      const size_t mask = slots_.size() - 1;
      for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & mask;; i = (i + 1) & mask) {
        auto& slot = slots_[i];
        if (slot.first == key) return slot.second;
        if (slot.first == 0) return insert(key);
      }
    }
    // The (key, Interval) entries, in no particular order.
    template <class F>
    void for_each(F&& f) const {
      for (const auto& [key, iv] : slots_)
        if (key != 0) f(key, iv);
    }

   private:
    Interval& insert(uint64_t key);  // a key not in the table
    std::vector<std::pair<uint64_t, Interval>> slots_ = std::vector<std::pair<uint64_t, Interval>>(1024);
    size_t used_ = 0;
  };
  // key: core, space, first and last quadrant, byte range inside a partition
  RangeTable ranges_;
};

}  // namespace trnsim::model
