// The compute engines' start-partition rule (partition_start.h).
#include "sim/isa/partition_start.h"

namespace trnsim::isa {

std::vector<uint32_t> engine_start_partitions(uint32_t n) {
  std::vector<uint32_t> starts;
  for (uint32_t s = 0; s < 128; s += 32)
    if (engine_start_allowed(n, s)) starts.push_back(s);
  return starts;
}

std::string engine_start_rule(uint32_t n) {
  if (n > 64) return "more than 64 must start at 0";
  if (n > 32) return "33-64 must start at 0 or 64";
  return "up to 32 must start at 0, 32, 64 or 96";
}

}  // namespace trnsim::isa
