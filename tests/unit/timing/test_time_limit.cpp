// The simulated-time bound (sim/timing/time_limit.h) and the overflow-safe ns -> ps conversion.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "sim/timing/cost_model.h"
#include "sim/timing/time_limit.h"

using namespace trnsim;
using timing::end_after;
using timing::kMaxSimTime;
using timing::TimeLimitError;

TEST_CASE("end_after adds within the limit and refuses an end at or beyond it", "[timing][time_limit]") {
  const Picoseconds limit(2000);
  CHECK(end_after(Picoseconds(1000), Picoseconds(999), limit, "x would end") == Picoseconds(1999));
  CHECK_THROWS_WITH(
      end_after(Picoseconds(1000), Picoseconds(1000), limit, "x would end"),
      "x would end at 2000 ps (2e-09 s), at or beyond the simulated-time limit of 2000 ps (2e-09 s)");
  // Sums that would wrap 64 bits are refused, not wrapped.
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  CHECK_THROWS_AS(end_after(Picoseconds(max - 1), Picoseconds(5), kMaxSimTime, "x"), TimeLimitError);
  CHECK_THROWS_AS(end_after(Picoseconds(5), Picoseconds(max), kMaxSimTime, "x"), TimeLimitError);
  CHECK(kMaxSimTime == Picoseconds(uint64_t{1} << 62));
}

TEST_CASE("end_after in cycles converts once, after the check", "[timing][time_limit]") {
  const ClockDomain pe(2.4);  // 416.667 ps per cycle
  // 3 cycles = 1250 ps (rounded up from 1250.0000000000002 - 1e-9).
  CHECK(end_after(Picoseconds(100), pe, Cycles(3), kMaxSimTime, "x") == Picoseconds(1350));
  // 2^62 cycles = 1.92e21 ps: refused before any conversion to 64 bits.
  CHECK_THROWS_WITH(
      end_after(Picoseconds(0), pe, Cycles(uint64_t{1} << 62), kMaxSimTime, "its execution would end"),
      Catch::Matchers::StartsWith("its execution would end at 1.92154e+21 ps (2.22e+04 days), at or "
                                  "beyond the simulated-time limit of 4.61169e+18 ps (53.4 days)"));
}

TEST_CASE("ns_to_ps rounds up and saturates instead of overflowing", "[timing][time_limit]") {
  CHECK(timing::ns_to_ps(1.5) == Picoseconds(1500));
  CHECK(timing::ns_to_ps(0.0004) == Picoseconds(1));  // 0.4 ps rounds up to 1
  CHECK(timing::ns_to_ps(0) == Picoseconds(0));
  CHECK(timing::ns_to_ps(-3) == Picoseconds(0));
  CHECK(timing::ns_to_ps(1e300) == Picoseconds(uint64_t{1} << 63));
  CHECK(timing::ns_to_ps(std::nan("")) == Picoseconds(uint64_t{1} << 63));
  // Beyond every time limit: adding it to any time is refused.
  CHECK_THROWS_AS(end_after(Picoseconds(0), timing::ns_to_ps(1e300), kMaxSimTime, "x"), TimeLimitError);
}
