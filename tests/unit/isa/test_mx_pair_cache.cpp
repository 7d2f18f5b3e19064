// MxPairCache: an image is served only while the bytes and scales it was made from are unchanged, and the
// images of the current instruction survive its other lookups.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "sim/isa/mx_pair_cache.h"

using namespace trnsim;
using namespace trnsim::isa;

TEST_CASE("MxPairCache serves an image only while its source bytes are unchanged", "[isa]") {
  MxPairCache cache(size_t{1} << 20);
  std::vector<uint8_t> r0(4 * 32, 1), r1(4 * 32, 2), scales(32, 127);
  const std::vector<const uint8_t*> rows = {r0.data(), r1.data()};
  const MxPairLayout layout{2, 32, 32, 0, 128};
  cache.begin();
  auto first = cache.get(layout, rows, scales);
  REQUIRE_FALSE(first.hit);
  first.pairs[0] = 0x12345678u;
  first.range->emin = 100;
  cache.commit(first);
  cache.begin();
  auto again = cache.get(layout, rows, scales);
  CHECK(again.hit);
  CHECK(again.pairs == first.pairs);
  CHECK(again.pairs[0] == 0x12345678u);
  CHECK(again.range->emin == 100);
  // Another layout of the same bytes is another image.
  cache.begin();
  CHECK_FALSE(cache.get({2, 32, 64, 0, 128}, rows, scales).hit);
  // A byte of a row rewritten in place, then a scale byte: misses, whose images are the caller's to write.
  r1[77] = 9;
  cache.begin();
  auto row_changed = cache.get(layout, rows, scales);
  CHECK_FALSE(row_changed.hit);
  cache.commit(row_changed);
  scales[31] = 128;
  cache.begin();
  CHECK_FALSE(cache.get(layout, rows, scales).hit);
  // An image not committed (its writer failed) is never served.
  cache.begin();
  CHECK_FALSE(cache.get(layout, rows, scales).hit);
}

TEST_CASE("MxPairCache evicts the least recently used image, never one of the current instruction", "[isa]") {
  // Each image: 128 source bytes + 4 * (64 + 16) bytes = 448; a budget of 1000 holds two.
  MxPairCache cache(1000);
  std::vector<uint8_t> a(96, 1), b(96, 2), c(96, 3), s(32, 127);
  const MxPairLayout layout{1, 24, 32, 0, 64};
  const auto get = [&](std::vector<uint8_t>& row) {
    const uint8_t* rows[] = {row.data()};
    auto im = cache.get(layout, rows, s);
    if (!im.hit) cache.commit(im);
    return im.hit;
  };
  cache.begin();
  CHECK_FALSE(get(a));
  cache.begin();
  CHECK_FALSE(get(b));
  cache.begin();
  CHECK(get(a));        // a is now the more recent
  CHECK_FALSE(get(c));  // evicts b, not a (used by this instruction)
  CHECK(cache.entries() == 2);
  cache.begin();
  CHECK(get(a));
  CHECK(get(c));
  CHECK_FALSE(get(b));  // both others are this instruction's: a third entry over the budget
  CHECK(cache.entries() == 3);
}
