// Reads of on-chip memory nothing wrote (kernels/api/written.h): the map of written bytes, and the builder's
// warnings at the reading instruction's line.
#include <catch2/catch.hpp>

#include "kernels/api/assume_written.h"
#include "kernels/api/nki.h"
#include "kernels/api/written.h"

using namespace trnsim;
using namespace trnsim::kernels;

namespace {

using Miss = std::optional<std::pair<int64_t, int64_t>>;

KernelBuild build(const KernelFn& fn, int programs = 1) {
  return build_program(fn, {default_limits(Generation::Trn2), programs});
}

}  // namespace

TEST_CASE("WrittenMap: parts, merging and the first unwritten byte", "[kernels][written]") {
  WrittenMap m;
  CHECK(m.first_unwritten({0, 128, 0, 256}) == Miss(std::make_pair(int64_t{0}, int64_t{0})));
  m.mark({0, 128, 0, 128});
  CHECK(m.first_unwritten({0, 128, 0, 128}) == std::nullopt);
  CHECK(m.first_unwritten({0, 128, 64, 256}) == Miss(std::make_pair(int64_t{0}, int64_t{128})));
  m.mark({0, 128, 128, 256});  // the second half: one range again
  CHECK(m.ranges() == 1);
  CHECK(m.first_unwritten({0, 128, 0, 256}) == std::nullopt);
  // Partitions 64-127 of bytes 256-512, then 0-63: the first read misses partition 0 (bytes first).
  m.mark({64, 128, 256, 512});
  CHECK(m.first_unwritten({0, 128, 300, 400}) == Miss(std::make_pair(int64_t{0}, int64_t{300})));
  CHECK(m.first_unwritten({64, 128, 300, 400}) == std::nullopt);
  m.mark({0, 64, 256, 512});
  CHECK(m.ranges() == 1);
  CHECK(m.first_unwritten({0, 128, 0, 512}) == std::nullopt);
  // A write inside a range of fewer partitions splits it; empty rectangles change nothing.
  m.mark({0, 1, 1000, 1010});
  m.mark({1, 2, 1004, 1006});
  CHECK(m.first_unwritten({0, 2, 1004, 1006}) == std::nullopt);
  CHECK(m.first_unwritten({0, 2, 1000, 1010}) == Miss(std::make_pair(int64_t{1}, int64_t{1000})));
  m.mark({0, 0, 0, 4096});
  CHECK(m.first_unwritten({0, 1, 600, 601}) == Miss(std::make_pair(int64_t{0}, int64_t{600})));
}

TEST_CASE("builder: a read of unwritten SBUF warns at its line, once", "[kernels][written]") {
  int line = 0, t_line = 0;
  KernelBuild b = build([&](Kernel& k) {
    View x = k.input("x", DType::F32, {128, 64});
    View y = k.output("y", DType::F32, {128, 64});
    t_line = __LINE__ + 1;
    View t = k.sbuf({128, 64}, DType::F32, "t");
    View u = k.sbuf({128, 64}, DType::F32, "u");
    nki::dma_copy(t.slice(1, 0, 32), x.slice(1, 0, 32));
    for (int i = 0; i < 3; ++i) {
      line = __LINE__ + 1;
      nki::tensor_copy(u, t);  // bytes 128-255 of each partition of t were never written
    }
    nki::dma_copy(y, u);
  });
  REQUIRE(b.warnings.size() == 1);
  CHECK(b.warnings[0] ==
        "test_written.cpp:" + std::to_string(line) +
            ": tensor_copy reads sbuf 't' [128, 64] float32 allocated at test_written.cpp:" +
            std::to_string(t_line) +
            " where no instruction wrote before (partition 0, "
            "byte "
            "128 of the read is the first such): its values are undefined (a tile starts uninitialised, as "
            "numpy.empty's contents; trnsim's memory starts as NaN)");
}

TEST_CASE("builder: an accumulation group's first matmul reads nothing, later ones what it wrote",
          "[kernels][written]") {
  KernelBuild b = build(
      [](Kernel& k) {
        View x = k.input("x", DType::BF16, {128, 128});
        View y = k.output("y", DType::F32, {128, 128});
        View a = k.sbuf({128, 128}, DType::BF16, "a");
        View p = k.psum({128, 128}, DType::F32, "p");
        View o = k.sbuf({128, 128}, DType::F32, "o");
        nki::dma_copy(a, x);
        nki::nc_matmul(p, a, a);
        nki::nc_matmul(p, a, a, {.accumulate = true});
        nki::tensor_copy(o, p);
        nki::dma_copy(y, o);
      },
      2);
  CHECK(b.warnings.empty());
}

TEST_CASE("builder: bytes a kernel assumes written do not warn", "[kernels][written]") {
  KernelBuild b = build([](Kernel& k) {
    View y = k.output("y", DType::F32, {128, 64});
    View t = k.sbuf({128, 64}, DType::F32, "t");
    View u = k.sbuf({128, 64}, DType::F32, "u");
    assume_written(t);
    nki::tensor_copy(u, t);
    nki::dma_copy(y, u);
  });
  CHECK(b.warnings.empty());
}
