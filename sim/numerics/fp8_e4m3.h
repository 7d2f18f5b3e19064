// NKI's float8_e4m3: the IEEE-style E4M3 (1 sign, 4 exponent, 3 mantissa bits, bias 7) that NKI lists apart
// from OCP's float8_e4m3fn (NKI "Supported Data Types"; ml_dtypes' float8_e4m3 has the same layout).
// Unlike E4M3FN it keeps IEEE's special values: exponent field 15 is Inf (mantissa 0, S.1111.000) or NaN
// (S.1111.mmm, mmm != 0), so the largest finite value is S.1110.111 = 1.875 * 2^7 = 240 and the smallest
// subnormal 2^-9. Stores round to nearest even and saturate as the simulator's other FP8 stores
// (docs/program-format.md "Casts"): |x| beyond 240 and +-Inf give +-240 (0x77/0xF7), NaN gives 0x7F.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "sim/numerics/float_formats.h"

namespace trnsim::num {

inline constexpr uint8_t kE4M3MaxCode = 0x77;  // 240

inline uint8_t f32_to_e4m3(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return kFp8NaN;
  const uint32_t code = std::min(detail::encode_magnitude<3, 7>(a), uint32_t{kE4M3MaxCode});
  return static_cast<uint8_t>(code | ((u >> 24) & 0x80u));
}

inline constexpr std::array<float, 256> kE4M3IeeeToF32 = detail::make_fp8_table(3, 7, true);

// Exact; S.1111.000 gives +-Inf, the other S.1111.mmm a quiet NaN with the byte's sign.
inline float e4m3_to_f32(uint8_t b) {
  return kE4M3IeeeToF32[b];
}

}  // namespace trnsim::num
