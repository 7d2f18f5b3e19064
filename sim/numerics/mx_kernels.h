// The inner loops of MX quantization (mx.h), internal to sim/numerics: the scalar code and AVX2 and AVX-512
// versions of it that give the same bytes (integer operations, one exact-or-RNE FP32 multiply and one FP32
// add per element, the same as the scalar code; the file is built with -ffp-contract=off so no multiply is
// fused into an add).
#pragma once

#include <bit>
#include <cstdint>

#include "sim/numerics/mx_isa.h"

namespace trnsim::num::mxk {

// Key whose maximum over a block drives the scale: abs bits; Te drops NaN elements (TE's fmaxf amax).
template <ScaleRule R>
inline uint32_t abs_key(float v) {
  const uint32_t a = std::bit_cast<uint32_t>(v) & 0x7FFFFFFFu;
  if constexpr (R == ScaleRule::Te) return a > 0x7F800000u ? 0u : a;
  return a;
}

inline float load(float v) {
  return v;
}
inline float load(uint16_t v) {
  return bf16_to_f32(v);
}

// In: float (FP32) or uint16_t (BF16 bits).
template <class In>
struct Kernels {
  // One contiguous block of 32: its FP8 bytes to out[0, 32); returns its E8M0 scale byte.
  uint8_t (*block)(const In* v, uint8_t* out);
  // n contiguous blocks: block() of each, its scale byte to scales[b].
  void (*blocks)(const In* v, int64_t n, uint8_t* out, uint8_t* scales);
  // key[c] = max(key[c], abs_key(row[c])) for c in [0, n).
  void (*keys)(const In* row, int64_t n, uint32_t* key);
  // out[c] = satfinite FP8 of row[c] * mult[c] for c in [0, n).
  void (*encode)(const In* row, const float* mult, int64_t n, uint8_t* out);
};

// The kernels of `isa`; a level the host lacks gives the scalar ones (mx_host_isa() says which it has).
template <Fp8Format F, ScaleRule R, class In>
Kernels<In> kernels(MxIsa isa);

}  // namespace trnsim::num::mxk
