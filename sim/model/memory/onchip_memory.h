// A physical core's SBUF and PSUM (internal to the model; see run.h): thin SystemC modules with a TLM-2.0
// target socket over the core's bytes (isa::CoreMemory), partition-major: the byte at `offset` of partition
// p is at address p x bytes_per_partition + offset. Their initiators are the core's five engines
// (sequencers) and the DMA system.
//
// Socket (TLM-2.0 base protocol, loosely timed; a multi-passthrough socket, one binding per initiator):
//   - get_direct_mem_ptr: read/write DMI over the whole memory (numerics on): the data path of every engine
//     and DMA transfer, which read and write these bytes directly (isa::execute).
//   - b_transport / transport_dbg: copy bytes (numerics on; TLM_COMMAND_ERROR_RESPONSE without), no delay:
//     an engine's SBUF and PSUM access time is part of its instruction's cost (timing::CostModel: the
//     strided-access rate, the PE's PSUM accumulation) and the per-partition and PSUM bank rules are checked
//     with the instruction (isa::check).
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <systemc>
#include <tlm>

#include <cstdint>
#include <vector>

#include "sim/isa/instruction.h"
#include "sim/model/memory/memory_target.h"

namespace trnsim::model {

class OnChipMemory : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<OnChipMemory> socket;

  // `bytes`: the memory's `size` bytes (partitions x bytes per partition); null or empty when the run keeps
  // no bytes.
  OnChipMemory(sc_core::sc_module_name name, std::vector<uint8_t>* bytes, uint64_t size);

 private:
  void b_transport(int initiator, tlm::tlm_generic_payload& t, sc_core::sc_time& delay);
  bool get_direct_mem_ptr(int initiator, tlm::tlm_generic_payload& t, tlm::tlm_dmi& dmi);
  unsigned transport_dbg(int initiator, tlm::tlm_generic_payload& t);

  memory::Region region_;
};

// A core's state buffer (SBUF).
class Sbuf final : public OnChipMemory {
 public:
  Sbuf(sc_core::sc_module_name name, std::vector<uint8_t>* bytes, const isa::Limits& limits)
      : OnChipMemory(name, bytes, uint64_t{limits.partitions} * limits.sbuf_bytes_per_partition) {}
};

// A core's PSUM (the PE's accumulation buffer).
class Psum final : public OnChipMemory {
 public:
  Psum(sc_core::sc_module_name name, std::vector<uint8_t>* bytes, const isa::Limits& limits)
      : OnChipMemory(name, bytes, uint64_t{limits.partitions} * limits.psum_bytes_per_partition) {}
};

}  // namespace trnsim::model
