// What the memory modules (Hbm, Sbuf, Psum) do alike with a TLM-2.0 generic payload over one region of
// bytes: copy (b_transport, transport_dbg) and grant DMI. A region is `size` bytes at address `start`, held
// at `bytes` (null when the run keeps no bytes: numerics off).
#pragma once

#include <tlm>

#include <cstdint>
#include <string>

#include "sim/base/units.h"

namespace trnsim::model::memory {

struct Region {
  uint8_t* bytes = nullptr;
  uint64_t start = 0;
  uint64_t size = 0;
};

// Reads or writes the payload's bytes within `r` and sets its response (a TLM_IGNORE_COMMAND moves nothing,
// checks nothing and gets TLM_OK_RESPONSE): TLM_ADDRESS_ERROR_RESPONSE outside `r`,
// TLM_BYTE_ENABLE_ERROR_RESPONSE / TLM_BURST_ERROR_RESPONSE for byte enables or a streaming width below the
// length (not supported), TLM_COMMAND_ERROR_RESPONSE for a read or write when `r` holds no bytes. Returns the
// bytes moved.
unsigned copy(tlm::tlm_generic_payload& t, const Region& r);

// Grants read/write DMI over `r` with no latency when it holds bytes and `address` is inside it; else denies
// DMI over all addresses (false).
bool grant_dmi(uint64_t address, const Region& r, tlm::tlm_dmi& dmi);

// Sends one timing-only TLM_IGNORE_COMMAND of `length` bytes (at most UINT_MAX) at `address` through
// `socket`, reusing the payload `t` (no data, no byte enables, DMI hint cleared), and returns the delay the
// target annotates. `t`'s response says whether it answered an error (the caller names what sent it).
Picoseconds timing_transaction(tlm::tlm_initiator_socket<>& socket, uint64_t address, uint64_t length,
                               tlm::tlm_generic_payload& t);

// The DMI an initiator gets through `socket` at `address` is the run's bytes `expected` (read/write, at least
// `size` bytes from `address`): the model's numerics read and write those bytes directly. InputError naming
// `what` otherwise (a memory model bound in place of trnsim's must forward DMI to it; docs/architecture.md).
void require_dmi(tlm::tlm_initiator_socket<>& socket, uint64_t address, const uint8_t* expected,
                 uint64_t size, const std::string& what);

}  // namespace trnsim::model::memory
