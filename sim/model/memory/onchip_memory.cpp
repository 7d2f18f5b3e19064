#include "sim/model/memory/onchip_memory.h"

#include <algorithm>
#include <limits>

#include "sim/base/error.h"
#include "sim/isa/opcode_table.h"
#include "sim/isa/semantics.h"

namespace trnsim::model {

OnChipTarget::OnChipTarget(std::vector<uint8_t>* bytes, uint64_t size)
    : socket("socket"), region_{bytes && bytes->size() == size ? bytes->data() : nullptr, 0, size} {
  socket.register_b_transport(this, &OnChipTarget::b_transport);
  socket.register_get_direct_mem_ptr(this, &OnChipTarget::get_direct_mem_ptr);
  socket.register_transport_dbg(this, &OnChipTarget::transport_dbg);
}

void OnChipTarget::b_transport(int, tlm::tlm_generic_payload& t, sc_core::sc_time&) {
  memory::copy(t, region_);
}

bool OnChipTarget::get_direct_mem_ptr(int, tlm::tlm_generic_payload& t, tlm::tlm_dmi& dmi) {
  return memory::grant_dmi(t.get_address(), region_, dmi);
}

unsigned OnChipTarget::transport_dbg(int, tlm::tlm_generic_payload& t) {
  return memory::copy(t, region_);
}

namespace memory {

Picoseconds access_delay(tlm::tlm_initiator_socket<>& socket, isa::MemSpace space,
                         const isa::Instruction& inst, int core, int memory_core,
                         uint64_t bytes_per_partition, tlm::tlm_generic_payload& t) {
  uint64_t address = std::numeric_limits<uint64_t>::max(), bytes = 0;
  for (uint32_t i = 0; i < inst.nops; ++i) {
    const isa::AccessPattern& a = inst.ops[i];
    if (!a.present() || a.space != space ||
        isa::operand_core(inst.op, static_cast<int>(i), core) != memory_core)
      continue;
    address = std::min(address, a.partition_start * bytes_per_partition +
                                    static_cast<uint64_t>(std::max<int64_t>(a.offset_bytes, 0)));
    bytes += uint64_t{a.partitions} * a.free_elements() * isa::dtype_size(a.dtype);
  }
  if (bytes == 0) return Picoseconds();
  const Picoseconds delay = timing_transaction(socket, address, bytes, t);
  if (t.is_response_error())
    throw InputError(std::string("the ") + (space == isa::MemSpace::PSUM ? "PSUM" : "SBUF") + " model (" +
                     socket.get_base_port().name() + ") answered " + t.get_response_string() +
                     " to the access's timing transaction");
  return delay;
}

}  // namespace memory

}  // namespace trnsim::model
