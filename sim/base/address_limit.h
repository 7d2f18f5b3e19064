// The address-space limit (`ulimit -v`, RLIMIT_AS) some host behaviour adapts to: OpenBLAS's threads, the
// instruction-stream reservation, the heap tuning and the host-memory check.
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <optional>

namespace trnsim {

// The soft limit in bytes, or nullopt when there is none (or it cannot be read).
inline std::optional<uint64_t> address_space_limit() {
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<uint64_t>(as.rlim_cur);
}

}  // namespace trnsim
