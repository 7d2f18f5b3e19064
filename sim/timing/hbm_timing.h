// The HBM stack's timing for one access, the policy behind the Hbm module's socket (sim/model/memory/hbm.h).
// Plain C++, no SystemC. An access (one DMA transfer that reads or writes HBM) waits hbm.latency_ns before
// its data moves; its bytes then take a share of hbm.bandwidth_GBps, which the DMA queues divide between the
// transfers moving at once (timing::DmaQueues, max-min fair with the DMA engines).
#pragma once

#include "sim/base/units.h"
#include "sim/config/hw_config.h"

namespace trnsim::timing {

class HbmTiming {
 public:
  explicit HbmTiming(const config::HbmConfig& hbm);

  // Before the first byte of an access moves, ps (hbm.latency_ns rounded up to a whole ps).
  Picoseconds access_latency() const { return latency_; }
  // The stack's bandwidth, bytes per ns (= GB/s), shared by both cores.
  double bandwidth_GBps() const { return bandwidth_GBps_; }

 private:
  Picoseconds latency_;
  double bandwidth_GBps_;
};

}  // namespace trnsim::timing
