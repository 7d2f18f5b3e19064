// Another SBUF or PSUM model bound to a core's initiators (RunOptions::bind_sbuf / bind_psum) with the
// example of tests/sim/model/alt_memory.h: each instruction and DMA transfer with operands in that memory
// waits exactly the model's latency once, the bytes stay trnsim's, and a model that breaks the contract is
// refused with a message. Times from configs/hw/trn2.json with the DMA packet rate on (dma.packet_ns = 44),
// the PE throttle and the launch delay off (model_test_util.h: trn2_dma_packets).
#include <catch2/catch.hpp>

#include <systemc>

#include <numeric>

#include "sim/base/error.h"
#include "sim/isa/semantics.h"
#include "tests/sim/model/alt_memory.h"
#include "tests/sim/model/model_test_util.h"

using namespace trnsim;
using namespace trnsim::test;
using isa::DType;
using isa::Engine;
using isa::Opcode;

namespace {

constexpr uint64_t kExtra = 100000;  // ps: the example model's latency per transaction

// One PE nc_matmul: PSUM [128, 128] F32 <- SBUF stationary [128, 128] BF16 x SBUF moving [128, 128] BF16.
isa::Instruction one_matmul() {
  return make(
      Opcode::NcMatmul, Engine::PE,
      {psum(DType::F32, 128, {128}), sbuf(DType::BF16, 128, {128}), sbuf(DType::BF16, 128, {128}, 4096)});
}

// x [128, 16] BF16 from HBM into SBUF, then back out to y, the store waiting for the load through S0.
isa::Program load_store() {
  isa::Program p;
  p.num_cores = 1;
  declare(p, {"x", "y"}, DType::BF16, {128, 16});
  push(p, 0,
       make(Opcode::DmaCopy, Engine::SP, {sbuf(DType::BF16, 128, {16}), hbm(0, DType::BF16, 128, 16)}, {},
            {{0, 1}}));
  push(p, 0,
       make(Opcode::DmaCopy, Engine::SP, {hbm(1, DType::BF16, 128, 16), sbuf(DType::BF16, 128, {16})},
            {{0, 1}}));
  return p;
}

isa::Program one(const isa::Instruction& i) {
  isa::Program p;
  p.num_cores = 1;
  push(p, 0, i);
  return p;
}

struct Bound {
  bool sbuf = false, psum = false;
};

// The run's end in ps with the example model bound in place of the SBUF and/or the PSUM; `made` receives
// the models' transaction counts.
uint64_t end_ps(const isa::Program& p, Bound b, std::vector<std::shared_ptr<int>>* made = nullptr) {
  model::RunOptions o;
  o.numerics = false;
  if (b.sbuf) o.bind_sbuf = bind_fixed_latency_onchip(ps(kExtra), made);
  if (b.psum) o.bind_psum = bind_fixed_latency_onchip(ps(kExtra), made);
  return model::run_program(p, trn2_dma_packets(), o).end_time.count();
}

}  // namespace

TEST_CASE("another SBUF or PSUM model holds each engine instruction by its latency", "[model][memory]") {
  SECTION("POOL iota (SBUF only): + 100 ns with the SBUF model, unchanged with the PSUM's") {
    // 150 + 512 = 662 cycles at 1.2 GHz = 551667 ps, its results posted 199 cycles = 165834 ps later
    // (test_critical_path.cpp): 717501 ps.
    const isa::Program p = one(pool_iota());
    CHECK(end_ps(p, {}) == 717501);
    std::vector<std::shared_ptr<int>> made;
    CHECK(end_ps(p, {true, false}, &made) == 717501 + kExtra);
    REQUIRE(made.size() == 2);  // core 0's and core 1's SBUF models
    CHECK(*made[0] == 1);
    CHECK(*made[1] == 0);
    made.clear();
    CHECK(end_ps(p, {false, true}, &made) == 717501);
    CHECK(*made[0] == 0);  // the iota has no PSUM operand: no transaction
  }
  SECTION("PE nc_matmul: its MultiplyMoving waits for each memory's latency") {
    // LoadStationary 128 / 4 = 32 cycles = 13334 ps, MultiplyMoving max(64, 128) = 128 cycles = 53334 ps at
    // 2.4 GHz (test_model.cpp). One transaction per memory it touches (SBUF: the stationary and moving
    // operands; PSUM: its result) holds the MultiplyMoving's start: + 100 ns each.
    const isa::Program p = one(one_matmul());
    CHECK(end_ps(p, {}) == 13334 + 53334);
    CHECK(end_ps(p, {true, false}) == 13334 + kExtra + 53334);
    CHECK(end_ps(p, {false, true}) == 13334 + kExtra + 53334);
    CHECK(end_ps(p, {true, true}) == 13334 + 2 * kExtra + 53334);
  }
}

TEST_CASE("another SBUF model adds its latency to each DMA transfer's setup", "[model][dma][memory]") {
  // Each transfer: trigger 50 ns, setup 1000 + hbm.latency_ns 240, data 396 ns (9 packets of 44 ns per DMA
  // engine), completion semaphore 10 ns, which the store waits for (test_alt_hbm.cpp):
  // 2 x (50 + 1240 + 396 + 10) = 3392 ns. Both touch the SBUF: + 2 x 100 ns with its model; the PSUM's sees
  // no transaction.
  const isa::Program p = load_store();
  CHECK(end_ps(p, {}) == 3392000);
  CHECK(end_ps(p, {true, false}) == 3392000 + 2 * kExtra);
  std::vector<std::shared_ptr<int>> made;
  CHECK(end_ps(p, {false, true}, &made) == 3392000);
  CHECK(*made[0] == 0);
}

TEST_CASE("another SBUF model on each core times a sendrecv's src and dst there", "[model][dma][memory]") {
  // Core 0's POOL sends SBUF [128, 16] BF16 to core 1's SBUF (offset 64): trigger 50 ns, setup 1000 (no HBM),
  // data 396 ns (9 packets of 44 ns per DMA engine), completion on the peer core sync.cross_core_latency_ns
  // 100 later: 1546 ns. Its src is read from core 0's SBUF and its dst written to core 1's: one transaction
  // to each core's model, + 2 x 100 ns. (Before, both operands went to core 0's model as one transaction and
  // core 1's saw none.)
  isa::Program p;
  p.num_cores = 2;
  push(p, 0,
       make(Opcode::SendRecv, Engine::POOL, {sbuf(DType::BF16, 128, {16}, 64), sbuf(DType::BF16, 128, {16})},
            {}, {{0, 1}}));
  CHECK(end_ps(p, {}) == 1546000);
  std::vector<std::shared_ptr<int>> made;
  CHECK(end_ps(p, {true, false}, &made) == 1546000 + 2 * kExtra);
  REQUIRE(made.size() == 2);
  CHECK(*made[0] == 1);  // core 0's SBUF model: the src
  CHECK(*made[1] == 1);  // core 1's: the dst
}

TEST_CASE("another SBUF model that forwards DMI leaves the bytes as trnsim's", "[model][memory]") {
  const isa::Program p = load_store();
  const auto limits = trn2_dma_packets().limits();
  std::vector<uint8_t> x(128 * 16 * 2);
  std::iota(x.begin(), x.end(), uint8_t{3});
  auto state = isa::make_machine_state(p, limits, {{0, HostBytes(x)}});
  model::RunOptions o;
  o.bind_sbuf = bind_fixed_latency_onchip(ps(kExtra));
  o.bind_psum = bind_fixed_latency_onchip(ps(kExtra));
  model::run_program(p, trn2_dma_packets(), o, &state);
  REQUIRE(state.hbm[1].size() == x.size());
  CHECK(std::equal(x.begin(), x.end(), state.hbm[1].data()));
}

namespace {

// BrokenMemory (alt_memory.h): no DMI, an error response to every timing transaction.
std::unique_ptr<sc_core::sc_module> bind_broken(model::OnChipSockets& ends) {
  return interpose(std::make_unique<BrokenMemory>(onchip_name("broken", ends).c_str(), false), ends);
}

}  // namespace

TEST_CASE("an SBUF or PSUM model that denies DMI or answers an error stops the run with a message",
          "[model][memory]") {
  SECTION("numerics on: no DMI to the SBUF") {
    model::RunOptions o;
    o.bind_sbuf = bind_broken;
    CHECK_THROWS_WITH(model::run_program(one(pool_iota()), trn2_dma_packets(), o),
                      Catch::Contains("core 0 PE SBUF") && Catch::Contains("must grant read/write DMI"));
  }
  SECTION("timing only: an engine's access") {
    model::RunOptions o;
    o.numerics = false;
    o.bind_sbuf = bind_broken;
    CHECK_THROWS_WITH(
        model::run_program(one(pool_iota()), trn2_dma_packets(), o),
        "at 0.000 ns, unknown source: core 0 POOL #0 iota: the SBUF model (lnc2.core0_POOL.sbuf) "
        "answered TLM_GENERIC_ERROR_RESPONSE to the access's timing transaction");
  }
  SECTION("timing only: a DMA transfer's access") {
    model::RunOptions o;
    o.numerics = false;
    o.bind_sbuf = bind_broken;
    CHECK_THROWS_WITH(
        model::run_program(load_store(), trn2_dma_packets(), o),
        Catch::StartsWith("at 50.000 ns, unknown source: core 0 SP #0 dma_copy (DMA queue 0): the "
                          "SBUF model (lnc2.dma.core0_sbuf) answered TLM_GENERIC_ERROR_RESPONSE"));
  }
}
