// Trn1 (NeuronCore-v2) generation checks in the builder: no hardware DGE (unknown resolves to precomputed
// descriptors), no ScalarE tensor_copy, no MX matmul or quantize; the sizes of its limits.
#include <catch2/catch.hpp>

#include "kernels/api/nki.h"
#include "sim/base/error.h"

using namespace trnsim;
using namespace trnsim::kernels;

namespace {

KernelBuild build1(const KernelFn& fn) {
  return build_program(fn, {default_limits(Generation::Trn1), 1});
}

}  // namespace

TEST_CASE("trn1: limits, DMAs without hardware DGE, and the v3+ instructions refused") {
  const isa::Limits l = default_limits(Generation::Trn1);
  CHECK(l.sbuf_bytes_per_partition == 192 * 1024);  // 24 MiB SBUF (NeuronCore-v2 guide)
  CHECK(l.hbm_bytes == uint64_t{32} << 30);

  // dge_mode unknown: precomputed descriptors (none) on the compiler's static queue sets, the load on SP and
  // the store on GpSimd, as a published Trn1 NEFF places them (kernels/api/dma_mode.h); not on ACT, whose
  // share of the stores comes from the DGE blocks NeuronCore-v2 lacks.
  const KernelBuild b = build1([](Kernel& k) {
    View x = k.input("x", DType::F32, {128, 64});
    View y = k.output("y", DType::F32, {128, 64});
    View t = k.sbuf({128, 64}, DType::F32, "t");
    nki::dma_copy(t, x);
    nki::dma_copy(y, t);
  });
  const auto& sp = b.program.streams[0][static_cast<int>(Engine::SP)];
  const auto& pool = b.program.streams[0][static_cast<int>(Engine::POOL)];
  REQUIRE(sp.size() == 1);
  REQUIRE(pool.size() == 1);
  CHECK(b.program.streams[0][static_cast<int>(Engine::ACT)].empty());
  CHECK(sp[0].dge == isa::DgeMode::None);
  CHECK(pool[0].dge == isa::DgeMode::None);
  CHECK(pool[0].ops[0].space == isa::MemSpace::HBM);  // the store

  // Hardware DGE is NeuronCore-v3+.
  CHECK_THROWS_WITH(build1([](Kernel& k) {
                      View x = k.input("x", DType::F32, {128, 64});
                      View t = k.sbuf({128, 64}, DType::F32, "t");
                      nki::dma_copy(t, x, {.dge_mode = DgeMode::Hwdge});
                    }),
                    Catch::Contains("dge_mode hwdge needs NeuronCore-v3+"));
  // No ScalarE tensor_copy on v2.
  CHECK_THROWS_AS(build1([](Kernel& k) {
                    View a = k.sbuf({128, 64}, DType::F32, "a");
                    View c = k.sbuf({128, 64}, DType::F32, "c");
                    nki::memset(a, 0.0);
                    nki::tensor_copy(c, a, Engine::ACT);
                  }),
                  RuleError);
  // A BF16 PSUM result is Trn3's.
  CHECK_THROWS_WITH(build1([](Kernel& k) {
                      View s = k.sbuf({128, 128}, DType::BF16, "s");
                      View m = k.sbuf({128, 512}, DType::BF16, "m");
                      View p = k.psum({128, 512}, DType::BF16, "p");
                      nki::memset(s, 0.0);
                      nki::memset(m, 0.0);
                      nki::nc_matmul(p, s, m);
                    }),
                    Catch::Contains("float32 on Trn1"));
}
