// timing::HbmTiming, the policy behind the Hbm module's socket, without SystemC: configs/hw/trn2.json gives
// hbm.latency_ns 240 and hbm.bandwidth_GBps 725 (one stack of four, shared by both cores of the pair).
#include <catch2/catch.hpp>

#include "sim/config/hw_config.h"
#include "sim/timing/hbm_timing.h"

using namespace trnsim;

TEST_CASE("HBM timing: the access latency in whole ps, the stack's bandwidth", "[timing]") {
  const timing::HbmTiming trn2(config::load_hw_config("trn2").hbm);
  CHECK(trn2.access_latency() == Picoseconds(240000));
  CHECK(trn2.bandwidth_GBps() == 725);
  // 0.0004 ns rounds up to 1 ps, so an access never takes less than its latency.
  const timing::HbmTiming tiny(config::load_hw_config("trn2", {{"hbm.latency_ns", 0.0004}}).hbm);
  CHECK(tiny.access_latency() == Picoseconds(1));
}
