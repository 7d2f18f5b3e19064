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
