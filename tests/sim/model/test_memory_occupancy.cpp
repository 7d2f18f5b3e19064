// model::MemoryOccupancy: SBUF/PSUM use over time from records fed by hand (known times, no SystemC). The
// stats' peaks and the trace's occupancy counters both come from it.
#include <catch2/catch.hpp>

#include <utility>
#include <vector>

#include "sim/model/memory_occupancy.h"
#include "tests/sim/model/model_test_util.h"

using namespace trnsim;
using namespace trnsim::test;
using isa::DType;
using isa::Engine;
using isa::Opcode;

namespace {

model::InstructionRecord record(const isa::Instruction& inst, uint64_t start_ns, uint64_t end_ns,
                                int core = 0) {
  model::InstructionRecord r;
  r.core = core;
  r.engine = inst.engine;
  r.inst = &inst;
  r.start = r.issue = r.ls_start = r.ls_end = ps(start_ns * 1000);
  r.end = ps(end_ns * 1000);
  return r;
}

std::vector<std::pair<uint64_t, uint64_t>> ns_steps(const std::vector<model::UseStep>& s) {
  std::vector<std::pair<uint64_t, uint64_t>> v;
  for (const auto& u : s) v.emplace_back(u.t.count() / 1000, u.bytes);
  return v;
}

}  // namespace

TEST_CASE("memory occupancy: use over time per core, the largest quadrant at each time", "[stats]") {
  const auto bf = DType::BF16;
  // Core 0, every quadrant: A [0, 1024) <- [4096, 5120) during 0-1000 ns; B [0, 1024) <- [8192, 9216) during
  // 2000-2500 ns. In use: [0, 1024) 0-2500 (reused after a gap: in use during it), [4096, 5120) 0-1000,
  // [8192, 9216) 2000-2500. C: quadrant 1 only, [12288, 16384) during 3000-4000 ns.
  const auto a = make(Opcode::TensorCopy, Engine::DVE, {sbuf(bf, 128, {512}), sbuf(bf, 128, {512}, 4096)});
  const auto b = make(Opcode::TensorCopy, Engine::DVE, {sbuf(bf, 128, {512}), sbuf(bf, 128, {512}, 8192)});
  auto q1 = onchip(isa::MemSpace::SBUF, DType::F32, 32, {1024}, 12288, 32);
  const auto c = make(Opcode::TensorCopy, Engine::ACT, {q1, q1});
  // PSUM on core 1: banks 0 and 1 (2 KiB each) during 0-1000 ns, bank 1 again during 500-1500 ns.
  const auto m = make(Opcode::TensorCopy, Engine::ACT,
                      {psum(DType::F32, 128, {512}), psum(DType::F32, 128, {512}, 2048)});
  const auto m2 = make(Opcode::TensorCopy, Engine::ACT, {psum(DType::F32, 128, {512}, 2048)});
  model::MemoryOccupancy occ;
  occ.on_instruction(record(a, 0, 1000));
  occ.on_instruction(record(b, 2000, 2500));
  occ.on_instruction(record(c, 3000, 4000));
  occ.on_instruction(record(m, 0, 1000, 1));
  occ.on_instruction(record(m2, 500, 1500, 1));

  // Quadrant 0: 1024 + 1024 at 0, 1024 at 1000, 1024 + 1024 at 2000, 0 at 2500; quadrant 1 adds 4096 during
  // 3000-4000.
  using V = std::vector<std::pair<uint64_t, uint64_t>>;
  CHECK(ns_steps(occ.use_over_time(0, isa::MemSpace::SBUF)) ==
        V{{0, 2048}, {1000, 1024}, {2000, 2048}, {2500, 0}, {3000, 4096}, {4000, 0}});
  CHECK(occ.use_over_time(0, isa::MemSpace::PSUM).empty());
  CHECK(occ.use_over_time(1, isa::MemSpace::SBUF).empty());
  // Bank 0 0-1000, bank 1 0-1500.
  CHECK(ns_steps(occ.use_over_time(1, isa::MemSpace::PSUM)) == V{{0, 4096}, {1000, 2048}, {1500, 0}});

  // The peaks are the largest steps: SBUF 4096 first at 3000 ns (quadrant 1), PSUM 4096 at 0 (core 1).
  const model::MemoryPeak sb = occ.peak(isa::MemSpace::SBUF, 100);
  CHECK(sb.bytes_per_partition == 4096);
  CHECK(sb.at == ps(3000000));
  CHECK(sb.quadrant == std::array<uint64_t, 4>{2048, 4096, 2048, 2048});
  CHECK(sb.capacity_per_partition == 100);
  const model::MemoryPeak pm = occ.peak(isa::MemSpace::PSUM, 16384);
  CHECK(pm.bytes_per_partition == 4096);
  CHECK(pm.at == ps(0));
}
