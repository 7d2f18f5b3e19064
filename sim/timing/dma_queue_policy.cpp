#include "sim/timing/dma_queue_policy.h"

#include <algorithm>

namespace trnsim::timing {

uint32_t hardware_queue(const config::DmaConfig& dma, uint32_t program_queue, isa::Engine issuer) {
  if (!dma.queue_sets) return program_queue;
  return static_cast<uint32_t>(issuer) % dma.queues_per_core;
}

void set_queue_occupancy(const config::DmaConfig& dma, DmaCost& c) {
  c.queue_engines = ~uint64_t{0};
  if (dma.queue_sets && dma.engines_per_core <= 64 && c.engines > 0 && c.engines < 64)
    c.queue_engines = ((uint64_t{1} << c.engines) - 1) << c.first_engine;
  if (!dma.queue_sets || c.bytes == 0) {
    c.queue_rate_cap_GBps = c.rate_cap_GBps;
    c.latency = Picoseconds();
    return;
  }
  const double bytes = static_cast<double>(c.bytes);
  const uint32_t engines = std::max<uint32_t>(1, c.engines);
  const double data_ns = bytes / (engines * dma.engine_bandwidth_GBps * c.efficiency);
  const double descriptors = (c.partitions + engines - 1) / engines + 1.0;
  const double occupancy_ns = std::max(data_ns, descriptors * dma.descriptor_ns);
  c.queue_rate_cap_GBps = bytes / occupancy_ns;
  c.latency = ns_to_ps(bytes / c.rate_cap_GBps);
}

}  // namespace trnsim::timing
