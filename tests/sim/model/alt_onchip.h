// An example of another SBUF or PSUM model bound in place of trnsim's (RunOptions::bind_sbuf / bind_psum;
// docs/architecture.md, "Binding another memory model"): a SystemC module between a core's initiators (its
// five engines and the DMA system, each bound to its multi-passthrough target socket) and trnsim's Sbuf or
// Psum, which forwards every call there and adds a fixed latency to each timed transaction (b_transport). A
// model of SBUF bank conflicts or another arbitration would take the same place, computing the delay from
// the transaction's address (partition-major) and length.
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <tlm_utils/simple_initiator_socket.h>
#include <systemc>
#include <tlm>

#include <memory>
#include <string>
#include <vector>

#include "sim/model/memory/onchip_memory.h"
#include "sim/model/run.h"

namespace trnsim::test {

class FixedLatencyOnChip : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<FixedLatencyOnChip> target{
      "target"};                                                              // the initiators bind here
  tlm_utils::simple_initiator_socket<FixedLatencyOnChip> forward{"forward"};  // bound to trnsim's memory

  FixedLatencyOnChip(sc_core::sc_module_name name, sc_core::sc_time extra) : sc_module(name), extra_(extra) {
    target.register_b_transport(this, &FixedLatencyOnChip::b_transport);
    target.register_get_direct_mem_ptr(this, &FixedLatencyOnChip::get_direct_mem_ptr);
    target.register_transport_dbg(this, &FixedLatencyOnChip::transport_dbg);
    forward.register_invalidate_direct_mem_ptr(this, &FixedLatencyOnChip::invalidate_direct_mem_ptr);
  }

  // Timed transactions seen; shared so that a test reads it after the run has destroyed the model.
  std::shared_ptr<int> transactions = std::make_shared<int>(0);

 private:
  void b_transport(int, tlm::tlm_generic_payload& t, sc_core::sc_time& delay) {
    ++*transactions;
    forward->b_transport(t, delay);
    delay += extra_;
  }
  // Numerics read and write trnsim's bytes directly: DMI must reach them.
  bool get_direct_mem_ptr(int, tlm::tlm_generic_payload& t, tlm::tlm_dmi& dmi) {
    return forward->get_direct_mem_ptr(t, dmi);
  }
  unsigned transport_dbg(int, tlm::tlm_generic_payload& t) { return forward->transport_dbg(t); }
  void invalidate_direct_mem_ptr(sc_dt::uint64 start, sc_dt::uint64 end) {
    for (unsigned i = 0; i < target.size(); ++i) target[i]->invalidate_direct_mem_ptr(start, end);
  }

  sc_core::sc_time extra_;
};

// RunOptions::bind_sbuf / bind_psum for a FixedLatencyOnChip adding `extra` per transaction on each core;
// `made`, if given, receives each model's transaction count (the model itself lives only until the run ends).
inline auto bind_fixed_latency_onchip(Picoseconds extra, std::vector<std::shared_ptr<int>>* made = nullptr) {
  return [extra, made](model::OnChipSockets& ends) -> std::unique_ptr<sc_core::sc_module> {
    const std::string name = std::string("fixed_latency_core") + std::to_string(ends.core) +
                             (ends.space == isa::MemSpace::PSUM ? "_psum" : "_sbuf");
    auto m = std::make_unique<FixedLatencyOnChip>(name.c_str(), sc_core::sc_time::from_value(extra.count()));
    for (auto* i : ends.initiators) i->bind(m->target);
    m->forward.bind(ends.memory);
    if (made) made->push_back(m->transactions);
    return m;
  };
}

}  // namespace trnsim::test
