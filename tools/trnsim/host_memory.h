// Host memory for a run with numerics: what it needs at least and what the machine has, so that a layer too
// big for this machine is refused with a message before any work, instead of being killed by the kernel's
// out-of-memory killer minutes later.
#pragma once

#include <cstdint>
#include <optional>

namespace trnsim::cli {

// Bytes this process may still allocate: MemAvailable plus SwapFree from /proc/meminfo, capped by the memory
// cgroups' limits, v1 and v2, at every level (sim/base/cgroup_memory.h) and by the address-space limit
// (`ulimit -v`: RLIMIT_AS - VmSize) when they are set. The environment variable TRNSIM_HOST_MEMORY_BYTES,
// when set, replaces the measurement (machines whose /proc/meminfo misleads; tests): InputError unless it is
// a plain decimal byte count.
// nullopt when nothing can be read.
std::optional<uint64_t> available_host_bytes();

}  // namespace trnsim::cli
