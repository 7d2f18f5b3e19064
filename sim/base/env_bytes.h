// Byte counts given in environment variables (TRNSIM_SCRATCH_MIN_BYTES, TRNSIM_HOST_MEMORY_BYTES,
// TRNSIM_MAPPED_RSS_BYTES): one rule and one message for all of them.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "sim/base/error.h"

namespace trnsim {

// The value of environment variable `name`, or nullopt when it is not set. InputError unless it is a plain
// decimal byte count.
inline std::optional<uint64_t> env_byte_count(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  const std::string s(v);
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 19)
    throw InputError(std::string("environment variable ") + name + ": '" + s +
                     "' is not a byte count (digits only, at most 19)");
  return std::stoull(s);
}

}  // namespace trnsim
