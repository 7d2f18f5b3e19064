#include "sim/isa/element.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "sim/base/error.h"
#include "sim/isa/int_range.h"
#include "sim/isa/semantics.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/fp8_e4m3.h"

namespace trnsim::isa {
namespace {

template <typename T>
T read_as(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void write_as(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// RNE to integer, saturated to int_range(t); NaN -> 0. Below 2^23 in magnitude, adding and subtracting 2^23
// rounds |v| to an integer with the FP32 adder's round-to-nearest-even (the default mode, as std::nearbyint);
// larger magnitudes are integers already. No libm call: this runs for every element of an integer store.
int64_t float_to_int(float v, DType t) {
  const auto [lo, hi] = int_range(t);
  if (std::isnan(v)) return 0;
  const float a = std::fabs(v);
  const double r = a < 0x1p23f ? std::copysign((a + 0x1p23f) - 0x1p23f, v) : v;
  if (r <= static_cast<double>(lo)) return lo;
  if (r >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(r);
}

uint8_t f32_to_e8m0_floor(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  if (std::isnan(v) || std::isinf(v) || (u >> 31) != 0) return (u & 0x7FFFFFFFu) == 0 ? 0x00 : 0xFF;
  return static_cast<uint8_t>(u >> 23);
}

}  // namespace

bool is_x4(DType t) {
  return t == DType::FP8_E4M3FN_X4 || t == DType::FP8_E5M2_X4;
}
bool is_fp8(DType t) {
  return t == DType::FP8_E4M3FN || t == DType::FP8_E5M2 || t == DType::FP8_E4M3;
}
bool is_int(DType t) {
  switch (t) {
    case DType::I32:
    case DType::U32:
    case DType::I16:
    case DType::U16:
    case DType::I8:
    case DType::U8:
      return true;
    default:
      return false;
  }
}

float load_element(DType t, const uint8_t* p) {
  switch (t) {
    case DType::F32:
      return read_as<float>(p);
    case DType::BF16:
      return num::bf16_to_f32(read_as<uint16_t>(p));
    case DType::FP16:
      return num::fp16_to_f32(read_as<uint16_t>(p));
    case DType::FP8_E4M3FN:
      return num::fp8_to_f32(*p, num::Fp8Format::E4M3FN);
    case DType::FP8_E5M2:
      return num::fp8_to_f32(*p, num::Fp8Format::E5M2);
    case DType::FP8_E4M3:
      return num::e4m3_to_f32(*p);
    case DType::E8M0:
      return num::e8m0_to_f32(*p);
    case DType::I32:
      return static_cast<float>(read_as<int32_t>(p));
    case DType::U32:
      return static_cast<float>(read_as<uint32_t>(p));
    case DType::I16:
      return static_cast<float>(read_as<int16_t>(p));
    case DType::U16:
      return static_cast<float>(read_as<uint16_t>(p));
    case DType::I8:
      return static_cast<float>(read_as<int8_t>(p));
    case DType::U8:
      return static_cast<float>(*p);
    case DType::FP8_E4M3FN_X4:
    case DType::FP8_E5M2_X4:
      break;
  }
  throw RuleError(fmt::format("{} elements are packed FP8 and have no single value", dtype_name(t)));
}

void split_fill(DType t, double v, float& imm0, float& imm1) {
  imm0 = static_cast<float>(v);
  imm1 = 0.f;
  const bool wide =
      t == DType::I32 ? v >= INT32_MIN && v <= INT32_MAX : t == DType::U32 && v >= 0 && v <= UINT32_MAX;
  if (wide && v == std::nearbyint(v) && static_cast<double>(imm0) != v)
    imm1 = static_cast<float>(v - static_cast<double>(imm0));
}

void store_element(DType t, uint8_t* p, float v) {
  switch (t) {
    case DType::F32:
      write_as(p, v);
      return;
    case DType::BF16:
      write_as(p, num::f32_to_bf16(v));
      return;
    case DType::FP16:
      write_as(p, num::f32_to_fp16(v));
      return;
    case DType::FP8_E4M3FN:
      *p = num::f32_to_fp8(v, num::Fp8Format::E4M3FN, true);
      return;
    case DType::FP8_E5M2:
      *p = num::f32_to_fp8(v, num::Fp8Format::E5M2, true);
      return;
    case DType::FP8_E4M3:
      *p = num::f32_to_e4m3(v);
      return;
    case DType::E8M0:
      *p = f32_to_e8m0_floor(v);
      return;
    case DType::I32:
      write_as(p, static_cast<int32_t>(float_to_int(v, DType::I32)));
      return;
    case DType::U32:
      write_as(p, static_cast<uint32_t>(float_to_int(v, DType::U32)));
      return;
    case DType::I16:
      write_as(p, static_cast<int16_t>(float_to_int(v, DType::I16)));
      return;
    case DType::U16:
      write_as(p, static_cast<uint16_t>(float_to_int(v, DType::U16)));
      return;
    case DType::I8:
      write_as(p, static_cast<int8_t>(float_to_int(v, DType::I8)));
      return;
    case DType::U8:
      *p = static_cast<uint8_t>(float_to_int(v, DType::U8));
      return;
    case DType::FP8_E4M3FN_X4:
    case DType::FP8_E5M2_X4:
      break;
  }
  throw RuleError(fmt::format("{} elements are packed FP8 and have no single value", dtype_name(t)));
}

int64_t load_element_int(DType t, const uint8_t* p) {
  switch (t) {
    case DType::I32:
      return read_as<int32_t>(p);
    case DType::U32:
      return read_as<uint32_t>(p);
    case DType::I16:
      return read_as<int16_t>(p);
    case DType::U16:
      return read_as<uint16_t>(p);
    case DType::I8:
      return read_as<int8_t>(p);
    case DType::U8:
      return *p;
    default:
      break;
  }
  const float v = load_element(t, p);
  if (std::isnan(v)) return 0;
  const double tr = std::trunc(static_cast<double>(v));
  if (tr >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (tr <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(tr);
}

void store_element_int(DType t, uint8_t* p, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  switch (t) {
    case DType::I32:
    case DType::U32:
      write_as(p, static_cast<uint32_t>(u));
      return;
    case DType::I16:
    case DType::U16:
      write_as(p, static_cast<uint16_t>(u));
      return;
    case DType::I8:
    case DType::U8:
      *p = static_cast<uint8_t>(u);
      return;
    default:
      store_element(t, p, static_cast<float>(v));
  }
}

}  // namespace trnsim::isa
