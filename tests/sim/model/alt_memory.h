// An example of another memory model bound in place of trnsim's HBM, SBUF or PSUM (RunOptions::bind_hbm,
// bind_sbuf, bind_psum; docs/architecture.md, "Binding another memory model"): a SystemC module between the
// memory's initiators and trnsim's memory module. Interposer is the part every such model shares: it forwards
// DMI, debug transport and DMI invalidation to trnsim's memory, whose bytes the numerics use.
// FixedLatencyMemory adds a fixed latency to each timed transaction (b_transport); a DRAM simulator behind
// the HBM socket, or a model of SBUF bank conflicts, would take its place, computing the delay from the
// transaction's address and length. The target socket is a multi-passthrough one: an SBUF or PSUM has
// several initiators (the core's five engines and the DMA system), the HBM one (the DMA system).
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <tlm_utils/simple_initiator_socket.h>
#include <systemc>
#include <tlm>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim/model/memory/hbm.h"
#include "sim/model/memory/onchip_memory.h"
#include "sim/model/run.h"

namespace trnsim::test {

class Interposer : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<Interposer> target{"target"};  // the initiators bind here
  tlm_utils::simple_initiator_socket<Interposer> forward{"forward"};        // bound to trnsim's memory

 protected:
  // `dmi` false: the model grants no DMI (a model that breaks the contract, for the tests).
  explicit Interposer(sc_core::sc_module_name name, bool dmi = true) : sc_module(name) {
    target.register_b_transport(this, &Interposer::b_transport_from);
    if (dmi) target.register_get_direct_mem_ptr(this, &Interposer::get_direct_mem_ptr);
    target.register_transport_dbg(this, &Interposer::transport_dbg);
    forward.register_invalidate_direct_mem_ptr(this, &Interposer::invalidate_direct_mem_ptr);
  }
  // The model's timing: answer `t` (usually by forwarding it) and add its delay.
  virtual void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time& delay) = 0;

 private:
  void b_transport_from(int, tlm::tlm_generic_payload& t, sc_core::sc_time& delay) { b_transport(t, delay); }
  bool get_direct_mem_ptr(int, tlm::tlm_generic_payload& t, tlm::tlm_dmi& dmi) {
    return forward->get_direct_mem_ptr(t, dmi);
  }
  unsigned transport_dbg(int, tlm::tlm_generic_payload& t) { return forward->transport_dbg(t); }
  void invalidate_direct_mem_ptr(sc_dt::uint64 start, sc_dt::uint64 end) {
    for (unsigned i = 0; i < target.size(); ++i) target[i]->invalidate_direct_mem_ptr(start, end);
  }
};

class FixedLatencyMemory : public Interposer {
 public:
  FixedLatencyMemory(sc_core::sc_module_name name, sc_core::sc_time extra)
      : Interposer(name), extra_(extra) {}

  // Timed transactions seen; shared so that a test reads it after the run has destroyed the model.
  std::shared_ptr<int> transactions = std::make_shared<int>(0);

 private:
  void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time& delay) override {
    ++*transactions;
    forward->b_transport(t, delay);
    delay += extra_;
  }

  sc_core::sc_time extra_;
};

// For the tests: a model that breaks the contract. It grants no DMI and answers every transaction with an
// error, but the HBM bandwidth query when `answers_query` (forwarded to the Hbm).
class BrokenMemory : public Interposer {
 public:
  BrokenMemory(sc_core::sc_module_name name, bool answers_query)
      : Interposer(name, false), answers_query_(answers_query) {}

 private:
  void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time& delay) override {
    if (answers_query_ && t.get_extension<model::HbmBandwidth>()) return forward->b_transport(t, delay);
    t.set_response_status(tlm::TLM_GENERIC_ERROR_RESPONSE);
  }
  bool answers_query_;
};

// Binds `m` between the DMA system's HBM socket and trnsim's Hbm (RunOptions::bind_hbm's work).
inline std::unique_ptr<sc_core::sc_module> interpose(std::unique_ptr<Interposer> m, model::HbmSockets& ends) {
  ends.dma.bind(m->target);
  m->forward.bind(ends.hbm);
  return m;
}

// Binds `m` between a core's initiators of its SBUF or PSUM and trnsim's (RunOptions::bind_sbuf's work).
inline std::unique_ptr<sc_core::sc_module> interpose(std::unique_ptr<Interposer> m,
                                                     model::OnChipSockets& ends) {
  for (auto* i : ends.initiators) i->bind(m->target);
  m->forward.bind(ends.memory);
  return m;
}

// "<prefix>_core<c>_sbuf" or "..._psum": a model's name, one per core and memory.
inline std::string onchip_name(const char* prefix, const model::OnChipSockets& ends) {
  return std::string(prefix) + "_core" + std::to_string(ends.core) +
         (ends.space == isa::MemSpace::PSUM ? "_psum" : "_sbuf");
}

// RunOptions::bind_hbm for a FixedLatencyMemory adding `extra` per transaction. (An sc_time is made only
// inside the run, once it has set SystemC's time resolution.)
inline auto bind_fixed_latency_hbm(Picoseconds extra) {
  return [extra](model::HbmSockets& ends) {
    return interpose(std::make_unique<FixedLatencyMemory>("fixed_latency_hbm",
                                                          sc_core::sc_time::from_value(extra.count())),
                     ends);
  };
}

// RunOptions::bind_sbuf / bind_psum for a FixedLatencyMemory adding `extra` per transaction on each core;
// `made`, if given, receives each model's transaction count (the model itself lives only until the run ends).
inline auto bind_fixed_latency_onchip(Picoseconds extra, std::vector<std::shared_ptr<int>>* made = nullptr) {
  return [extra, made](model::OnChipSockets& ends) {
    auto m = std::make_unique<FixedLatencyMemory>(onchip_name("fixed_latency", ends).c_str(),
                                                  sc_core::sc_time::from_value(extra.count()));
    if (made) made->push_back(m->transactions);
    return interpose(std::move(m), ends);
  };
}

}  // namespace trnsim::test
