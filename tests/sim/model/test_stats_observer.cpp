// model::StatsObserver: per-opcode and per-line times, BF16-equivalent FLOPs, SBUF/PSUM peak use. The first
// cases feed records by hand (known times, no SystemC); the last runs a small program through the model and
// derives every figure from the program and the (pinned) config constants.
#include <catch2/catch.hpp>

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

constexpr int kDve = static_cast<int>(Engine::DVE);
constexpr int kPe = static_cast<int>(Engine::PE);
constexpr int kSp = static_cast<int>(Engine::SP);

// A record of `inst` on core 0 occupying [start, end) ns, having waited from `wait_start` to `start`.
model::InstructionRecord record(const isa::Instruction& inst, double start_ns, double end_ns,
                                double wait_start_ns = -1) {
  model::InstructionRecord r;
  r.engine = inst.engine;
  r.inst = &inst;
  r.start = r.issue = r.ls_start = r.ls_end = ps(static_cast<uint64_t>(start_ns * 1000));
  r.wait_start = wait_start_ns < 0 ? r.start : ps(static_cast<uint64_t>(wait_start_ns * 1000));
  r.end = ps(static_cast<uint64_t>(end_ns * 1000));
  return r;
}

isa::Instruction at_line(isa::Instruction i, uint32_t line) {
  i.loc = {1, line};
  return i;
}

config::HwConfig trn2() {
  return config::load_hw_config("trn2", {{"pe.throttle.enabled", false}});
}

}  // namespace

TEST_CASE("stats observer: per-opcode and per-line time, two source lines", "[stats]") {
  isa::Program p;
  p.num_cores = 1;
  p.files = {"?", "kernel.cpp"};
  const auto bf = DType::BF16;
  // Line 5: two tensor_copies (1000 ns and 500 ns); line 7: one tensor_tensor (250 ns) that waited 300 ns.
  const auto copy =
      at_line(make(Opcode::TensorCopy, Engine::DVE, {sbuf(bf, 128, {512}), sbuf(bf, 128, {512}, 1024)}), 5);
  const auto tt =
      at_line(make(Opcode::TensorTensor, Engine::DVE,
                   {sbuf(bf, 128, {512}), sbuf(bf, 128, {512}, 1024), sbuf(bf, 128, {512}, 2048)}),
              7);
  model::StatsObserver obs(p, trn2());
  obs.on_instruction(record(copy, 0, 1000));
  obs.on_instruction(record(copy, 1000, 1500));
  obs.on_instruction(record(tt, 1800, 2050, 1500));
  obs.finish();
  const auto& s = obs.stats();

  const auto& c = s.opcodes[kDve][static_cast<int>(Opcode::TensorCopy)];
  CHECK(c.count == 2);
  CHECK(c.total == ps(1500000));  // 1000 + 500 ns
  CHECK(s.opcodes[kDve][static_cast<int>(Opcode::TensorTensor)].count == 1);
  CHECK(s.opcodes[kDve][static_cast<int>(Opcode::TensorTensor)].total == ps(250000));
  CHECK(s.opcodes[kPe][static_cast<int>(Opcode::NcMatmul)].count == 0);

  // Busiest first: line 5 (1500 ns of the DVE's 1750), then line 7 (250 ns, 300 ns semaphore wait).
  REQUIRE(s.lines.size() == 2);
  CHECK(s.lines[0].line == 5);
  CHECK(s.lines[0].file == 1);
  CHECK(s.lines[0].engine == Engine::DVE);
  CHECK(s.lines[0].instructions == 2);
  CHECK(s.lines[0].busy == ps(1500000));
  CHECK(s.lines[0].semaphore_wait == ps(0));
  CHECK(s.lines[1].line == 7);
  CHECK(s.lines[1].instructions == 1);
  CHECK(s.lines[1].busy == ps(250000));
  CHECK(s.lines[1].semaphore_wait == ps(300000));
}

TEST_CASE("stats observer: SBUF peak follows use over time and quadrants", "[stats]") {
  isa::Program p;
  p.num_cores = 1;
  const auto bf = DType::BF16;
  // A: [0, 1024) <- [4096, 5120) during 0-1000 ns; B: [0, 1024) <- [8192, 9216) during 2000-2500 ns.
  // In use: [0, 1024) 0-2500, [4096, 5120) 0-1000, [8192, 9216) 2000-2500 -> 2048 bytes at 0 ns and again at
  // 2000 ns, although 3072 bytes are touched in all.
  const auto a = make(Opcode::TensorCopy, Engine::DVE, {sbuf(bf, 128, {512}), sbuf(bf, 128, {512}, 4096)});
  const auto b = make(Opcode::TensorCopy, Engine::DVE, {sbuf(bf, 128, {512}), sbuf(bf, 128, {512}, 8192)});
  // C: partitions 32-63 only (quadrant 1), [12288, 16384) read and written, 3000-4000 ns: 4096 bytes there.
  auto q1 = onchip(isa::MemSpace::SBUF, DType::F32, 32, {1024}, 12288, 32);
  const auto c = make(Opcode::TensorCopy, Engine::ACT, {q1, q1});
  // PSUM: 2 KiB bank 0 during 0-1000 ns, bank 1 during 500-1500 ns -> 4096 bytes at 500 ns.
  const auto m = make(Opcode::TensorCopy, Engine::ACT,
                      {psum(DType::F32, 128, {512}), psum(DType::F32, 128, {512}, 2048)});
  model::StatsObserver obs(p, trn2());
  obs.on_instruction(record(a, 0, 1000));
  obs.on_instruction(record(b, 2000, 2500));
  obs.on_instruction(record(c, 3000, 4000));
  const auto pm0 = make(Opcode::Memset, Engine::POOL, {sbuf(bf, 128, {1})});  // 2 bytes, 0-0 ns: never in use
  obs.on_instruction(record(pm0, 0, 0));
  auto m1 = record(m, 0, 1000);
  obs.on_instruction(m1);
  // The same instruction's second bank alone, later: a DMA-free way to shift one range in time.
  const auto m2 = make(Opcode::TensorCopy, Engine::ACT, {psum(DType::F32, 128, {512}, 2048)});
  obs.on_instruction(record(m2, 500, 1500));
  obs.finish();
  const auto& s = obs.stats();

  CHECK(s.sbuf.quadrant[0] == 2048);
  CHECK(s.sbuf.quadrant[1] == 4096);  // 4096 of C; A and B have ended by 3000 ns
  CHECK(s.sbuf.quadrant[2] == 2048);
  CHECK(s.sbuf.bytes_per_partition == 4096);
  CHECK(s.sbuf.at == ps(3000000));
  CHECK(s.sbuf.capacity_per_partition == 224 * 1024);
  // PSUM: bank 0 in use 0-1000 ns, bank 1 0-1500 ns (m touches it at 0 already): 4096 bytes from 0 ns.
  CHECK(s.psum.bytes_per_partition == 4096);
  CHECK(s.psum.at == ps(0));
}

TEST_CASE("stats observer: LoadStationary time and BF16-equivalent FLOPs", "[stats]") {
  isa::Program p;
  p.num_cores = 2;
  const auto mm =
      make(Opcode::NcMatmul, Engine::PE,
           {psum(DType::F32, 128, {128}), sbuf(DType::BF16, 128, {128}), sbuf(DType::BF16, 128, {128}, 256)});
  auto mm32 = mm;
  mm32.ops[1].dtype = mm32.ops[2].dtype = DType::F32;
  auto dr = mm;
  dr.flags |= isa::kDoubleRow;
  auto r = record(mm, 100, 600);
  r.ls_start = ps(0);
  r.ls_end = ps(100000);
  r.work.flops = 1000;
  model::StatsObserver obs(p, trn2());
  obs.on_instruction(r);
  auto r32 = record(mm32, 600, 1100);
  r32.work.flops = 1000;
  obs.on_instruction(r32);
  auto rdr = record(dr, 1100, 1600);
  rdr.work.flops = 1000;
  obs.on_instruction(rdr);
  obs.finish();
  const auto& s = obs.stats();
  CHECK(s.pe_flops == 3000);
  // BF16 1000 x 1 + FP32 1000 x pe.fp32_factor 4 + double_row 1000 / 2.
  CHECK(s.pe_flops_bf16_equivalent == Approx(1000 + 4000 + 500));
  CHECK(s.pe_load_stationary.count == 1);
  CHECK(s.pe_load_stationary.total == ps(100000));
  CHECK(s.opcodes[kPe][static_cast<int>(Opcode::NcMatmul)].total == ps(1500000));
  // 128 x 128 x 2 x 2.4 GHz x 2 cores.
  CHECK(s.bf16_peak_flops_per_ns == Approx(128.0 * 128 * 2 * 2.4 * 2));
}

TEST_CASE("stats observer on a model run: DMA, two matmul lines, PSUM and SBUF peaks", "[stats]") {
  // Constants pinned (the calibration may move the shipped ones): PE 2.4 GHz, MM floor 64 cycles, 1 moving
  // column and 4 LoadStationary columns per cycle, background LoadStationary, DMA trigger 50 ns (no
  // precomputed-descriptor issue cost), no launch delay.
  config::HwConfig hw = config::load_hw_config("trn2", {{"pe.throttle.enabled", false},
                                                        {"sync.kernel_launch_ns", 0},
                                                        {"dma.trigger_ns", 50},
                                                        {"dma.precomputed_issue_ns", 0},
                                                        {"pe.clock_GHz", 2.4},
                                                        {"pe.mm_init_latency_cycles", 64},
                                                        {"pe.moving_columns_per_cycle", 1},
                                                        {"pe.ls_columns_per_cycle", 4},
                                                        {"pe.ls_overlap", true}});
  isa::Program p;
  p.num_cores = 1;
  p.files = {"?", "k.cpp"};
  isa::TensorDecl x;
  x.name = "x";
  x.dtype = DType::BF16;
  x.shape = {128, 1024};
  p.tensors.push_back(x);
  // k.cpp:10 SP: HBM [128, 1024] BF16 -> SBUF [0, 2048) of every partition, then S0 += 1.
  auto load = make(Opcode::DmaCopy, Engine::SP,
                   {sbuf(DType::BF16, 128, {1024}), hbm(0, DType::BF16, 128, 1024)}, {}, {{0, 1}});
  load.loc = {1, 10};
  push(p, 0, load);
  // k.cpp:20 PE, twice after S0 >= 1: psum[0, 512) = stationary [0, 256)^T @ moving [256, 512).
  // k.cpp:21 PE, once: the same into psum [2048, 2560).
  auto mm =
      make(Opcode::NcMatmul, Engine::PE,
           {psum(DType::F32, 128, {128}), sbuf(DType::BF16, 128, {128}), sbuf(DType::BF16, 128, {128}, 256)},
           {{0, 1}});
  mm.loc = {1, 20};
  push(p, 0, mm);
  mm.waits.clear();
  push(p, 0, mm);
  mm.loc = {1, 21};
  mm.ops[0].offset_bytes = 2048;
  push(p, 0, mm);

  model::StatsObserver obs(p, hw);
  model::RunOptions o;
  o.numerics = false;
  o.observer = &obs;
  const model::RunResult r = model::run_program(p, hw, o);
  const auto& s = obs.stats();
  const auto& cs = r.stats.cores[0];

  // SP: one dma_copy trigger of 50 ns; one transfer of 128 x 2048 bytes.
  const auto& dma = s.opcodes[kSp][static_cast<int>(Opcode::DmaCopy)];
  CHECK(dma.count == 1);
  CHECK(dma.total == ps(50000));
  CHECK(cs.dma_transfers == 1);
  CHECK(cs.dma_bytes == 128u * 2048);
  // PE: 3 matmuls of N = 128: MultiplyMoving max(64, 128) = 128 cycles at 2.4 GHz = 53334 ps each; every
  // matmul has LoadStationary 128 / 4 = 32 cycles = 13334 ps. FLOPs 2 x 128^3 each.
  const auto& mmt = s.opcodes[kPe][static_cast<int>(Opcode::NcMatmul)];
  CHECK(mmt.count == 3);
  CHECK(mmt.total == ps(3 * 53334));
  CHECK(mmt.total == cs.engines[kPe].busy);
  CHECK(s.pe_load_stationary.count == 3);
  CHECK(s.pe_load_stationary.total == ps(3 * 13334));
  CHECK(s.pe_flops == 3ull * 2 * 128 * 128 * 128);
  CHECK(s.pe_flops_bf16_equivalent == Approx(3.0 * 2 * 128 * 128 * 128));
  // Peak with one core: 128 x 128 x 2 x 2.4 = 78643.2 FLOP/ns.
  CHECK(s.bf16_peak_flops_per_ns == Approx(78643.2));

  // Lines: k.cpp:20 PE 2 matmuls 106668 ps (2/3 of the PE), k.cpp:21 PE 53334 ps, k.cpp:10 SP 50000 ps.
  REQUIRE(s.lines.size() == 3);
  CHECK(s.lines[0].line == 20);
  CHECK(s.lines[0].instructions == 2);
  CHECK(s.lines[0].busy == ps(2 * 53334));
  CHECK(s.lines[1].line == 21);
  CHECK(s.lines[1].busy == ps(53334));
  CHECK(s.lines[2].line == 10);
  CHECK(s.lines[2].engine == Engine::SP);
  CHECK(s.lines[2].busy == ps(50000));
  // The first matmul waits for the DMA: the PE's semaphore wait is all line 20's.
  CHECK(s.lines[0].semaphore_wait == cs.engines[kPe].semaphore_wait);
  CHECK(s.lines[0].semaphore_wait > ps(1000000));  // the transfer costs over 1 us

  // SBUF: [0, 2048) is in use from the transfer's data start to the last matmul's end, [0, 512) of it by the
  // matmuls -> 2048 bytes per partition, reached when the data starts moving. PSUM: [0, 512) and
  // [2048, 2560) overlap in time (the third matmul's LoadStationary starts under the second's
  // MultiplyMoving) -> 1024.
  CHECK(s.sbuf.bytes_per_partition == 2048);
  CHECK(s.sbuf.quadrant[3] == 2048);
  CHECK(s.psum.bytes_per_partition == 1024);
}
