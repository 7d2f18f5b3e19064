// The HBM stack of the LNC=2 pair, shared by both cores (internal to the model; see run.h): a thin SystemC
// module with a TLM-2.0 target socket over the HBM tensors' bytes (isa::MachineState::hbm) and the
// timing::HbmTiming policy. The DMA system is its initiator.
//
// Addresses (HbmAddressMap): the program's tensors one after another in declaration order, each at a 4 KiB
// aligned base; an address names one byte of one tensor. An access stays within one tensor.
//
// Socket (TLM-2.0 base protocol, loosely timed):
//   - b_transport: every command adds HbmTiming::access_latency() to `delay`; TLM_READ_COMMAND /
//     TLM_WRITE_COMMAND also copy the bytes (numerics on; TLM_COMMAND_ERROR_RESPONSE without). The DMA system
//     sends one TLM_IGNORE_COMMAND for each transfer that touches HBM when it is queued (address: its first
//     HBM byte; length: its HBM bytes, read + written), and the delay it gets back is that transfer's HBM
//     latency, added to its setup (dma.setup_ns). Its data moves through DMI when it completes.
//   - get_direct_mem_ptr: read/write DMI over the tensor holding the address (numerics on).
//   - transport_dbg: copies bytes, no time.
//   - HbmBandwidth: a transaction carrying this extension gets the stack's bandwidth
//     (HbmTiming::bandwidth_GBps()). The DMA system asks once, at the start of the run, and its queues share
//     that bandwidth between the transfers moving at once (timing::DmaQueues, max-min fair with the DMA
//     engines).
// An address outside every tensor: TLM_ADDRESS_ERROR_RESPONSE.
//
// Another HBM model (a DRAM simulator, a fixed latency) binds between the DMA system's socket and this one
// through RunOptions::bind_hbm; see docs/architecture.md, "Binding another memory model".
#pragma once

#include <tlm_utils/simple_target_socket.h>
#include <systemc>
#include <tlm>

#include <cstdint>
#include <vector>

#include "sim/base/host_bytes.h"
#include "sim/isa/instruction.h"
#include "sim/timing/hbm_timing.h"

namespace trnsim::model {

class HbmAddressMap {
 public:
  static constexpr uint64_t kAlignment = 4096;
  explicit HbmAddressMap(const isa::Program& program);

  uint64_t base(uint32_t tensor) const { return base_[tensor]; }
  uint64_t size(uint32_t tensor) const { return size_[tensor]; }
  size_t tensors() const { return base_.size(); }
  // The tensor whose bytes hold `address`; -1 if none.
  int64_t tensor_at(uint64_t address) const;

 private:
  std::vector<uint64_t> base_, size_;
};

// The HBM's bandwidth, asked with a TLM_IGNORE_COMMAND carrying this extension (see above). A model bound in
// place of the Hbm answers it, or forwards it to the Hbm; left at 0 (unanswered), the DMA system uses
// hbm.bandwidth_GBps.
struct HbmBandwidth : tlm::tlm_extension<HbmBandwidth> {
  double GBps = 0;  // bytes per ns
  tlm::tlm_extension_base* clone() const override { return new HbmBandwidth(*this); }
  void copy_from(const tlm::tlm_extension_base& e) override {
    GBps = static_cast<const HbmBandwidth&>(e).GBps;
  }
};

// The two ends RunOptions::bind_hbm connects: the DMA system's initiator socket and the Hbm's target socket.
struct HbmSockets {
  tlm::tlm_initiator_socket<>& dma;
  tlm::tlm_target_socket<>& hbm;
};

// (clang-format 14 reads an SC_MODULE's body as a function's.)
// clang-format off
SC_MODULE(Hbm) {
 public:
  tlm_utils::simple_target_socket<Hbm> socket;

  // `tensors`: the bytes of each tensor of `map`, in its order; null when the run keeps no bytes.
  Hbm(sc_core::sc_module_name name, const HbmAddressMap& map, std::vector<HostBytes>* tensors,
      const timing::HbmTiming& timing);

  const HbmAddressMap& address_map() const { return map_; }

 private:
  void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time& delay);
  bool get_direct_mem_ptr(tlm::tlm_generic_payload& t, tlm::tlm_dmi& dmi);
  unsigned transport_dbg(tlm::tlm_generic_payload& t);

  const HbmAddressMap& map_;
  std::vector<HostBytes>* tensors_;
  sc_core::sc_time latency_;
  double bandwidth_GBps_;
};
// clang-format on

}  // namespace trnsim::model
