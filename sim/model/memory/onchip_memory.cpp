#include "sim/model/memory/onchip_memory.h"

namespace trnsim::model {

OnChipMemory::OnChipMemory(sc_core::sc_module_name name, std::vector<uint8_t>* bytes, uint64_t size)
    : sc_module(name),
      socket("socket"),
      region_{bytes && bytes->size() == size ? bytes->data() : nullptr, 0, size} {
  socket.register_b_transport(this, &OnChipMemory::b_transport);
  socket.register_get_direct_mem_ptr(this, &OnChipMemory::get_direct_mem_ptr);
  socket.register_transport_dbg(this, &OnChipMemory::transport_dbg);
}

void OnChipMemory::b_transport(int, tlm::tlm_generic_payload& t, sc_core::sc_time&) {
  memory::copy(t, region_);
}

bool OnChipMemory::get_direct_mem_ptr(int, tlm::tlm_generic_payload& t, tlm::tlm_dmi& dmi) {
  return memory::grant_dmi(t.get_address(), region_, dmi);
}

unsigned OnChipMemory::transport_dbg(int, tlm::tlm_generic_payload& t) {
  return memory::copy(t, region_);
}

}  // namespace trnsim::model
