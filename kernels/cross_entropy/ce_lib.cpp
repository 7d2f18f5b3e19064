#include "kernels/cross_entropy/ce_lib.h"

#include <algorithm>

#include "kernels/lib/partition_fill.h"

namespace trnsim::kernels::ce {

using isa::AluOp;
using nki::ActFunc;

Consts consts(const CommonParams& p) {
  Consts c;
  c.one_minus_ls = static_cast<float>(1.0 - p.label_smoothing);
  c.neg_eps = static_cast<float>(-p.label_smoothing / static_cast<double>(p.V));
  return c;
}

ColRange core_columns(int64_t V, int core, int cores) {
  if (cores <= 1) return {0, V};
  const int64_t mid = std::min(V, round_up(ceil_div(V, 2), kP));
  return core == 0 ? ColRange{0, mid} : ColRange{mid, V};
}

void load_rows(const View& dst, const View& src, int64_t rows) {
  const int64_t full = rows / kP, rest = rows % kP;
  if (full > 0) nki::dma_copy(dst(all, S(0, full)), src(S(0, full * kP)).reshape({full, kP}).permute({1, 0}));
  if (rest > 0) nki::dma_copy(dst(S(0, rest), S(full, full + 1)), src(S(full * kP, rows)).reshape({rest, 1}));
}

void store_rows(const View& dst, const View& src, int64_t rows) {
  const int64_t full = rows / kP, rest = rows % kP;
  if (full > 0) nki::dma_copy(dst(S(0, full * kP)).reshape({full, kP}).permute({1, 0}), src(all, S(0, full)));
  if (rest > 0) nki::dma_copy(dst(S(full * kP, rows)).reshape({rest, 1}), src(S(0, rest), S(full, full + 1)));
}

void row_factors(Kernel& k, const RowFactors& o, const View& m, const View& d, const View& t, const View& g,
                 const View& c, const CommonParams& p, const Consts& cs) {
  const std::vector<int64_t> shape = m.shape();
  View tmp = k.sbuf(shape, DType::F32, "ce_rf_tmp");
  View s = k.sbuf(shape, DType::F32, "ce_rf_s");
  View gc = k.sbuf(shape, DType::F32, "ce_rf_gc");
  // s = shift(m): m, or 0 while m is -inf (a NaN m stays NaN); b = -s. Ignored rows: b = m * 0 - inf, which
  // is -inf for a finite m (exp(x - inf) = 0 for every finite or -inf logit: a zero row) and NaN for a NaN
  // or infinite m (a NaN row, as PyTorch's softmax backward gives for such a row).
  nki::tensor_scalar(tmp, m, AluOp::NotEqual, kNegInf);
  nki::select(s, tmp, m, 0.0);
  nki::tensor_scalar(s, s, AluOp::Multiply, -1.0);
  nki::tensor_scalar(o.valid, t, AluOp::NotEqual, static_cast<double>(p.ignore_idx));
  nki::tensor_scalar(tmp, m, AluOp::Multiply, 0.0, false, AluOp::Add, kNegInf);
  nki::select(o.b, o.valid, s, tmp);
  // gc = g * c; gcd = gc / d; both 0 for ignored rows (d may be 0 there).
  nki::tensor_scalar(tmp, g, AluOp::Multiply, c);
  nki::select(gc, o.valid, tmp, 0.0);
  nki::tensor_scalar(tmp, d, AluOp::Divide, 1.0, true);
  nki::tensor_tensor(tmp, gc, tmp, AluOp::Multiply);
  nki::select(o.gcd, o.valid, tmp, 0.0);
  // h = gc * neg_eps; hy = h + gc * -(1 - ls).
  nki::tensor_scalar(o.h, gc, AluOp::Multiply, static_cast<double>(cs.neg_eps));
  nki::tensor_scalar(tmp, gc, AluOp::Multiply, -static_cast<double>(cs.one_minus_ls));
  nki::tensor_tensor(o.hy, o.h, tmp, AluOp::Add);
}

View count_valid(Kernel& k, const View& valid) {
  View per = k.sbuf({kP, 1}, DType::F32, "ce_count_part");
  nki::tensor_reduce(per, AluOp::Add, valid, {1});
  View ones = k.sbuf({kP, kP}, DType::F32, "ce_ones");
  nki::memset(ones, 1.0);
  View acc = k.psum({kP, 1}, DType::F32, "ce_count_psum");
  nki::nc_matmul(acc, ones, per);
  View out = k.sbuf({kP, 1}, DType::F32, "ce_count");
  nki::tensor_copy(out, acc);
  return out;
}

View row_offsets(Kernel& k, int64_t n, int64_t stride) {
  View o = k.sbuf({kP, n}, DType::I32, "ce_row_offsets");
  nki::iota(o, {static_cast<int32_t>(kP * stride)}, 0.0, static_cast<double>(stride));
  return o;
}

void add_i32(Kernel& k, const View& dst, const View& a, const View& b) {
  std::vector<int64_t> shape;
  for (int d = 0; d < a.rank(); ++d) shape.push_back(a.size(d));
  View lo = k.sbuf(shape, DType::I32, "add_i32_lo");
  View hi = k.sbuf(shape, DType::I32, "add_i32_hi");
  View c = k.sbuf(shape, DType::I32, "add_i32_carry");
  nki::tensor_scalar(lo, a, AluOp::BitwiseAnd, 65535.0);
  nki::tensor_scalar(hi, a, AluOp::ShiftRight, 16.0);
  nki::tensor_tensor(lo, lo, b, AluOp::Add);  // below 2^24: exact in FP32
  nki::tensor_scalar(c, lo, AluOp::ShiftRight, 16.0);
  nki::tensor_tensor(hi, hi, c, AluOp::Add);
  nki::tensor_scalar(lo, lo, AluOp::BitwiseAnd, 65535.0);
  nki::tensor_scalar(hi, hi, AluOp::ShiftLeft, 16.0);
  nki::tensor_tensor(dst, hi, lo, AluOp::BitwiseOr);
}

View broadcast_partitions(Kernel& k, const View& one) {
  View ones = k.sbuf({1, kP}, DType::F32, "ce_ones_row");
  nki::memset(ones, 1.0);
  View v = k.sbuf({1, 1}, DType::F32, "ce_bcast_src");
  nki::tensor_copy(v, one);
  View acc = k.psum({kP, 1}, DType::F32, "ce_bcast_psum");
  View out = k.sbuf({kP, 1}, DType::F32, "ce_bcast");
  kernels::broadcast_partitions(out, v, ones, acc, Engine::DVE);
  return out;
}

}  // namespace trnsim::kernels::ce
