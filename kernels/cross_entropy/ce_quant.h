// MXFP8 pieces of cross_entropy_bwd: MX scale rules made of ALU operations on SBUF tiles, and writers of
// E8M0 scale tiles into TransformerEngine's compact or GEMM-swizzled scale tensors (sim/numerics/
// scale_layout.h gives both layouts; the writers express them as strided DMA patterns).
//
// TE rule on chip (reference: TransformerEngine's float_to_e8m0 and its MXFP8 cast kernels), from BF16 data:
//   key   = ((bits + 0x7F) & 0x7FFF) per element (int16): monotone in |x| for non-NaN values (0x7F..0x7FFF),
//           and below every non-NaN key for NaN (0x00..0x7E), so a max-reduce of keys is TE's NaN-ignoring
//           amax
//   amax  = max(key_max - 0x7F, 0)                 (BF16 bits, by a saturating U16 store; 0 for all-NaN)
//   p     = amax * fl32(1 / max_norm)                (one FP32 multiply, as TE)
//   byte  = min(E(fl32(p * (2 - 2^-22))), 254)       (E: the FP32 exponent field)
//   mult  = 2^(127 - byte) as BF16                   (pow; exact, 2^-127 is the BF16 subnormal 0x0040)
//   elem  = fp8_satfinite(x * mult)                  (FP32 multiply, RNE, as TE's cvt.rn.satfinite)
// The byte is TE's ceil to a power of two (E + [M != 0], a subnormal p <= 2^-127 staying 0, Inf saturating to
// 254): with c = 2 - 2^-22, a normal p = 2^E gives p c = 2^(E+1) - 2^(E-22), exact, exponent E; a normal p
// with M != 0 gives p c >= 2^(E+1) (1 - 2^-46), which rounds to at least 2^(E+1), and p c < 2^(E+2) (1 -
// 2^-24); a subnormal p = q 2^-149 gives round(2q - q 2^-22) units of 2^-149, below 2^23 (exponent 0) exactly
// when q <= 2^22 (q = 2^22 gives 2^23 - 1 exactly). Trn3 rule (quantize_mx's, for the few blocks the backward
// recomputes itself): key = bits & 0x7FFF,
//   byte = 255 if the key is NaN/Inf (>= 0x7F80) else max(key >> 7 - (emax - 1), 0), mult NaN for byte 255.
// Every step is exact; the result equals num::quantize_block bit for bit (tests/unit and the kernel checks).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/api/nki.h"
#include "kernels/cross_entropy/ce_params.h"
#include "sim/numerics/float_formats.h"

namespace trnsim::kernels::ce {

// keys [P, n] int16 of BF16 data [P, n] for `rule` (TE: NaN-ignoring; Trn3: bits & 0x7FFF). The NKI ISA docs
// (nki.isa.tensor_scalar) keep bitvec operators (and, or, xor, shifts) out of instructions with arithmetic
// ones and on the Vector Engine, on integer dtypes: the TE key is an add on `e` into t ([P, n] int32: bits +
// 0x7F reaches 0x1007E) then a bitwise and on DVE (the two halves: mx_keys_te_add, mx_keys_te_mask); the Trn3
// key is one bitwise and on DVE (t unused).
void mx_keys(const View& keys, const View& t, const View& data, QuantizeRule rule, Engine e);
void mx_keys_te_add(const View& t, const View& data, Engine e);
void mx_keys_te_mask(const View& keys, const View& t);

// Temporaries of one scale chain ([P, n] int32 and FP32 tiles). Allocated once per pipeline buffer: tiles
// allocated inside a loop would share addresses with other engines' temporaries and serialize them.
struct ChainTemps {
  View i1, i2, f1, f2, u;
};
ChainTemps chain_temps(Kernel& k, const std::vector<int64_t>& shape);

// From block key maxima kmax ([P, n], FP32 or int dtype; int for the Trn3 rule) to E8M0 bytes ([P, n] uint8)
// and element multipliers 2^(127 - byte) ([P, n] bfloat16), by `rule`. The TE chain is arithmetic and runs on
// `e`; the Trn3 chain's shifts run on DVE (bitvec operators), the rest on `e`.
void mx_scale_chain(const ChainTemps& tmp, const View& kmax, const View& bytes, const View& mult,
                    QuantizeRule rule, num::Fp8Format fmt, Engine e);

// Whole-block quantization along the free dim: data [P, nb, 32] BF16 -> q [P, nb, 32] FP8 and bytes
// [P, nb] (keys, max-reduce, chain, one multiply). The reduce runs on DVE; `e` runs the rest.
void mx_quantize_free(Kernel& k, const View& q, const View& bytes, const View& data, QuantizeRule rule,
                      num::Fp8Format fmt, Engine e);

// The scale tensors' geometry (te_scale_shape) for data [rows, V].
struct ScaleGeom {
  int64_t rows = 0, V = 0;
  bool swizzled = false;
  int64_t row_rows() const;  // roundup(rows, 128)
  int64_t row_cols() const;  // roundup(V / 32, 4)
  int64_t col_rows() const;  // roundup(rows / 32, 4)
  int64_t col_cols() const;  // roundup(V, 128)
};

// Rowwise scales of rows [r0, r0 + n) (r0 % 128 == 0; row r0 + i on partition i) and blocks [b0, b1)
// (b0 % 4 == 0) from tile [n, >= b1 - b0].
void write_row_scales(const View& out, const ScaleGeom& g, const View& tile, int64_t r0, int64_t n,
                      int64_t b0, int64_t b1);
// Columnwise scales of block-rows [rb0, rb0 + nrb) (rb0 % 4 == 0, nrb <= 4) and columns [v0, v1)
// (v0 % 128 == 0) from tile [128 (v % 128), ceil((v1 - v0) / 128), >= nrb].
void write_col_scales(const View& out, const ScaleGeom& g, const View& tile, int64_t rb0, int64_t nrb,
                      int64_t v0, int64_t v1);
// The same from quantize_mx's scale tile: block-row rb0 + 4q + i at partition 32q + i (i < 4), columns
// [v0, v1) at free 0..v1-v0; `groups` block-rows in all.
void write_col_scales_mx(const View& out, const ScaleGeom& g, const View& tile, int64_t rb0, int64_t groups,
                         int64_t v0, int64_t v1);
// Writes 0x00 to every padding byte of a scale tensor (core 0; see the kernel for the ordering).
void zero_scale_padding(Kernel& k, const View& out, const ScaleGeom& g, bool rowwise);
bool has_scale_padding(const ScaleGeom& g, bool rowwise);

// Flat byte index (int32) of scale (i, j) in a swizzled scale tensor, from int32 tiles i, j of dst's shape
// ((i >> 7) * ntx + (j >> 2) below 2^24); ntx = 4-wide tiles along j. DVE; temporaries from `k`.
void swizzled_index(Kernel& k, const View& dst, const View& i, const View& j, int64_t ntx);

}  // namespace trnsim::kernels::ce
