// The builder's shortcuts for HBM tensors: reads of a kernel input that nothing on the core wrote wait for
// nothing and leave no record (a weight read every block would pile up records), so the first write to such
// an input after those reads waits for everything before it; reads after a write are tracked as usual.
#include <catch2/catch.hpp>

#include "kernels/api/nki.h"

using namespace trnsim;
using namespace trnsim::kernels;

namespace {

std::vector<isa::SemWait> waits_of_last(const KernelBuild& b, isa::Engine e) {
  return b.program.streams[0][static_cast<int>(e)].back().waits;
}

bool waits_on_queue(const std::vector<isa::SemWait>& w, int queue, uint32_t value) {
  for (const auto& s : w)
    if (s.sem == kDmaSemBase + queue && s.value >= value) return true;
  return false;
}

}  // namespace

TEST_CASE("input reads: an unwritten input's reads wait for nothing; a later write to it waits for them",
          "[kernels][deps]") {
  const KernelBuild b = build_program(
      [](Kernel& k) {
        View w = k.input("w", isa::DType::F32, {4, 64});
        View t = k.sbuf({4, 64}, isa::DType::F32, "t");
        View u = k.sbuf({4, 64}, isa::DType::F32, "u");
        View v = k.sbuf({4, 64}, isa::DType::F32, "v");
        nki::memset(v, 2.0);
        nki::dma_copy(t, w, {.queue = 0});  // SP queue 0: a read of w
        nki::dma_copy(u, w, {.queue = 1});  // queue 1: a read of w, no wait
        // A write of w from an unrelated tile: it waits for both reads (and the memset of v).
        nki::dma_copy(w, v, {.engine = isa::Engine::ACT, .queue = 8});
      },
      {.limits = default_limits(isa::Generation::Trn3)});
  const auto& sp = b.program.streams[0][static_cast<int>(isa::Engine::SP)];
  REQUIRE(sp.size() == 2);
  CHECK(sp[1].waits.empty());
  const auto w = waits_of_last(b, isa::Engine::ACT);
  CHECK(waits_on_queue(w, 0, 1));
  CHECK(waits_on_queue(w, 1, 1));
}

TEST_CASE("input reads: after a write, reads of the input are ordered after it", "[kernels][deps]") {
  const KernelBuild b = build_program(
      [](Kernel& k) {
        View w = k.input("w", isa::DType::F32, {4, 64});
        View t = k.sbuf({4, 64}, isa::DType::F32, "t");
        nki::memset(t, 1.0);
        nki::dma_copy(w, t, {.engine = isa::Engine::ACT, .queue = 8});  // write first
        nki::dma_copy(t, w, {.queue = 0});                              // RAW on the write
      },
      {.limits = default_limits(isa::Generation::Trn3)});
  CHECK(waits_on_queue(waits_of_last(b, isa::Engine::SP), 8, 1));
}
