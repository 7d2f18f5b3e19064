// The allocation rule (kernels/api/alloc_rule.h): buffers of a tile declared in a loop, by memory space,
// size, loop and free space; the builder's pools asking it (and recording the choice), an explicit bufs
// bypassing it.
#include <catch2/catch.hpp>

#include "kernels/api/nki.h"
#include "sim/base/error.h"

using namespace trnsim;
using namespace trnsim::kernels;

namespace {

BufferChoice ask(isa::MemSpace space, int64_t bytes, InLoop loop, int64_t free) {
  return loop_tile_buffers(
      {.space = space, .bytes_per_partition = bytes, .loop = loop, .free_bytes_per_partition = free});
}

}  // namespace

TEST_CASE("allocation rule: SBUF double buffering, PSUM every free bank, within the loop and free space") {
  using isa::MemSpace;
  // SBUF: the compiler's double buffering wherever two fit.
  CHECK(ask(MemSpace::SBUF, 2048, {.trip_count = 100}, 229376).bufs == 2);
  // A declaration that runs once, or a dynamic loop: one buffer.
  CHECK(ask(MemSpace::SBUF, 2048, {.trip_count = 1}, 229376).bufs == 1);
  CHECK(ask(MemSpace::SBUF, 2048, {.trip_count = 100, .dynamic = true}, 229376).bufs == 1);
  // The hoisted FP32 tutorial's rhs set: 64 tiles x 2 KiB = 128 KiB; after two 32 KiB lhsT sets 160 KiB are
  // free: one buffer.
  const BufferChoice rhs = ask(MemSpace::SBUF, 64 * 2048, {.trip_count = 512, .tiles = 64}, 229376 - 65536);
  CHECK(rhs.bufs == 1);
  CHECK(rhs.reason.find("1 of 2 buffers fit") != std::string::npos);
  // The reserve of the tiles declared after it in the same body: 96 KiB free, 32 KiB wanted twice, 64 KiB
  // reserved -> one.
  CHECK(ask(MemSpace::SBUF, 32768, {.trip_count = 8, .reserve_bytes_per_partition = 65536}, 98304).bufs == 1);
  CHECK(ask(MemSpace::SBUF, 32768, {.trip_count = 8, .reserve_bytes_per_partition = 32768}, 98304).bufs == 2);
  // PSUM: every free 2 KiB bank, up to the trip count.
  CHECK(ask(MemSpace::PSUM, 2048, {.trip_count = 64}, 16384).bufs == 8);
  CHECK(ask(MemSpace::PSUM, 2048, {.trip_count = 3}, 16384).bufs == 3);
  CHECK(ask(MemSpace::PSUM, 2048, {.trip_count = 64}, 6144).bufs == 3);
  // Nothing fits: still 1 (the builder's allocation then fails naming the tile).
  CHECK(ask(MemSpace::SBUF, 4096, {.trip_count = 4}, 1024).bufs == 1);
  // Outside the rule's domain.
  CHECK_THROWS_AS(ask(MemSpace::HBM, 2048, {}, 229376), InputError);
  CHECK_THROWS_AS(ask(MemSpace::SBUF, 0, {}, 229376), InputError);
  CHECK_THROWS_AS(ask(MemSpace::SBUF, 2048, {.trip_count = 0}, 229376), InputError);
  CHECK_THROWS_AS(ask(MemSpace::SBUF, 2048, {.tiles = 0}, 229376), InputError);
}

TEST_CASE(
    "allocation rule: the builder's in-loop pools ask it, record it, and an explicit bufs bypasses it") {
  const KernelBuild b = build_program(
      [](Kernel& k) {
        // [128, 512] FP32: 2 KiB per partition, declared 16 times: 2 buffers.
        TilePool a = k.sbuf_pool({128, 512}, DType::F32, "a", InLoop{.trip_count = 16});
        CHECK(a.bufs() == 2);
        // A set of 4 tiles per iteration: 2 sets, 8 tiles.
        TilePool s = k.sbuf_pool({128, 512}, DType::F32, "set", InLoop{.trip_count = 4, .tiles = 4});
        CHECK(s.bufs() == 8);
        // PSUM: all 8 banks.
        TilePool p = k.psum_pool({128, 512}, DType::F32, "acc", InLoop{.trip_count = 32});
        CHECK(p.bufs() == 8);
        // The explicit override.
        TilePool e = k.sbuf_pool({128, 512}, DType::F32, "e", InLoop{.trip_count = 16, .bufs = 3});
        CHECK(e.bufs() == 3);
        TilePool old = k.sbuf_pool({128, 64}, DType::F32, "old", 1);
        CHECK(old.bufs() == 1);
        // A site declared again (per outer iteration) is one record.
        for (int i = 0; i < 3; ++i) TilePool again = k.sbuf_pool({128, 64}, DType::F32, "again", InLoop{});
      },
      {default_limits(Generation::Trn2), 2});
  REQUIRE(b.allocations.size() == 6);  // core 0's sites only
  const AllocationRecord& a = b.allocations[0];
  CHECK(a.name == "a");
  CHECK(a.space == isa::MemSpace::SBUF);
  CHECK(a.bytes_per_partition == 2048);
  CHECK(a.trip_count == 16);
  CHECK(a.bufs == 2);
  CHECK(a.by_rule);
  CHECK(a.reason == "double buffering (compiler default)");
  CHECK(b.allocations[1].bytes_per_partition == 4 * 2048);
  CHECK(b.allocations[1].bufs == 2);
  CHECK(b.allocations[2].bufs == 8);
  CHECK(b.allocations[2].space == isa::MemSpace::PSUM);
  CHECK_FALSE(b.allocations[3].by_rule);
  CHECK(b.allocations[3].bufs == 3);
  CHECK_FALSE(b.allocations[4].by_rule);
  CHECK(b.allocations[5].declarations == 3);

  // A malformed InLoop names the pool.
  CHECK_THROWS_WITH(build_program(
                        [](Kernel& k) {
                          k.sbuf_pool({128, 64}, DType::F32, "z", InLoop{.trip_count = 0});
                        },
                        {default_limits(Generation::Trn2), 1}),
                    Catch::Contains("sbuf pool 'z'") && Catch::Contains("trip count >= 1"));
}

TEST_CASE("allocation rule: a site's scope is its outermost loop unless a tile outlives that iteration") {
  CHECK(site_scope({false}) == 0);        // declared in a loop, dead by the end of its iteration
  CHECK(site_scope({false, true}) == 0);  // alive across an inner loop (a set of tiles) only
  CHECK(site_scope({true, true}) == -1);  // outlives the outermost loop's iteration: the kernel
  CHECK(site_scope({}) == -1);            // declared outside every loop
}

TEST_CASE("allocation rule: scoped pools give a dead site's space to a later site, pool to pool") {
  // 8 KiB of SBUF per partition. Two outer iterations, each: an operand site "rhs" (2 KiB tiles, 4 per
  // iteration, ops 0-3 / 6-9) then a packing site "pack" (4 KiB tiles, 2 per iteration, ops 4-5 / 10-11),
  // and a PSUM site "acc" alive in both operand phases (ops 0-3 / 6-9).
  isa::Limits l = default_limits(Generation::Trn2);
  l.sbuf_bytes_per_partition = 8192;
  const std::vector<PoolSite> sites = {
      {isa::MemSpace::SBUF, 128, 2048, InLoop{.trip_count = 8}},
      {isa::MemSpace::SBUF, 128, 4096, InLoop{.trip_count = 4}},
      {isa::MemSpace::PSUM, 128, 2048, InLoop{.trip_count = 8}},
  };
  const std::vector<PoolInstance> inst = {{0, 0, 3}, {1, 4, 5}, {0, 6, 9}, {1, 10, 11}, {2, 0, 3}, {2, 6, 9}};
  const PoolPlan p = plan_pools(l, sites, inst);
  // rhs: 8 KiB free -> double buffering; pack (asked at op 4, rhs dead): 8 KiB free, 2 x 4 KiB fit; acc:
  // all 8 PSUM banks.
  CHECK(p.sites[0].bufs == 2);
  CHECK(p.sites[1].bufs == 2);
  CHECK(p.sites[2].bufs == 8);
  // Placements in order of first access: rhs#1 (0), acc (1), pack#1 (2), rhs#2 (3), pack#2 (4). The PSUM
  // site's space is taken by nobody: its second iteration keeps placement 1 (the rotation goes on).
  CHECK(p.placement_of == std::vector<int64_t>{0, 2, 3, 4, 1, 1});
  REQUIRE(p.placements.size() == 5);
  CHECK(p.placements[0].offsets == std::vector<int64_t>{0, 2048});
  CHECK(p.placements[2].offsets == std::vector<int64_t>{0, 4096});  // pack takes rhs's dead space
  CHECK(p.placements[3].offsets == std::vector<int64_t>{0, 2048});  // rhs again, fresh: pack held it
  CHECK(p.placements[4].offsets == std::vector<int64_t>{0, 4096});
  using After = std::vector<std::pair<int64_t, int64_t>>;
  // pack's buffer 0 [0, 4 KiB) held rhs's buffers 0 and 1 before: its first writer waits for their readers.
  CHECK(p.placements[2].after[0] == After{{0, 0}, {0, 1}});
  CHECK(p.placements[2].after[1].empty());
  // rhs's second placement: both buffers lie in pack#1's buffer 0 (which replaced rhs#1 as their holder).
  CHECK(p.placements[3].after[0] == After{{2, 0}});
  CHECK(p.placements[3].after[1] == After{{2, 0}});
  // pack's second placement: buffer 0 over pack#1's buffer 0 (only partly replaced by rhs#2) and rhs#2's
  // two buffers, buffer 1 over pack#1's buffer 1.
  CHECK(p.placements[4].after[0] == After{{2, 0}, {3, 0}, {3, 1}});
  CHECK(p.placements[4].after[1] == After{{2, 1}});
  CHECK(p.placements[1].after[0].empty());

  // A third SBUF site alive beside both: 8 KiB wanted once while rhs holds 4 KiB -> does not fit.
  const std::vector<PoolSite> over = {sites[0], {isa::MemSpace::SBUF, 128, 8192, InLoop{.trip_count = 1}}};
  CHECK_THROWS_WITH(plan_pools(l, over, {{0, 0, 3}, {1, 1, 2}}),
                    Catch::Contains("site 1") && Catch::Contains("does not fit"));
}
