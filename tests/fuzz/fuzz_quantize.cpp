// Fuzzes MX quantization (`trnsim quantize`: sim/numerics/mx.h, scale_layout.h) on arbitrary arrays.
// Input: byte 0 picks the FP8 format, scale rule, axis, input dtype (float32 or raw BF16) and thread count
// (1..4); byte 1 the shape (the blocked dim 32, 64, 96 or 128, the other 32 or 64 or 1..8; byte 2 odd
// makes the blocked dim 1..8 too, which quantize must refuse); the rest are the array's bytes (repeated to
// fill it). Checks: output bytes are the same for 1 and N threads and equal quantize_block on each block;
// BF16 input equals its exact float32 widening; dequantize runs; the TE scale layouts round-trip. No code
// path depends on a size beyond these (each dim splits into 1-4 parts; the BF16 table path starts at 2^22
// elements), so the other dim stops at 64: an input costs at most 8192 elements, each quantized and
// dequantized twice under the coverage counters.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sim/numerics/mx.h"
#include "sim/numerics/scale_layout.h"
#include "tests/fuzz/fuzz_check.h"

using namespace trnsim;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return -1;
  const uint8_t opt = data[0];
  const auto fmt = (opt & 1) ? num::Fp8Format::E5M2 : num::Fp8Format::E4M3FN;
  const num::ScaleRule rule = ((opt >> 1) & 3) == 1   ? num::ScaleRule::Ocp
                              : ((opt >> 1) & 3) == 2 ? num::ScaleRule::Te
                                                      : num::ScaleRule::Trn3;
  const auto axis = (opt & 8) ? num::MxAxis::Col : num::MxAxis::Row;
  const bool bf16 = opt & 16;
  const int threads = 1 + ((opt >> 5) & 3);  // 1..4
  const bool row = axis == num::MxAxis::Row;
  // Dim codes 0..15: the blocked dim 32 * (code % 4 + 1), the other 32 * (code % 2 + 1); or 1..8 (code >= 8)
  // on the non-blocked dim, and on the blocked dim too when byte 2 is odd (quantize must refuse that).
  const int rc = data[1] & 15, cc = data[1] >> 4;
  const int bc = row ? cc : rc, oc = row ? rc : cc;
  const bool bad_blocked = bc >= 8 && (data[2] & 1);
  const int64_t blocked = bad_blocked ? bc - 7 : (bc % 4 + 1) * 32;
  const int64_t other = oc < 8 ? (oc % 2 + 1) * 32 : oc - 7;
  const int64_t rows = row ? other : blocked, cols = row ? blocked : other;
  const uint8_t* payload = data + 3;
  const size_t psize = size - 3;
  const int64_t n = rows * cols;

  std::vector<float> x(static_cast<size_t>(n));
  std::vector<uint16_t> xb(static_cast<size_t>(n));
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * (bf16 ? 2 : 4));
  // The payload repeated: copied once, then the filled prefix doubled.
  if (psize > 0) {
    size_t filled = std::min(psize, bytes.size());
    std::memcpy(bytes.data(), payload, filled);
    while (filled < bytes.size()) {
      const size_t k = std::min(filled, bytes.size() - filled);
      std::memcpy(bytes.data() + filled, bytes.data(), k);
      filled += k;
    }
  }
  if (bf16) {
    std::memcpy(xb.data(), bytes.data(), bytes.size());
    for (int64_t i = 0; i < n; ++i) x[i] = num::bf16_to_f32(xb[i]);
  } else {
    std::memcpy(x.data(), bytes.data(), bytes.size());
  }

  std::vector<uint8_t> q1(n), s1(n / 32 + 1), qn(n), sn(n / 32 + 1);
  const auto quantize = [&](uint8_t* q, uint8_t* s, int t) {
    if (bf16)
      num::quantize(xb.data(), rows, cols, axis, fmt, rule, q, s, t);
    else
      num::quantize(x.data(), rows, cols, axis, fmt, rule, q, s, t);
  };
  if (bad_blocked) {
    bool refused = false;
    fuzz::run(size, [&] {
      try {
        quantize(q1.data(), s1.data(), 1);
      } catch (const InputError&) {
        refused = true;
        throw;
      }
    });
    if (!refused) fuzz::die("quantize", "accepted a blocked dim that is not a multiple of 32");
    return 0;
  }
  quantize(q1.data(), s1.data(), 1);
  quantize(qn.data(), sn.data(), threads);
  if (q1 != qn || s1 != sn) fuzz::die("quantize", "results depend on the thread count");

  // Each block against quantize_block (float) or quantize_block_bf16.
  const int64_t nblocks = n / 32;
  for (int64_t b = 0; b < nblocks; ++b) {
    float vf[32];
    uint16_t vb[32];
    int64_t idx[32];
    for (int k = 0; k < 32; ++k) {
      idx[k] = row ? b * 32 + k : ((b / cols) * 32 + k) * cols + b % cols;
      vf[k] = x[idx[k]];
      vb[k] = xb[idx[k]];
    }
    uint8_t out[32];
    const uint8_t s =
        bf16 ? num::quantize_block_bf16(vb, out, fmt, rule) : num::quantize_block(vf, out, fmt, rule);
    if (s != s1[b]) fuzz::die("quantize", "scale differs from quantize_block");
    for (int k = 0; k < 32; ++k)
      if (out[k] != q1[idx[k]]) fuzz::die("quantize", "element differs from quantize_block");
    if (bf16) {
      uint8_t outf[32];
      if (num::quantize_block(vf, outf, fmt, rule) != s || std::memcmp(outf, out, 32) != 0)
        fuzz::die("quantize", "BF16 input differs from its float32 widening");
    }
  }

  std::vector<float> d1(n), dn(n);
  num::dequantize(q1.data(), s1.data(), rows, cols, axis, fmt, d1.data(), 1);
  num::dequantize(q1.data(), s1.data(), rows, cols, axis, fmt, dn.data(), threads);
  if (std::memcmp(d1.data(), dn.data(), n * sizeof(float)) != 0)
    fuzz::die("dequantize", "results depend on the thread count");

  if (rows % 32 == 0 && cols % 32 == 0) {
    const num::ScaleShape te = num::te_scale_shape(rows, cols, axis);
    std::vector<uint8_t> t(te.size()), back(nblocks);
    num::to_te_compact(s1.data(), rows, cols, axis, t.data());
    num::from_te_compact(t.data(), rows, cols, axis, back.data());
    if (std::memcmp(back.data(), s1.data(), nblocks) != 0)
      fuzz::die("TE compact layout", "does not round-trip");
    num::to_te_swizzled(s1.data(), rows, cols, axis, t.data());
    num::from_te_swizzled(t.data(), rows, cols, axis, back.data());
    if (std::memcmp(back.data(), s1.data(), nblocks) != 0)
      fuzz::die("TE swizzled layout", "does not round-trip");
  }
  return 0;
}
