// A ModelObserver that collects the profile-style figures of a run which RunStats does not hold: time per
// engine and opcode, time per kernel source line, BF16-equivalent PE FLOPs (for MFU), the SBUF/PSUM peak
// use and the critical path (critical_path.h). Plain C++ (no SystemC): tests may feed it records directly.
// tools/trnsim/report.h turns it into stats.json.
//
// Times are engine occupancy as RunStats counts it: end - start of each instruction (PE: the MultiplyMoving
// phase; LoadStationary is counted apart as the PE's "load_stationary" pseudo-opcode, Neuron's LDWEIGHTS; DMA
// instructions: the trigger on the issuing sequencer; core_barrier: 0). Per opcode and per line, figures are
// summed over both physical cores.
//
// SBUF/PSUM use: memory_occupancy.h (from the instruction operands over time).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/base/units.h"
#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"
#include "sim/model/critical_path.h"
#include "sim/model/memory_occupancy.h"
#include "sim/model/observer.h"

namespace trnsim::model {

struct OpcodeTime {
  uint64_t count = 0;
  Picoseconds total;  // summed engine occupancy
};

// Time one kernel source line spent on one engine (both cores).
struct LineTime {
  uint32_t file = 0;  // index into Program::files (0 = unknown)
  uint32_t line = 0;
  isa::Engine engine = isa::Engine::SP;
  uint64_t instructions = 0;
  Picoseconds busy;
  Picoseconds semaphore_wait;  // before issue, plus a core_barrier's own wait
};

// One kernel phase (Instruction::phase, a builder PhaseScope), both cores.
struct PhaseTime {
  std::string name;
  Picoseconds start, end;  // first start, last end of its instructions and DMA transfers
  std::array<Picoseconds, isa::kNumEngines> busy{};  // engine occupancy (PE: MultiplyMoving)
  uint64_t instructions = 0;
  uint64_t dma_transfers = 0, dma_bytes = 0;
};

struct ProfileStats {
  // [engine][opcode], both cores. PE nc_matmul time is its MultiplyMoving phase.
  std::array<std::array<OpcodeTime, isa::kNumOpcodes>, isa::kNumEngines> opcodes{};
  OpcodeTime pe_load_stationary;  // LoadStationary phases (count: matmuls / transposes that had one)
  uint64_t pe_flops = 0;
  double pe_flops_bf16_equivalent = 0;  // FLOPs scaled to BF16 speed: MX / 4, FP8 double_row / 2, FP32 x 4
  double bf16_peak_flops_per_ns = 0;    // 128 x 128 MACs x 2 x PE GHz x physical cores of the program
  std::vector<LineTime> lines;          // busiest first (ties: file, line, engine)
  MemoryPeak sbuf, psum;
  std::vector<PhaseTime> phases;  // in Program::phases order, phases that ran only
  CriticalPathSummary critical_path;
};

class StatsObserver final : public ModelObserver {
 public:
  // `program` must outlive the observer.
  StatsObserver(const isa::Program& program, const config::HwConfig& hw);

  Needs needs() const override { return {false, false, false}; }  // work.flops, records only
  void on_instruction(const InstructionRecord& r) override;
  void on_dma(const DmaRecord& r) override;
  void on_finish(const RunStats& stats) override;

  // Complete after on_finish (or finish()).
  const ProfileStats& stats() const { return stats_; }
  // Computes the line ranking and memory peaks from what was observed so far (on_finish calls it).
  void finish();

 private:
  PhaseTime* phase_of(const isa::Instruction& inst) {
    return inst.phase != 0 && inst.phase < phases_.size() ? &phases_[inst.phase] : nullptr;
  }

  const isa::Program& program_;
  uint32_t fp32_factor_ = 4;
  ProfileStats stats_;
  std::unordered_map<uint64_t, LineTime> lines_;                              // key: file, line, engine
  std::array<std::pair<uint64_t, LineTime*>, isa::kNumEngines> last_line_{};  // per engine: last key, entry
  MemoryOccupancy occupancy_;
  std::vector<PhaseTime> phases_;  // by Program::phases index (0: no phase)
  CriticalPathRecorder critical_;
};

// Forwards every callback to each observer in turn (e.g. a trace and the stats of one run).
class TeeObserver final : public ModelObserver {
 public:
  explicit TeeObserver(std::vector<ModelObserver*> observers) : observers_(std::move(observers)) {}
  Needs needs() const override;  // what any of them needs
  void on_instruction(const InstructionRecord& r) override;
  void on_dma(const DmaRecord& r) override;
  void on_semaphore(int core, uint16_t sem, int64_t value, Picoseconds t) override;
  void on_semaphore_update(int core, uint16_t sem, int64_t old_value, int64_t new_value, Picoseconds t,
                           const SemaphoreSource& source) override;
  void on_counter(int core, std::string_view name, Picoseconds t, double value) override;
  void on_finish(const RunStats& stats) override;

 private:
  std::vector<ModelObserver*> observers_;
};

}  // namespace trnsim::model
