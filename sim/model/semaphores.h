// The semaphores of both cores and the updates on their way to them (internal to the model; see run.h).
//
// Values are plain counters. A sequencer whose wait is not satisfied registers its wake event on the
// semaphore with the value it waits for (wait_for) and is woken by immediate notification when a change of
// that semaphore reaches the value (a change that does not leaves it registered: it would only register
// again). An update takes
// effect now (apply) or after a latency (signal with a later time): sync.semaphore_latency_ns on the same
// core, sync.cross_core_latency_ns on the peer (post_updates). Delayed updates are applied in time order, in
// the order they were posted when their times are equal, by this module's one SC_METHOD.
//
// Errors: RuleError for a semaphore index the core does not have; TimeLimitError (sim/timing/time_limit.h)
// for an update that would arrive at or beyond the run's time limit.
#pragma once

#include <systemc>

#include <array>
#include <cstdint>
#include <exception>
#include <functional>
#include <queue>
#include <vector>

#include "sim/base/units.h"
#include "sim/config/hw_config.h"
#include "sim/isa/instruction.h"
#include "sim/model/observer.h"

namespace trnsim::model {

class Semaphores : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Semaphores);
  // `on_error` receives what the SC_METHOD throws (an observer's exception) and stops the run.
  Semaphores(sc_core::sc_module_name name, const config::HwConfig& hw, ModelObserver* observer,
             Picoseconds limit, std::function<void(std::exception_ptr)> on_error);

  size_t count() const { return value_[0].size(); }  // semaphores per core
  int64_t value(int core, uint16_t sem) const { return value_[core][sem]; }
  // The writer of the last update of S[sem] of `core` (nullptr before the first update).
  const SemaphoreSource* last_source(int core, uint16_t sem) const {
    return sem < last_[core].size() && last_[core][sem].index != kNever ? &last_[core][sem] : nullptr;
  }
  // `wake` is notified (immediately) at the first change of S[sem] of `core` that leaves it >= `value`.
  void wait_for(int core, uint16_t sem, int64_t value, sc_core::sc_event& wake) {
    waiters_[core][sem].push_back({&wake, value});
  }

  // S[sem] += delta on `core` now; wakes its waiters.
  void apply(int core, uint16_t sem, int32_t delta, const SemaphoreSource& src);
  // S[sem] += delta on `core` at `at` (now if at <= now).
  void signal(int core, uint16_t sem, int32_t delta, Picoseconds at, const SemaphoreSource& src);
  // The updates of `inst`, completed on `core` at `at`, each with its same-core or cross-core latency.
  void post_updates(int core, const isa::Instruction& inst, Picoseconds at, const SemaphoreSource& src) {
    post(core, inst.updates, at, src);
  }
  void post(int core, const isa::SemUpdates& updates, Picoseconds at, const SemaphoreSource& src);

 private:
  struct Pending {
    uint64_t at, seq;
    int core;
    uint16_t sem;
    int32_t delta;
    SemaphoreSource src;
    bool operator>(const Pending& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  void update();  // SC_METHOD: applies the delayed updates that are due

  const config::SyncConfig& sync_;
  ModelObserver* observer_;
  Picoseconds limit_;
  std::function<void(std::exception_ptr)> on_error_;
  Picoseconds latency_, peer_latency_;  // sync.semaphore_latency_ns, sync.cross_core_latency_ns
  static constexpr uint32_t kNever = ~uint32_t{0};
  std::array<std::vector<int64_t>, 2> value_;
  std::array<std::vector<SemaphoreSource>, 2> last_;  // index kNever: never updated
  struct Waiter {
    sc_core::sc_event* wake;
    int64_t value;  // woken once S[sem] >= value
  };
  std::array<std::vector<std::vector<Waiter>>, 2> waiters_;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> delayed_;
  uint64_t seq_ = 0;
  sc_core::sc_event ev_;
  static constexpr uint64_t kNoWake = ~uint64_t{0};
  uint64_t wake_at_ = kNoWake;  // when ev_'s pending notification fires (kNoWake: none pending)
};

}  // namespace trnsim::model
