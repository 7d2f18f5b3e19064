// SystemC modules of the LNC=2 model (internal; callers use sim/model/run.h). Thin sc_modules over the plain
// C++ policies in sim/timing: every process is an SC_METHOD that schedules its next event directly (one
// timed event per instruction or DMA state change), no sc_clock, no sc_signal.
#pragma once

#include <systemc>

#include <array>
#include <deque>
#include <exception>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "sim/config/hw_config.h"
#include "sim/model/run.h"
#include "sim/timing/bandwidth_sharing.h"
#include "sim/timing/cost_model.h"
#include "sim/timing/pe_throttle.h"

namespace trnsim::model {

class Lnc2;
class Sequencer;

inline Picoseconds now_ps() {
  return Picoseconds(sc_core::sc_time_stamp().value());
}
inline sc_core::sc_time to_sc(Picoseconds d) {
  return sc_core::sc_time::from_value(d.count());
}

// Semaphores of one core: plain counters; a blocked sequencer registers on the semaphore it waits for and is
// woken (immediate notification) when that semaphore changes.
struct SemaphoreFile {
  std::vector<int64_t> value;
  std::vector<std::vector<Sequencer*>> waiters;
  void reset(size_t n) {
    value.assign(n, 0);
    waiters.assign(n, {});
  }
};

// One engine sequencer: runs its stream in program order.
class Sequencer : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Sequencer);
  Sequencer(sc_core::sc_module_name name, Lnc2& top, int core, isa::Engine engine);

  sc_core::sc_event wake;  // a semaphore this sequencer waits for changed

  bool done() const { return idx_ >= stream_.size() && pe_pending_.empty(); }
  // "core 0 PE: instruction #3 (nc_matmul, kernel.cpp:12) waits for S[2] >= 1 (now 0)"
  std::string blocked_description() const;

 private:
  enum class Phase { Fetch, Busy, Trigger, PeMoveOn, BarrierWait };
  struct PePending {
    uint32_t index;
    InstructionRecord rec;
  };

  void step();  // SC_METHOD
  void run();
  void pe_complete();  // SC_METHOD: PE completions at the end of each MultiplyMoving
  bool waits_ok(const isa::Instruction& inst);
  void complete(uint32_t index, InstructionRecord& rec);
  [[noreturn]] void rethrow_rule(const std::exception& e, const isa::Instruction& inst, uint32_t index) const;

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
  int64_t barrier_target_ = 0;
  // PE pipeline: LoadStationary unit and MultiplyMoving unit.
  Picoseconds ls_free_, mm_start_prev_, mm_end_prev_;
  std::unique_ptr<timing::PeThrottle> throttle_;
  std::deque<PePending> pe_pending_;
  sc_core::sc_event pe_done_;
};

// The DMA queues of both cores and the shared HBM stack.
class DmaSystem : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(DmaSystem);
  DmaSystem(sc_core::sc_module_name name, Lnc2& top);

  // Transfer triggered by `rec.issuer` of core `rec.core`, queued now.
  void enqueue(const DmaRecord& rec, const timing::DmaCost& cost, const isa::Work& work);

 private:
  struct Transfer {
    DmaRecord rec;
    timing::DmaCost cost;
    isa::Work work;
    Picoseconds ready;  // setup done
    uint64_t flow = 0;  // 0: not moving yet
  };
  void update();  // SC_METHOD
  void finish(Transfer& t);

  Lnc2& top_;
  timing::BandwidthSharing share_;
  std::array<std::vector<std::deque<std::unique_ptr<Transfer>>>, 2> queues_;
  sc_core::sc_event ev_;
  double last_hbm_rate_ = -1;
  std::array<std::array<double, 2>, 2> last_rw_rate_{{{-1, -1}, {-1, -1}}};  // per core: HBM read, write
};

// Semaphore updates that become visible after a latency.
class SemaphoreDelay : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(SemaphoreDelay);
  SemaphoreDelay(sc_core::sc_module_name name, Lnc2& top);
  void post(int core, uint16_t sem, int32_t delta, Picoseconds at, const SemaphoreSource& src);

 private:
  struct Pending {
    uint64_t at, seq;
    int core;
    uint16_t sem;
    int32_t delta;
    SemaphoreSource src;
    bool operator>(const Pending& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  void update();  // SC_METHOD
  Lnc2& top_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> q_;
  uint64_t seq_ = 0;
  sc_core::sc_event ev_;
};

// Top level: two cores' sequencers and semaphores, the DMA system, shared run state.
class Lnc2 : public sc_core::sc_module {
 public:
  Lnc2(sc_core::sc_module_name name, const isa::Program& program, const config::HwConfig& hw,
       const RunOptions& options, isa::MachineState* state);

  const isa::Program& program;
  const config::HwConfig& hw;
  const RunOptions& options;
  isa::MachineState* state;  // null when numerics are off
  isa::Limits limits;
  timing::CostModel cost;
  RunStats stats;
  std::array<SemaphoreFile, 2> sems;
  std::array<int64_t, 2> barriers_issued{};
  uint64_t total_instructions = 0;
  uint64_t completed = 0;
  Picoseconds last_completion;
  std::exception_ptr error;

  // Applies S[sem] += delta on `core` now and wakes its waiters.
  void apply_update(int core, uint16_t sem, int32_t delta, const SemaphoreSource& src);
  // Applies an instruction's updates with the same-core / cross-core latency.
  void post_updates(int core, const isa::Instruction& inst, Picoseconds at, double same_core_ns,
                    const SemaphoreSource& src);
  void signal(int core, uint16_t sem, int32_t delta, Picoseconds at, const SemaphoreSource& src);
  void count_completion(Picoseconds t);
  void fail(std::exception_ptr e);
  std::string where(const isa::Instruction& inst) const;  // "kernel.cpp:12" or "unknown source"

  std::array<std::array<std::unique_ptr<Sequencer>, isa::kNumEngines>, 2> seq;
  std::unique_ptr<DmaSystem> dma;
  std::unique_ptr<SemaphoreDelay> delay;
};

}  // namespace trnsim::model
