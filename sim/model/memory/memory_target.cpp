#include "sim/model/memory/memory_target.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "sim/base/error.h"

namespace trnsim::model::memory {

unsigned copy(tlm::tlm_generic_payload& t, const Region& r) {
  if (!t.is_read() && !t.is_write()) {
    t.set_response_status(tlm::TLM_OK_RESPONSE);
    return 0;
  }
  const uint64_t a = t.get_address(), n = t.get_data_length();
  if (a < r.start || a - r.start > r.size || n > r.size - (a - r.start)) {
    t.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return 0;
  }
  if (t.get_byte_enable_ptr() != nullptr) {
    t.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
    return 0;
  }
  if (t.get_streaming_width() < n) {
    t.set_response_status(tlm::TLM_BURST_ERROR_RESPONSE);
    return 0;
  }
  if (r.bytes == nullptr) {
    t.set_response_status(tlm::TLM_COMMAND_ERROR_RESPONSE);
    return 0;
  }
  uint8_t* mem = r.bytes + (a - r.start);
  if (t.is_read()) {
    std::memcpy(t.get_data_ptr(), mem, n);
  } else {
    std::memcpy(mem, t.get_data_ptr(), n);
  }
  t.set_response_status(tlm::TLM_OK_RESPONSE);
  return static_cast<unsigned>(n);
}

bool grant_dmi(uint64_t address, const Region& r, tlm::tlm_dmi& dmi) {
  if (r.bytes == nullptr || r.size == 0 || address < r.start || address - r.start >= r.size) {
    dmi.allow_none();
    dmi.set_start_address(0);
    dmi.set_end_address(~sc_dt::uint64{0});
    return false;
  }
  dmi.set_dmi_ptr(r.bytes);
  dmi.set_start_address(r.start);
  dmi.set_end_address(r.start + r.size - 1);
  dmi.allow_read_write();
  dmi.set_read_latency(sc_core::SC_ZERO_TIME);
  dmi.set_write_latency(sc_core::SC_ZERO_TIME);
  return true;
}

Picoseconds timing_transaction(tlm::tlm_initiator_socket<>& socket, uint64_t address, uint64_t length,
                               tlm::tlm_generic_payload& t) {
  const auto n = static_cast<unsigned>(std::min<uint64_t>(length, std::numeric_limits<unsigned>::max()));
  t.set_command(tlm::TLM_IGNORE_COMMAND);
  t.set_data_ptr(nullptr);
  t.set_byte_enable_ptr(nullptr);
  t.set_address(address);
  t.set_data_length(n);
  t.set_streaming_width(n);
  t.set_dmi_allowed(false);
  t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
  socket->b_transport(t, delay);
  return Picoseconds(delay.value());
}

void require_dmi(tlm::tlm_initiator_socket<>& socket, uint64_t address, const uint8_t* expected,
                 uint64_t size, const std::string& what) {
  if (size == 0) return;
  tlm::tlm_generic_payload t;
  t.set_address(address);
  t.set_command(tlm::TLM_READ_COMMAND);
  tlm::tlm_dmi dmi;
  const bool granted = socket->get_direct_mem_ptr(t, dmi);
  // The pointer of `address` in the region granted.
  const uint8_t* p = granted && dmi.get_dmi_ptr() && address >= dmi.get_start_address()
                         ? dmi.get_dmi_ptr() + (address - dmi.get_start_address())
                         : nullptr;
  const uint64_t last = address + size - 1;  // size > 0
  if (p != expected || !dmi.is_read_write_allowed() || dmi.get_end_address() < last)
    throw InputError(
        what +
        ": the memory model bound there must grant read/write DMI over the memory trnsim's numerics "
        "use (forward get_direct_mem_ptr to trnsim's memory module; see docs/architecture.md, "
        "\"Binding another memory model\")");
}

}  // namespace trnsim::model::memory
