// RegionTracker against a one-list model of its rules: the strongest event per semaphore an access must wait
// for does not depend on the chunking, on the per-semaphore grouping, or on the order of the events.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>

#include "kernels/api/deps.h"

using namespace trnsim::kernels;

namespace {

using Strongest = std::map<uint16_t, uint32_t>;

Strongest strongest(const std::vector<Event>& deps) {
  Strongest s;
  for (const Event& e : deps) s[e.sem] = std::max(s[e.sem], e.value);
  return s;
}

// The strongest events collect() finds for an access, every floor at 0 (nothing waited for yet).
Strongest collected(const RegionTracker& t, uint32_t space, const Rect& r, bool write) {
  Needs need;
  need.reset(std::vector<uint32_t>(64, 0));
  t.collect(space, r, write, need);
  return strongest(need.events());
}

// The same through collect_and_record(), which also records the access with event `ev`.
Strongest collected_and_recorded(RegionTracker& t, uint32_t space, const Rect& r, bool write, Event ev) {
  Needs need;
  need.reset(std::vector<uint32_t>(64, 0));
  t.collect_and_record(space, r, write, need, ev);
  return strongest(need.events());
}

// The rules in one list: RAW for reads; WAW and WAR for writes; a write drops the records it covers, a read
// drops the reads of its semaphore it covers.
struct OneList {
  struct Rec {
    Rect r;
    Event ev;
    bool write;
  };
  std::vector<Rec> recs;

  Strongest collect(const Rect& r, bool write) const {
    std::vector<Event> deps;
    for (const Rec& x : recs)
      if ((x.write || write) && x.r.overlaps(r)) deps.push_back(x.ev);
    return strongest(deps);
  }
  void record(const Rect& r, bool write, Event ev) {
    std::erase_if(recs,
                  [&](const Rec& x) { return r.covers(x.r) && (write || (!x.write && x.ev.sem == ev.sem)); });
    recs.push_back({r, ev, write});
  }
};

// Queue 0's fourth transfer writes bytes 0-63 of every partition, then DVE and ACT read them.
RegionTracker loaded_then_read() {
  RegionTracker t(128, 64);
  t.record(0, {0, 128, 0, 64}, true, {8, 4});
  t.record(0, {0, 128, 0, 64}, false, {1, 9});
  t.record(0, {0, 128, 0, 64}, false, {2, 5});
  return t;
}

}  // namespace

TEST_CASE("RegionTracker: a read waits for the latest overlapping write of each semaphore",
          "[kernels][deps]") {
  RegionTracker t(128, 64);
  t.record(0, {0, 128, 0, 256}, true, {8, 1});                                     // queue 0 loads the tile
  t.record(0, {0, 128, 0, 128}, true, {8, 2});                                     // then its left half
  t.record(0, {0, 64, 128, 256}, true, {1, 7});                                    // DVE writes a corner
  CHECK(collected(t, 0, {0, 128, 100, 200}, false) == Strongest{{1, 7}, {8, 2}});  // overlaps all three
  CHECK(collected(t, 0, {64, 128, 200, 256}, false) == Strongest{{8, 1}});         // only the first load
  CHECK(collected(t, 1, {0, 128, 0, 256}, true).empty());                          // another space
  // A write covering everything drops the three records (it waited for them); its own record stays.
  t.record(0, {0, 128, 0, 256}, true, {2, 1});
  CHECK(t.live_records() == 4);  // 256 bytes in 64-byte chunks: the one record in each of 4 chunks
}

TEST_CASE("RegionTracker: reads drop only covered reads of their own semaphore", "[kernels][deps]") {
  RegionTracker t(1 << 20, 1 << 20);  // one chunk: live_records counts records
  t.record(0, {0, 1, 0, 4}, false, {8, 1});
  t.record(0, {0, 1, 4, 8}, false, {8, 2});
  t.record(0, {0, 1, 0, 4}, false, {9, 1});
  CHECK(t.live_records() == 3);
  t.record(0, {0, 1, 0, 8}, false, {8, 3});  // covers both queue-0 reads, not queue 1's
  CHECK(t.live_records() == 2);
  CHECK(collected(t, 0, {0, 1, 2, 3}, true) == Strongest{{8, 3}, {9, 1}});
}

TEST_CASE("RegionTracker: same strongest waits as the one-list rules, for any chunking and event order",
          "[kernels][deps]") {
  const std::pair<int64_t, int64_t> chunkings[] = {{1, 4}, {2, 16}, {4, 24}, {1 << 20, 1 << 20}};
  for (const auto& [rows, bytes] : chunkings) {
    for (const bool in_order : {true, false}) {
      INFO("chunks " << rows << " x " << bytes
                     << (in_order ? ", increasing events" : ", events out of order"));
      std::mt19937 rng(1234 + static_cast<unsigned>(rows * 7 + bytes) + (in_order ? 0 : 1));
      RegionTracker t(rows, bytes), fused(rows, bytes);  // collect then record; both in one walk
      OneList model[2];                                  // one per space
      uint32_t next[6] = {};
      for (int step = 0; step < 3000; ++step) {
        const auto pick = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint32_t>(n)); };
        const uint32_t space = static_cast<uint32_t>(pick(2));
        const int64_t r0 = pick(16), c0 = pick(96);
        const Rect r{r0, r0 + 1 + pick(6), c0, c0 + 1 + pick(32)};
        const bool write = pick(3) == 0;
        const auto sem = static_cast<uint16_t>(pick(6));
        // Out of order: now and then an event earlier than the semaphore's last (as an `as` event may be).
        const uint32_t value = !in_order && next[sem] > 3 && pick(5) == 0
                                   ? next[sem] - static_cast<uint32_t>(pick(3))
                                   : ++next[sem];
        REQUIRE(collected(t, space, r, write) == model[space].collect(r, write));
        REQUIRE(collected_and_recorded(fused, space, r, write, {sem, value}) ==
                model[space].collect(r, write));
        model[space].record(r, write, {sem, value});
        t.record(space, r, write, {sem, value});
      }
      if (rows == (1 << 20)) CHECK(t.live_records() == model[0].recs.size() + model[1].recs.size());
      CHECK(fused.live_records() == t.live_records());
    }
  }
}

TEST_CASE(
    "RegionTracker: same strongest waits and live records as the one-list rules on nested and repeated "
    "rectangles",
    "[kernels][deps]") {
  // Adversarial regions: a few exact rectangles repeated (same region read and written again), nested ones
  // (covering, covered), edge-touching neighbours (no overlap), rectangles starting below 0 and a space with
  // its own non-power-of-two chunks; all semaphores read and written, and events out of order now and then.
  const Rect shapes[] = {{0, 8, 0, 64},   {0, 8, 0, 32},    {0, 8, 32, 64}, {2, 4, 16, 48}, {0, 4, 0, 64},
                         {4, 8, 0, 64},   {3, 5, 31, 33},   {0, 1, 0, 1},   {7, 8, 63, 64}, {-2, 3, -8, 8},
                         {0, 16, 0, 128}, {8, 16, 64, 128}, {8, 9, 0, 128}, {0, 8, 64, 65}};
  for (const int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{16}}) {
    INFO("chunks " << chunk << " x " << chunk * 8);
    std::mt19937 rng(99 + static_cast<unsigned>(chunk));
    RegionTracker t(chunk, chunk * 8), fused(chunk, chunk * 8);
    t.set_chunks(1, 5, 24);
    fused.set_chunks(1, 5, 24);
    OneList model[2];
    uint32_t next[4] = {};
    for (int step = 0; step < 4000; ++step) {
      const auto pick = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint32_t>(n)); };
      const uint32_t space = static_cast<uint32_t>(pick(2));
      const Rect r = shapes[pick(std::size(shapes))];
      const bool write = pick(4) == 0;
      const auto sem = static_cast<uint16_t>(pick(4));
      const uint32_t value =
          next[sem] > 2 && pick(7) == 0 ? next[sem] - static_cast<uint32_t>(pick(2)) : ++next[sem];
      REQUIRE(collected(t, space, r, write) == model[space].collect(r, write));
      REQUIRE(collected_and_recorded(fused, space, r, write, {sem, value}) == model[space].collect(r, write));
      model[space].record(r, write, {sem, value});
      t.record(space, r, write, {sem, value});
    }
    CHECK(fused.live_records() == t.live_records());
  }
}

TEST_CASE("RegionTracker: an access looks at the records near it, not at every earlier access",
          "[kernels][deps]") {
  // cs149_vector_add's stores: 2^17 disjoint column blocks of 8 bytes over all 128 rows of one tensor, in one
  // space with 8-row, 128 KiB chunks (as kernel.cpp chunks a [128, 2^18] FP32 tensor). Each bucket once held
  // every earlier store and each store scanned them all: 2^17 stores x 16 buckets x up to 2^14 records.
  RegionTracker t(8, 128 * 1024), fused(8, 128 * 1024);
  const int64_t stores = 1 << 17;
  for (int64_t m = 0; m < stores; ++m) {
    const Rect r{0, 128, 8 * m, 8 * m + 8};
    REQUIRE(collected(t, 0, r, true).empty());  // disjoint: nothing to wait for
    t.record(0, r, true, {8, static_cast<uint32_t>(m + 1)});
    REQUIRE(collected_and_recorded(fused, 0, r, true, {8, static_cast<uint32_t>(m + 1)}).empty());
  }
  // A write's collect and its record's drop look at the same records: in one walk, each once.
  CHECK(fused.records_examined() * 2 == t.records_examined());
  // Each store looks at one leaf of the partition (a few dozen records) in each of its 16 buckets, twice
  // (collect, then record): a few thousand records, whatever the count (the old scan: 2^18 on average).
  CHECK(t.records_examined() < 4000 * static_cast<uint64_t>(stores));
  // And the waits are still exact: a read of block 1000 waits for its store.
  CHECK(collected(t, 0, {5, 6, 8000, 8008}, false) == Strongest{{8, 1001}});
}

TEST_CASE("RegionTracker: only events past their semaphore's floor are needed", "[kernels][deps]") {
  RegionTracker t = loaded_then_read();
  t.record(0, {0, 64, 64, 128}, true, {8, 3});  // queue 0's third (an earlier event recorded later)
  std::vector<uint32_t> floor(64, 0);
  floor[8] = 3;  // the engine waited for queue 0 up to 3 already
  Needs need;
  need.reset(floor, /*never=*/2);  // ACT's own semaphore: program order
  t.collect(0, {0, 128, 0, 128}, true, need);
  // 8: 4 (above the floor, 3 is not); 1: 9; 2: none (its own).
  REQUIRE(need.events().size() == 2);
  CHECK(need.events()[0].sem == 1);
  CHECK(need.events()[0].value == 9);
  CHECK(need.events()[1].sem == 8);
  CHECK(need.events()[1].value == 4);
  // A start over forgets them; a semaphore past the floors' count is never needed.
  need.reset(std::vector<uint32_t>(8, 0));
  need.add({8, 1});
  t.collect(0, {0, 128, 0, 128}, true, need);
  REQUIRE(need.events().size() == 2);
  CHECK(need.events()[0].sem == 1);
  CHECK(need.events()[1].sem == 2);
}

TEST_CASE("RegionTracker: collect_and_record keeps the floors and records the access", "[kernels][deps]") {
  RegionTracker t = loaded_then_read();
  std::vector<uint32_t> floor(64, 0);
  floor[8] = 4;  // the engine waited for queue 0 up to 4 already
  Needs need;
  need.reset(floor, /*never=*/2);                               // ACT's own semaphore: program order
  t.collect_and_record(0, {0, 64, 0, 64}, true, need, {2, 6});  // ACT writes the upper half
  // 8: none (at its floor); 1: 9 (WAR); 2: none (its own).
  REQUIRE(need.events().size() == 1);
  CHECK(need.events()[0].sem == 1);
  CHECK(need.events()[0].value == 9);
  // Recorded, dropping nothing (no earlier record lies inside rows 0-63): a read of the upper half waits for
  // the write, one of the lower half for the load only.
  CHECK(t.live_records() == 4);
  CHECK(collected(t, 0, {0, 64, 0, 8}, false) == Strongest{{2, 6}, {8, 4}});
  CHECK(collected(t, 0, {64, 128, 0, 8}, false) == Strongest{{8, 4}});
  // A write covering all four waits for each (the latest per semaphore) and leaves only itself, once in each
  // of the two 64-byte chunks it spans.
  CHECK(collected_and_recorded(t, 0, {0, 128, 0, 128}, true, {3, 1}) == Strongest{{1, 9}, {2, 6}, {8, 4}});
  CHECK(t.live_records() == 2);
}
