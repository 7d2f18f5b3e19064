// timing::PePipeline driven directly (no SystemC). Times derived from configs/hw/trn2.json: PE at 2.4 GHz,
// one cycle = 416.667 ps, each conversion rounded up to a whole ps (ClockDomain::to_time):
//   LS of a 128-column stationary = 128 / 4 = 32 cycles  -> 13334 ps
//   MM of 128 moving columns      = max(64, 128) = 128    -> 53334 ps
//   MM of 512 moving columns      = 512 cycles            -> 213334 ps
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "sim/config/hw_config.h"
#include "sim/timing/pe_pipeline.h"
#include "sim/timing/time_limit.h"

using namespace trnsim;
using timing::PePipeline;

namespace {

config::PeConfig trn2_pe(bool throttle = false, bool ls_overlap = true) {
  config::PeConfig pe = config::load_hw_config("trn2").pe;
  pe.throttle_enabled = throttle;
  pe.ls_overlap = ls_overlap;
  return pe;
}

const Cycles kLs(32), kMm128(128), kMm512(512);

}  // namespace

TEST_CASE("PE pipeline: one matmul is LoadStationary then MultiplyMoving", "[timing][pe]") {
  PePipeline pe(trn2_pe());
  const auto m = pe.matmul(Picoseconds(0), kLs, kMm128);
  CHECK(m.ls.start == Picoseconds(0));
  CHECK(m.ls.end == Picoseconds(13334));
  CHECK(m.mm.start == Picoseconds(13334));
  CHECK(m.mm.end == Picoseconds(13334 + 53334));
  CHECK(m.mm.full_rate == Picoseconds(53334));
  CHECK(m.mm.throttle_cap == 1.0);
  // With ls_overlap the LS unit takes the next stationary as soon as this MM starts.
  CHECK(pe.next_issue() == Picoseconds(13334));
}

TEST_CASE("PE pipeline: with ls_overlap, the next LoadStationary runs under the current MultiplyMoving",
          "[timing][pe]") {
  PePipeline pe(trn2_pe());
  const auto a = pe.matmul(Picoseconds(0), kLs, kMm128);
  // Issued at next_issue() = 13334: LS [13334, 26668] under MM(a) [13334, 66668]; MM(b) waits for MM(a).
  const auto b = pe.matmul(pe.next_issue(), kLs, kMm128);
  CHECK(b.ls.start == Picoseconds(13334));
  CHECK(b.ls.end == Picoseconds(26668));
  CHECK(b.mm.start == a.mm.end);
  CHECK(b.mm.end == Picoseconds(66668 + 53334));
  // Third: LS from MM(b)'s start 66668, MM after MM(b): end = 13334 + 3 x 53334 = 173336.
  const auto c = pe.matmul(pe.next_issue(), kLs, kMm128);
  CHECK(c.ls.start == Picoseconds(66668));
  CHECK(c.mm.end == Picoseconds(13334 + 3 * 53334));
}

TEST_CASE("PE pipeline: without ls_overlap, LoadStationary waits for the previous MultiplyMoving",
          "[timing][pe]") {
  PePipeline pe(trn2_pe(false, /*ls_overlap=*/false));
  const auto a = pe.matmul(Picoseconds(0), kLs, kMm128);
  CHECK(pe.next_issue() == a.mm.end);  // 66668
  const auto b = pe.matmul(pe.next_issue(), kLs, kMm128);
  // LS [66668, 80002], MM [80002, 133336]: 2 x (13334 + 53334).
  CHECK(b.ls.start == Picoseconds(66668));
  CHECK(b.mm.start == Picoseconds(80002));
  CHECK(b.mm.end == Picoseconds(2 * (13334 + 53334)));
}

TEST_CASE("PE pipeline: an instruction ready late starts when it is ready", "[timing][pe]") {
  PePipeline pe(trn2_pe());
  pe.matmul(Picoseconds(0), kLs, kMm128);  // MM ends at 66668
  // Ready at 1 us, long after the pipeline drained: LS [1000000, 1013334], MM [1013334, 1066668].
  const auto m = pe.matmul(Picoseconds(1000000), kLs, kMm128);
  CHECK(m.ls.start == Picoseconds(1000000));
  CHECK(m.mm.start == Picoseconds(1013334));
  CHECK(m.mm.end == Picoseconds(1066668));
}

TEST_CASE("PE pipeline: the two units called separately, as two instructions would", "[timing][pe]") {
  PePipeline pe(trn2_pe());
  // The stationary loads at 0; the moving operand is ready only at 100000: MM [100000, 153334].
  const auto ls = pe.load_stationary(Picoseconds(0), kLs);
  CHECK(ls.end == Picoseconds(13334));
  const auto mm = pe.multiply_moving(Picoseconds(100000), kMm128);
  CHECK(mm.start == Picoseconds(100000));
  CHECK(mm.end == Picoseconds(153334));
}

TEST_CASE("PE pipeline: the dI/dt throttle stretches the first MultiplyMoving", "[timing][pe]") {
  // trn2 throttle: cap 0.5 at the first MM start, rising linearly to 1 over 3000 ns (slope s = 0.5 / 3e6
  // per ps). 213334 ps of full-rate work from the cap's start: 0.5 d + s d^2 / 2 = 213334
  //   -> d = (-0.5 + sqrt(0.25 + 2 s x 213334)) / s = 400001.18 ps -> 400002 ps (rounded up).
  PePipeline pe(trn2_pe(/*throttle=*/true));
  const auto m = pe.matmul(Picoseconds(0), kLs, kMm512);
  CHECK(m.mm.start == Picoseconds(13334));
  CHECK(m.mm.full_rate == Picoseconds(213334));
  CHECK(m.mm.end == Picoseconds(13334 + 400002));
  CHECK(m.mm.throttle_cap == Approx(0.5));
  CHECK(pe.throttle().engagements() == 1);
  CHECK(pe.throttle().throttled() == Picoseconds(400002 - 213334));
}

TEST_CASE("PE pipeline: an end at or beyond the time limit is a TimeLimitError", "[timing][pe]") {
  SECTION("a lowered limit") {
    PePipeline pe(trn2_pe(), Picoseconds(100000));
    pe.matmul(Picoseconds(0), kLs, kMm128);  // ends at 66668, within the limit
    // The second MM would end at 66668 + 53334 = 120002 >= 100000.
    try {
      pe.matmul(pe.next_issue(), kLs, kMm128);
      FAIL("no error");
    } catch (const timing::TimeLimitError& e) {
      CHECK(std::string(e.what()) ==
            "its MultiplyMoving would end at 120002 ps (1.2e-07 s), at or beyond the simulated-time limit of "
            "100000 ps (1e-07 s)");
      CHECK(e.at_ps() == 120002);
    }
  }
  SECTION("a cycle count whose time would overflow 64 bits") {
    // 2^64 - 1 cycles x 416.667 ps = 7.69e21 ps: refused before the conversion, at the default 2^62 ps.
    PePipeline pe(trn2_pe());
    CHECK_THROWS_AS(pe.load_stationary(Picoseconds(0), Cycles(std::numeric_limits<uint64_t>::max())),
                    timing::TimeLimitError);
    CHECK_THROWS_WITH(pe.matmul(Picoseconds(0), kLs, Cycles(uint64_t{1} << 60)),
                      Catch::Matchers::StartsWith(
                          "its MultiplyMoving would end at 4.80384e+20 ps (5.56e+03 days), at or "
                          "beyond the simulated-time limit of 4.61169e+18 ps (53.4 days); a hardware "
                          "value is probably far out of scale"));
  }
}
