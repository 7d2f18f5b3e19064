// OperandView's row forms (load_row, store_row, load_row_int, store_row_int) against the per-element
// load / store / load_int / store_int (load_element, store_element, ...): every dtype, contiguous and strided
// rows, adversarial values, byte for byte, including the bytes between strided elements.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "isa_test_util.h"
#include "sim/isa/operand_view.h"

using namespace trnsim::isa;
using namespace trnsim::isa::test;

namespace {

constexpr DType kNumberTypes[] = {DType::F32,      DType::BF16, DType::FP16, DType::FP8_E4M3FN,
                                  DType::FP8_E5M2, DType::E8M0, DType::I32,  DType::U32,
                                  DType::I16,      DType::U16,  DType::I8,   DType::U8};

constexpr uint32_t kRows = 128;

// FP32 values around every edge of the store conversions: NaNs of both signs (quiet and signalling),
// infinities, signed zeros, FP32 subnormals, the FP8 and BF16 maxima and their rounding ties, integer bounds
// of every int dtype with their neighbours and halves (RNE ties), the 2^23 / 2^24 / 2^31 / 2^32 edges, then
// hashed bit patterns of every kind.
std::vector<float> adversarial_floats() {
  std::vector<float> v;
  for (uint32_t bits :
       {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0x7F800000u, 0xFF800000u,
        0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x807FFFFFu, 0x00800000u,
        0x80800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x3F808000u, 0x3F818000u, 0x3F807FFFu, 0x3F808001u})
    v.push_back(std::bit_cast<float>(bits));
  const double edges[] = {
      0.5,     1.5,        2.5,     127,          128,      255,           256,          32767,  32768,
      65535,   65536,      448,     464,          480,      57344,         61440,        0x1p23, 0x1p23 + 1,
      0x1p24,  0x1p24 + 2, 0x1p31,  0x1p31 - 128, 0x1p32,   0x1p32 - 256,  0x1p-6,       0x1p-9, 0x1p-10,
      0x1p-14, 0x1p-16,    0x1p-17, 0x1p-126,     0x1p-127, 3.0 * 0x1p-10, 3.0 * 0x1p-17};
  for (double e : edges)
    for (double d : {-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0})
      for (double s : {1.0, -1.0}) {
        const float f = static_cast<float>(s * (e + d));
        v.push_back(f);
        v.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
        v.push_back(std::nextafter(f, -std::numeric_limits<float>::infinity()));
      }
  uint32_t h = 2463534242u;
  while (v.size() < kRows * 96) {
    h ^= h << 13;
    h ^= h >> 17;
    h ^= h << 5;
    v.push_back(std::bit_cast<float>(h));  // every exponent, NaN patterns included
    // Magnitudes within the integer and FP8 ranges, with a fraction.
    v.push_back(std::ldexp(static_cast<float>(h & 0xFFFFF), static_cast<int>(h >> 27) - 4) *
                ((h & 0x100000u) != 0 ? -1.0f : 1.0f));
  }
  return v;
}

std::vector<int64_t> adversarial_ints() {
  std::vector<int64_t> v = {0,
                            -1,
                            1,
                            127,
                            128,
                            -128,
                            -129,
                            255,
                            256,
                            32767,
                            32768,
                            -32768,
                            -32769,
                            65535,
                            65536,
                            INT32_MAX,
                            INT32_MIN,
                            int64_t{1} << 31,
                            -(int64_t{1} << 31) - 1,
                            int64_t{1} << 32,
                            (int64_t{1} << 32) + 5,
                            (int64_t{1} << 24) + 1,
                            INT64_MAX,
                            INT64_MIN,
                            -(int64_t{1} << 40) - 3};
  uint64_t h = 88172645463325252ull;
  while (v.size() < kRows * 96) {
    h ^= h << 13;
    h ^= h >> 7;
    h ^= h << 17;
    v.push_back(static_cast<int64_t>(h) >> (h & 63));  // every magnitude
  }
  return v;
}

// Row layouts over kRows partitions of `cols` elements: one byte run, one byte run split in two free dims,
// every other element, and reversed.
std::vector<AccessPattern> layouts(DType t, uint32_t cols) {
  const int64_t ds = dtype_size(t);
  return {sbuf(0, kRows, 64, t, {{1, cols}}), sbuf(0, kRows, 0, t, {{cols / 2, 2}, {1, cols / 2}}),
          sbuf(0, kRows, 8, t, {{2, cols}}), sbuf(0, kRows, (cols - 1) * ds, t, {{-1, cols}})};
}

// Trn2 limits with 16 KiB partitions (room for every layout, little memory to copy and compare).
Limits small_sbuf() {
  Limits l = trn2();
  l.sbuf_bytes_per_partition = 16 * 1024;
  return l;
}

struct Fixture {
  Limits limits = small_sbuf();
  Program program;
  MachineState state = make_machine_state(program, limits);
  OperandView view(const AccessPattern& ap) { return OperandView(ap, 0, program, limits, state, "t", "x"); }
};

// Raw element codes covering every code of 1- and 2-byte dtypes and hashed 4-byte codes.
void fill_codes(OperandView& v, uint32_t seed) {
  const uint32_t ds = dtype_size(v.dtype());
  uint32_t h = seed;
  for (uint32_t r = 0; r < v.rows(); ++r)
    for (uint64_t c = 0; c < v.cols(); ++c) {
      h = h * 1664525u + 1013904223u;
      const uint32_t code = ds == 4 ? h : static_cast<uint32_t>(r * v.cols() + c);
      std::memcpy(v.at(r, c), &code, ds);
    }
}

// Index of the first byte where a and b differ, -1 if none (comparing whole memories in a message is too
// slow).
int64_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return ia == a.end() && ib == b.end() ? -1 : ia - a.begin();
}

// The row store `store_row(v, r, values)` leaves SBUF with the same bytes as `store(v, r, c, value)` on every
// element of the rows (from the same poisoned SBUF).
template <class T, class Elem, class Row>
void check_row_store(OperandView& v, Fixture& f, const std::vector<T>& x, Elem store, Row store_row) {
  const uint64_t cols = v.cols();
  const std::vector<uint8_t> poison = f.state.cores[0].sbuf;
  for (uint32_t r = 0; r < kRows; ++r)
    for (uint64_t c = 0; c < cols; ++c) store(v, r, c, x[r * cols + c]);
  const std::vector<uint8_t> want = f.state.cores[0].sbuf;
  f.state.cores[0].sbuf = poison;
  for (uint32_t r = 0; r < kRows; ++r) store_row(v, r, &x[r * cols]);
  CHECK(first_difference(f.state.cores[0].sbuf, want) == -1);
}

}  // namespace

TEST_CASE("store_row equals store element for element: every dtype, contiguous and strided", "[isa]") {
  const std::vector<float> x = adversarial_floats();
  const uint32_t cols = 96;
  for (DType t : kNumberTypes)
    for (const AccessPattern& ap : layouts(t, cols)) {
      INFO(dtype_name(t) << " stride " << ap.strides[ap.ndim - 1]);
      Fixture f;
      OperandView v = f.view(ap);
      REQUIRE(v.cols() == cols);
      check_row_store(
          v, f, x, [](OperandView& w, uint32_t r, uint64_t c, float e) { w.store(r, c, e); },
          [](OperandView& w, uint32_t r, const float* row) { w.store_row(r, row); });
    }
}

TEST_CASE("load_row equals load element for element: every dtype and code, contiguous and strided", "[isa]") {
  for (DType t : kNumberTypes) {
    // 512 columns x 128 rows = 65536 elements: every code of the 1- and 2-byte dtypes.
    const uint32_t cols = 512;
    for (const AccessPattern& ap : layouts(t, cols)) {
      INFO(dtype_name(t) << " stride " << ap.strides[ap.ndim - 1]);
      Fixture f;
      OperandView v = f.view(ap);
      fill_codes(v, 7);
      std::vector<float> row(cols);
      int64_t bad = 0;
      for (uint32_t r = 0; r < kRows; ++r) {
        v.load_row(r, row.data());
        for (uint64_t c = 0; c < cols; ++c)
          bad += std::bit_cast<uint32_t>(row[c]) == std::bit_cast<uint32_t>(v.load(r, c)) ? 0 : 1;
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("store_row_int and load_row_int equal store_int / load_int: every dtype", "[isa]") {
  const std::vector<int64_t> x = adversarial_ints();
  const uint32_t cols = 96;
  for (DType t : kNumberTypes)
    for (const AccessPattern& ap : layouts(t, cols)) {
      INFO(dtype_name(t) << " stride " << ap.strides[ap.ndim - 1]);
      Fixture f;
      OperandView v = f.view(ap);
      REQUIRE(v.cols() == cols);
      check_row_store(
          v, f, x, [](OperandView& w, uint32_t r, uint64_t c, int64_t e) { w.store_int(r, c, e); },
          [](OperandView& w, uint32_t r, const int64_t* row) { w.store_row_int(r, row); });

      fill_codes(v, 11);
      std::vector<int64_t> row(cols);
      int64_t bad = 0;
      for (uint32_t r = 0; r < kRows; ++r) {
        v.load_row_int(r, row.data());
        for (uint64_t c = 0; c < cols; ++c) bad += row[c] == v.load_int(r, c) ? 0 : 1;
      }
      CHECK(bad == 0);
    }
}

TEST_CASE("store_row to integers: RNE ties, saturation and NaN give the documented bytes", "[isa]") {
  Fixture f;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {2.5f, -2.5f, 3.5f, nan, inf, -inf, 0x1p31f, -0x1p31f, 32767.5f, -0.5f};
  OperandView i32 = f.view(sbuf(0, 1, 0, DType::I32, {{1, 10}}));
  i32.store_row(0, in.data());
  const std::vector<int32_t> want32 = {2, -2, 4, 0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 32768, 0};
  for (uint64_t c = 0; c < 10; ++c) CHECK(get<int32_t>(i32.at(0, c)) == want32[c]);
  OperandView i16 = f.view(sbuf(0, 1, 64, DType::I16, {{1, 10}}));
  i16.store_row(0, in.data());
  const std::vector<int16_t> want16 = {2, -2, 4, 0, 32767, -32768, 32767, -32768, 32767, 0};
  for (uint64_t c = 0; c < 10; ++c) CHECK(get<int16_t>(i16.at(0, c)) == want16[c]);
  OperandView u8 = f.view(sbuf(0, 1, 128, DType::U8, {{1, 10}}));
  u8.store_row(0, in.data());
  const std::vector<uint8_t> want8 = {2, 0, 4, 0, 255, 0, 255, 0, 255, 0};
  for (uint64_t c = 0; c < 10; ++c) CHECK(*u8.at(0, c) == want8[c]);
}
