#include "sim/model/memory/hbm.h"

#include <algorithm>

#include "sim/isa/semantics.h"
#include "sim/model/memory/memory_target.h"
#include "sim/model/sc_time.h"

namespace trnsim::model {
namespace {

// Bytes of a tensor (its shape's product saturates: such a tensor is refused before any run with numerics).
uint64_t tensor_bytes(const isa::TensorDecl& t) {
  uint64_t n = isa::dtype_size(t.dtype);
  for (int64_t d : t.shape)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(std::max<int64_t>(d, 0)), &n))
      return uint64_t{1} << 62;
  return n;
}

}  // namespace

HbmAddressMap::HbmAddressMap(const isa::Program& program) {
  uint64_t next = 0;
  for (const auto& t : program.tensors) {
    base_.push_back(next);
    size_.push_back(tensor_bytes(t));
    next += (size_.back() + kAlignment - 1) / kAlignment * kAlignment;
  }
}

int64_t HbmAddressMap::tensor_at(uint64_t address) const {
  const auto it = std::upper_bound(base_.begin(), base_.end(), address);
  if (it == base_.begin()) return -1;
  const auto i = static_cast<size_t>(it - base_.begin()) - 1;
  return address - base_[i] < size_[i] ? static_cast<int64_t>(i) : -1;
}

Hbm::Hbm(sc_core::sc_module_name name, const HbmAddressMap& map, std::vector<HostBytes>* tensors,
         const timing::HbmTiming& timing)
    : sc_module(name),
      socket("socket"),
      map_(map),
      tensors_(tensors),
      latency_(to_sc(timing.access_latency())),
      bandwidth_GBps_(timing.bandwidth_GBps()) {
  socket.register_b_transport(this, &Hbm::b_transport);
  socket.register_get_direct_mem_ptr(this, &Hbm::get_direct_mem_ptr);
  socket.register_transport_dbg(this, &Hbm::transport_dbg);
}

namespace {

// The region of the tensor holding `address` (an empty region outside every tensor).
memory::Region region_at(const HbmAddressMap& map, std::vector<HostBytes>* tensors, uint64_t address) {
  const int64_t i = map.tensor_at(address);
  if (i < 0) return {};
  uint8_t* bytes = tensors && static_cast<size_t>(i) < tensors->size() ? (*tensors)[i].data() : nullptr;
  return {bytes, map.base(static_cast<uint32_t>(i)), map.size(static_cast<uint32_t>(i))};
}

}  // namespace

void Hbm::b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time& delay) {
  if (t.is_read() || t.is_write()) {
    memory::copy(t, region_at(map_, tensors_, t.get_address()));
  } else {
    t.set_response_status(tlm::TLM_OK_RESPONSE);  // the DMA system's timing transactions: no bytes
  }
  if (auto* b = t.get_extension<HbmBandwidth>()) b->GBps = bandwidth_GBps_;
  delay += latency_;
}

bool Hbm::get_direct_mem_ptr(tlm::tlm_generic_payload& t, tlm::tlm_dmi& dmi) {
  return memory::grant_dmi(t.get_address(), region_at(map_, tensors_, t.get_address()), dmi);
}

unsigned Hbm::transport_dbg(tlm::tlm_generic_payload& t) {
  return memory::copy(t, region_at(map_, tensors_, t.get_address()));
}

}  // namespace trnsim::model
