// Cost formulas of sim/timing against values derived from configs/hw/trn2.json and trn3.json.
#include <catch2/catch.hpp>

#include <cmath>
#include <utility>
#include <vector>

#include "sim/base/error.h"
#include "sim/config/hw_config.h"
#include "sim/timing/bandwidth_sharing.h"
#include "sim/timing/cost_model.h"
#include "sim/timing/pe_throttle.h"

using namespace trnsim;
using isa::DType;
using isa::Engine;
using isa::MemSpace;
using isa::Opcode;

namespace {

const config::HwConfig& trn2() {
  static const config::HwConfig c = config::load_hw_config("trn2");
  return c;
}
const config::HwConfig& trn3() {
  static const config::HwConfig c = config::load_hw_config("trn3");
  return c;
}

// On-chip operand: `parts` partitions x `free` contiguous elements (or the given dims).
isa::AccessPattern ap(MemSpace space, DType t, uint32_t parts, std::initializer_list<uint32_t> dims,
                      int64_t inner_stride = 1) {
  isa::AccessPattern a;
  a.space = space;
  a.dtype = t;
  a.partitions = parts;
  int64_t stride = inner_stride;
  std::vector<uint32_t> d(dims);
  a.ndim = static_cast<uint8_t>(d.size());
  for (int i = a.ndim - 1; i >= 0; --i) {
    a.set_dim(i, {stride, d[i]});
    stride *= d[i];
  }
  return a;
}

isa::Instruction inst(Opcode op, Engine e, std::initializer_list<isa::AccessPattern> ops,
                      uint32_t flags = 0) {
  isa::Instruction i;
  i.op = op;
  i.engine = e;
  i.flags = flags;
  for (const auto& a : ops) i.ops[i.nops++] = a;
  return i;
}

isa::Instruction matmul(DType t, uint32_t m, uint32_t n_moving, uint32_t flags = 0) {
  return inst(Opcode::NcMatmul, Engine::PE,
              {ap(MemSpace::PSUM, DType::F32, m, {n_moving}), ap(MemSpace::SBUF, t, 128, {m}),
               ap(MemSpace::SBUF, t, 128, {n_moving})},
              flags);
}

}  // namespace

TEST_CASE("nc_matmul cost by N_moving size class (trn2)", "[timing]") {
  timing::CostModel cm(trn2());
  // MM = max(min(64, N_stationary = 128), N_moving) PE cycles; LS = N_stationary / 4 = 128 / 4 = 32 cycles.
  CHECK(cm.engine_cost(matmul(DType::BF16, 128, 32)).cycles == Cycles(64));  // floor: max(64, 32)
  CHECK(cm.engine_cost(matmul(DType::BF16, 128, 64)).cycles == Cycles(64));
  CHECK(cm.engine_cost(matmul(DType::BF16, 128, 128)).cycles == Cycles(128));
  CHECK(cm.engine_cost(matmul(DType::BF16, 128, 512)).cycles == Cycles(512));
  CHECK(cm.engine_cost(matmul(DType::BF16, 128, 512)).ls_cycles == Cycles(32));
  // A short stationary lowers the floor: max(min(64, 16), 32) = 32; LS = 16 / 4 = 4.
  CHECK(cm.engine_cost(matmul(DType::BF16, 16, 32)).cycles == Cycles(32));
  CHECK(cm.engine_cost(matmul(DType::BF16, 16, 32)).ls_cycles == Cycles(4));
  // Converted once at 2.4 GHz: 512 cycles x 416.67 ps = 213334 ps (rounded up).
  CHECK(trn2().clock(Engine::PE).to_time(Cycles(512)) == Picoseconds(213334));
}

TEST_CASE("nc_matmul FP32, FP8 double_row and nc_matmul_mx", "[timing]") {
  timing::CostModel cm2(trn2());
  // FP32: fp32_factor 4 x max(64, 128) = 512 cycles.
  CHECK(cm2.engine_cost(matmul(DType::F32, 128, 128)).cycles == Cycles(512));
  // FP32 in transpose mode: fp32_transpose_factor 2 x 128 = 256.
  CHECK(cm2.engine_cost(matmul(DType::F32, 128, 128, isa::kIsTranspose)).cycles == Cycles(256));
  // double_row FP8: stationary [128, 2, 128], moving [128, 2, 512]: K = 256 in one pass, N = 512 -> 512
  // cycles, the same time as the BF16 K = 128 matmul (2x throughput); LS = 128 / 4 = 32.
  auto dr =
      inst(Opcode::NcMatmul, Engine::PE,
           {ap(MemSpace::PSUM, DType::F32, 128, {512}), ap(MemSpace::SBUF, DType::FP8_E4M3FN, 128, {2, 128}),
            ap(MemSpace::SBUF, DType::FP8_E4M3FN, 128, {2, 512})},
           isa::kDoubleRow);
  CHECK(cm2.engine_cost(dr).cycles == Cycles(512));
  CHECK(cm2.engine_cost(dr).ls_cycles == Cycles(32));
  CHECK_NOTHROW(cm2.check_features(dr));

  // nc_matmul_mx (trn3): stationary [128P, 128 x4], moving [128P, 512 x4]: K = 128 x 4 = 512 = mx_k_per_pass,
  // one pass, N = 512 -> 512 cycles.
  auto mx =
      inst(Opcode::NcMatmulMx, Engine::PE,
           {ap(MemSpace::PSUM, DType::F32, 128, {512}), ap(MemSpace::SBUF, DType::FP8_E4M3FN_X4, 128, {128}),
            ap(MemSpace::SBUF, DType::FP8_E4M3FN_X4, 128, {512}), ap(MemSpace::SBUF, DType::U8, 16, {128}),
            ap(MemSpace::SBUF, DType::U8, 16, {512})});
  timing::CostModel cm3(trn3());
  CHECK(cm3.engine_cost(mx).cycles == Cycles(512));
  CHECK_NOTHROW(cm3.check_features(mx));
  // Trn2 lacks it: a RuleError naming the feature flag.
  CHECK_THROWS_WITH(cm2.check_features(mx),
                    "nc_matmul_mx is not available on trn2 (config features.nc_matmul_mx = false)");
}

TEST_CASE("PE nc_transpose: max(P, min(64, F))", "[timing]") {
  timing::CostModel cm(trn2());
  auto t = inst(Opcode::NcTranspose, Engine::PE,
                {ap(MemSpace::PSUM, DType::BF16, 32, {128}), ap(MemSpace::SBUF, DType::BF16, 128, {32})});
  // P = 128, F = 32: max(128, min(64, 32)) = 128; LS = F / 4 = 8.
  CHECK(t.ops[1].free_elements() == 32);
  CHECK(cm.engine_cost(t).cycles == Cycles(128));
  CHECK(cm.engine_cost(t).ls_cycles == Cycles(8));
}

TEST_CASE("DVE costs with and without performance modes (trn2)", "[timing]") {
  timing::CostModel cm(trn2());
  const uint32_t n = 1024;
  // DVE fixed_overhead_cycles = 100.
  auto copy = [&](DType s, DType d, MemSpace ss, int64_t stride = 1) {
    return inst(Opcode::TensorCopy, Engine::DVE,
                {ap(MemSpace::SBUF, d, 128, {n}), ap(ss, s, 128, {n}, stride)});
  };
  // BF16 SBUF->SBUF contiguous: 4x mode -> 100 + 1024 / 4 = 356.
  auto c = cm.engine_cost(copy(DType::BF16, DType::BF16, MemSpace::SBUF));
  CHECK(c.cycles == Cycles(356));
  CHECK(c.perf_mode == 4);
  // FP16 -> BF16 also qualifies (the two 16-bit dtypes may differ): 356.
  CHECK(cm.engine_cost(copy(DType::FP16, DType::BF16, MemSpace::SBUF)).cycles == Cycles(356));
  // BF16 from PSUM: 2x mode -> 100 + 512 = 612; non-contiguous source: 2x as well.
  CHECK(cm.engine_cost(copy(DType::BF16, DType::BF16, MemSpace::PSUM)).cycles == Cycles(612));
  CHECK(cm.engine_cost(copy(DType::BF16, DType::BF16, MemSpace::SBUF, 2)).cycles == Cycles(612));
  // FP32: no mode -> 100 + 1024 = 1124. FP8 on trn2 is not a fast dtype: 1124 too.
  CHECK(cm.engine_cost(copy(DType::F32, DType::F32, MemSpace::SBUF)).cycles == Cycles(1124));
  CHECK(cm.engine_cost(copy(DType::FP8_E4M3FN, DType::FP8_E4M3FN, MemSpace::SBUF)).cycles == Cycles(1124));

  auto tt = [&](DType t, MemSpace a, MemSpace b) {
    return inst(Opcode::TensorTensor, Engine::DVE,
                {ap(MemSpace::SBUF, t, 128, {n}), ap(a, t, 128, {n}), ap(b, t, 128, {n})});
  };
  // Two inputs: 2N. BF16 in SBUF: 2x mode -> 100 + 2048 / 2 = 1124. FP32: 100 + 2048 = 2148.
  CHECK(cm.engine_cost(tt(DType::BF16, MemSpace::SBUF, MemSpace::SBUF)).cycles == Cycles(1124));
  CHECK(cm.engine_cost(tt(DType::F32, MemSpace::SBUF, MemSpace::SBUF)).cycles == Cycles(2148));
  // One PSUM + one SBUF input read in parallel: N -> 100 + 1024 = 1124.
  CHECK(cm.engine_cost(tt(DType::F32, MemSpace::PSUM, MemSpace::SBUF)).cycles == Cycles(1124));

  // tensor_reduce add BF16 -> BF16: N / 2 -> 100 + 512 = 612.
  auto red = inst(Opcode::TensorReduce, Engine::DVE,
                  {ap(MemSpace::SBUF, DType::BF16, 128, {1}), ap(MemSpace::SBUF, DType::BF16, 128, {n})});
  red.alu0 = isa::AluOp::Add;
  CHECK(cm.engine_cost(red).cycles == Cycles(612));
}

TEST_CASE("DVE on trn3: FP8 fast path and quantize_mx", "[timing]") {
  timing::CostModel cm(trn3());
  // FP8 copy counts as a fast dtype on trn3: 100 + 1024 / 4 = 356.
  auto c = inst(Opcode::TensorCopy, Engine::DVE,
                {ap(MemSpace::SBUF, DType::FP8_E4M3FN, 128, {1024}),
                 ap(MemSpace::SBUF, DType::FP8_E4M3FN, 128, {1024})});
  CHECK(cm.engine_cost(c).cycles == Cycles(356));
  // quantize_mx: 4 elements per partition per cycle: 100 + 1024 / 4 = 356 DVE cycles; at 1.2 GHz = 296667 ps.
  auto q = inst(Opcode::QuantizeMx, Engine::DVE,
                {ap(MemSpace::SBUF, DType::FP8_E4M3FN_X4, 128, {256}),
                 ap(MemSpace::SBUF, DType::BF16, 128, {1024}), ap(MemSpace::SBUF, DType::U8, 16, {256})});
  CHECK(cm.engine_cost(q).cycles == Cycles(356));
  CHECK(trn3().clock(Engine::DVE).to_time(Cycles(356)) == Picoseconds(296667));
  CHECK_THROWS_AS(timing::CostModel(trn2()).check_features(q), RuleError);
}

TEST_CASE("ACT and POOL costs", "[timing]") {
  timing::CostModel cm2(trn2()), cm3(trn3());
  auto act =
      inst(Opcode::Activation, Engine::ACT,
           {ap(MemSpace::SBUF, DType::BF16, 128, {1024}), ap(MemSpace::PSUM, DType::F32, 128, {1024})});
  // ACT fixed 64 + N = 64 + 1024 = 1088; with reduce: + reduce_extra_cycles 64 = 1152.
  CHECK(cm2.engine_cost(act).cycles == Cycles(1088));
  act.flags |= isa::kReduce;
  CHECK(cm2.engine_cost(act).cycles == Cycles(1152));
  auto copy =
      inst(Opcode::TensorCopy, Engine::ACT,
           {ap(MemSpace::SBUF, DType::BF16, 128, {1024}), ap(MemSpace::SBUF, DType::BF16, 128, {1024})});
  // trn2 ACT has no perf mode: 64 + 1024 = 1088; trn3 ACT 2x for BF16: 64 + 512 = 576.
  CHECK(cm2.engine_cost(copy).cycles == Cycles(1088));
  CHECK(cm3.engine_cost(copy).cycles == Cycles(576));
  // POOL iota: fixed 150 + N = 150 + 512 = 662.
  auto iota = inst(Opcode::Iota, Engine::POOL, {ap(MemSpace::SBUF, DType::I32, 128, {512})});
  CHECK(cm2.engine_cost(iota).cycles == Cycles(662));
}

TEST_CASE("DMA cost inputs by bytes per partition", "[timing]") {
  const config::HwConfig curve_hw = config::load_hw_config("trn2", {{"dma.packet_ns", 0}});
  auto dma = [&](uint32_t parts, uint32_t bytes_pp, const config::HwConfig& hw) {
    timing::CostModel cm(hw);
    isa::AccessPattern hbm;
    hbm.space = MemSpace::HBM;
    hbm.dtype = DType::U8;
    hbm.partitions = parts;
    hbm.ndim = 1;
    hbm.set_dim(0, {1, bytes_pp});
    auto i = inst(Opcode::DmaCopy, Engine::SP, {ap(MemSpace::SBUF, DType::U8, parts, {bytes_pp}), hbm});
    isa::Work w;
    w.bytes_read = w.bytes_written = w.hbm_bytes_read = uint64_t{parts} * bytes_pp;
    return cm.dma_cost(i, w);
  };
  SECTION("packet rate (dma.packet_ns = 96)") {
    // 128 partitions x 4 KiB: 16 engines (128 / 8). Each engine moves 8 packets of 4096 B at 23 B/ns (above
    // the 96 x 23 = 2208 B knee) and writes the completion semaphore, one more 96 ns packet: engine bytes
    // 524288 + 16 x 2208 = 559616, so the transfer's cap is 368 x 524288 / 559616 = 344.77 B/ns. Its bytes
    // take the engines' shared bandwidth at face value (efficiency 1): the packet cost is a latency other
    // queues overlap. setup 1000 ns (the HBM latency, 240 ns, is the HBM module's: timing::HbmTiming);
    // completion write 10 ns; trigger 50 ns.
    auto c = dma(128, 4096, trn2());
    CHECK(c.bytes == 524288);
    CHECK(c.engines == 16);
    CHECK(c.efficiency == 1.0);
    CHECK(c.transfer_efficiency == Approx(524288.0 / 559616));
    CHECK(c.rate_cap_GBps == Approx(368.0 * 524288 / 559616));
    CHECK(c.setup == Picoseconds(1000000));
    CHECK(c.touches_hbm);
    CHECK(c.completion == Picoseconds(10000));
    CHECK(c.trigger == Picoseconds(50000));
    // 256 B per partition, below the knee: 9 packets x 96 ns = 864 ns per engine for its 2048 B, so
    // 16 x 2048 / 864 = 37.93 B/ns.
    CHECK(dma(128, 256, trn2()).rate_cap_GBps == Approx(16.0 * 2048 / 864));
    // 4 B per partition (CS149 ROW_CHUNK = 128): 9 x 96 = 864 ns for 32 B per engine.
    CHECK(dma(128, 4, trn2()).rate_cap_GBps == Approx(16.0 * 32 / 864));
    // 8 partitions x 4 KiB on one engine: 32768 B / 23 + 96 ns = 1520.7 ns (the NKI DMA overview profiles
    // 32 KiB on one engine in 1416 ns): 32768 / 1520.7 = 21.55 B/ns.
    CHECK(dma(8, 4096, trn2()).engines == 1);
    CHECK(dma(8, 4096, trn2()).rate_cap_GBps == Approx(32768.0 / (32768.0 / 23 + 96)));
  }
  SECTION("queue occupancy (dma.queue_sets, descriptor_ns = 40)") {
    // Without queue sets a transfer holds its queue to its last byte: no separate latency.
    const config::HwConfig no_sets = config::load_hw_config("trn2", {{"dma.queue_sets", false}});
    CHECK(dma(128, 4, no_sets).queue_rate_cap_GBps == dma(128, 4, no_sets).rate_cap_GBps);
    CHECK(dma(128, 4, no_sets).latency == Picoseconds(0));
    const config::HwConfig sets =
        config::load_hw_config("trn2", {{"dma.queue_sets", true}, {"dma.descriptor_ns", 40}});
    // 128 x 4 B: 8 + 1 descriptors per engine x 40 ns = 360 ns (its 32 B per engine take 1.4 ns): it holds
    // the queue at 512 B / 360 ns; its last byte lands 9 x 96 = 864 ns after it starts.
    CHECK(dma(128, 4, sets).queue_rate_cap_GBps == Approx(512.0 / 360));
    CHECK(dma(128, 4, sets).latency == Picoseconds(864000));
    // 128 x 4 KiB: its bytes, 524288 / 368 = 1424.7 ns, hold the queue longer than 9 x 40 ns; it lands after
    // 524288 / 344.77 = 1520.7 ns (8 packets at 23 B/ns and the 96 ns completion packet per engine).
    CHECK(dma(128, 4096, sets).queue_rate_cap_GBps == Approx(368.0));
    CHECK(dma(128, 4096, sets).latency == Picoseconds(1520696));
  }
  SECTION("efficiency curve (dma.packet_ns = 0)") {
    // 4 KiB per partition: efficiency 1.0 -> cap 16 x 23 = 368 B/ns.
    CHECK(dma(128, 4096, curve_hw).efficiency == Approx(1.0));
    CHECK(dma(128, 4096, curve_hw).rate_cap_GBps == Approx(368.0));
    // 256 B per partition: efficiency 0.38 -> 368 x 0.38 = 139.84 B/ns.
    CHECK(dma(128, 256, curve_hw).rate_cap_GBps == Approx(139.84));
    // 2 KiB: 0.9 -> 331.2 B/ns. 64 KiB: clamped at 1.0 -> 368 B/ns.
    CHECK(dma(128, 2048, curve_hw).rate_cap_GBps == Approx(331.2));
    CHECK(dma(128, 65536, curve_hw).rate_cap_GBps == Approx(368.0));
    // 8 partitions use one engine: 23 B/ns at 4 KiB.
    CHECK(dma(8, 4096, curve_hw).engines == 1);
    CHECK(dma(8, 4096, curve_hw).rate_cap_GBps == Approx(23.0));
  }
}

TEST_CASE("PE throttle: 50 % cap ramping to 100 % over 3 us, re-engaging after idle", "[timing]") {
  config::PeConfig pe = trn2().pe;  // cap 0.5, ramp 3000 ns, window 3000 ns, re-arm below 0.5
  timing::PeThrottle th(pe);
  // 1000 ns of full-rate work from t = 0 under cap(t) = 0.5 + 0.5 t / 3000:
  // 0.5 d + d^2 / 12000 = 1000  ->  d = -3000 + sqrt(3000^2 + 12000 x 1000) = 1582.576 ns.
  const double d1 = -3000.0 + std::sqrt(9e6 + 12e6);
  Picoseconds r1 = th.run(Picoseconds(0), Picoseconds(1000000));
  CHECK(r1.count() == static_cast<uint64_t>(std::ceil(d1 * 1000 - 1e-6)));
  CHECK(th.cap_at(Picoseconds(0)) == Approx(0.5));
  CHECK(th.cap_at(Picoseconds(1500000)) == Approx(0.75));  // halfway through the ramp
  CHECK(th.cap_at(Picoseconds(3000000)) == Approx(1.0));

  // Back to back, 10000 ns more from the end of the first: the ramp ends at 3000 ns. Work left in the ramp
  // from a = 1582.576: 0.5 (3000 - a) + (0.5 / 3000) / 2 (3000^2 - a^2) = 2250 - 1000 = 1250 ns of work in
  // 1417.424 ns; the remaining 8750 ns run at full rate: d = 1417.424 + 8750 = 10167.424 ns.
  Picoseconds r2 = th.run(r1, Picoseconds(10000000));
  CHECK(r2.ns() == Approx(3000.0 - d1 + 8750.0).margin(0.002));

  // A short gap (250 ns): the last 3 us were ~92 % busy, so the cap stays off.
  Picoseconds t3 = r1 + r2 + Picoseconds(250000);
  CHECK(th.run(t3, Picoseconds(100000)) == Picoseconds(100000));
  // 10 us idle: utilisation in the window is 0 -> the cap re-engages at 50 %:
  // 0.5 d + d^2 / 12000 = 100 -> d = -3000 + sqrt(9e6 + 1.2e6) = 193.877 ns.
  Picoseconds t4 = t3 + Picoseconds(10000000);
  CHECK(th.run(t4, Picoseconds(100000)).ns() == Approx(-3000.0 + std::sqrt(9e6 + 1.2e6)).margin(0.002));
  CHECK(th.engagements() == 2);

  pe.throttle_enabled = false;
  timing::PeThrottle off(pe);
  CHECK(off.run(Picoseconds(0), Picoseconds(1000000)) == Picoseconds(1000000));
}

TEST_CASE("bandwidth sharing: max-min fair with caps and a shared resource", "[timing]") {
  // Resources: engines of core 0 and core 1 (0.368 B/ps each), HBM 0.4 B/ps.
  timing::BandwidthSharing s({0.368, 0.368, 0.4});
  uint64_t a = s.add(1000, 0.368, {{0, 1.0}, {2, 1.0}}, 0);
  CHECK(s.rate(a) == Approx(0.368));  // alone: its own cap
  uint64_t b = s.add(400, 0.368, {{1, 1.0}, {2, 1.0}}, 1000);
  // Both on HBM: 0.4 / 2 = 0.2 each.
  CHECK(s.rate(a) == Approx(0.2));
  CHECK(s.rate(b) == Approx(0.2));
  // a moved 368 bytes in the first 1000 ps; 632 left. b finishes first: 400 / 0.2 = 2000 ps -> t = 3000.
  CHECK(s.next_finish() == Approx(3000));
  auto done = s.take_finished(3000);
  REQUIRE(done.size() == 1);
  CHECK(done[0] == b);
  // a: 632 - 0.2 x 2000 = 232 bytes left, now alone at 0.368 -> finishes at 3000 + 232 / 0.368 = 3630.43 ps.
  CHECK(s.rate(a) == Approx(0.368));
  CHECK(s.next_finish() == Approx(3000 + 232 / 0.368));
  // A flow with a small cap leaves the rest to the other: caps 0.1 and 0.368 on HBM 0.4 -> 0.1 and 0.3.
  timing::BandwidthSharing t({1, 1, 0.4});
  uint64_t x = t.add(100, 0.1, {{0, 1.0}, {2, 1.0}}, 0);
  uint64_t y = t.add(100, 0.368, {{1, 1.0}, {2, 1.0}}, 0);
  CHECK(t.rate(x) == Approx(0.1));
  CHECK(t.rate(y) == Approx(0.3));
}

TEST_CASE("bandwidth sharing: flows removed and added at one time get the rates of that set", "[timing]") {
  // The rates are recomputed once per change of the set (when read), not per flow: after a finish and two
  // adds at t = 2000 they must equal, bit for bit, those of a sharing that holds just the three flows.
  using U = timing::BandwidthSharing::Uses;
  const U core0_hbm{{0, 1.0}, {2, 0.5}}, core1_hbm{{1, 1.25}, {2, 1.0}}, core0{{0, 1.0}};
  timing::BandwidthSharing s({0.368, 0.368, 0.4});
  const uint64_t a = s.add(100, 0.3, core0_hbm, 0);
  const uint64_t b = s.add(1e6, 0.2, core1_hbm, 0);
  // a moves at its cap 0.3 and finishes at 100 / 0.3 = 333.3 ps; b (capped at 0.2) keeps moving.
  REQUIRE(s.take_finished(2000).size() == 1);
  const uint64_t c = s.add(1e6, 0.368, core0_hbm, 2000);
  const uint64_t d = s.add(1e6, 0.1, core0, 2000);
  CHECK(a != c);
  timing::BandwidthSharing fresh({0.368, 0.368, 0.4});
  const uint64_t fb = fresh.add(1e6, 0.2, core1_hbm, 0);
  const uint64_t fc = fresh.add(1e6, 0.368, core0_hbm, 0);
  const uint64_t fd = fresh.add(1e6, 0.1, core0, 0);
  CHECK(s.rate(b) == fresh.rate(fb));
  CHECK(s.rate(c) == fresh.rate(fc));
  CHECK(s.rate(d) == fresh.rate(fd));
  CHECK(s.load(2) == fresh.load(2));
  // Core 0: c (up to 0.368) and d (capped at 0.1) share 0.368 -> d 0.1, c 0.268; HBM 0.4 holds b x 1 +
  // c x 0.5 = 0.2 + 0.134.
  CHECK(s.rate(d) == Approx(0.1));
  CHECK(s.rate(c) == Approx(0.268));
  CHECK(s.rate(b) == Approx(0.2));
}

TEST_CASE("bandwidth sharing: a flow set that recurs gets the rates of that set, flow by flow", "[timing]") {
  // The rates of a set seen before come from the sharing's memo: a set of the same flows in another order is
  // another set, and each flow must get its own rate, bit for bit those of a sharing that computes them.
  using U = timing::BandwidthSharing::Uses;
  const U core0_hbm{{0, 1.0}, {2, 0.5}}, core0{{0, 1.0}};
  timing::BandwidthSharing s({0.368, 0.368, 0.4});
  s.add(100, 0.3, core0_hbm, 0);  // x, then y: the set [x, y]
  s.add(1e6, 0.1, core0, 0);
  REQUIRE(s.take_finished(1000).size() == 1);            // x finished at 333.3 ps
  const uint64_t x2 = s.add(100, 0.3, core0_hbm, 1000);  // [y, x2]
  timing::BandwidthSharing yx({0.368, 0.368, 0.4});
  const uint64_t fy = yx.add(1e6, 0.1, core0, 0);
  const uint64_t fx = yx.add(100, 0.3, core0_hbm, 0);
  CHECK(s.rate(x2) == yx.rate(fx));
  CHECK(s.next_finish() == Approx(1000 + 100 / yx.rate(fx)));
  REQUIRE(s.take_finished(2000).size() == 1);                      // x2
  CHECK(s.rate(s.add(100, 0.3, core0_hbm, 2000)) == yx.rate(fx));  // [y, x3]: the set [y, x2] again
  CHECK(yx.rate(fy) == Approx(0.1));
  CHECK(yx.rate(fx) == Approx(0.268));  // core 0: 0.368 - 0.1
}

TEST_CASE("bandwidth sharing: sets keep their rates when the flow kinds are numbered afresh", "[timing]") {
  // The memo keys a flow set by its flows' kind numbers (one per cap and uses); past 2^16 kinds they are
  // numbered afresh, the live flows' first, and the memo is dropped. Sets on either side of that must get the
  // rates of a sharing that computes them, bit for bit. Kinds here: 0 a first flow, 1 y, 2 + i the short
  // flow i; adding i = 65534 renumbers: y 0, i = 65534 1, i = 65535 2. Had y kept 1, i = 65535 would be 1
  // too, and [p, q] below (two flows of its kind) would take the rates stored for [y, i = 65535].
  using U = timing::BandwidthSharing::Uses;
  const U core0{{0, 1.0}}, core0_hbm{{0, 1.0}, {2, 0.5}};
  const auto fresh = [](const std::vector<std::pair<double, U>>& flows) {
    timing::BandwidthSharing f({0.368, 0.368, 0.4});
    std::vector<uint64_t> ids;
    for (const auto& [cap, uses] : flows) ids.push_back(f.add(1e6, cap, uses, 0));
    std::vector<double> rates;
    for (const uint64_t id : ids) rates.push_back(f.rate(id));
    return rates;
  };
  timing::BandwidthSharing s({0.368, 0.368, 0.4});
  s.add(1, 0.05, core0, 0);  // one kind before y's
  REQUIRE(s.take_finished(100).size() == 1);
  // y moves at its cap 0.1 beside every short flow below (core 0: 0.1 + at most 0.27 < 0.368) for 70000 x
  // 100 ps: 700000 bytes, then 5 more after the loop.
  const uint64_t y = s.add(700005, 0.1, core0, 100);
  double now = 100;
  int short_done = 0;
  for (int i = 0; i < 70000; ++i) {  // 70000 kinds: 1 byte at caps 0.2 + i x 1e-6, done within 100 ps
    s.add(1, 0.2 + i * 1e-6, core0_hbm, now);
    now += 100;
    short_done += static_cast<int>(s.take_finished(now).size());
  }
  CHECK(short_done == 70000);
  const double last = 0.2 + 65535 * 1e-6;
  const uint64_t p = s.add(1e6, last, core0_hbm, now);  // [y, p]
  const std::vector<double> yp = fresh({{0.1, core0}, {last, core0_hbm}});
  CHECK(s.rate(y) == yp[0]);
  CHECK(s.rate(p) == yp[1]);
  REQUIRE(s.take_finished(now + 100) == std::vector<uint64_t>{y});
  const uint64_t q = s.add(1e6, last, core0_hbm, now + 100);  // [p, q]: one kind twice
  const std::vector<double> pq = fresh({{last, core0_hbm}, {last, core0_hbm}});
  CHECK(s.rate(p) == pq[0]);
  CHECK(s.rate(q) == pq[1]);
  const uint64_t r = s.add(1e6, 0.1, core0, now + 100);  // [p, q, r]: y's kind again
  const std::vector<double> pqr = fresh({{last, core0_hbm}, {last, core0_hbm}, {0.1, core0}});
  CHECK(s.rate(p) == pqr[0]);
  CHECK(s.rate(q) == pqr[1]);
  CHECK(s.rate(r) == pqr[2]);
  // Core 0 (0.368) holds p and q at most 0.184 each beside r's 0.1 (0.268 left: 0.134 each); HBM 0.4 takes
  // p and q at 0.5 per byte (0.134 of 0.4).
  CHECK(s.rate(r) == Approx(0.1));
  CHECK(s.rate(p) == Approx(0.134));
}

TEST_CASE("costs of scalar_tensor_tensor, bn_stats, bn_aggr, affine_select and the new activations",
          "[timing]") {
  timing::CostModel cm(trn2());
  const uint32_t n = 1024;
  // scalar_tensor_tensor: tensor_tensor's rule on data and operand1 (DVE fixed_overhead_cycles = 100).
  auto stt = [&](DType t, MemSpace data, MemSpace in1, Engine e = Engine::DVE) {
    return inst(Opcode::ScalarTensorTensor, e,
                {ap(MemSpace::SBUF, t, 128, {n}), ap(data, t, 128, {n}),
                 ap(MemSpace::SBUF, DType::F32, 128, {1}), ap(in1, t, 128, {n})},
                isa::kOperand0Vector);
  };
  // Two SBUF inputs: 2N; BF16: perf_mode_tensor_tensor 2 -> 100 + 2048 / 2 = 1124; FP32: 100 + 2048 = 2148.
  CHECK(cm.engine_cost(stt(DType::BF16, MemSpace::SBUF, MemSpace::SBUF)).cycles == Cycles(1124));
  CHECK(cm.engine_cost(stt(DType::F32, MemSpace::SBUF, MemSpace::SBUF)).cycles == Cycles(2148));
  // data in PSUM, operand1 in SBUF: one input per port, N -> 100 + 1024 = 1124.
  CHECK(cm.engine_cost(stt(DType::F32, MemSpace::PSUM, MemSpace::SBUF)).cycles == Cycles(1124));
  // On GpSimd: pool fixed_overhead_cycles 150 + N x 2 inputs = 150 + 2048 = 2198.
  CHECK(cm.engine_cost(stt(DType::F32, MemSpace::SBUF, MemSpace::SBUF, Engine::POOL)).cycles == Cycles(2198));

  // bn_stats [128, 512] -> [128, 6]: one input, 100 + 512 = 612; bn_aggr of 4 chunks [128, 24]: 100 + 24 =
  // 124.
  auto stats = inst(Opcode::BnStats, Engine::DVE,
                    {ap(MemSpace::SBUF, DType::F32, 128, {6}), ap(MemSpace::SBUF, DType::BF16, 128, {512})});
  CHECK(cm.engine_cost(stats).cycles == Cycles(612));
  auto aggr = inst(Opcode::BnAggr, Engine::DVE,
                   {ap(MemSpace::SBUF, DType::F32, 128, {2}), ap(MemSpace::SBUF, DType::F32, 128, {24})});
  CHECK(cm.engine_cost(aggr).cycles == Cycles(124));

  // affine_select [128, 512]: pool fixed 150 + N = 662, as iota (NKI 2.21: "150 + N GpSimd cycles").
  auto sel = inst(Opcode::AffineSelect, Engine::POOL,
                  {ap(MemSpace::SBUF, DType::F32, 128, {512}), ap(MemSpace::SBUF, DType::F32, 128, {512})});
  CHECK(cm.engine_cost(sel).cycles == Cycles(662));

  // The new activation functions cost as any activation: ACT fixed 64 + N = 64 + 1024 = 1088.
  for (auto f : {isa::ActFunc::Sin, isa::ActFunc::Erf, isa::ActFunc::Softplus, isa::ActFunc::Floor}) {
    auto a = inst(Opcode::Activation, Engine::ACT,
                  {ap(MemSpace::SBUF, DType::F32, 128, {n}), ap(MemSpace::SBUF, DType::F32, 128, {n})});
    a.act = f;
    CHECK(cm.engine_cost(a).cycles == Cycles(1088));
  }
  // float8_e4m3 is an FP8 dtype for the DVE fast path: not fast on trn2 (100 + 1024 = 1124), 4x on trn3
  // (100 + 1024 / 4 = 356), as float8_e4m3fn.
  auto copy8 =
      inst(Opcode::TensorCopy, Engine::DVE,
           {ap(MemSpace::SBUF, DType::FP8_E4M3, 128, {n}), ap(MemSpace::SBUF, DType::FP8_E4M3, 128, {n})});
  CHECK(cm.engine_cost(copy8).cycles == Cycles(1124));
  CHECK(timing::CostModel(trn3()).engine_cost(copy8).cycles == Cycles(356));
}

TEST_CASE("costs of max8, nc_find_index8 and nc_match_replace8", "[timing][top8]") {
  // NKI 2.26's pages: "N engine cycles" for N elements per partition of src / data; with the DVE
  // fixed_overhead_cycles (100, configs/hw/trn2.json and trn3.json), no performance mode for BF16 either.
  for (const config::HwConfig* hw : {&trn2(), &trn3()}) {
    timing::CostModel cm(*hw);
    // max8 of a [128, 1024] BF16 tile: 100 + 1024 = 1124.
    auto top =
        inst(Opcode::Max8, Engine::DVE,
             {ap(MemSpace::SBUF, DType::BF16, 128, {8}), ap(MemSpace::SBUF, DType::BF16, 128, {1024})});
    CHECK(cm.engine_cost(top).cycles == Cycles(1124));
    // nc_find_index8 over data [128, 4, 64] (256 per partition): 100 + 256 = 356; vals do not count.
    auto find = inst(Opcode::NcFindIndex8, Engine::DVE,
                     {ap(MemSpace::SBUF, DType::U32, 128, {8}), ap(MemSpace::SBUF, DType::F32, 128, {4, 64}),
                      ap(MemSpace::SBUF, DType::F32, 128, {8})});
    CHECK(cm.engine_cost(find).cycles == Cycles(356));
    // nc_match_replace8 over data [128, 32000] (a vocabulary row) with dst_idx: 100 + 32000 = 32100.
    auto rep =
        inst(Opcode::NcMatchReplace8, Engine::DVE,
             {ap(MemSpace::SBUF, DType::F32, 128, {32000}), ap(MemSpace::SBUF, DType::F32, 128, {32000}),
              ap(MemSpace::SBUF, DType::F32, 128, {8}), ap(MemSpace::SBUF, DType::U32, 128, {8})});
    CHECK(cm.engine_cost(rep).cycles == Cycles(32100));
  }
}

TEST_CASE("cost of tensor_scalar_reduce", "[timing]") {
  // NKI's "max(MIN_II, N) + MIN_II": DVE fixed_overhead_cycles (100) + N + 100 for the reduction, no
  // performance mode (a BF16 tensor_scalar in SBUF has 4x): [128, 1024] BF16 -> 100 + 1024 + 100 = 1224.
  timing::CostModel cm(trn2());
  auto in = inst(Opcode::TensorScalarReduce, Engine::DVE,
                 {ap(MemSpace::SBUF, DType::BF16, 128, {1024}), ap(MemSpace::SBUF, DType::BF16, 128, {1024}),
                  isa::AccessPattern{}, ap(MemSpace::SBUF, DType::F32, 128, {1})});
  CHECK(cm.engine_cost(in).cycles == Cycles(1224));
  // The same tensor_scalar: 100 + 1024 / 4 = 356.
  auto ts =
      inst(Opcode::TensorScalar, Engine::DVE,
           {ap(MemSpace::SBUF, DType::BF16, 128, {1024}), ap(MemSpace::SBUF, DType::BF16, 128, {1024})});
  CHECK(cm.engine_cost(ts).cycles == Cycles(356));
}

TEST_CASE("costs of tensor_tensor_scan and tensor_partition_reduce", "[timing]") {
  for (const config::HwConfig* hw : {&trn2(), &trn3()}) {
    timing::CostModel cm(*hw);
    // tensor_tensor_scan, NKI's "max(MIN_II, 2N)": DVE fixed_overhead_cycles (100) + 2N, no performance mode
    // even for BF16 in SBUF: [128, 512] BF16 -> 100 + 2 * 512 = 1124.
    auto scan =
        inst(Opcode::TensorTensorScan, Engine::DVE,
             {ap(MemSpace::SBUF, DType::BF16, 128, {512}), ap(MemSpace::SBUF, DType::BF16, 128, {512}),
              ap(MemSpace::SBUF, DType::BF16, 128, {512})});
    CHECK(cm.engine_cost(scan).cycles == Cycles(1124));
    // tensor_partition_reduce on POOL: fixed_overhead_cycles (150) + N of data [128, 32, 4] (128 per
    // partition) = 278.
    auto pr =
        inst(Opcode::TensorPartitionReduce, Engine::POOL,
             {ap(MemSpace::SBUF, DType::F32, 1, {32, 4}), ap(MemSpace::SBUF, DType::F32, 128, {32, 4})});
    CHECK(cm.engine_cost(pr).cycles == Cycles(278));
  }
}

TEST_CASE("cost of nc_n_gather", "[timing]") {
  // No published cost: the POOL one-input rule over the gathered elements, fixed_overhead_cycles (150) + N of
  // dst: 64 indices per partition from a [128, 2048] data tile -> 150 + 64 = 214 (not 150 + 2048).
  timing::CostModel cm(trn2());
  auto g = inst(Opcode::NcNGather, Engine::POOL,
                {ap(MemSpace::SBUF, DType::F32, 128, {64}), ap(MemSpace::SBUF, DType::F32, 128, {2048}),
                 ap(MemSpace::SBUF, DType::U32, 128, {64})});
  CHECK(cm.engine_cost(g).cycles == Cycles(214));
}

TEST_CASE("cost of nonzero_with_count and nc_stream_shuffle", "[timing]") {
  // Neither has a published cost: each takes its engine's one-input rule over src's elements per partition
  // (ours). nonzero_with_count (POOL): fixed_overhead_cycles 150 + 4096 = 4246. nc_stream_shuffle (DVE, no
  // performance mode even for BF16): fixed_overhead_cycles 100 + 512 = 612.
  timing::CostModel cm(trn2());
  auto nz = inst(Opcode::NonzeroWithCount, Engine::POOL,
                 {ap(MemSpace::SBUF, DType::I32, 128, {4097}), ap(MemSpace::SBUF, DType::F32, 128, {4096})});
  CHECK(cm.engine_cost(nz).cycles == Cycles(4246));
  auto sh = inst(Opcode::NcStreamShuffle, Engine::DVE,
                 {ap(MemSpace::SBUF, DType::BF16, 128, {512}), ap(MemSpace::SBUF, DType::BF16, 128, {512})});
  CHECK(cm.engine_cost(sh).cycles == Cycles(612));
}
