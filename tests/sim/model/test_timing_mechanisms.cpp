// The timing mechanisms of docs/timing.md on hand-written programs, each with its arithmetic from
// configs/hw/trn2.json (PE throttle and launch delay off unless a case says otherwise; ps rounded up per
// conversion): the DMA issue cost per descriptor mode, the two DGE blocks, the DMA engines' packet rate,
// strided SBUF access, the throttle counting array utilisation.
#include <catch2/catch.hpp>

#include <cmath>

#include "sim/config/hw_config.h"
#include "sim/model/run.h"
#include "tests/sim/model/model_test_util.h"

using namespace trnsim;
using namespace trnsim::test;
using isa::DType;
using isa::Engine;
using isa::Opcode;

namespace {

constexpr int kPool = static_cast<int>(Engine::POOL);
constexpr int kDve = static_cast<int>(Engine::DVE);

// The DMA times below are derived with a packet rate of dma.packet_ns = 44 ns (the mechanism, not the
// shipped value).
config::HwConfig trn2(config::Overrides o = {}) {
  return trn2_dma_packets(std::move(o));
}

model::RunResult run(const isa::Program& p, const config::HwConfig& hw) {
  model::RunOptions o;
  o.numerics = false;
  return model::run_program(p, hw, o);
}

// A program with the HBM tensor x [128, 16] BF16 (32 bytes per row).
isa::Program with_x() {
  return with_hbm_x(DType::BF16, 128, 16);
}

// x -> SBUF at byte `offset` of every partition (32 bytes per partition), issued by `e` in mode `dge`.
isa::Instruction load_x(Engine e, isa::DgeMode dge, uint8_t queue, int64_t offset) {
  auto i = make(Opcode::DmaCopy, e, {sbuf(DType::BF16, 128, {16}, offset), hbm(0, DType::BF16, 128, 16)});
  i.dge = dge;
  i.dma_queue = queue;
  return i;
}

// Two loads of x in mode `dge`: by `a` on queue 0 into byte 0, then by `b` on queue 1 into byte 64.
isa::Program two_loads(Engine a, Engine b, isa::DgeMode dge) {
  isa::Program p = with_x();
  push(p, 0, load_x(a, dge, 0, 0));
  push(p, 0, load_x(b, dge, 1, 64));
  return p;
}

// The data of one such transfer: each of its 16 engines moves 8 packets of 32 B (below the dma.packet_ns x
// bandwidth = 44 x 23 = 1012 B knee: 44 ns each) and writes the completion semaphore (one more packet):
// 9 x 44 = 396 ns.
constexpr uint64_t kData = 396000;
// dma.setup_ns + hbm.latency_ns, then the completion write (sync.semaphore_latency_ns).
constexpr uint64_t kSetup = 1240000, kWrite = 10000;

}  // namespace

TEST_CASE("DMA issue: 16 hardware-DGE DMAs from one queue take 16 issue costs plus one latency",
          "[model][dma][mechanism]") {
  isa::Program p = with_x();
  for (int k = 0; k < 16; ++k) push(p, 0, load_x(Engine::SP, isa::DgeMode::Hwdge, 0, 64 * k));
  const auto r = run(p, trn2());
  // DGE block 0 runs one instruction at a time, dma.hwdge_instruction_ns = 600 each: the last one's
  // descriptors are ready at 16 x 600 ns; its transfer then takes setup, data and the completion write (the
  // earlier transfers, 185.5 ns of data each, are done by then).
  CHECK(r.end_time == ps(16 * 600000 + kSetup + kData + kWrite));
  CHECK(r.stats.cores[0].dma_transfers == 16);
  // Switched off (0): the 50 ns trigger of precomputed descriptors, and the queue's FIFO order of data
  // bounds the run instead: the first transfer's data from 50 + 1240 ns, then 16 x 185508 ps back to back.
  const auto off = run(p, trn2({{"dma.hwdge_instruction_ns", 0}}));
  CHECK(off.end_time == ps(50000 + kSetup + 16 * kData + kWrite));
}

TEST_CASE("DMA issue: software DGE occupies GpSimd for each DMA's descriptors", "[model][dma][mechanism]") {
  isa::Program p = with_x();
  push(p, 0, load_x(Engine::POOL, isa::DgeMode::Swdge, 0, 0));
  push(p, 0, load_x(Engine::POOL, isa::DgeMode::Swdge, 0, 64));
  const auto r = run(p, trn2());
  // dma.swdge_instruction_ns = 600 of POOL time per DMA: the second is handed to its queue at 1200 ns.
  CHECK(r.stats.cores[0].engines[kPool].busy == ps(2 * 600000));
  CHECK(r.end_time == ps(2 * 600000 + kSetup + kData + kWrite));
}

TEST_CASE("DMA issue: precomputed descriptors hold the trigger's sequencer for dma.precomputed_issue_ns more",
          "[model][dma][mechanism]") {
  const isa::Program p = two_loads(Engine::SP, Engine::SP, isa::DgeMode::None);
  // dma.trigger_ns 50 + dma.precomputed_issue_ns 485 of SP per DMA (the Trn1 loops' fit): the second is
  // handed to its queue at 2 x 535 = 1070 ns, then setup, data and the completion write.
  const auto r = run(p, trn2({{"dma.precomputed_issue_ns", 485}}));
  CHECK(r.stats.cores[0].engines[static_cast<int>(Engine::SP)].busy == ps(2 * 535000));
  CHECK(r.end_time == ps(2 * 535000 + kSetup + kData + kWrite));
  // Hardware-DGE DMAs do not take it: SP's trigger stays 50 ns, the DGE block's 600 ns bound them.
  const isa::Program h = two_loads(Engine::SP, Engine::SP, isa::DgeMode::Hwdge);
  CHECK(run(h, trn2({{"dma.precomputed_issue_ns", 485}})).end_time ==
        ps(2 * 600000 + kSetup + kData + kWrite));
  // The shipped trn1 and trn2 configs carry the one fitted value.
  CHECK(config::load_hw_config("trn1", {}).dma.precomputed_issue_ns == 485);
  CHECK(config::load_hw_config("trn2", {}).dma.precomputed_issue_ns == 485);
}

TEST_CASE("DMA packet rate: a transfer takes its packets per engine, small or large",
          "[model][dma][mechanism]") {
  // y [128, 1] FP32 and z [1, 2048] FP32 in HBM, loaded with precomputed descriptors (trigger 50 ns).
  const auto program = [](uint32_t parts, uint32_t cols) {
    isa::Program p;
    p.num_cores = 1;
    declare(p, {"t"}, DType::F32, {parts, cols});
    auto i =
        make(Opcode::DmaCopy, Engine::SP, {sbuf(DType::F32, parts, {cols}), hbm(0, DType::F32, parts, cols)});
    i.dge = isa::DgeMode::None;
    i.dma_queue = 0;
    push(p, 0, i);
    return p;
  };
  // 128 partitions x 4 B (CS149 vector_add_tiled ROW_CHUNK = 128): 16 engines, each 8 packets of 4 B and the
  // semaphore write, 9 x 44 ns = 396 ns of data after the 50 ns trigger and 1240 ns setup.
  CHECK(run(program(128, 1), trn2()).end_time == ps(50000 + kSetup + 396000 + kWrite));
  // One partition x 4 B (ROW_CHUNK = 1): one engine, its packet and the semaphore write: 2 x 44 = 88 ns.
  CHECK(run(program(1, 1), trn2()).end_time == ps(50000 + kSetup + 88000 + kWrite));
  // One partition x 8 KiB: above the 1012 B knee, bandwidth-bound: 8192 / 23 + 44 = 400.17 ns (the engine
  // bytes 8192 + 1012 = 9204 at 23 B/ns = 400173.9 -> 400174 ps, at most 1 ps more from rounding).
  const auto big = run(program(1, 2048), trn2()).end_time.count();
  CHECK(big >= 50000 + kSetup + 400174 + kWrite);
  CHECK(big <= 50000 + kSetup + 400174 + kWrite + 1);
  // Switched off (0), the efficiency curve: 4 B per partition at its first point 0.06, 16 x 23 x 0.06 =
  // 22.08 B/ns for 512 B = 23188.4 -> 23189 ps.
  const auto off = run(program(128, 1), trn2({{"dma.packet_ns", 0}})).end_time.count();
  CHECK(off >= 50000 + kSetup + 23189 + kWrite);
  CHECK(off <= 50000 + kSetup + 23189 + kWrite + 1);
}

TEST_CASE("DMA issue: SP and ACT command two DGE blocks, with one block they queue",
          "[model][dma][mechanism]") {
  const isa::Program p = two_loads(Engine::SP, Engine::ACT, isa::DgeMode::Hwdge);
  // One block (dma.hwdge_blocks = 1): ACT's instruction waits for SP's, its descriptors are ready at 1200 ns;
  // its transfer starts data at 2440 ns, after the first transfer's data (1840 to 2025.5 ns).
  const auto one = run(p, trn2({{"dma.hwdge_blocks", 1}}));
  CHECK(one.end_time == ps(2 * 600000 + kSetup + kData + kWrite));
  // Two blocks: both are ready at 600 ns and move their data from 1840 ns on two queues at once: a
  // packet's cost is its setup latency, which the other queue's packets overlap, so each transfer is bound by
  // its own 9 packets per engine (396 ns) and their bytes (16 x 512 B) take a sliver of the engines' shared
  // bandwidth.
  const auto two = run(p, trn2());
  CHECK(two.end_time == ps(600000 + kSetup + kData + kWrite));
}

TEST_CASE("DMA issue: ACT's hardware DGE generates descriptors ahead, SP's after the waits",
          "[model][dma][mechanism]") {
  // Two hwdge loads from one sequencer, the second waiting for the first's completion semaphore S[3].
  const auto pair = [](Engine e) {
    isa::Program p = with_x();
    auto first = load_x(e, isa::DgeMode::Hwdge, 0, 0);
    first.updates = {{3, 1}};
    auto second = load_x(e, isa::DgeMode::Hwdge, 1, 64);
    second.waits = {{3, 1}};
    push(p, 0, first);
    push(p, 0, second);
    return p;
  };
  // The first transfer completes at 600 (DGE) + kSetup + kData + kWrite = 2246 ns.
  const uint64_t first_done = 600000 + kSetup + kData + kWrite;
  // SP: the second's descriptors are generated once its wait holds (2246 to 2846 ns), then the transfer.
  CHECK(run(pair(Engine::SP), trn2()).end_time == ps(first_done + 600000 + kSetup + kData + kWrite));
  // ACT (dma.hwdge_act_lookahead): the block takes the second instruction once ACT has reached the first
  // (0 ns) and is free (600 ns): its descriptors are ready at 1200 ns, and the transfer is queued when the
  // trigger ends, 50 ns (dma.trigger_ns) after the wait holds.
  CHECK(run(pair(Engine::ACT), trn2()).end_time == ps(first_done + 50000 + kSetup + kData + kWrite));
  // Switched off, ACT is as SP.
  CHECK(run(pair(Engine::ACT), trn2({{"dma.hwdge_act_lookahead", false}})).end_time ==
        ps(first_done + 600000 + kSetup + kData + kWrite));
}

TEST_CASE("strided SBUF access streams at half rate", "[model][mechanism]") {
  // DVE tensor_copy FP32 [128, 512] (no performance mode for FP32): 100 + 512 = 612 cycles at 0.96 GHz =
  // 637500 ps when the source's innermost stride is at most memory.strided_access_bytes = 16 B.
  const auto copy_busy = [](int64_t step, config::Overrides o = {}) {
    isa::Program p;
    p.num_cores = 1;
    auto src = sbuf(DType::F32, 128, {512}, 4096);
    src.strides[src.ndim - 1] = step;  // elements
    push(p, 0, make(Opcode::TensorCopy, Engine::DVE, {sbuf(DType::F32, 128, {512}), src}));
    return run(p, trn2(o)).stats.cores[0].engines[kDve].busy;
  };
  CHECK(copy_busy(1) == ps(637500));
  CHECK(copy_busy(4) == ps(637500));  // 16 B
  // 8 elements = 32 B: the 512 elements stream at 1 / memory.strided_access_slowdown = 1/2 rate:
  // 100 + 1024 = 1124 cycles = 1170834 ps.
  CHECK(copy_busy(8) == ps(1170834));
  CHECK(copy_busy(8, {{"memory.strided_access_slowdown", 1}}) == ps(637500));
}

TEST_CASE("PE throttle: a matmul using half the array runs at full rate under the 50 % cap",
          "[model][mechanism]") {
  // K = 64 of 128 rows, 128 stationary columns, N = 512: array utilisation 0.5, within the cap
  // (pe.throttle.cap = 0.5) from the start: LS 128 / 4 = 32 cycles = 13334 ps, MM 512 cycles = 213334 ps,
  // unstretched. (The full-array matmul of "PE throttle ramps a matmul after idle" is stretched to about 2x.)
  const auto run_k = [](uint32_t k, bool count_util) {
    isa::Program p;
    p.num_cores = 1;
    push(
        p, 0,
        make(Opcode::NcMatmul, Engine::PE,
             {psum(DType::F32, 128, {512}), sbuf(DType::BF16, k, {128}), sbuf(DType::BF16, k, {512}, 4096)}));
    return run(p, config::load_hw_config("trn2", {{"sync.kernel_launch_ns", 0},
                                                  {"pe.throttle.count_array_utilization", count_util}}));
  };
  const auto half = run_k(64, true);
  CHECK(half.end_time == ps(13334 + 213334));
  CHECK(half.stats.cores[0].pe_throttled == ps(0));
  // Counting every matmul as the full array (the switch off), it is stretched like the full-array one.
  const auto as_full = run_k(64, false);
  CHECK(as_full.stats.cores[0].pe_throttled > ps(150000));
}

TEST_CASE("DMA queue sets: one trigger engine's transfers pipeline in one in-order queue",
          "[model][dma][mechanism]") {
  // SP triggers four loads with precomputed descriptors (50 ns each: queued at 50, 100, 150, 200 ns, ready
  // kSetup later: 1290, 1340, 1390, 1440 ns), on program queues 0-3 as the builder spreads them.
  isa::Program p = with_x();
  for (uint8_t k = 0; k < 4; ++k) push(p, 0, load_x(Engine::SP, isa::DgeMode::None, k, 64 * k));
  SECTION("without queue sets: four queues, each transfer alone (the last ready at 1440 ns)") {
    const auto r = run(p, trn2({{"dma.queue_sets", false}}));
    CHECK(r.end_time == ps(200000 + kSetup + kData + kWrite));
  }
  SECTION("queue sets, descriptor_ns = 20: each transfer holds SP's queue 9 x 20 = 180 ns") {
    // Its 4096 B at 368 B/ns take 11.1 ns, so its 8 + 1 descriptors per engine hold the queue: data starts
    // at 1290, 1470, 1650, 1830 ns; each lands kData (396 ns) after its start, in order: the last at 2226 ns.
    const auto r = run(p, trn2({{"dma.queue_sets", true}, {"dma.descriptor_ns", 20}}));
    CHECK(r.end_time.count() == Approx(1830000 + kData + kWrite).margin(4));  // up to 1 ps per rounded hold
  }
  SECTION("queue sets, descriptor_ns = packet_ns (44): the queue holds each transfer to its last byte") {
    // Data starts at 1290 ns and every kData after it: the last at 1290 + 3 x 396 = 2478 ns.
    const auto r = run(p, trn2({{"dma.queue_sets", true}, {"dma.descriptor_ns", 44}}));
    CHECK(r.end_time.count() == Approx(1290000 + 4 * kData + kWrite).margin(4));
  }
}

TEST_CASE("DMA queue sets: a set holds one queue per DMA engine, so transfers on disjoint engines overlap",
          "[model][dma][mechanism]") {
  // SP triggers two loads of 64 rows of x (32 B each) with precomputed descriptors (queued at 50 and 100 ns,
  // ready at 1290 and 1340 ns): the first to partitions [0, 64), engines 0-7, the second to partitions
  // [start, start + 64). Each engine moves 8 packets of 32 B and the completion write: 9 x 44 = 396 ns; with
  // descriptor_ns = packet_ns (44) its 8 + 1 descriptors per engine hold the queue as long.
  const auto two_halves = [](uint32_t start) {
    isa::Program p = with_x();
    auto first =
        make(Opcode::DmaCopy, Engine::SP, {sbuf(DType::BF16, 64, {16}), hbm(0, DType::BF16, 64, 16)});
    first.dge = isa::DgeMode::None;
    auto second = first;
    second.ops[0].partition_start = start;
    second.ops[1].offset_bytes = 64 * 32;
    second.dma_queue = 1;
    push(p, 0, first);
    push(p, 0, second);
    return run(p, trn2({{"dma.queue_sets", true}, {"dma.descriptor_ns", 44}})).end_time;
  };
  // Partitions [64, 128), engines 8-15: its own queues, it moves from its ready time, 1340 + 396 ns, and
  // writes its completion 10 ns later.
  CHECK(two_halves(64) == ps(1340000 + kData + kWrite));
  // Partitions [32, 96), engines 4-11: it waits on engines 4-7 for the first to let go (1290 + 396 ns).
  CHECK(two_halves(32) == ps(1290000 + 2 * kData + kWrite));
}
