// An example of another HBM model bound in place of trnsim's (RunOptions::bind_hbm; docs/architecture.md,
// "Binding another memory model"): a SystemC module between the DMA system's socket and the Hbm's that
// forwards every call to the Hbm and adds a fixed latency to each timed transaction (b_transport). A DRAM
// simulator would take the same place, computing the delay from the transaction's address and length.
#pragma once

#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>
#include <systemc>
#include <tlm>

#include <memory>

#include "sim/model/memory/hbm.h"
#include "sim/model/run.h"

namespace trnsim::test {

class FixedLatencyHbm : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<FixedLatencyHbm> target{"target"};       // the DMA system binds here
  tlm_utils::simple_initiator_socket<FixedLatencyHbm> forward{"forward"};  // bound to trnsim's Hbm

  FixedLatencyHbm(sc_core::sc_module_name name, sc_core::sc_time extra) : sc_module(name), extra_(extra) {
    target.register_b_transport(this, &FixedLatencyHbm::b_transport);
    target.register_get_direct_mem_ptr(this, &FixedLatencyHbm::get_direct_mem_ptr);
    target.register_transport_dbg(this, &FixedLatencyHbm::transport_dbg);
    forward.register_invalidate_direct_mem_ptr(this, &FixedLatencyHbm::invalidate_direct_mem_ptr);
  }

 private:
  void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time& delay) {
    forward->b_transport(t, delay);
    delay += extra_;
  }
  // Numerics read and write the Hbm's bytes directly: DMI must reach it.
  bool get_direct_mem_ptr(tlm::tlm_generic_payload& t, tlm::tlm_dmi& dmi) {
    return forward->get_direct_mem_ptr(t, dmi);
  }
  unsigned transport_dbg(tlm::tlm_generic_payload& t) { return forward->transport_dbg(t); }
  void invalidate_direct_mem_ptr(sc_dt::uint64 start, sc_dt::uint64 end) {
    target->invalidate_direct_mem_ptr(start, end);
  }

  sc_core::sc_time extra_;
};

// RunOptions::bind_hbm for a FixedLatencyHbm adding `extra` per transaction. (An sc_time is made only
// inside the run, once it has set SystemC's time resolution.)
inline auto bind_fixed_latency_hbm(Picoseconds extra) {
  return [extra](model::HbmSockets& ends) -> std::unique_ptr<sc_core::sc_module> {
    auto m =
        std::make_unique<FixedLatencyHbm>("fixed_latency_hbm", sc_core::sc_time::from_value(extra.count()));
    ends.dma.bind(m->target);
    m->forward.bind(ends.hbm);
    return m;
  };
}

}  // namespace trnsim::test
