// The compute engines' start-partition rule (docs/facts/trainium-hardware.md §2.3, §2.6): an operand of more
// than 64 partitions starts at partition 0, one of 33-64 at 0 or 64, one of up to 32 at 0, 32, 64 or 96.
// DMAs are not bound by it (their descriptors address each partition). isa::check applies it; the Python
// front end asks it while tracing, so that its error can name the mask that moved the start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trnsim::isa {

// Whether a compute engine's operand of `n` partitions (1-128) may start at partition `start`.
inline bool engine_start_allowed(uint32_t n, uint32_t start) {
  const uint32_t step = n > 64 ? 128 : n > 32 ? 64 : 32;
  return start < 128 && start % step == 0;
}
// The partitions a compute engine's operand of `n` partitions (1-128) may start at, ascending.
std::vector<uint32_t> engine_start_partitions(uint32_t n);
// The rule for `n` partitions in words: "33-64 must start at 0 or 64".
std::string engine_start_rule(uint32_t n);

}  // namespace trnsim::isa
