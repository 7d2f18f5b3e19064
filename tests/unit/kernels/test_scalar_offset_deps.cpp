// The builder's view of a scalar_offset DMA: the moved side may land on the same in-row bytes of any row of
// its tensor, so it waits for every earlier conflicting access to those bytes in any row (and later accesses
// wait for it), but not for accesses to other bytes of the rows; the API rejects misuse with clear messages.
#include <catch2/catch.hpp>

#include "kernels/api/nki.h"
#include "sim/base/error.h"

using namespace trnsim;
using namespace trnsim::kernels;

namespace {

const isa::Instruction& last(const KernelBuild& b, isa::Engine e) {
  return b.program.streams[0][static_cast<int>(e)].back();
}

// w [E=3, 4, 8] F32: one tensor row per expert. The SP queue writes rows 2..3 of expert 2's slice; then the
// ACT queue reads rows read_rows..read_rows+1 of expert 0 with a scalar_offset (the expert id in SBUF).
// Whether that read waits for the SP store; `together`: w's rows tracked in one chunk
// (Kernel::track_rows_together).
bool moved_read_waits_for_store(int read_rows, bool together) {
  const KernelBuild b = build_program(
      [&](Kernel& k) {
        View w = k.output("w", isa::DType::F32, {3, 4, 8});
        if (together) k.track_rows_together(w);
        View t = k.sbuf({2, 8}, isa::DType::F32, "t");
        View e = k.sbuf({1, 1}, isa::DType::I32, "expert");
        View r = k.sbuf({2, 8}, isa::DType::F32, "r");
        nki::memset(t, 1.0);
        nki::memset(e, 2.0);
        nki::dma_copy(w(2, S(2, 4), all), t, {.engine = isa::Engine::SP});
        nki::dma_copy(r, w(0, S(read_rows, read_rows + 2), all),
                      {.engine = isa::Engine::ACT, .scalar_offset = e});
      },
      {.limits = default_limits(isa::Generation::Trn3)});
  const isa::Instruction& rd = last(b, isa::Engine::ACT);
  REQUIRE(rd.ops[3].present());
  bool waits = false;
  for (const isa::SemWait& s : rd.waits) waits |= s.sem >= kDmaSemBase && s.sem < kDmaSemBase + 8;
  return waits;
}

}  // namespace

TEST_CASE("scalar_offset deps: a moved read waits for writes to the same in-row bytes of any row",
          "[kernels][deps]") {
  // The read of expert 0's rows 2..3 lands on the stored bytes when the offset is expert 2's (the row-0
  // placement covers rows 2..3 of every expert): it waits; rows 0..1 need not.
  CHECK(moved_read_waits_for_store(2, false));
  CHECK_FALSE(moved_read_waits_for_store(0, false));
}

TEST_CASE("scalar_offset deps: tracking a tensor's rows together keeps the same waits", "[kernels][deps]") {
  // As above, with w's dependencies tracked in one chunk of all its rows (for tensors mostly accessed
  // through a scalar_offset): the same waits; an SBUF view is rejected.
  CHECK(moved_read_waits_for_store(2, true));
  CHECK_FALSE(moved_read_waits_for_store(0, true));
  CHECK_THROWS_WITH(build_program(
                        [](Kernel& k) {
                          View t = k.sbuf({2, 8}, isa::DType::F32, "t");
                          k.track_rows_together(t);
                        },
                        {.limits = default_limits(isa::Generation::Trn3)}),
                    Catch::Contains("track_rows_together: ") && Catch::Contains("is not in HBM"));
}

TEST_CASE("scalar_offset deps: misuse is rejected by the API and the rule check", "[kernels][deps]") {
  const auto err = [](const KernelFn& fn) {
    try {
      build_program(fn, {.limits = default_limits(isa::Generation::Trn3)});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(err([](Kernel& k) {
               View w = k.input("w", isa::DType::F32, {3, 8});
               View r = k.sbuf({1, 8}, isa::DType::F32, "r");
               nki::dma_copy(r, w(S(0, 1), all), {.scalar_offset_dst = true});
             }),
             Catch::EndsWith("dma_copy: scalar_offset_dst without a scalar_offset"));
  CHECK_THAT(err([](Kernel& k) {
               View w = k.input("w", isa::DType::F32, {3, 8});
               View r = k.sbuf({1, 8}, isa::DType::F32, "r");
               View e = k.sbuf({1, 1}, isa::DType::I32, "e");
               nki::dma_copy(r, w(S(0, 1), all), {.engine = isa::Engine::POOL, .scalar_offset = e});
             }),
             Catch::Contains("scalar_offset needs a hardware-DGE DMA (triggered from SP or ACT), not POOL"));
}
