#include "kernels/cross_entropy/ce_quant.h"

#include <algorithm>

#include "kernels/cross_entropy/ce_lib.h"
#include "sim/numerics/mx.h"

namespace trnsim::kernels::ce {

using isa::AluOp;

void mx_keys_te_add(const View& t, const View& data, Engine e) {
  nki::tensor_scalar(t, data.bitcast(DType::U16), AluOp::Add, 127.0, false, AluOp::Bypass, 0.0, false, e);
}

void mx_keys_te_mask(const View& keys, const View& t) {
  nki::tensor_scalar(keys, t, AluOp::BitwiseAnd, 32767.0);
}

void mx_keys(const View& keys, const View& t, const View& data, QuantizeRule rule, Engine e) {
  if (rule == QuantizeRule::Te) {
    mx_keys_te_add(t, data, e);
    mx_keys_te_mask(keys, t);
  } else {
    nki::tensor_scalar(keys, data.bitcast(DType::U16), AluOp::BitwiseAnd, 32767.0);
  }
}

ChainTemps chain_temps(Kernel& k, const std::vector<int64_t>& shape) {
  return {k.sbuf(shape, DType::I32, "mx_i1"), k.sbuf(shape, DType::I32, "mx_i2"),
          k.sbuf(shape, DType::F32, "mx_f1"), k.sbuf(shape, DType::F32, "mx_f2"),
          k.sbuf(shape, DType::U16, "mx_u")};
}

void mx_scale_chain(const ChainTemps& tmp, const View& kmax, const View& bytes, const View& mult,
                    QuantizeRule rule, num::Fp8Format fmt, Engine e) {
  const View mbits = mult.bitcast(DType::U16);
  const View &i1 = tmp.i1, &i2 = tmp.i2, &f1 = tmp.f1, &f2 = tmp.f2;
  if (rule == QuantizeRule::Te) {
    // amax bits = max(key - 0x7F, 0) (the U16 store saturates at 0), read as BF16.
    nki::tensor_scalar(tmp.u, kmax, AluOp::Subtract, 127.0, false, AluOp::Bypass, 0.0, false, e);
    // p = amax * fl32(1 / max_norm) (TE's FP32 product), then * (2 - 2^-22): the exponent field of the
    // second product is TE's ceil exponent of p (see the header), Inf giving 255.
    nki::tensor_scalar(f1, tmp.u.bitcast(DType::BF16), AluOp::Multiply,
                       static_cast<double>(num::te_max_norm_rcp(fmt)), false, AluOp::Multiply, 2.0 - 0x1p-22,
                       false, e);
    // byte = min(E, 254), E the exponent field of f1 (>= 0): with h its upper 16 bits, E = floor(h / 128),
    // and (h - 63.5) / 128 (exact in FP32) lies within 0.4961 of E, so the integer store's rounding gives E
    // (an arithmetic form: this chain runs on POOL, which has no bitvec operators). mult = 2^(127 - byte),
    // exact in BF16 (2^-127 is its subnormal 0x0040).
    const int64_t n = f1.size(1);
    nki::tensor_scalar(f2, f1.bitcast(DType::U16)(all, S(1, 2 * n, 2)), AluOp::Subtract, 63.5, false,
                       AluOp::Multiply, 1.0 / 128.0, false, e);
    nki::tensor_scalar(bytes, f2, AluOp::Min, 254.0, false, AluOp::Bypass, 0.0, false, e);
    nki::tensor_scalar(mult, bytes, AluOp::Subtract, 127.0, true, AluOp::Pow, 2.0, true, e);
    return;
  }
  // Trn3: exponent field E of amax; byte = 255 for NaN/Inf (E = 255), else max(E - (emax - 1), 0).
  // The shifts are bitvec steps: DVE, integer dtypes (kmax int32).
  const double drop = num::fp8_emax(fmt) - 1;
  nki::tensor_scalar(i1, kmax, AluOp::ShiftRight, 7.0);
  nki::tensor_scalar(f1, i1, AluOp::IsEqual, 255.0, false, AluOp::Bypass, 0.0, false, e);
  nki::tensor_scalar(f2, i1, AluOp::Subtract, drop, false, AluOp::Max, 0.0, false, e);
  nki::tensor_scalar(i2, f1, AluOp::Multiply, drop, false, AluOp::Bypass, 0.0, false, e);
  nki::tensor_tensor(bytes, f2, i2, AluOp::Add, e);
  // mult bits (254 - byte) << 7; byte 255 gives -128, plus 0x8040 -> 0x7FC0 (NaN).
  nki::tensor_scalar(i1, bytes, AluOp::Subtract, 254.0, true, AluOp::Bypass, 0.0, false, e);
  nki::tensor_scalar(i1, i1, AluOp::ShiftLeft, 7.0);
  nki::tensor_scalar(f2, f1, AluOp::Multiply, 32832.0, false, AluOp::Bypass, 0.0, false, e);
  nki::tensor_tensor(mbits, i1, f2, AluOp::Add, e);
}

void mx_quantize_free(Kernel& k, const View& q, const View& bytes, const View& data, QuantizeRule rule,
                      num::Fp8Format fmt, Engine e) {
  const int64_t P = data.size(0), nb = data.size(1);
  View keys = k.sbuf({P, nb, 32}, DType::I16, "mx_keys");
  mx_keys(keys, k.sbuf({P, nb, 32}, DType::I32, "mx_keys_t"), data, rule, e);
  View kmax = k.sbuf({P, nb}, DType::I32, "mx_kmax");
  nki::tensor_reduce(kmax, AluOp::Max, keys, {2});
  View mult = k.sbuf({P, nb}, DType::BF16, "mx_mult");
  mx_scale_chain(chain_temps(k, {P, nb}), kmax, bytes, mult, rule, fmt, e);
  nki::tensor_tensor(q, data, mult.reshape({P, nb, 1}).broadcast(2, 32), AluOp::Multiply, e);
}

int64_t ScaleGeom::row_rows() const {
  return round_up(rows, 128);
}
int64_t ScaleGeom::row_cols() const {
  return round_up(V / 32, 4);
}
int64_t ScaleGeom::col_rows() const {
  return round_up(rows / 32, 4);
}
int64_t ScaleGeom::col_cols() const {
  return round_up(V, 128);
}

namespace {

// The swizzled tensor (gemm_swizzle_index) as [i % 32, i / 128, j / 4, (i % 128) / 32, j % 4]: the lane of a
// 32-row group first, so that it can be the DMA's partition dim; integer indices then pick the other fields.
View swizzle5(const View& out, int64_t irows, int64_t jcols) {
  return out.reshape({irows / 128, jcols / 4, 32, 4, 4}).permute({2, 0, 1, 3, 4});
}

}  // namespace

void write_row_scales(const View& out, const ScaleGeom& g, const View& tile, int64_t r0, int64_t n,
                      int64_t b0, int64_t b1) {
  const int64_t nb = b1 - b0;
  if (n <= 0 || nb <= 0) return;
  const View t8 = tile.bitcast(DType::E8M0);
  if (!g.swizzled) {
    nki::dma_copy(out(S(r0, r0 + n), S(b0, b1)), t8(S(0, n), S(0, nb)));
    return;
  }
  // One DMA per 32-row group: the lane r % 32 is the partition (r0 % 128 == 0).
  const int64_t nf = nb / 4, rem = nb % 4;  // b0 % 4 == 0
  const View v5 = swizzle5(out, g.row_rows(), g.row_cols());
  for (int64_t p0 = 0; p0 < n; p0 += 32) {
    const int64_t m = std::min<int64_t>(32, n - p0), r = r0 + p0, ib = r / 128, qd = (r % 128) / 32;
    if (nf > 0)
      nki::dma_copy(v5(S(0, m), ib, S(b0 / 4, b0 / 4 + nf), qd, all),
                    t8(S(p0, p0 + m), S(0, nf * 4)).reshape({m, nf, 4}));
    if (rem > 0) nki::dma_copy(v5(S(0, m), ib, b0 / 4 + nf, qd, S(0, rem)), t8(S(p0, p0 + m), S(nf * 4, nb)));
  }
}

void write_col_scales(const View& out, const ScaleGeom& g, const View& tile, int64_t rb0, int64_t nrb,
                      int64_t v0, int64_t v1) {
  const int64_t w = v1 - v0, nf = w / 128, wb = w % 128;
  if (nrb <= 0 || w <= 0) return;
  const View t8 = tile.bitcast(DType::E8M0);
  if (!g.swizzled) {
    if (nf > 0)
      nki::dma_copy(out(S(rb0, rb0 + nrb), S(v0, v0 + nf * 128)).reshape({nrb, nf, 128}).permute({2, 1, 0}),
                    t8(all, S(0, nf), S(0, nrb)));
    if (wb > 0)
      nki::dma_copy(out(S(rb0, rb0 + nrb), S(v0 + nf * 128, v1)).permute({1, 0}),
                    t8(S(0, wb), nf, S(0, nrb)));
    return;
  }
  // i = column v (lane v % 32), j = block-row rb.
  const View v5 = swizzle5(out, g.col_cols(), g.col_rows());
  const int64_t vb = v0 / 128, jb = rb0 / 4;
  for (int64_t qv = 0; qv < 4; ++qv) {
    if (nf > 0)
      nki::dma_copy(v5(all, S(vb, vb + nf), jb, qv, S(0, nrb)),
                    t8(S(32 * qv, 32 * qv + 32), S(0, nf), S(0, nrb)));
    const int64_t m = std::min<int64_t>(32, wb - 32 * qv);
    if (m > 0)
      nki::dma_copy(v5(S(0, m), vb + nf, jb, qv, S(0, nrb)), t8(S(32 * qv, 32 * qv + m), nf, S(0, nrb)));
  }
}

void write_col_scales_mx(const View& out, const ScaleGeom& g, const View& tile, int64_t rb0, int64_t groups,
                         int64_t v0, int64_t v1) {
  const int64_t w = v1 - v0, nf = w / 128, wb = w % 128;
  const View t8 = tile.bitcast(DType::E8M0);
  for (int64_t q = 0; 4 * q < groups; ++q) {
    const int64_t ni = std::min<int64_t>(4, groups - 4 * q);
    const View src = t8(S(32 * q, 32 * q + ni), S(0, w));
    if (!g.swizzled) {
      nki::dma_copy(out(S(rb0 + 4 * q, rb0 + 4 * q + ni), S(v0, v1)), src);
      continue;
    }
    // Partition = block-row % 4 (rb0 % 16 == 0); [v / 128, (v % 128) / 32, v % 32] along the free dims.
    const View v5 = out.reshape({g.col_cols() / 128, g.col_rows() / 4, 32, 4, 4}).permute({4, 0, 1, 3, 2});
    const int64_t vb = v0 / 128, jb = rb0 / 4 + q;
    if (nf > 0)
      nki::dma_copy(v5(S(0, ni), S(vb, vb + nf), jb, all, all),
                    src(all, S(0, nf * 128)).reshape({ni, nf, 4, 32}));
    if (wb > 0)
      nki::dma_copy(v5(S(0, ni), vb + nf, jb, S(0, wb / 32), all),
                    src(all, S(nf * 128, w)).reshape({ni, wb / 32, 32}));
  }
}

bool has_scale_padding(const ScaleGeom& g, bool rowwise) {
  return rowwise ? (g.rows % 128 != 0 || (g.V / 32) % 4 != 0) : ((g.rows / 32) % 4 != 0 || g.V % 128 != 0);
}

void zero_scale_padding(Kernel& k, const View& out, const ScaleGeom& g, bool rowwise) {
  if (!has_scale_padding(g, rowwise)) return;
  constexpr int64_t kZ = 8192;
  View zero = k.sbuf({128, kZ}, DType::U8, "ce_zero");
  nki::memset(zero, 0.0);
  const View z8 = zero.bitcast(DType::E8M0);
  auto fill = [&](const View& region) {  // region [nr, nc] of the HBM tensor
    const int64_t nr = region.size(0), nc = region.size(1);
    for (int64_t r = 0; r < nr; r += 128)
      for (int64_t c = 0; c < nc; c += kZ) {
        const int64_t m = std::min<int64_t>(128, nr - r), w = std::min(kZ, nc - c);
        nki::dma_copy(region(S(r, r + m), S(c, c + w)), z8(S(0, m), S(0, w)));
      }
  };
  const int64_t R = rowwise ? g.row_rows() : g.col_rows(), C = rowwise ? g.row_cols() : g.col_cols();
  if (g.swizzled) {
    fill(out);
    return;
  }
  const int64_t vr = rowwise ? g.rows : g.rows / 32, vc = rowwise ? g.V / 32 : g.V;
  if (vr < R) fill(out(S(vr, R), all));
  if (vc < C) fill(out(S(0, vr), S(vc, C)));
}

void swizzled_index(Kernel& k, const View& dst, const View& i, const View& j, int64_t ntx) {
  std::vector<int64_t> shape;
  for (int d = 0; d < i.rank(); ++d) shape.push_back(i.size(d));
  View a = k.sbuf(shape, DType::I32, "swz_a");
  View b = k.sbuf(shape, DType::I32, "swz_b");
  // ((i >> 7) * ntx + (j >> 2)) << 9: the bitvec and arithmetic steps in separate instructions (NKI ISA docs,
  // nki.isa.tensor_scalar); the product and sum stay below 2^24, exact in FP32.
  nki::tensor_scalar(a, i, AluOp::ShiftRight, 7.0);
  nki::tensor_scalar(a, a, AluOp::Multiply, static_cast<double>(ntx));
  nki::tensor_scalar(b, j, AluOp::ShiftRight, 2.0);
  nki::tensor_tensor(a, a, b, AluOp::Add);
  nki::tensor_scalar(dst, a, AluOp::ShiftLeft, 9.0);
  // | (i & 31) << 4 | ((i >> 5) & 3) << 2 | (j & 3)
  nki::tensor_scalar(a, i, AluOp::BitwiseAnd, 31.0, false, AluOp::ShiftLeft, 4.0);
  nki::tensor_tensor(dst, dst, a, AluOp::BitwiseOr);
  nki::tensor_scalar(a, i, AluOp::ShiftRight, 5.0, false, AluOp::BitwiseAnd, 3.0);
  nki::tensor_scalar(a, a, AluOp::ShiftLeft, 2.0);
  nki::tensor_tensor(dst, dst, a, AluOp::BitwiseOr);
  nki::tensor_scalar(a, j, AluOp::BitwiseAnd, 3.0);
  nki::tensor_tensor(dst, dst, a, AluOp::BitwiseOr);
}

}  // namespace trnsim::kernels::ce
