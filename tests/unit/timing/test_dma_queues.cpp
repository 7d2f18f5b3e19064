// timing::DmaQueues driven directly (no SystemC). Capacities from configs/hw/trn2.json: per core 16 DMA
// engines x 23 B/ns = 368 B/ns, one HBM stack of 725 B/ns for both cores; an HBM transfer's setup is
// dma.setup_ns 1000 + hbm.latency_ns 240 = 1240 ns. A transfer of 128 partitions x 4 KiB is 524288 B on 16
// engines at efficiency 1 (rate cap 368 B/ns). Finish times are rounded up to a whole ps.
#include <catch2/catch.hpp>

#include <string>

#include "sim/config/hw_config.h"
#include "sim/timing/dma_queues.h"
#include "sim/timing/time_limit.h"

using namespace trnsim;
using timing::DmaQueues;

namespace {

config::HwConfig trn2() {
  return config::load_hw_config("trn2");
}

// A transfer of `bytes` on core/queue, all of it read from HBM unless hbm = false.
timing::DmaTransfer transfer(uint64_t tag, int core, uint32_t queue, uint64_t bytes = 524288,
                             double efficiency = 1.0, bool hbm = true) {
  timing::DmaTransfer t;
  t.core = core;
  t.queue = queue;
  t.tag = tag;
  t.cost.bytes = bytes;
  t.cost.hbm_bytes = hbm ? bytes : 0;
  t.hbm_bytes_read = t.cost.hbm_bytes;
  t.cost.engines = 16;
  t.cost.efficiency = efficiency;
  t.cost.rate_cap_GBps = 16 * 23 * efficiency;
  t.cost.queue_rate_cap_GBps = t.cost.rate_cap_GBps;  // holds its queue to its last byte (no queue sets)
  t.cost.setup = Picoseconds(hbm ? 1240000 : 1000000);
  return t;
}

struct Done {
  uint64_t tag, start, end;
  bool operator==(const Done&) const = default;
};

std::vector<Done> advance(DmaQueues& q, uint64_t now) {
  std::vector<Done> out;
  for (const auto& f : q.advance(Picoseconds(now)))
    out.push_back({f.tag, f.data_start.count(), f.data_end.count()});
  return out;
}

uint64_t next(const DmaQueues& q, uint64_t now) {
  auto n = q.next_event(Picoseconds(now));
  REQUIRE(n.has_value());
  return n->count();
}

}  // namespace

namespace Catch {
template <>
struct StringMaker<Done> {
  static std::string convert(const Done& d) {
    return "{tag " + std::to_string(d.tag) + ", " + std::to_string(d.start) + ", " + std::to_string(d.end) +
           "}";
  }
};
}  // namespace Catch

TEST_CASE("DMA queues: two transfers on one queue move back to back after one setup", "[timing][dma]") {
  // Both queued at 0, ready at 1240 ns (setups overlap). 524288 B / 368 B/ns = 1424.696 ns each, in FIFO
  // order: the first moves over [1240000, 2664696], the second over [2664696, 2664696 + 1424695.65 ->
  // 4089392].
  DmaQueues q(trn2());
  CHECK(q.enqueue(transfer(1, 0, 0), Picoseconds(0)) == Picoseconds(1240000));
  CHECK(q.enqueue(transfer(2, 0, 0), Picoseconds(0)) == Picoseconds(1240000));
  CHECK(advance(q, 0).empty());
  CHECK(next(q, 0) == 1240000);
  CHECK(advance(q, 1240000).empty());
  CHECK(next(q, 1240000) == 2664696);
  CHECK(advance(q, 2664696) == std::vector<Done>{{1, 1240000, 2664696}});
  CHECK(next(q, 2664696) == 4089392);
  CHECK(advance(q, 4089392) == std::vector<Done>{{2, 2664696, 4089392}});
  CHECK_FALSE(q.next_event(Picoseconds(4089392)).has_value());
  CHECK(q.in_flight() == 0);
}

TEST_CASE("DMA queues: FIFO per queue even when a later transfer is ready first", "[timing][dma]") {
  // The second transfer is SBUF -> SBUF (setup 1000 ns, no HBM latency) and ready before the first, but it
  // starts only when the first has moved: at 2664696, then 524288 B at 368 B/ns -> 4089392.
  DmaQueues q(trn2());
  q.enqueue(transfer(1, 0, 3), Picoseconds(0));
  q.enqueue(transfer(2, 0, 3, 524288, 1.0, /*hbm=*/false), Picoseconds(0));
  CHECK(next(q, 0) == 1240000);  // the queue head, not the earlier-ready second transfer
  advance(q, 1240000);
  CHECK(advance(q, 2664696) == std::vector<Done>{{1, 1240000, 2664696}});
  CHECK(advance(q, 4089392) == std::vector<Done>{{2, 2664696, 4089392}});
}

TEST_CASE("DMA queues: two queues of one core share its DMA engines", "[timing][dma]") {
  // Queues 0 and 1 of core 0, both moving from 1240 ns: 368 B/ns of engines / 2 = 184 B/ns each (HBM 368 of
  // 725 B/ns is not the limit): 524288 / 0.184 = 2849391.3 ps -> both end at 4089392, oldest first.
  DmaQueues q(trn2());
  q.enqueue(transfer(1, 0, 0), Picoseconds(0));
  q.enqueue(transfer(2, 0, 1), Picoseconds(0));
  advance(q, 1240000);
  CHECK(q.hbm_GBps() == Approx(368));
  CHECK(next(q, 1240000) == 4089392);
  CHECK(advance(q, 4089392) == (std::vector<Done>{{1, 1240000, 4089392}, {2, 1240000, 4089392}}));
}

TEST_CASE("DMA queues: the two cores share the HBM stack", "[timing][dma]") {
  // One transfer per core: each core's engines allow 368 B/ns, but HBM has 725 B/ns for both: 362.5 B/ns
  // each. 524288 / 0.3625 = 1446311.72 ps -> both end at 1240000 + 1446311.72 -> 2686312.
  DmaQueues q(trn2());
  q.enqueue(transfer(1, 0, 0), Picoseconds(0));
  q.enqueue(transfer(2, 1, 0), Picoseconds(0));
  advance(q, 1240000);
  CHECK(q.hbm_GBps() == Approx(725));
  const auto rw = q.hbm_rw_GBps();
  CHECK(rw[0][0] == Approx(362.5));  // core 0 reads at 362.5 GB/s, writes nothing
  CHECK(rw[0][1] == 0);
  CHECK(rw[1][0] == Approx(362.5));
  CHECK(next(q, 1240000) == 2686312);
  CHECK(advance(q, 2686312) == (std::vector<Done>{{1, 1240000, 2686312}, {2, 1240000, 2686312}}));
}

TEST_CASE("DMA queues: low efficiency takes more of the engines per byte", "[timing][dma]") {
  // 128 partitions x 256 B = 32768 B at efficiency 0.38: capped at 368 x 0.38 = 139.84 B/ns, and each byte
  // uses 1 / 0.38 of engine capacity. Two on one core: 2 x r / 0.38 <= 368 -> r = 69.92 B/ns each;
  // 32768 / 0.06992 = 468649.89 ps -> both end at 1240000 + 468650 = 1708650.
  DmaQueues q(trn2());
  q.enqueue(transfer(1, 0, 0, 32768, 0.38), Picoseconds(0));
  CHECK(next(q, 0) == 1240000);
  advance(q, 1240000);
  // Alone: its cap, 139.84 B/ns (the engines are then exactly full).
  CHECK(q.hbm_GBps() == Approx(139.84));
  q.enqueue(transfer(2, 0, 1, 32768, 0.38), Picoseconds(0));  // queued at 0 too: ready at 1240000
  advance(q, 1240000);
  CHECK(q.hbm_GBps() == Approx(2 * 69.92));
  CHECK(next(q, 1240000) == 1708650);
  CHECK(advance(q, 1708650).size() == 2);
}

TEST_CASE("DMA queues: a zero-byte transfer finishes when it starts", "[timing][dma]") {
  DmaQueues q(trn2());
  q.enqueue(transfer(5, 1, 2, 0, 1.0, /*hbm=*/false), Picoseconds(500000));  // ready at 1500000
  CHECK(next(q, 500000) == 1500000);
  CHECK(advance(q, 1500000) == std::vector<Done>{{5, 1500000, 1500000}});
  CHECK_FALSE(q.next_event(Picoseconds(1500000)).has_value());
}

TEST_CASE("DMA queues: a pipelined queue starts the next transfer when the one ahead lets go of it",
          "[timing][dma]") {
  // Two 1 KiB transfers (128 partitions x 8 B) on one queue, queued at 0, ready at 1240 ns. Each holds the
  // queue for 256 ns (say 8 + 1 descriptors per engine x 28.44 ns: queue cap 1024 B / 256 ns = 4 B/ns) and
  // lands 864 ns after its start (9 packets of 96 ns). The first moves over [1240000, 1496000] and lands at
  // 1240000 + 864000 = 2104000; the second starts at 1496000 and lands at 1496000 + 864000 = 2360000.
  DmaQueues q(trn2());
  for (uint64_t tag : {1, 2}) {
    auto t = transfer(tag, 0, 0, 1024);
    t.cost.rate_cap_GBps = 1024.0 / 864;
    t.cost.queue_rate_cap_GBps = 4;
    t.cost.latency = Picoseconds(864000);
    q.enqueue(t, Picoseconds(0));
  }
  advance(q, 1240000);
  CHECK(next(q, 1240000) == 1496000);
  CHECK(advance(q, 1496000).empty());  // the first let go of the queue: the second moves
  CHECK(next(q, 1496000) == 1752000);
  CHECK(advance(q, 1752000).empty());
  CHECK(next(q, 1752000) == 2104000);
  CHECK(advance(q, 2104000) == std::vector<Done>{{1, 1240000, 2104000}});
  CHECK(next(q, 2104000) == 2360000);
  CHECK(advance(q, 2360000) == std::vector<Done>{{2, 1496000, 2360000}});
  CHECK(q.in_flight() == 0);
}

TEST_CASE("DMA queues: a pipelined queue lands its transfers in order", "[timing][dma]") {
  // A long-latency transfer then a short one on one queue: the second lets go of the queue and passes its
  // own latency before the first has landed, and waits for it. First: 1024 B at 4 B/ns over [1240000,
  // 1496000], lands at 1240000 + 2000000 = 3240000. Second: 1024 B over [1496000, 1752000], its latency
  // 100 ns would land it at 1752000, but it lands with the first, at 3240000, after it.
  DmaQueues q(trn2());
  for (uint64_t tag : {1, 2}) {
    auto t = transfer(tag, 0, 0, 1024);
    t.cost.queue_rate_cap_GBps = 4;
    t.cost.latency = Picoseconds(tag == 1 ? 2000000 : 100000);
    q.enqueue(t, Picoseconds(0));
  }
  advance(q, 1240000);
  advance(q, 1496000);
  CHECK(advance(q, 1752000).empty());
  CHECK(next(q, 1752000) == 3240000);
  CHECK(advance(q, 3240000) == (std::vector<Done>{{1, 1240000, 3240000}, {2, 1496000, 3240000}}));
  CHECK_FALSE(q.next_event(Picoseconds(3240000)).has_value());
}

TEST_CASE(
    "DMA queues: a transfer on every engine lands after the last landing on any, and after it each engine's",
    "[timing][dma]") {
  // One queue, 1024 B transfers at 4 B/ns (256 ns each), all ready at 1240000. 1 on engines 0-7, latency
  // 2000 ns: moves over [1240000, 1496000], lands at 3240000. 2 on engines 8-15 (none of 1's), latency 100
  // ns: moves alongside it, lands at 1496000. 3 on every engine, latency 100 ns: moves once 1 and 2 let go,
  // [1496000, 1752000], and lands after 1 on engines 0-7, at 3240000. 4 on engines 8-15 again, latency 100
  // ns: moves after 3, [1752000, 2008000], and lands after 3 on its engines, at 3240000 (not at 2008000,
  // after 2 alone).
  DmaQueues q(trn2());
  const uint64_t engines[] = {0x00FF, 0xFF00, ~uint64_t{0}, 0xFF00};
  const uint64_t latency_ns[] = {2000, 100, 100, 100};
  for (uint64_t tag : {1, 2, 3, 4}) {
    auto t = transfer(tag, 0, 0, 1024);
    t.cost.queue_rate_cap_GBps = 4;
    t.cost.queue_engines = engines[tag - 1];
    t.cost.latency = Picoseconds(latency_ns[tag - 1] * 1000);
    q.enqueue(t, Picoseconds(0));
  }
  CHECK(advance(q, 1240000).empty());
  CHECK(next(q, 1240000) == 1496000);
  CHECK(advance(q, 1496000) == std::vector<Done>{{2, 1240000, 1496000}});
  CHECK(next(q, 1496000) == 1752000);
  CHECK(advance(q, 1752000).empty());
  CHECK(next(q, 1752000) == 2008000);
  CHECK(advance(q, 2008000).empty());
  CHECK(next(q, 2008000) == 3240000);
  CHECK(advance(q, 3240000) ==
        (std::vector<Done>{{1, 1240000, 3240000}, {3, 1496000, 3240000}, {4, 1752000, 3240000}}));
  CHECK(q.in_flight() == 0);
}

TEST_CASE("DMA queues: an event at or beyond the time limit is a TimeLimitError naming the transfer",
          "[timing][dma]") {
  SECTION("a transfer that would never finish in time: HBM at 1e-11 GB/s") {
    // 524288 B at 1e-14 B/ps = 5.24288e19 ps (more than 2^64 ps): refused when its finish is scheduled.
    config::HwConfig hw = trn2();
    hw.hbm.bandwidth_GBps = 1e-11;  // not a valid config value (see hw_config): set behind validation's back
    DmaQueues q(hw);
    q.enqueue(transfer(7, 0, 4), Picoseconds(0));
    advance(q, 1240000);
    try {
      q.next_event(Picoseconds(1240000));
      FAIL("no error");
    } catch (const timing::TimeLimitError& e) {
      CHECK(e.tag() == 7);
      CHECK(
          std::string(e.what()) ==
          "its data transfer would end at 5.24288e+19 ps (607 days), at or beyond the simulated-time limit "
          "of 4.61169e+18 ps (53.4 days); a hardware value is probably far out of scale (a bandwidth, clock "
          "or efficiency)");
    }
  }
  SECTION("a setup beyond a lowered limit") {
    DmaQueues q(trn2(), Picoseconds(1000000));
    try {
      q.enqueue(transfer(3, 0, 0), Picoseconds(0));
      FAIL("no error");
    } catch (const timing::TimeLimitError& e) {
      CHECK(e.tag() == 3);
      CHECK(std::string(e.what()) ==
            "its DMA setup would end at 1.24e+06 ps (1.24e-06 s), at or beyond the simulated-time limit of "
            "1e+06 ps (1e-06 s)");
    }
  }
}
