// The DMA system of the LNC=2 pair (internal to the model; see run.h): a thin SystemC module over
// timing::DmaQueues, which holds the queues of both cores, the setup latency, FIFO order and bandwidth
// sharing. This module keeps each transfer's record, runs one SC_METHOD at every DmaQueues event, and on a
// transfer's completion applies its numerics (isa::execute), posts its semaphore updates, counts its stats
// and reports it to the observer, with the HBM bandwidth counters.
//
// Errors: RuleError "at <t> ns, <file>:<line>: core <c> <ENGINE> #<i> <opcode> (DMA queue <q>): <rule>" from
// isa::execute; the same prefix on an InputError when the transfer would finish at or beyond the run's time
// limit. Both stop the run (Lnc2::fail).
#pragma once

#include <systemc>

#include <array>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "sim/isa/semantics.h"
#include "sim/model/observer.h"
#include "sim/timing/cost_model.h"
#include "sim/timing/dma_queues.h"

namespace trnsim::model {

class Lnc2;

class DmaSystem : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(DmaSystem);
  DmaSystem(sc_core::sc_module_name name, Lnc2& top);

  // Transfer triggered by `rec.issuer` of core `rec.core`, queued now (rec.enqueue) on queue rec.queue.
  void enqueue(const DmaRecord& rec, const timing::DmaCost& cost, const isa::Work& work);

 private:
  struct Transfer {
    DmaRecord rec;
    timing::DmaCost cost;
    isa::Work work;
  };
  void update();  // SC_METHOD
  void finish(Transfer& t);
  // "at 12.345 ns, kernel.cpp:12: core 0 SP #3 dma_copy (DMA queue 2)"
  std::string context(const DmaRecord& rec) const;

  Lnc2& top_;
  timing::DmaQueues queues_;
  std::vector<Transfer> transfers_;  // indexed by the DmaQueues tag
  std::vector<uint64_t> free_;       // free slots of transfers_
  sc_core::sc_event ev_;
  double last_hbm_rate_ = -1;
  std::array<std::array<double, 2>, 2> last_rw_rate_{{{-1, -1}, {-1, -1}}};  // per core: HBM read, write
};

}  // namespace trnsim::model
