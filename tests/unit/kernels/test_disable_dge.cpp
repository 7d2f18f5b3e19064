// The compiler's --disable-dge (Kernel::set_disable_dge): on Trn2 a DMA left to the compiler (dge_mode
// unknown) uses precomputed descriptors on the static queue sets (load on SP, store on GpSimd), as on Trn1;
// without it the hardware DGE (load on SP, store on ACT); an explicit dge_mode is kept.
#include <catch2/catch.hpp>

#include "kernels/api/nki.h"

using namespace trnsim;
using namespace trnsim::kernels;

namespace {

// One load and one store of a [128, 64] FP32 tile on one Trn2 core; `explicit_hwdge` names the load's mode.
KernelBuild load_store(bool disable_dge, bool explicit_hwdge = false) {
  return build_program(
      [=](Kernel& k) {
        k.set_disable_dge(disable_dge);
        View x = k.input("x", DType::F32, {128, 64});
        View y = k.output("y", DType::F32, {128, 64});
        View t = k.sbuf({128, 64}, DType::F32, "t");
        if (explicit_hwdge)
          nki::dma_copy(t, x, {.dge_mode = DgeMode::Hwdge});
        else
          nki::dma_copy(t, x);
        nki::dma_copy(y, t);
      },
      {default_limits(Generation::Trn2), 1});
}

const isa::Instruction& only(const KernelBuild& b, Engine e) {
  const auto& s = b.program.streams[0][static_cast<int>(e)];
  REQUIRE(s.size() == 1);
  return s[0];
}

}  // namespace

TEST_CASE("disable_dge: dge_mode unknown resolves to precomputed descriptors on Trn2") {
  const KernelBuild dflt = load_store(false);
  CHECK(only(dflt, Engine::SP).dge == isa::DgeMode::Hwdge);
  CHECK(only(dflt, Engine::ACT).dge == isa::DgeMode::Hwdge);

  const KernelBuild off = load_store(true);
  CHECK(only(off, Engine::SP).dge == isa::DgeMode::None);
  CHECK(only(off, Engine::POOL).dge == isa::DgeMode::None);
  CHECK(off.program.streams[0][static_cast<int>(Engine::ACT)].empty());

  // An explicit dge_mode is the kernel's, not the compiler's: kept.
  const KernelBuild expl = load_store(true, true);
  CHECK(only(expl, Engine::SP).dge == isa::DgeMode::Hwdge);
  CHECK(only(expl, Engine::POOL).dge == isa::DgeMode::None);
}
