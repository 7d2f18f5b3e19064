// Bytes this process may still allocate, for checks that refuse work too big for the machine with a message
// before the kernel's out-of-memory killer ends the process (trnsim run's host-memory check,
// tools/trnsim/host_memory.h; the Python front end's trace budget, python/trnsim/nki/_trace.py).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace trnsim {

// MemAvailable plus SwapFree from /proc/meminfo, capped by the memory cgroups' limits, v1 and v2, at every
// level (cgroup_memory.h) and by the address-space limit (`ulimit -v`: RLIMIT_AS - VmSize) when they are set.
// The environment variable TRNSIM_HOST_MEMORY_BYTES, when set, replaces the measurement (machines whose
// /proc/meminfo misleads; tests): InputError unless it is a plain decimal byte count. nullopt when nothing
// can be read.
std::optional<uint64_t> available_host_bytes();

// A "Key:   123 kB" line of /proc/meminfo (MemTotal, MemAvailable, ...) in bytes; nullopt when absent.
std::optional<uint64_t> meminfo(const std::string& key);

// What `ulimit -v` leaves of the address space (RLIMIT_AS - VmSize), when it is set; nullopt otherwise.
std::optional<uint64_t> address_space_headroom();

}  // namespace trnsim
