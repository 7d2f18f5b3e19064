// The compute engines' start-partition rule (partition_start.h).
#include "sim/isa/partition_start.h"

namespace trnsim::isa {

std::vector<uint32_t> engine_start_partitions(uint32_t n) {
  if (n > 64) return {0};
  if (n > 32) return {0, 64};
  return {0, 32, 64, 96};
}

std::string engine_start_rule(uint32_t n) {
  if (n > 64) return "more than 64 must start at 0";
  if (n > 32) return "33-64 must start at 0 or 64";
  return "up to 32 must start at 0, 32, 64 or 96";
}

}  // namespace trnsim::isa
