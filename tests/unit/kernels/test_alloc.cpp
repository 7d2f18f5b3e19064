// SBUF/PSUM allocation: placement, RAII release, Trn2/Trn3 sizes, and the errors naming the kernel line.
#include <catch2/catch.hpp>

#include "kernels/api/alloc.h"
#include "kernels/api/kernel.h"
#include "sim/base/error.h"

using namespace trnsim;
using namespace trnsim::kernels;

namespace {
BuildOptions opts(Generation g, int programs = 1) {
  return {default_limits(g), programs};
}

std::string build_error(const KernelFn& fn, Generation g = Generation::Trn2) {
  try {
    build_program(fn, opts(g));
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("allocator: first fit, alignment, release and partition-disjoint sharing", "[kernels][alloc]") {
  Allocator a(128, 4096, 64);
  auto b1 = a.allocate(0, 128, 100);  // rounds to 128
  auto b2 = a.allocate(0, 128, 1000);
  REQUIRE(b1);
  REQUIRE(b2);
  CHECK(b1->offset == 0);
  CHECK(b1->bytes == 128);
  CHECK(b2->offset == 128);
  CHECK(a.largest_free(0, 128) == 4096 - 128 - 1024);
  a.release(b1->id);
  auto b3 = a.allocate(0, 64, 128);  // reuses the hole
  REQUIRE(b3);
  CHECK(b3->offset == 0);
  // Partitions 64-127 still have the hole at 0: another 64-partition block fits there.
  auto b4 = a.allocate(64, 64, 128);
  REQUIRE(b4);
  CHECK(b4->offset == 0);
  CHECK_FALSE(a.allocate(0, 128, 4096));
  CHECK_FALSE(a.allocate(100, 64, 64));  // partitions beyond 128
  CHECK(a.live() == 3);
}

TEST_CASE("sbuf tiles: offsets, RAII release, and a clear error with the kernel line", "[kernels][alloc]") {
  build_program(
      [](Kernel& k) {
        int64_t first_offset = -1;
        {
          View a = k.sbuf({128, 1000}, DType::F32, "a");  // 4000 B -> 4032 with 64-byte alignment
          View b = k.sbuf({128, 16}, DType::BF16, "b");
          first_offset = a.offset_bytes();
          CHECK(a.offset_bytes() == 0);
          CHECK(b.offset_bytes() == 4032);
        }
        View c = k.sbuf({128, 8}, DType::F32, "c");  // a and b were released
        CHECK(c.offset_bytes() == first_offset);
        View small = k.sbuf({32, 8}, DType::F32, "small");
        CHECK(small.partitions() == 32);
        CHECK(small.offset_bytes() == 64);
      },
      opts(Generation::Trn2));

  int line = 0;
  const std::string msg = build_error([&](Kernel& k) {
    View big = k.sbuf({128, 180 * 1024}, DType::U8, "big");
    line = __LINE__ + 1;
    View lhs = k.sbuf({128, 32768}, DType::BF16, "lhs");
  });
  CHECK(msg.find("test_alloc.cpp:" + std::to_string(line) +
                 ": sbuf tile 'lhs' [128 x 65536 B] does not fit: 45056 B free in partitions 0-127") !=
        std::string::npos);
  // Trn3 has 256 KiB per partition: the same tiles fit.
  CHECK(build_error(
            [](Kernel& k) {
              View big = k.sbuf({128, 180 * 1024}, DType::U8, "big");
              View lhs = k.sbuf({128, 32768}, DType::BF16, "lhs");
              CHECK(lhs.offset_bytes() == 180 * 1024);
            },
            Generation::Trn3) == "no error");
  CHECK(build_error([](Kernel& k) {
          k.sbuf({129, 4}, DType::F32, "wide");
        }).find("129 partitions") != std::string::npos);
}

TEST_CASE("psum tiles take whole banks; multi-bank tiles up to 4 banks on Trn2, any on Trn3",
          "[kernels][alloc]") {
  build_program(
      [](Kernel& k) {
        View a = k.psum({128, 128}, DType::F32, "a");  // 512 B: one bank
        View b = k.psum({128, 512}, DType::F32, "b");  // 2 KiB: the next bank
        CHECK(a.offset_bytes() == 0);
        CHECK(b.offset_bytes() == 2048);
        std::vector<View> rest;
        for (int i = 0; i < 6; ++i) rest.push_back(k.psum({128, 1}, DType::F32));
        CHECK(rest.back().offset_bytes() == 7 * 2048);
      },
      opts(Generation::Trn2));
  int line = 0;
  std::string msg = build_error([&](Kernel& k) {
    std::vector<View> banks;
    for (int i = 0; i < 8; ++i) banks.push_back(k.psum({128, 512}, DType::F32));
    line = __LINE__ + 1;
    k.psum({128, 4}, DType::F32, "ninth");
  });
  CHECK(msg.find("test_alloc.cpp:" + std::to_string(line) +
                 ": psum tile 'ninth' [128 x 16 B] does not fit: 0 B free in partitions 0-127") !=
        std::string::npos);
  // Trn2: a Vector/Scalar PSUM tile may take up to 4 banks (8 KiB per partition), placed on whole banks.
  build_program(
      [](Kernel& k) {
        View one = k.psum({128, 4}, DType::F32, "one");
        View two = k.psum({128, 1024}, DType::F32, "two");     // 4 KiB: banks 1-2
        View four = k.psum({128, 4096}, DType::BF16, "four");  // 8 KiB: banks 3-6
        CHECK(two.offset_bytes() == 2048);
        CHECK(four.offset_bytes() == 3 * 2048);
      },
      opts(Generation::Trn2));
  line = 0;
  msg = build_error([&](Kernel& k) {
    line = __LINE__ + 1;
    k.psum({128, 2049}, DType::F32, "wide");
  });
  CHECK(msg ==
        "test_alloc.cpp:" + std::to_string(line) +
            ": psum tile 'wide' [128 x 8196 B] spans more than 4 banks of 2048 B; a trn2 PSUM tile covers "
            "at most 8192 B per partition (Vector/Scalar access; a matmul output stays in one bank)");
  build_program(
      [](Kernel& k) {
        View one = k.psum({128, 4}, DType::F32, "one");
        View wide = k.psum({128, 2048}, DType::F32, "wide");  // 8 KiB: banks 1-4
        CHECK(wide.offset_bytes() == 2048);
      },
      opts(Generation::Trn3));
}
