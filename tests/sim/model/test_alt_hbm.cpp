// Another HBM model bound to the DMA system's socket (RunOptions::bind_hbm) with the example of
// tests/sim/model/alt_memory.h: it moves the simulated time by exactly its latency per HBM transfer on the
// critical path and leaves the bytes alone; a model that breaks the contract is refused with a message.
// Times from configs/hw/trn2.json with the DMA packet rate on (dma.packet_ns = 44, as in
// test_timing_mechanisms.cpp), the PE throttle and the launch delay off.
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

// HBM x [128, 16] BF16 -> SBUF (offset 0), SBUF -> SBUF (offset 64), SBUF (offset 64) -> HBM y, each from SP
// with precomputed descriptors (trigger 50 ns), each waiting for the one before through S0.
isa::Program chain() {
  isa::Program p;
  p.num_cores = 1;
  declare(p, {"x", "y"}, DType::BF16, {128, 16});
  push(p, 0,
       make(Opcode::DmaCopy, Engine::SP, {sbuf(DType::BF16, 128, {16}), hbm(0, DType::BF16, 128, 16)}, {},
            {{0, 1}}));
  push(p, 0,
       make(Opcode::DmaCopy, Engine::SP, {sbuf(DType::BF16, 128, {16}, 64), sbuf(DType::BF16, 128, {16})},
            {{0, 1}}, {{0, 1}}));
  push(p, 0,
       make(Opcode::DmaCopy, Engine::SP, {hbm(1, DType::BF16, 128, 16), sbuf(DType::BF16, 128, {16}, 64)},
            {{0, 2}}, {{0, 1}}));
  return p;
}

model::RunResult run(const isa::Program& p, const model::RunOptions& o, isa::MachineState* state = nullptr) {
  return model::run_program(p, trn2_dma_packets(), o, state);
}

model::RunOptions timing_only() {
  model::RunOptions o;
  o.numerics = false;
  return o;
}

}  // namespace

TEST_CASE("another HBM model adds its latency to each transfer that touches HBM", "[model][dma][memory]") {
  // Each transfer: trigger 50 ns, setup (dma.setup_ns 1000, + hbm.latency_ns 240 when it touches HBM), data
  // 396 ns (each of its 16 engines moves 8 packets of 32 B and the completion packet, 9 x 44 ns), then the
  // completion semaphore 10 ns, which the next one waits for:
  //   x -> SBUF 50 + 1240 + 396 + 10 = 1696; SBUF -> SBUF 50 + 1000 + 396 + 10 = 1456;
  //   SBUF -> y 1696: 4848 ns in all.
  const auto base = run(chain(), timing_only());
  CHECK(base.end_time == ps(4848000));
  // 100 ns more per HBM transaction: the first and the last transfer touch HBM, the middle one does not:
  // 4848 + 2 x 100 = 5048 ns.
  auto o = timing_only();
  o.bind_hbm = bind_fixed_latency_hbm(ps(100000));
  const auto alt = run(chain(), o);
  CHECK(alt.end_time == ps(4848000 + 2 * 100000));
  CHECK(alt.stats.cores[0].hbm_bytes_read == base.stats.cores[0].hbm_bytes_read);
  CHECK(alt.stats.cores[0].hbm_bytes_written == 4096);
}

namespace {

// Forwards to the Hbm but answers the DMA system's bandwidth query with 1 GB/s (1 byte per ns).
class SlowHbm : public Interposer {
 public:
  explicit SlowHbm(sc_core::sc_module_name name) : Interposer(name) {}

 private:
  void b_transport(tlm::tlm_generic_payload& t, sc_core::sc_time& delay) override {
    forward->b_transport(t, delay);
    if (auto* b = t.get_extension<model::HbmBandwidth>()) b->GBps = 1;
  }
};

}  // namespace

TEST_CASE("the DMA queues share the bandwidth the HBM model answers", "[model][dma][memory]") {
  auto o = timing_only();
  o.bind_hbm = [](model::HbmSockets& ends) { return interpose(std::make_unique<SlowHbm>("slow_hbm"), ends); };
  // At 1 byte per ns the 4096 bytes of x -> SBUF and of SBUF -> y take 4096 ns of data each instead of 396;
  // the SBUF -> SBUF copy does not use the HBM: 4848 + 2 x (4096 - 396) = 12248 ns.
  CHECK(run(chain(), o).end_time == ps(12248000));
}

TEST_CASE("another HBM model that forwards DMI leaves the bytes as trnsim's", "[model][dma][memory]") {
  const isa::Program p = chain();
  const auto limits = trn2_dma_packets().limits();
  std::vector<uint8_t> x(128 * 16 * 2);
  std::iota(x.begin(), x.end(), uint8_t{7});
  auto state = isa::make_machine_state(p, limits, {{0, HostBytes(x)}});
  model::RunOptions o;
  o.bind_hbm = bind_fixed_latency_hbm(ps(100000));
  run(p, o, &state);
  REQUIRE(state.hbm[1].size() == x.size());
  CHECK(std::equal(x.begin(), x.end(), state.hbm[1].data()));
}

namespace {

// BrokenMemory (alt_memory.h), answering the bandwidth query or not.
auto bind_broken(bool answers_query) {
  return [answers_query](model::HbmSockets& ends) {
    return interpose(std::make_unique<BrokenMemory>("broken_hbm", answers_query), ends);
  };
}

}  // namespace

TEST_CASE("an HBM model that denies DMI or answers an error stops the run with a message",
          "[model][dma][memory]") {
  SECTION("numerics on: no DMI to the HBM tensors") {
    model::RunOptions o;
    o.bind_hbm = bind_broken(true);
    CHECK_THROWS_WITH(run(chain(), o),
                      Catch::Contains("DMA HBM tensor 'x'") && Catch::Contains("must grant read/write DMI"));
  }
  SECTION("timing only: an error response to the bandwidth query") {
    auto o = timing_only();
    o.bind_hbm = bind_broken(false);
    CHECK_THROWS_WITH(run(chain(), o),
                      "the HBM model (lnc2.dma.hbm) answered TLM_GENERIC_ERROR_RESPONSE with a "
                      "bandwidth of 0.000000 GB/s to the DMA system's bandwidth query");
  }
  SECTION("timing only: an error response to the first transfer's timing transaction") {
    auto o = timing_only();
    o.bind_hbm = bind_broken(true);
    CHECK_THROWS_WITH(run(chain(), o),
                      Catch::StartsWith("at 50.000 ns, unknown source: core 0 SP #0 dma_copy "
                                        "(DMA queue 0): the HBM model (lnc2.dma.hbm) answered "
                                        "TLM_GENERIC_ERROR_RESPONSE"));
  }
}
