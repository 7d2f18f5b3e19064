// How an HBM -> HBM DMA's bytes spread over the DMA engines (sim/timing/dma_spread.h), against values derived
// from configs/hw/trn2.json: 16 engines at 23 B/ns, dma.packet_ns 96 (the knee: 96 x 23 = 2208 B a packet).
#include <catch2/catch.hpp>

#include <initializer_list>
#include <vector>

#include "sim/config/hw_config.h"
#include "sim/timing/cost_model.h"
#include "sim/timing/dma_spread.h"

using namespace trnsim;
using isa::DType;
using isa::MemSpace;

namespace {

const config::HwConfig& trn2() {
  static const config::HwConfig c = config::load_hw_config("trn2");
  return c;
}

// An HBM view: `rows` rows `row_stride` elements apart, each of the given free dims, packed (the innermost
// stepping by `inner_stride`).
isa::AccessPattern hbm(uint32_t rows, std::initializer_list<uint32_t> dims, int64_t row_stride,
                       int64_t inner_stride = 1) {
  isa::AccessPattern a;
  a.space = MemSpace::HBM;
  a.dtype = DType::F32;
  a.partitions = rows;
  a.partition_stride = row_stride;
  std::vector<uint32_t> d(dims);
  a.ndim = static_cast<uint8_t>(d.size());
  int64_t stride = inner_stride;
  for (int i = a.ndim - 1; i >= 0; --i) {
    a.set_dim(i, {stride, d[i]});
    stride *= d[i];
  }
  return a;
}

// A view of `n` contiguous F32 elements as `rows` rows.
isa::AccessPattern packed(uint64_t n, uint32_t rows) {
  return hbm(rows, {static_cast<uint32_t>(n / rows)}, static_cast<int64_t>(n / rows));
}

timing::DmaCost copy(const isa::AccessPattern& dst, const isa::AccessPattern& src) {
  isa::Instruction i;
  i.op = isa::Opcode::DmaCopy;
  i.engine = isa::Engine::SP;
  i.ops[0] = dst;
  i.ops[1] = src;
  i.nops = 2;
  isa::Work w;
  const uint64_t bytes = uint64_t{dst.partitions} * dst.free_elements() * 4;
  w.bytes_read = w.bytes_written = w.hbm_bytes_read = w.hbm_bytes_written = bytes;
  return timing::CostModel(trn2()).dma_cost(i, w);
}

// The time its bytes take at its rate cap, ns.
double data_ns(const timing::DmaCost& c) {
  return static_cast<double>(c.bytes) / c.rate_cap_GBps;
}

}  // namespace

TEST_CASE("HBM -> HBM: a contiguous copy costs the same in every view of its bytes", "[timing][dma]") {
  // 4 MiB of F32 (1048576 elements) as [8, 131072], [1024, 1024], [8, 128, 1024] and [1048576, 1]: one
  // chunk on both sides, cut into 16 shares of 262144 B, one packet per engine (above the 2208 B knee):
  // engine time 262144 / 23 ns + the 96 ns completion packet, so the cap is 368 x 4194304 / (4194304 + 16 x
  // 2208) = 364.93 B/ns and the bytes take (4194304 + 35328) / 368 = 11493.6 ns. Before, the engines were
  // ceil(rows / 8): 1 for [8, 131072] (8.7x slower), 128 rows and up 16.
  constexpr uint64_t n = 1048576;
  const auto wide = copy(packed(n, 8), packed(n, 8));
  const auto square = copy(packed(n, 1024), packed(n, 1024));
  const auto blocks = copy(hbm(8, {128, 1024}, 131072), hbm(8, {128, 1024}, 131072));
  const auto column = copy(packed(n, 1048576), packed(n, 1048576));
  const auto mixed = copy(packed(n, 1024), hbm(8, {128, 1024}, 131072));
  for (const auto& c : {wide, square, blocks, column, mixed}) {
    CHECK(c.engines == 16);
    CHECK(c.partitions == 16);
    CHECK(c.packet_bytes == 262144.0);
    CHECK(c.rate_cap_GBps == Approx(368.0 * 4194304 / (4194304 + 35328)));
    CHECK(data_ns(c) == Approx((4194304.0 + 35328) / 368));
  }
}

TEST_CASE("HBM -> HBM: more bytes never take less time", "[timing][dma]") {
  // [k, 128, 512] F32, contiguous: k x 256 KiB in 16 packets, (bytes + 35328) / 368 ns. The rows rule gave
  // k = 8 one engine (91.3 us) and k = 12 two (68.5 us).
  double last = 0;
  for (uint32_t k : {1u, 2u, 4u, 8u, 12u, 16u, 24u, 32u, 64u}) {
    const auto c = copy(hbm(k, {128, 512}, 65536), hbm(k, {128, 512}, 65536));
    const double bytes = k * 262144.0;
    CHECK(c.engines == 16);
    CHECK(data_ns(c) == Approx((bytes + 35328) / 368));
    CHECK(data_ns(c) > last);
    last = data_ns(c);
  }
  // Below the knee every packet costs 96 ns: 16 elements (64 B) and 1024 (4 KiB) both take one packet per
  // engine and the completion packet, (16 + 16) x 2208 / 368 = 192 ns.
  CHECK(data_ns(copy(packed(16, 1), packed(16, 1))) == Approx(192.0));
  CHECK(data_ns(copy(packed(1024, 128), packed(1024, 128))) == Approx(192.0));
  // 4 elements use 4 engines (one element at least each): (4 + 4) x 2208 / (4 x 23) = 192 ns.
  CHECK(copy(packed(4, 1), packed(4, 1)).engines == 4);
  CHECK(data_ns(copy(packed(4, 1), packed(4, 1))) == Approx(192.0));
}

TEST_CASE("HBM -> HBM: packets end where either side's contiguous chunk ends", "[timing][dma]") {
  // src: 1024 rows of 128 F32 (512 B) every 256 elements; dst packed. Chunks: 1024 / 1 + 1 - 1 = 1024 (the
  // dst's one chunk ends with the last src row); the shares (8192 elements) end at row ends, so 1024
  // packets of 512 B, each under the knee, 96 ns each: (1024 + 16) / 16 x 96 = 6240 ns.
  const auto strided = copy(packed(131072, 1024), hbm(1024, {128}, 256));
  CHECK(strided.engines == 16);
  CHECK(strided.partitions == 1024);
  CHECK(data_ns(strided) == Approx(1040.0 / 16 * 96));
  // 8 rows of 32 elements every 64: the 16 shares of 16 elements end inside every row once: 8 + 8 packets.
  CHECK(copy(packed(256, 8), hbm(8, {32}, 64)).partitions == 16);
  // Runs of 96 and 128 elements end at multiples of 96 or 128: 98304 / 96 + 98304 / 128 - 98304 / 384 =
  // 1024 + 768 - 256 = 1536 chunks; the shares (6144 elements) end at multiples of 96.
  CHECK(copy(hbm(768, {128}, 256), hbm(1024, {96}, 192)).partitions == 1536);
  CHECK(timing::contiguous_run(hbm(4, {2, 8}, 16), false) == 64);
  CHECK(timing::contiguous_run(hbm(4, {2, 8}, 16), true) == 16);
  CHECK(timing::contiguous_run(hbm(4, {2, 8}, 32), false) == 16);
  CHECK(timing::contiguous_run(hbm(4, {2, 8}, 16, 2), false) == 1);
}

TEST_CASE("HBM -> HBM: an indirect gather's rows are packets of their own", "[timing][dma]") {
  // The MoE backward's dY gather (kernels/moe/bwd_emit.cpp): 128 rows of 512 BF16 indexed by a
  // vector_offset into a packed [128, 512] block: 128 chunks, the 16 shares ending at row ends: 8 packets
  // per engine, as the partition rule gave (128 rows / 8 per engine).
  auto dst = packed(65536, 128), src = packed(65536, 128);
  dst.dtype = src.dtype = DType::BF16;
  isa::AccessPattern idx;
  idx.space = MemSpace::SBUF;
  idx.dtype = DType::I32;
  idx.partitions = 128;
  idx.ndim = 1;
  isa::Instruction i;
  i.op = isa::Opcode::DmaCopy;
  i.engine = isa::Engine::POOL;
  i.ops[0] = dst;
  i.ops[1] = src;
  i.ops[2] = idx;
  i.nops = 3;
  const auto s = timing::dma_spread(i, trn2().dma);
  CHECK(s.engines == 16);
  CHECK(s.packets == 128);
  i.flags = isa::kIndirectDst;  // a scatter indexes dst's rows instead: the same
  CHECK(timing::dma_spread(i, trn2().dma).packets == 128);
  i.nops = 2;  // without the index both sides are one chunk: 16 packets
  CHECK(timing::dma_spread(i, trn2().dma).packets == 16);
}
