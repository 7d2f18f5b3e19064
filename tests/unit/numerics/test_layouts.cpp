// Scale and data layouts: TE compact and GEMM-swizzled (docs/facts/mx-numerics.md §5 and its test vectors),
// and the Trainium x4 interleave, MX groups and scale placement (docs/facts/nkilib-kernels.md §1.2).
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

#include "sim/base/error.h"
#include "sim/numerics/scale_layout.h"

using namespace trnsim::num;
using trnsim::InputError;

TEST_CASE("TE scale shapes", "[numerics][layout]") {
  CHECK(mx_scale_shape(256, 512, MxAxis::Row) == ScaleShape{256, 16});
  CHECK(mx_scale_shape(256, 512, MxAxis::Col) == ScaleShape{8, 512});
  CHECK(te_scale_shape(256, 512, MxAxis::Row) == ScaleShape{256, 16});
  CHECK(te_scale_shape(256, 512, MxAxis::Col) == ScaleShape{8, 512});
  CHECK(te_scale_shape(96, 64, MxAxis::Row) == ScaleShape{128, 4});
  CHECK(te_scale_shape(96, 64, MxAxis::Col) == ScaleShape{4, 128});
  CHECK(te_scale_shape(160, 544, MxAxis::Row) == ScaleShape{256, 20});
  CHECK(te_scale_shape(160, 544, MxAxis::Col) == ScaleShape{8, 640});
  CHECK_THROWS_MATCHES(te_scale_shape(96, 40, MxAxis::Row), InputError,
                       Catch::Message("te_scale_shape: K = 40 is not a multiple of 32"));
  CHECK_THROWS_MATCHES(te_scale_shape(100, 64, MxAxis::Col), InputError,
                       Catch::Message("te_scale_shape: M = 100 is not a multiple of 32"));
}

// The 13-row table of mx-numerics.md §5 (M = 256, K = 512).
TEST_CASE("TE layout test vectors of mx-numerics 5", "[numerics][layout]") {
  struct V {
    MxAxis axis;
    int64_t i, j, compact, swizzled;
  };
  const V vs[] = {
      {MxAxis::Row, 0, 0, 0, 0},         {MxAxis::Row, 1, 0, 16, 16},       {MxAxis::Row, 31, 0, 496, 496},
      {MxAxis::Row, 32, 0, 512, 4},      {MxAxis::Row, 33, 2, 530, 22},     {MxAxis::Row, 127, 3, 2035, 511},
      {MxAxis::Row, 0, 4, 4, 512},       {MxAxis::Row, 128, 0, 2048, 2048}, {MxAxis::Row, 130, 5, 2085, 2593},
      {MxAxis::Col, 1, 0, 512, 1},       {MxAxis::Col, 0, 1, 1, 16},        {MxAxis::Col, 5, 130, 2690, 1569},
      {MxAxis::Col, 7, 511, 4095, 4095},
  };
  for (const V& v : vs) {
    INFO("axis " << static_cast<int>(v.axis) << " (" << v.i << ", " << v.j << ")");
    CHECK(te_compact_index(v.i, v.j, 256, 512, v.axis) == v.compact);
    CHECK(te_swizzled_index(v.i, v.j, 256, 512, v.axis) == v.swizzled);
  }
  CHECK_THROWS_MATCHES(te_swizzled_index(8, 0, 256, 512, MxAxis::Col), InputError,
                       Catch::Message("te_swizzled_index: scale index (8, 0) outside [8, 512]"));
}

// The swizzle equals TE's test permutation view(M/128, 4, 32, K/128, 4).permute(0, 3, 2, 1, 4) of the padded
// rowwise scale matrix (mx-numerics.md §5), written here independently; padding bytes are 0x00.
TEST_CASE("TE swizzled layout equals the permutation, with zero padding", "[numerics][layout]") {
  const int64_t M = 160, K = 544;  // padded rowwise [256, 20]: two row tiles, five column tiles
  const ScaleShape c = mx_scale_shape(M, K, MxAxis::Row), p = te_scale_shape(M, K, MxAxis::Row);
  std::vector<uint8_t> compact(c.size());
  for (int64_t i = 0; i < c.size(); ++i) compact[i] = static_cast<uint8_t>(1 + i % 251);
  std::vector<uint8_t> padded(p.size(), 0xAA), swz(p.size(), 0xAA);
  to_te_compact(compact.data(), M, K, MxAxis::Row, padded.data());
  to_te_swizzled(compact.data(), M, K, MxAxis::Row, swz.data());
  for (int64_t r = 0; r < p.rows; ++r)
    for (int64_t j = 0; j < p.cols; ++j) {
      const uint8_t want = (r < c.rows && j < c.cols) ? compact[r * c.cols + j] : 0x00;
      REQUIRE(padded[r * p.cols + j] == want);
      const int64_t a = r / 128, q = (r % 128) / 32, b = r % 32, t = j / 4, jj = j % 4;
      const int64_t idx = (((a * (p.cols / 4) + t) * 32 + b) * 4 + q) * 4 + jj;
      REQUIRE(swz[idx] == want);
    }
  std::vector<uint8_t> back(c.size());
  from_te_compact(padded.data(), M, K, MxAxis::Row, back.data());
  CHECK(back == compact);
  std::fill(back.begin(), back.end(), 0);
  from_te_swizzled(swz.data(), M, K, MxAxis::Row, back.data());
  CHECK(back == compact);

  // Columnwise: compact [M/32, K] -> padded [roundup(M/32,4), roundup(K,128)]; swizzle of the transpose.
  const ScaleShape cc = mx_scale_shape(M, K, MxAxis::Col), pc = te_scale_shape(M, K, MxAxis::Col);
  CHECK(cc == ScaleShape{5, 544});
  CHECK(pc == ScaleShape{8, 640});
  std::vector<uint8_t> ccomp(cc.size());
  for (int64_t i = 0; i < cc.size(); ++i) ccomp[i] = static_cast<uint8_t>(1 + i % 253);
  std::vector<uint8_t> cswz(pc.size(), 0xAA);
  to_te_swizzled(ccomp.data(), M, K, MxAxis::Col, cswz.data());
  int64_t zeros = 0;
  for (uint8_t b : cswz) zeros += b == 0;
  CHECK(zeros == pc.size() - cc.size());
  // (rb=4, c=200): transposed (200, 4), ntx = ceil(160/128) = 2 -> (1*2 + 1)*512 + 8*16 + 2*4 + 0 = 1672.
  CHECK(te_swizzled_index(4, 200, M, K, MxAxis::Col) == 1672);
  CHECK(cswz[1672] == ccomp[4 * 544 + 200]);
  std::vector<uint8_t> cback(cc.size());
  from_te_swizzled(cswz.data(), M, K, MxAxis::Col, cback.data());
  CHECK(cback == ccomp);
}

TEST_CASE("Trainium wrapX and 1x32 positions", "[numerics][layout]") {
  const auto W = QuantScheme::WrapX;
  const auto X = QuantScheme::OneX32;
  // One 512-row tile: partition k % 128, slot k / 128.
  CHECK(swizzle_pos(0, 0, 512, 4, W) == SwizzlePos{0, 0});
  CHECK(swizzle_pos(1, 0, 512, 4, W) == SwizzlePos{1, 0});
  CHECK(swizzle_pos(128, 0, 512, 4, W) == SwizzlePos{0, 1});
  CHECK(swizzle_pos(129, 2, 512, 4, W) == SwizzlePos{1, 9});
  CHECK(swizzle_pos(389, 1, 512, 4, W) == SwizzlePos{5, 7});
  // K = 896 = 512 + 256 + 128: a 256-row sub-tile (quarters of 64) then a 128-row one (quarters of 32).
  CHECK(swizzle_pos(512, 0, 896, 1, W) == SwizzlePos{128, 0});
  CHECK(swizzle_pos(576, 0, 896, 1, W) == SwizzlePos{128, 1});
  CHECK(swizzle_pos(767, 0, 896, 1, W) == SwizzlePos{191, 3});
  CHECK(swizzle_pos(768, 0, 896, 1, W) == SwizzlePos{192, 0});
  CHECK(swizzle_pos(800, 0, 896, 1, W) == SwizzlePos{192, 1});
  CHECK(swizzle_pos(895, 0, 896, 1, W) == SwizzlePos{223, 3});
  // K = 640 = 512 + 128.
  CHECK(swizzle_pos(612, 0, 640, 1, W) == SwizzlePos{132, 3});
  // 1x32: partition k / 4, slot k % 4.
  CHECK(swizzle_pos(5, 2, 64, 3, X) == SwizzlePos{1, 9});
  CHECK(swizzle_pos(63, 0, 64, 3, X) == SwizzlePos{15, 3});
  CHECK(unswizzle_pos(192, 1, 896, 1, W) == LogicalPos{800, 0});
  CHECK(unswizzle_pos(1, 9, 64, 3, X) == LogicalPos{5, 2});

  // Bijection onto [K/4, 4F] and inverse, both schemes, K with every remainder kind.
  for (QuantScheme s : {W, X})
    for (int64_t K : {128, 256, 384, 512, 640, 896, 1408}) {
      const int64_t F = 3;
      std::set<std::pair<int64_t, int64_t>> seen;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t f = 0; f < F; ++f) {
          const SwizzlePos p = swizzle_pos(k, f, K, F, s);
          REQUIRE(p.partition < K / 4);
          REQUIRE(p.free < 4 * F);
          seen.insert({p.partition, p.free});
          REQUIRE(unswizzle_pos(p.partition, p.free, K, F, s) == LogicalPos{k, f});
        }
      CHECK(static_cast<int64_t>(seen.size()) == K * F);
    }
  CHECK_THROWS_MATCHES(
      swizzle_pos(0, 0, 96, 1, W), InputError,
      Catch::Message("swizzle: K = 96 is not a multiple of 128 (required by the wrapX scheme)"));
  CHECK_THROWS_MATCHES(
      swizzle_pos(0, 0, 40, 1, X), InputError,
      Catch::Message("swizzle: K = 40 is not a multiple of 32 (required by the 1x32 scheme)"));
  CHECK_THROWS_MATCHES(swizzle_pos(64, 0, 64, 1, X), InputError,
                       Catch::Message("swizzle_pos: (k, f) = (64, 0) outside [64, 1]"));
}

TEST_CASE("Trainium MX groups", "[numerics][layout]") {
  const auto W = QuantScheme::WrapX;
  auto runs = [](std::initializer_list<int64_t> starts) {
    std::array<int64_t, 32> ks{};
    int n = 0;
    for (int64_t s : starts)
      for (int i = 0; i < 8; ++i) ks[n++] = s + i;
    return ks;
  };
  CHECK(mx_group_k_indices(0, 512, W) == runs({0, 128, 256, 384}));
  CHECK(mx_group_k_indices(15, 512, W) == runs({120, 248, 376, 504}));
  CHECK(mx_group_k_indices(16, 896, W) == runs({512, 576, 640, 704}));
  CHECK(mx_group_k_indices(24, 896, W) == runs({768, 800, 832, 864}));
  std::array<int64_t, 32> contiguous{};
  std::iota(contiguous.begin(), contiguous.end(), 96);
  CHECK(mx_group_k_indices(3, 512, QuantScheme::OneX32) == contiguous);
  CHECK(mx_group_row(389, 512, W) == 0);
  CHECK(mx_group_row(130, 512, W) == 0);
  CHECK(mx_group_row(136, 512, W) == 1);
  CHECK(mx_group_row(100, 512, QuantScheme::OneX32) == 3);
}

TEST_CASE("swizzle and unswizzle arrays", "[numerics][layout]") {
  const int64_t K = 640, F = 3;
  std::vector<uint16_t> in(K * F), swz(K * F), back(K * F);
  std::iota(in.begin(), in.end(), uint16_t{0});
  swizzle(in.data(), K, F, QuantScheme::WrapX, swz.data());
  CHECK(swz[0] == in[0]);                   // (0, 0) -> (0, 0)
  CHECK(swz[1] == in[128 * F]);             // slot 1 of partition 0, f 0 is k = 128
  CHECK(swz[4 + 2] == in[256 * F + 1]);     // f 1, slot 2: k = 256
  CHECK(swz[132 * 12 + 3] == in[612 * F]);  // remainder tile: k = 612 -> partition 132, slot 3
  unswizzle(swz.data(), K, F, QuantScheme::WrapX, back.data());
  CHECK(back == in);
}

TEST_CASE("Trainium scale placement and packing", "[numerics][layout]") {
  CHECK(scale_partition(0) == 0);
  CHECK(scale_partition(3) == 3);
  CHECK(scale_partition(4) == 32);
  CHECK(scale_partition(5, 8) == 41);
  CHECK(scale_partition(15) == 99);
  CHECK(scale_partition(15, 12) == 111);
  CHECK(scale_partition(16) == 128);
  CHECK(packed_scale_partition(0) == 0);
  CHECK(packed_scale_partition(16) == 4);  // second K tile: offset 4
  CHECK(packed_scale_partition(17) == 5);
  CHECK(packed_scale_partition(20) == 36);
  CHECK(packed_scale_partition(63) == 111);  // fourth tile, last group: 96 + 12 + 3
  CHECK(packed_scale_partition(64) == 128);  // fifth tile starts the next packing group
  CHECK_THROWS_MATCHES(scale_partition(0, 3), InputError,
                       Catch::Message("scale offset 3 is not one of 0, 4, 8, 12"));

  CHECK(trainium_scale_shape(512, 8, false) == ScaleShape{128, 8});
  CHECK(trainium_scale_shape(512, 8, true) == ScaleShape{128, 8});
  CHECK(trainium_scale_shape(2560, 8, true) == ScaleShape{256, 8});
  CHECK(trainium_scale_shape(2560, 8, false) == ScaleShape{640, 8});

  for (bool packed : {false, true}) {
    const int64_t K = 2560, F = 5;
    const ScaleShape t = trainium_scale_shape(K, F, packed);
    std::vector<uint8_t> compact((K / 32) * F);
    for (size_t i = 0; i < compact.size(); ++i) compact[i] = static_cast<uint8_t>(i % 250);
    std::vector<uint8_t> tile(t.size(), 0xFF);  // compact values stay below 250
    scales_to_trainium(compact.data(), K, F, packed, 0, tile.data());
    int64_t untouched = 0;
    for (uint8_t b : tile) untouched += b == 0xFF;
    CHECK(untouched == t.size() - static_cast<int64_t>(compact.size()));
    const int64_t g = 37;  // tile 2, local group 5
    const int64_t p = packed ? 2 * 4 + 32 + 1 : 9 * 32 + 1;
    CHECK(tile[p * F + 4] == compact[g * F + 4]);
    std::vector<uint8_t> back(compact.size());
    scales_from_trainium(tile.data(), K, F, packed, 0, back.data());
    CHECK(back == compact);
  }
  std::vector<uint8_t> small(8 * 2), tile(8 * 2);
  CHECK_THROWS_MATCHES(
      scales_to_trainium(small.data(), 32, 2, false, 12, tile.data()), InputError,
      Catch::Message("scales_to_trainium: scale row of group 0 lands on partition 12, outside the "
                     "8-row tile"));
  CHECK_THROWS_MATCHES(
      scales_to_trainium(small.data(), 512, 2, true, 4, tile.data()), InputError,
      Catch::Message(
          "scales_to_trainium: packed scales take their offset from the K tile; scale_offset must be 0, "
          "got 4"));
}

// quantize_mx on an interleaved tile equals MX quantization of each group's 32 logical K values.
TEST_CASE("quantize_x4 groups follow the scheme", "[numerics][layout][mx]") {
  const int64_t K = 640, F = 3;
  std::vector<uint16_t> x(K * F);
  for (int64_t i = 0; i < K * F; ++i)
    x[i] = static_cast<uint16_t>(0x3C00 + (i * 2654435761u >> 7) % 0x0700 + ((i % 5 == 0) ? 0x8000 : 0));
  for (QuantScheme s : {QuantScheme::WrapX, QuantScheme::OneX32}) {
    std::vector<uint16_t> swz(K * F);
    swizzle(x.data(), K, F, s, swz.data());
    std::vector<uint8_t> data(K * F), scales((K / 32) * F);
    quantize_x4(swz.data(), K / 4, F, Fp8Format::E4M3FN, ScaleRule::Trn3, data.data(), scales.data());
    std::vector<uint8_t> logical(K * F);
    unswizzle(data.data(), K, F, s, logical.data());
    for (int64_t g = 0; g < K / 32; ++g)
      for (int64_t f = 0; f < F; ++f) {
        const auto ks = mx_group_k_indices(g, K, s);
        std::array<uint16_t, 32> v{};
        for (int i = 0; i < 32; ++i) v[i] = x[ks[i] * F + f];
        std::array<uint8_t, 32> q{};
        REQUIRE(quantize_block_bf16(v.data(), q.data(), Fp8Format::E4M3FN, ScaleRule::Trn3) ==
                scales[g * F + f]);
        for (int i = 0; i < 32; ++i) REQUIRE(q[i] == logical[ks[i] * F + f]);
      }
    if (s == QuantScheme::OneX32) {
      // 1x32 groups are the OCP columnwise groups.
      std::vector<uint8_t> cd(K * F), cs((K / 32) * F);
      quantize(x.data(), K, F * 1, MxAxis::Col, Fp8Format::E4M3FN, ScaleRule::Trn3, cd.data(), cs.data());
      CHECK(cd == logical);
      CHECK(cs == scales);
    }
  }
  std::vector<uint16_t> x4(12 * 4);
  std::vector<uint8_t> d(48), sc(4);
  CHECK_THROWS_MATCHES(
      quantize_x4(x4.data(), 12, 1, Fp8Format::E4M3FN, ScaleRule::Te, d.data(), sc.data()), InputError,
      Catch::Message("quantize_x4: partitions = 12 is not a multiple of 8 (one MX group spans 8)"));
}
