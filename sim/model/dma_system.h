// The DMA system of the LNC=2 pair (internal to the model; see run.h): a thin SystemC module over
// timing::DmaQueues, which holds the queues of both cores, the setup latency, FIFO order and bandwidth
// sharing. This module keeps each transfer's record, runs one SC_METHOD at every DmaQueues event, and on a
// transfer's completion applies its numerics (isa::execute), posts its semaphore updates, counts its stats
// and reports it to the observer, with the HBM bandwidth counters.
//
// It is the initiator of the memories' TLM-2.0 sockets (sim/model/memory): `hbm` (the Hbm, or another HBM
// model bound through RunOptions::bind_hbm) and each core's `sbuf` and `psum`. A transfer that touches HBM
// sends the HBM one timing transaction when it is queued (Hbm's b_transport): the delay annotated is added
// to its setup; at the start of the run it asks the HBM model's bandwidth (HbmBandwidth), which its queues
// share. With another model bound in place of a core's SBUF or PSUM (RunOptions::bind_sbuf / bind_psum), a
// transfer with operands there sends it one timing transaction too (a sendrecv: one to each core's SBUF, its
// src on the issuing core's, its dst on the peer's), whose delay is added to its setup. Data
// moves through DMI (the model checks at the start that every socket grants it over the run's bytes;
// Lnc2::start_of_simulation).
//
// Errors: RuleError "at <t> ns, <file>:<line>: core <c> <ENGINE> #<i> <opcode> (DMA queue <q>): <rule>" from
// isa::execute; the same prefix on an InputError when the transfer would finish at or beyond the run's time
// limit. Both stop the run (Lnc2::fail).
#pragma once

#include <tlm_utils/simple_initiator_socket.h>
#include <systemc>
#include <tlm>

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

  tlm_utils::simple_initiator_socket<DmaSystem> hbm;
  using Socket = tlm_utils::simple_initiator_socket<DmaSystem>;
  std::array<Socket, 2> sbuf{{Socket("core0_sbuf"), Socket("core1_sbuf")}},
      psum{{Socket("core0_psum"), Socket("core1_psum")}};  // per core

  // Transfer triggered by `rec.issuer` of core `rec.core`, queued now (rec.enqueue) on queue rec.queue.
  void enqueue(const DmaRecord& rec, const timing::DmaCost& cost, const isa::Work& work);

 private:
  struct Transfer {
    DmaRecord rec;
    timing::DmaCost cost;
    isa::Work work;
  };
  void update();  // SC_METHOD
  // Asks the HBM model's bandwidth (HbmBandwidth) for the queues; an error stops the run (Lnc2::fail).
  void start_of_simulation() override;
  // The HBM latency of a transfer that touches HBM: the delay the HBM model annotates on its timing
  // transaction. InputError (with context(rec)) if the model answers with an error response.
  Picoseconds hbm_latency(const DmaRecord& rec, const timing::DmaCost& cost);
  // The delays the SBUF and PSUM models bound in place of trnsim's (RunOptions::bind_sbuf / bind_psum)
  // annotate on the transfer's accesses, one per memory it touches (memory::access_delay): its core's SBUF
  // and PSUM, and the peer core's SBUF for a sendrecv's dst; with context(rec) on an error.
  Picoseconds onchip_latency(const DmaRecord& rec);
  void finish(Transfer& t);
  // Schedules update() at `at` (>= now) unless it is scheduled at or before then.
  void wake_at(Picoseconds at, Picoseconds now);
  // "at 12.345 ns, kernel.cpp:12: core 0 SP #3 dma_copy (DMA queue 2)"
  std::string context(const DmaRecord& rec) const;

  Lnc2& top_;
  timing::DmaQueues queues_;
  tlm::tlm_generic_payload hbm_access_;     // reused by hbm_latency
  tlm::tlm_generic_payload onchip_access_;  // reused by onchip_latency
  std::vector<Transfer> transfers_;         // indexed by the DmaQueues tag
  std::vector<uint64_t> free_;              // free slots of transfers_
  struct Done {
    NodeRef node;
    Picoseconds released;  // DmaRecord::queue_release
  };
  // Per core, hardware queue and DMA engine (timing::DmaCost::queue_engines; slot 0 for a transfer on all of
  // them): the last transfer that finished there, the one ahead of the next in that engine's queue.
  std::array<std::vector<std::array<Done, 64>>, 2> last_done_;
  sc_core::sc_event ev_;
  static constexpr uint64_t kNoWake = ~uint64_t{0};
  uint64_t wake_at_ = kNoWake;  // when ev_'s pending notification fires (kNoWake: none pending)
  double last_hbm_rate_ = -1;
  std::array<std::array<double, 2>, 2> last_rw_rate_{{{-1, -1}, {-1, -1}}};  // per core: HBM read, write
};

}  // namespace trnsim::model
