#include "sim/timing/hbm_timing.h"

#include "sim/timing/cost_model.h"

namespace trnsim::timing {

HbmTiming::HbmTiming(const config::HbmConfig& hbm)
    : latency_(ns_to_ps(hbm.latency_ns)), bandwidth_GBps_(hbm.bandwidth_GBps) {}

}  // namespace trnsim::timing
