// The critical path of a model run (sim/model/critical_path.h): which steps and links it walks, and that the
// charges sum to the total time. Times derived from configs/hw/trn2.json with the PE throttle and the launch
// delay off; ps values rounded up per conversion as ClockDomain::to_time does.
#include <catch2/catch.hpp>

#include <string>

#include "sim/config/hw_config.h"
#include "sim/model/run.h"
#include "sim/model/stats_observer.h"
#include "tests/sim/model/model_test_util.h"

using namespace trnsim;
using namespace trnsim::test;
using isa::DType;
using isa::Engine;
using isa::Opcode;

namespace {

// The DMA steps are derived with a packet rate of 44 ns (the mechanism, not the shipped value).
config::HwConfig trn2() {
  return trn2_dma_packets();
}

struct Traced {
  model::RunResult run;
  model::CriticalPathSummary path;
};

Traced run_traced(const isa::Program& p, const config::HwConfig& hw = trn2()) {
  model::StatsObserver obs(p, hw);
  model::RunOptions o;
  o.numerics = false;
  o.observer = &obs;
  Traced t{model::run_program(p, hw, o), {}};
  t.path = obs.stats().critical_path;
  return t;
}

Picoseconds time_of(const model::CriticalPathSummary& s, const std::string& key) {
  for (const auto& [k, v] : s.time)
    if (k == key) return v;
  return Picoseconds();
}

}  // namespace

TEST_CASE("critical path: DVE -> ACT through a semaphore, each with its completion latency",
          "[model][critical]") {
  isa::Program p;
  p.num_cores = 1;
  // DVE tensor_copy BF16, N = 1024, 4x mode: 100 + 256 = 356 cycles at 0.96 GHz = 370834 ps, results posted
  // 199 cycles (207292 ps) later at 578126; S[1] reaches ACT 10 ns later, at 588126.
  push(p, 0,
       make(Opcode::TensorCopy, Engine::DVE,
            {sbuf(DType::BF16, 128, {1024}), sbuf(DType::BF16, 128, {1024}, 2048)}, {}, {{1, 1, false}}));
  // ACT activation N = 1024: 64 + 1024 = 1088 cycles at 1.2 GHz = 906667 ps, results 199 cycles (165834 ps)
  // later: the run ends at 588126 + 906667 + 165834 = 1660627.
  push(p, 0,
       make(Opcode::Activation, Engine::ACT,
            {sbuf(DType::BF16, 128, {1024}, 8192), sbuf(DType::BF16, 128, {1024}, 2048)}, {{1, 1}}, {}));
  const Traced t = run_traced(p);
  CHECK(t.run.end_time == ps(1660627));
  CHECK(t.path.length == t.run.end_time);
  CHECK(t.path.steps == 2);
  CHECK(time_of(t.path, "core0 DVE") == ps(578126));
  CHECK(time_of(t.path, "link: semaphore latency") == ps(10000));
  CHECK(time_of(t.path, "core0 ACT") == ps(906667 + 165834));
  REQUIRE(t.path.segments.size() == 2);
  CHECK(t.path.segments[1].via == "S[1] <- core0 DVE");
}

TEST_CASE("critical path: a background LoadStationary links to the one before it, not to the launch",
          "[model][critical]") {
  isa::Program p = with_hbm_x(DType::BF16, 128, 2048);
  // Two matmuls, N_moving = 512: LoadStationary 128 / 4 = 32 cycles at 2.4 GHz = 13334 ps, MultiplyMoving 512
  // cycles = 213334 ps. LS #0 [0, 13334]; MM #0 from 13334; LS #1 loads in its background from 13334 (the
  // end of LS #0 and the start of MM #0) to 26668 and then adds 1 to S[5] (its stationary is latched).
  auto mm = make(
      Opcode::NcMatmul, Engine::PE,
      {psum(DType::F32, 128, {512}), sbuf(DType::BF16, 128, {128}), sbuf(DType::BF16, 128, {512}, 4096)});
  push(p, 0, mm);
  mm.ls_updates = {{5, 1}};
  mm.ops[0].offset_bytes = 2048;
  push(p, 0, mm);
  // SP: a load that overwrites the stationary, after S[5] >= 1 (at 26668 + 10 ns = 36668): trigger 50 ns,
  // setup 1000 + HBM latency 240 ns, 4 KiB per partition: each engine 8 x 4096 / 23 B/ns and its semaphore
  // packet (dma.packet_ns 44) = 1468696 ps, completion write 10 ns: the run ends at 36668 + 50000 + 1240000 +
  // 1468696 + 10000 = 2805364, after the matmuls (453336).
  push(p, 0,
       make(Opcode::DmaCopy, Engine::SP, {sbuf(DType::BF16, 128, {2048}), hbm(0, DType::BF16, 128, 2048)},
            {{5, 1}}, {}));
  const Traced t = run_traced(p);
  CHECK(t.run.end_time == ps(2805364));
  CHECK(t.path.length == t.run.end_time);
  // LS #0, LS #1 (program order), the trigger (S[5]), the transfer (its trigger): no launch link.
  CHECK(t.path.steps == 4);
  CHECK(time_of(t.path, "link: launch") == Picoseconds());
  CHECK(time_of(t.path, "core0 PE LoadStationary") == ps(2 * 13334));
  CHECK(time_of(t.path, "link: semaphore latency") == ps(10000));
  CHECK(time_of(t.path, "core0 SP") == ps(50000));
  CHECK(time_of(t.path, "link: dma setup") == ps(1240000));
  CHECK(time_of(t.path, "core0 DMA q0") == ps(1468696 + 10000));
}

TEST_CASE("critical path: program order hands over when the engine moves on, before results are posted",
          "[model][critical]") {
  // Core 1: iota (150 + 512 = 662 cycles at 1.2 GHz = 551667 ps; results posted 199 cycles = 165834 ps
  // later, at 717501), then its barrier, which the engine reaches at 551667, before the iota's results:
  // it signals core 0 at 551667 + 100 ns = 651667. Core 0: barrier at 0, released at 651667, then iota,
  // ending at 651667 + 551667 + 165834 = 1369168.
  const Traced t = run_traced(barrier_after_iota());
  CHECK(t.run.end_time == ps(1369168));
  CHECK(t.path.length == t.run.end_time);
  // core1 iota -> core1 barrier (program order, at 551667) -> its signal -> core0 barrier -> core0 iota.
  CHECK(t.path.steps == 4);
  CHECK(time_of(t.path, "link: launch") == Picoseconds());
  CHECK(time_of(t.path, "core1 POOL") == ps(551667));
  CHECK(time_of(t.path, "core0 POOL") == ps(100000 + 551667 + 165834));
}

TEST_CASE("critical path: barriers that release each other link through the last arrival's signal",
          "[model][critical]") {
  isa::Program p;
  // Both barriers arrive at 0 and signal each other: both release at 100 ns. Core 1's iota then ends at
  // 100000 + 551667 + 165834 = 817501.
  push(p, 0, core_barrier());
  push(p, 1, core_barrier());
  push(p, 1, pool_iota());
  const Traced t = run_traced(p);
  CHECK(t.run.end_time == ps(817501));
  CHECK(t.path.length == t.run.end_time);
  // core0 barrier's arrival (nothing before it) -> its signal -> core1 barrier (100 ns) -> core1 iota.
  CHECK(t.path.steps == 3);
  CHECK(time_of(t.path, "link: launch") == Picoseconds());
  CHECK(time_of(t.path, "core1 POOL") == ps(100000 + 551667 + 165834));
}

TEST_CASE("critical path: a pipelined queue (dma.queue_sets) hands over at each transfer's queue release",
          "[model][critical][dma]") {
  // SP triggers four loads of x [128, 16] BF16 (32 B per partition) with precomputed descriptors, 50 ns each:
  // queued at 50-200 ns, ready dma.setup_ns + hbm.latency_ns = 1240 ns later. With queue sets they share
  // SP's queue, and descriptor_ns = 20 holds it 8 + 1 descriptors per engine x 20 = 180 ns per transfer:
  // data starts at 1290, 1470, 1650, 1830 ns, each landing 9 packets x 44 ns = 396 ns after its start, the
  // last at 2226 ns, its completion write 10 ns later.
  isa::Program p = with_hbm_x(DType::BF16, 128, 16);
  for (uint8_t k = 0; k < 4; ++k) {
    auto i = make(Opcode::DmaCopy, Engine::SP,
                  {sbuf(DType::BF16, 128, {16}, 64 * k), hbm(0, DType::BF16, 128, 16)});
    i.dge = isa::DgeMode::None;
    i.dma_queue = k;
    push(p, 0, i);
  }
  const Traced t = run_traced(p, trn2_dma_packets({{"dma.queue_sets", true}, {"dma.descriptor_ns", 20}}));
  const auto& path = t.path;
  CHECK(t.run.end_time == ps(2236000));
  CHECK(path.length == t.run.end_time);
  // SP's first trigger, its setup, then the four transfers through queue order: each of the first three
  // hands over when the next one starts (180 ns after its own start), not when its last byte lands (the
  // first would be charged its 396 ns and the last 190 ns); the last runs 396 ns and its completion write.
  CHECK(path.steps == 5);
  CHECK(time_of(path, "core0 SP") == ps(50000));
  CHECK(time_of(path, "link: dma setup") == ps(1240000));
  CHECK(time_of(path, "core0 DMA q0") == ps(180000));
  CHECK(time_of(path, "core0 DMA q1") == ps(180000));
  CHECK(time_of(path, "core0 DMA q2") == ps(180000));
  CHECK(time_of(path, "core0 DMA q3") == ps(396000 + 10000));
}
