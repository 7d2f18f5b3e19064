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
//
// Another model binds between a core's initiators and its Sbuf or Psum through RunOptions::bind_sbuf /
// bind_psum (OnChipSockets); its b_transport delays then time each access (access_delay). See
// docs/architecture.md, "Binding another memory model".
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <systemc>
#include <tlm>

#include <cstdint>
#include <vector>

#include "sim/base/units.h"
#include "sim/isa/instruction.h"
#include "sim/model/memory/memory_target.h"

namespace trnsim::model {

// The target side Sbuf and Psum share: the socket's callbacks over one region of bytes. Not a module: its
// socket belongs to the module that holds it.
class OnChipTarget {
 public:
  tlm_utils::multi_passthrough_target_socket<OnChipTarget> socket;

  // `bytes`: the memory's `size` bytes (partitions x bytes per partition); null or empty when the run keeps
  // no bytes.
  OnChipTarget(std::vector<uint8_t>* bytes, uint64_t size);

 private:
  void b_transport(int initiator, tlm::tlm_generic_payload& t, sc_core::sc_time& delay);
  bool get_direct_mem_ptr(int initiator, tlm::tlm_generic_payload& t, tlm::tlm_dmi& dmi);
  unsigned transport_dbg(int initiator, tlm::tlm_generic_payload& t);

  memory::Region region_;
};

// (clang-format 14 reads an SC_MODULE's body as a function's.)
// clang-format off
// A core's state buffer (SBUF).
SC_MODULE(Sbuf) {
  OnChipTarget target;  // target.socket: the engines and the DMA system bind here

  Sbuf(sc_core::sc_module_name name, std::vector<uint8_t>* bytes, const isa::Limits& limits)
      : sc_module(name), target(bytes, uint64_t{limits.partitions} * limits.sbuf_bytes_per_partition) {}
};

// A core's PSUM (the PE's accumulation buffer).
SC_MODULE(Psum) {
  OnChipTarget target;

  Psum(sc_core::sc_module_name name, std::vector<uint8_t>* bytes, const isa::Limits& limits)
      : sc_module(name), target(bytes, uint64_t{limits.partitions} * limits.psum_bytes_per_partition) {}
};
// clang-format on

// The ends RunOptions::bind_sbuf / bind_psum connect for one core: every initiator of the memory (the core's
// five engines in isa::Engine order, then the DMA system) and trnsim's Sbuf or Psum target socket.
struct OnChipSockets {
  int core;
  isa::MemSpace space;  // SBUF or PSUM
  std::vector<tlm::tlm_initiator_socket<>*> initiators;
  tlm::tlm_base_target_socket_b<>& memory;
};

namespace memory {

// The delay a memory model bound in place of an Sbuf or Psum annotates on one access: one
// TLM_IGNORE_COMMAND through `socket` covering the operands of `inst` (of core `core`) in `space` of core
// `memory_core` (isa::operand_core: a sendrecv's dst is in the peer core's SBUF) (address: the lowest first
// byte of those operands, partition-major; length: their bytes), or 0 without a transaction when `inst` has
// none there. `t` is a payload the caller reuses. InputError "the <SBUF|PSUM> model (<socket>) answered
// <response> ..." on an error response.
Picoseconds access_delay(tlm::tlm_initiator_socket<>& socket, isa::MemSpace space,
                         const isa::Instruction& inst, int core, int memory_core,
                         uint64_t bytes_per_partition, tlm::tlm_generic_payload& t);

}  // namespace memory

}  // namespace trnsim::model
