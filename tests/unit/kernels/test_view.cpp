// Views and the access patterns they produce: exact partition, offset and strides.
#include <catch2/catch.hpp>

#include "kernels/api/kernel.h"
#include "sim/base/error.h"

using namespace trnsim;
using namespace trnsim::kernels;

namespace {
void with_kernel(const KernelFn& fn) {
  build_program(fn, {default_limits(Generation::Trn2), 1});
}

void check_dims(const isa::AccessPattern& ap, std::vector<std::pair<int64_t, uint32_t>> dims) {
  REQUIRE(ap.ndim == dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    CHECK(ap.strides[i] == dims[i].first);
    CHECK(ap.sizes[i] == dims[i].second);
  }
}
}  // namespace

TEST_CASE("hbm views: row slices, column slices with steps, transposed views", "[kernels][view]") {
  with_kernel([](Kernel& k) {
    View pad = k.input("pad", DType::F32, {4});
    View x = k.input("x", DType::BF16, {256, 512});
    isa::AccessPattern ap = x(S(128, 256), S(64, 192)).ap();
    CHECK(ap.space == isa::MemSpace::HBM);
    CHECK(ap.tensor == 1);
    CHECK(ap.dtype == DType::BF16);
    CHECK(ap.partitions == 128);
    CHECK(ap.partition_stride == 512);
    CHECK(ap.offset_bytes == (128 * 512 + 64) * 2);
    check_dims(ap, {{1, 128}});

    ap = x(S(0, 256, 2), S(1, 512, 4)).ap();
    CHECK(ap.partitions == 128);
    CHECK(ap.partition_stride == 1024);
    CHECK(ap.offset_bytes == 2);
    check_dims(ap, {{4, 128}});

    ap = x(S(0, 128), S(0, 64)).permute({1, 0}).ap();  // K on the row axis
    CHECK(ap.partitions == 64);
    CHECK(ap.partition_stride == 1);
    check_dims(ap, {{512, 128}});

    ap = x.reshape({256, 4, 128})(all, 3).ap();  // integer index drops the dim
    CHECK(ap.offset_bytes == 3 * 128 * 2);
    check_dims(ap, {{1, 128}});
    CHECK(x(7).shape() == std::vector<int64_t>{1, 512});
  });
}

TEST_CASE("hbm regions of an indexed (indirect DMA) side: whole rows, or the whole tensor for element steps",
          "[kernels][view]") {
  with_kernel([](Kernel& k) {
    View x = k.input("x", DType::BF16, {64, 256});
    // Whole-row pattern over columns [32, 96): every row, those bytes.
    View::Region r = x(S(0, 8), S(32, 96)).region(true);
    CHECK(r.r0 == 0);
    CHECK(r.r1 == 64);
    CHECK(r.c0 == 64);
    CHECK(r.c1 == 192);
    // Row stride of one element (flat element index): any byte of any row can be reached.
    r = x.reshape({64 * 256, 1})(S(0, 8)).region(true);
    CHECK(r.r0 == 0);
    CHECK(r.r1 == 64);
    CHECK(r.c0 == 0);
    CHECK(r.c1 == 512);
    // The same view without indexing touches its own 8 elements of row 0.
    r = x.reshape({64 * 256, 1})(S(0, 8)).region(false);
    CHECK(r.r0 == 0);
    CHECK(r.r1 == 1);
    CHECK(r.c0 == 0);
    CHECK(r.c1 == 16);
  });
}

TEST_CASE("sbuf views: partition ranges, free slices, reshape, bitcast", "[kernels][view]") {
  with_kernel([](Kernel& k) {
    View t = k.sbuf({128, 4, 256}, DType::F32, "t");
    isa::AccessPattern ap = t(S(32, 64), 2, S(16, 48)).ap();
    CHECK(ap.space == isa::MemSpace::SBUF);
    CHECK(ap.partition_start == 32);
    CHECK(ap.partitions == 32);
    CHECK(ap.partition_stride == 0);
    CHECK(ap.offset_bytes == (2 * 256 + 16) * 4);
    check_dims(ap, {{1, 32}});

    ap = t(all, S(1, 4, 2), S(0, 256, 8)).ap();
    CHECK(ap.offset_bytes == 256 * 4);
    check_dims(ap, {{512, 2}, {8, 32}});

    View u = k.sbuf({128, 1024}, DType::BF16, "u");
    const int64_t base = u.offset_bytes();
    check_dims(u.reshape({128, 4, 256}).ap(), {{256, 4}, {1, 256}});
    check_dims(u.reshape({128, 4, 256}).permute({0, 2, 1}).ap(), {{1, 256}, {256, 4}});
    CHECK_THROWS_AS(t(all, all, S(0, 128)).reshape({128, 512}), InputError);  // not contiguous
    CHECK_THROWS_AS(u.reshape({64, 2048}), InputError);                       // partition count
    CHECK_THROWS_AS(u.permute({1, 0}), InputError);

    // bf16 <-> u16 keeps the dims; fp8 -> x4 packs four elements into one.
    check_dims(u.bitcast(DType::U16).ap(), {{1, 1024}});
    View f8 = k.sbuf({128, 2, 512}, DType::FP8_E4M3FN, "f8");
    ap = f8.bitcast(DType::FP8_E4M3FN_X4).ap();
    CHECK(ap.dtype == DType::FP8_E4M3FN_X4);
    check_dims(ap, {{128, 2}, {1, 128}});
    CHECK_THROWS_AS(u(all, S(0, 1024, 2)).bitcast(DType::F32), InputError);
    CHECK(u(S(0, 64), S(512, 1024)).ap().offset_bytes == base + 1024);
  });
}

TEST_CASE("views from explicit patterns (the NKI front end): strides, bitcasts, bounds", "[kernels][view]") {
  with_kernel([](Kernel& k) {
    View t = k.sbuf({128, 1024}, DType::F32, "t");
    // Partitions [32, 96), a transposed [8, 16] block of a [16, 8] layout at element 40, in bytes 160.
    isa::AccessPattern ap = t.pattern(DType::F32, 160, {{0, 64}, {1, 8}, {8, 16}}, 32).ap();
    CHECK(ap.partition_start == 32);
    CHECK(ap.partitions == 64);
    CHECK(ap.offset_bytes == 160);
    check_dims(ap, {{1, 8}, {8, 16}});
    // The same bytes as BF16, a stride-0 (repeated) dim.
    ap = t.pattern(DType::BF16, 0, {{0, 128}, {0, 4}, {1, 2048}}).ap();
    CHECK(ap.dtype == DType::BF16);
    check_dims(ap, {{0, 4}, {1, 2048}});
    // One byte past the tile, and partitions past 128, are refused.
    CHECK_THROWS_AS(t.pattern(DType::F32, 4, {{0, 128}, {1, 1024}}), InputError);
    CHECK_THROWS_AS(t.pattern(DType::F32, 0, {{0, 64}, {1, 4}}, 65), InputError);
    CHECK_THROWS_AS(t.pattern(DType::F32, 0, {{0, 0}, {1, 4}}), InputError);
    // HBM: the row dim's stride is the row stride; a 1-D pattern gets a unit free dim.
    View x = k.input("x", DType::BF16, {64, 256});
    ap = x.pattern(DType::BF16, 2 * 256 * 2, {{0, 128}, {1, 256}}).ap();  // one row broadcast to 128 rows
    CHECK(ap.partitions == 128);
    CHECK(ap.partition_stride == 0);
    CHECK(ap.offset_bytes == 1024);
    ap = x.pattern(DType::BF16, 6, {{256, 64}}).ap();  // column 3 as 64 rows
    CHECK(ap.partition_stride == 256);
    check_dims(ap, {{1, 1}});
    CHECK_THROWS_AS(x.pattern(DType::BF16, 2, {{256, 64}, {1, 256}}), InputError);
    // Negative strides step backwards from the first element: the rows in reverse order (row 63 first), each
    // row's columns reversed; one row or column too many is refused.
    ap = x.pattern(DType::BF16, 63 * 512, {{-256, 64}, {1, 256}}).ap();
    CHECK(ap.partition_stride == -256);
    CHECK(ap.offset_bytes == 63 * 512);
    ap = x.pattern(DType::BF16, 510, {{256, 64}, {-1, 256}}).ap();
    check_dims(ap, {{-1, 256}});
    CHECK_THROWS_AS(x.pattern(DType::BF16, 62 * 512, {{-256, 64}, {1, 256}}), InputError);
    CHECK_THROWS_AS(x.pattern(DType::BF16, 508, {{256, 64}, {-1, 256}}), InputError);
    CHECK(t.pattern(DType::F32, 60, {{0, 128}, {-1, 16}}).ap().strides[0] == -1);
    CHECK_THROWS_AS(t.pattern(DType::F32, 56, {{0, 128}, {-1, 16}}), InputError);
    // Offsets count from the view's start: a tile allocated after t starts 4096 bytes in.
    View u = k.sbuf({128, 16}, DType::F32, "u");
    ap = u.pattern(DType::F32, 8, {{0, 2}, {1, 4}}, 3).ap();
    CHECK(ap.offset_bytes == u.offset_bytes() + 8);
    CHECK(ap.partition_start == 3);
    CHECK_THROWS_AS(u.pattern(DType::F32, 0, {{0, 128}, {1, 17}}), InputError);
  });
}

TEST_CASE("view errors and the 4-dim limit", "[kernels][view]") {
  with_kernel([](Kernel& k) {
    View t = k.sbuf({128, 2, 2, 2, 2, 2}, DType::F32, "t");
    check_dims(t.ap(), {{1, 32}});  // contiguous: merged into one dim
    View s = t(all, all, all, all, all, S(0, 1));
    CHECK(s.rank() == 6);
    check_dims(s.ap(), {{2, 16}});
    View strided = t(all, all, S(0, 2), all, S(0, 1), all);
    CHECK_NOTHROW(strided.ap());
    View five =
        k.sbuf({128, 3, 3, 3, 3, 3}, DType::F32, "five")(all, S(0, 2), S(0, 2), S(0, 2), S(0, 2), S(0, 2));
    CHECK_THROWS_WITH(five.ap(), Catch::Contains("at most 4"));
    CHECK_THROWS_WITH(t(S(0, 129)), Catch::Contains("out of range"));
    CHECK_THROWS_WITH(t(S(0, 128, 2)), Catch::Contains("contiguous"));
    CHECK_THROWS_AS(t(all, 5), InputError);
  });
}
