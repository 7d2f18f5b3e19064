#include "kernels/ref/matmul_ref.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <thread>
#include <type_traits>

#include "kernels/ref/gemm_f64.h"

#include "sim/base/error.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/scale_layout.h"

namespace trnsim::ref {
namespace {

void check_operand(const Operand& a, const char* what) {
  if (a.rows <= 0 || a.cols <= 0)
    throw InputError(
        fmt::format("matmul reference: {} shape [{}, {}] must be positive", what, a.rows, a.cols));
  if (a.data == nullptr) throw InputError(fmt::format("matmul reference: {} has no data", what));
}

// Element (t, f) of an operand: t along the contraction axis, f along the free axis.
int64_t index_of(const Operand& a, int64_t t, int64_t f) {
  return a.axis == Contract::Rows ? t * a.cols + f : f * a.cols + t;
}

}  // namespace

MatmulDims matmul_dims(const Operand& lhs, const Operand& rhs) {
  check_operand(lhs, "lhs");
  check_operand(rhs, "rhs");
  if (lhs.contraction() != rhs.contraction())
    throw InputError(fmt::format("matmul reference: contraction lengths differ (lhs {}, rhs {})",
                                 lhs.contraction(), rhs.contraction()));
  return {lhs.free(), lhs.contraction(), rhs.free()};
}

std::vector<double> to_f64(const Operand& a) {
  check_operand(a, "operand");
  return std::vector<double>(a.data, a.data + a.rows * a.cols);
}

namespace {

// mx_fake_quantize's values into out (a.rows * a.cols of V); false when one of them is not exactly a V
// (then out holds roundings of some values).
template <class V>
bool fake_quantize_into(const Operand& a, const MxQuant& q, V* out) {
  check_operand(a, "operand");
  bool exact = true;
  const auto put = [&](V& dst, double v) {
    dst = static_cast<V>(v);
    if constexpr (!std::is_same_v<V, double>) exact = exact && static_cast<double>(dst) == v;
  };
  const int64_t T = a.contraction(), F = a.free();
  num::check_swizzle_shape(T, 1, q.scheme);
  const int64_t groups = T / num::kMxBlock;
  std::vector<std::array<int64_t, 32>> idx(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) idx[g] = num::mx_group_k_indices(g, T, q.scheme);
  float block[32];
  uint8_t bytes[32];
  // One group's 32 values, quantized, into their dequantized values (groups are independent).
  const auto group = [&](const float* v, double* o) {
    const double scale = num::e8m0_to_f32(num::quantize_block(v, bytes, q.format, q.rule));
    for (int i = 0; i < 32; ++i) o[i] = static_cast<double>(num::fp8_to_f32(bytes[i], q.format)) * scale;
  };
  if (a.axis == Contract::Cols) {  // a group's values lie in one row
    double o[32];
    for (int64_t f = 0; f < F; ++f)
      for (int64_t g = 0; g < groups; ++g) {
        for (int i = 0; i < 32; ++i) block[i] = a.data[index_of(a, idx[g][i], f)];
        group(block, o);
        for (int i = 0; i < 32; ++i) put(out[index_of(a, idx[g][i], f)], o[i]);
      }
    return exact;
  }
  // Contraction along rows: a group's values lie in 32 rows, one column. kTile columns at a time, so each of
  // the 32 rows is read and written in runs of kTile elements rather than one element per cache line.
  constexpr int64_t kTile = 64;
  std::vector<float> in(32 * kTile);
  std::vector<double> res(32 * kTile);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t f0 = 0; f0 < F; f0 += kTile) {
      const int64_t nf = std::min(kTile, F - f0);
      for (int i = 0; i < 32; ++i) {
        const float* row = a.data + idx[g][i] * a.cols + f0;
        for (int64_t c = 0; c < nf; ++c) in[c * 32 + i] = row[c];
      }
      for (int64_t c = 0; c < nf; ++c) group(&in[c * 32], &res[c * 32]);
      for (int i = 0; i < 32; ++i) {
        V* row = out + idx[g][i] * a.cols + f0;
        for (int64_t c = 0; c < nf; ++c) put(row[c], res[c * 32 + i]);
      }
    }
  return exact;
}

}  // namespace

std::vector<double> mx_fake_quantize(const Operand& a, const MxQuant& q) {
  std::vector<double> out(static_cast<size_t>(a.rows * a.cols));
  fake_quantize_into(a, q, out.data());
  return out;
}

namespace {

// Rows [r0, r0 + nr) of the product into out [nr, C] (ref::gemm_f64: the same bytes on every thread count).
void matmul_rows(const Operand& lhs, const double* lv, const Operand& rhs, const double* rv,
                 const MatmulDims& d, int64_t r0, int64_t nr, double* out) {
  const bool ta = lhs.axis == Contract::Rows;  // lhs is [T, R]
  const bool tb = rhs.axis == Contract::Cols;  // rhs is [C, T]
  const double* a = ta ? lv + r0 : lv + r0 * d.T;
  static const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  gemm_f64(ta, tb, nr, d.C, d.T, a, ta ? d.R : d.T, rv, tb ? d.T : d.C, out, threads);
}

constexpr int64_t kMaxBlasDim = 0x7FFFFFFF;

void check_blas_dims(const MatmulDims& d) {
  if (d.R > kMaxBlasDim || d.T > kMaxBlasDim || d.C > kMaxBlasDim)
    throw InputError(
        fmt::format("matmul reference: dims [{}, {}, {}] exceed the BLAS int range", d.R, d.T, d.C));
}

}  // namespace

std::vector<double> matmul_f64(const Operand& lhs, const double* lhs_vals, const Operand& rhs,
                               const double* rhs_vals) {
  const MatmulDims d = matmul_dims(lhs, rhs);
  check_blas_dims(d);
  std::vector<double> out(static_cast<size_t>(d.R * d.C));
  matmul_rows(lhs, lhs_vals, rhs, rhs_vals, d, 0, d.R, out.data());
  return out;
}

std::vector<double> matmul_exact(const Operand& lhs, const Operand& rhs) {
  const std::vector<double> l = to_f64(lhs), r = to_f64(rhs);
  return matmul_f64(lhs, l.data(), rhs, r.data());
}

std::vector<double> matmul_mx(const Operand& lhs, const Operand& rhs, const MxQuant& q) {
  matmul_dims(lhs, rhs);
  const std::vector<double> l = mx_fake_quantize(lhs, q), r = mx_fake_quantize(rhs, q);
  return matmul_f64(lhs, l.data(), rhs, r.data());
}

namespace {

// Output rows computed by one GEMM call: the sampled blocks are gathered up to this many rows.
constexpr int64_t kChunkRows = 256;

// The sampled row blocks [r0, r1): blocks of block_rows starting at rows 0, s b, 2 s b, ... (b = block_rows).
void check_compare_args(const Operand& lhs, const Operand& rhs, int64_t block_rows, int64_t block_stride) {
  check_blas_dims(matmul_dims(lhs, rhs));
  if (block_rows < 1) throw InputError(fmt::format("matmul reference: block_rows {} < 1", block_rows));
  if (block_stride < 1) throw InputError(fmt::format("matmul reference: block_stride {} < 1", block_stride));
}

// Calls f(golden, first block, end block) for consecutive groups of the sampled blocks (at most kChunkRows
// rows, or one block), golden holding their reference rows [rows, C] in block order. The rows of L are
// gathered (FP32) into one [rows, T] operand and, for the MX reference, quantized there: its MX groups are
// the same values as in the whole operand (they run along T). Every element's order of additions is
// gemm_f64's, whichever rows share a call, so the values are those of one call per block.
template <class F>
void reference_chunks(const Operand& lhs, const Operand& rhs, const std::optional<MxQuant>& quant,
                      const std::vector<std::pair<int64_t, int64_t>>& blocks, F&& f) {
  const MatmulDims d = matmul_dims(lhs, rhs);
  // rhs as the GEMM reads it: its own FP32 values in place, or its MX-quantized values in FP32 when every
  // one is exact there (FP64 otherwise): no FP64 copy of the operand (470 MB for the README main job's).
  std::vector<float> r32;
  std::vector<double> r64;
  const float* r = rhs.data;
  if (quant && !rhs.mx_values) {
    r32.resize(static_cast<size_t>(rhs.rows * rhs.cols));
    r = r32.data();
    if (!fake_quantize_into(rhs, *quant, r32.data())) {
      r32 = {};
      r = nullptr;
      r64 = mx_fake_quantize(rhs, *quant);
    }
  }
  const bool tb = rhs.axis == Contract::Cols;  // rhs is [C, T]
  static const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<float> rows;
  std::vector<double> golden;
  for (size_t b0 = 0; b0 < blocks.size();) {
    size_t b1 = b0;
    int64_t n = 0;
    while (b1 < blocks.size() && (b1 == b0 || n + blocks[b1].second - blocks[b1].first <= kChunkRows))
      n += blocks[b1].second - blocks[b1].first, ++b1;
    rows.resize(static_cast<size_t>(n * d.T));
    float* o = rows.data();
    for (size_t b = b0; b < b1; ++b)
      for (int64_t i = blocks[b].first; i < blocks[b].second; ++i, o += d.T)
        for (int64_t t = 0; t < d.T; ++t) o[t] = lhs.data[index_of(lhs, t, i)];
    Operand g{rows.data(), n, d.T, Contract::Cols, lhs.mx_values};
    const std::vector<double> l = quant && !g.mx_values ? mx_fake_quantize(g, *quant) : to_f64(g);
    golden.resize(static_cast<size_t>(n * d.C));
    if (r != nullptr)
      gemm_f64(false, tb, n, d.C, d.T, l.data(), d.T, r, tb ? d.T : d.C, golden.data(), threads);
    else
      gemm_f64(false, tb, n, d.C, d.T, l.data(), d.T, r64.data(), tb ? d.T : d.C, golden.data(), threads);
    f(golden.data(), b0, b1);
    b0 = b1;
  }
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> sample_blocks(int64_t R, int64_t block_rows, int64_t block_stride) {
  std::vector<std::pair<int64_t, int64_t>> v;
  for (int64_t r0 = 0; r0 < R; r0 += block_rows * block_stride)
    v.push_back({r0, std::min(R, r0 + block_rows)});
  return v;
}

int64_t sampled_rows(int64_t R, int64_t block_rows, int64_t block_stride) {
  int64_t n = 0;
  for (int64_t r0 = 0; r0 < R; r0 += block_rows * block_stride) n += std::min(block_rows, R - r0);
  return n;
}

std::vector<double> sampled_reference(const Operand& lhs, const Operand& rhs,
                                      const std::optional<MxQuant>& quant, int64_t block_rows,
                                      int64_t block_stride) {
  check_compare_args(lhs, rhs, block_rows, block_stride);
  const MatmulDims d = matmul_dims(lhs, rhs);
  const auto blocks = sample_blocks(d.R, block_rows, block_stride);
  std::vector<double> out;
  reference_chunks(lhs, rhs, quant, blocks, [&](const double* g, size_t b0, size_t b1) {
    int64_t n = 0;
    for (size_t b = b0; b < b1; ++b) n += blocks[b].second - blocks[b].first;
    out.insert(out.end(), g, g + n * d.C);
  });
  return out;
}

namespace {

// Adds the kernel's values of blocks [b0, b1) against their reference rows `g` (in block order).
void add_blocks(MetricsAccumulator& acc, const float* kernel_out, int64_t C,
                const std::vector<std::pair<int64_t, int64_t>>& blocks, const double* g, size_t b0,
                size_t b1) {
  for (size_t b = b0; b < b1; ++b) {
    const int64_t n = (blocks[b].second - blocks[b].first) * C;
    acc.add(kernel_out + blocks[b].first * C, g, n);
    g += n;
  }
}

}  // namespace

ErrorMetrics compare_matmul(const float* kernel_out, const Operand& lhs, const Operand& rhs,
                            const std::optional<MxQuant>& quant, int64_t block_rows, int64_t block_stride) {
  const MatmulDims d = matmul_dims(lhs, rhs);
  check_blas_dims(d);
  if (kernel_out == nullptr) throw InputError("matmul reference: no kernel output to compare");
  check_compare_args(lhs, rhs, block_rows, block_stride);
  const auto blocks = sample_blocks(d.R, block_rows, block_stride);
  MetricsAccumulator acc;
  reference_chunks(lhs, rhs, quant, blocks, [&](const double* g, size_t b0, size_t b1) {
    add_blocks(acc, kernel_out, d.C, blocks, g, b0, b1);
  });
  return acc.finish();
}

ErrorMetrics compare_sampled(const float* kernel_out, const MatmulDims& d, int64_t block_rows,
                             int64_t block_stride, const std::vector<double>& golden) {
  if (kernel_out == nullptr) throw InputError("matmul reference: no kernel output to compare");
  const auto blocks = sample_blocks(d.R, block_rows, block_stride);
  const int64_t n = sampled_rows(d.R, block_rows, block_stride);
  if (static_cast<int64_t>(golden.size()) != n * d.C)
    throw Error(fmt::format("matmul reference: {} prepared values for {} sampled rows of {} columns",
                            golden.size(), n, d.C));
  MetricsAccumulator acc;
  add_blocks(acc, kernel_out, d.C, blocks, golden.data(), 0, blocks.size());
  return acc.finish();
}

void dequantize_x4(const uint8_t* data, const uint8_t* tile, int64_t K, int64_t F, bool packed,
                   num::Fp8Format fmt, std::vector<float>& out, num::QuantScheme scheme) {
  std::vector<uint8_t> compact(static_cast<size_t>(K / 32 * F));
  num::scales_from_trainium(tile, K, F, packed, 0, compact.data());
  out.resize(static_cast<size_t>(K * F));
  for (int64_t k = 0; k < K; ++k) {
    const num::SwizzlePos sp = num::swizzle_pos(k, 0, K, F, scheme);
    const int64_t g = num::mx_group_row(k, K, scheme);
    for (int64_t f = 0; f < F; ++f) {
      const uint8_t byte = data[sp.partition * 4 * F + sp.free + 4 * f];
      out[f * K + k] = num::fp8_to_f32(byte, fmt) * num::e8m0_to_f32(compact[g * F + f]);
    }
  }
}

void unswizzle_bf16(const uint8_t* bytes, int64_t K, int64_t F, std::vector<float>& out,
                    num::QuantScheme scheme) {
  std::vector<uint16_t> in(static_cast<size_t>(K * F)), kf(static_cast<size_t>(K * F));
  std::memcpy(in.data(), bytes, in.size() * 2);
  num::unswizzle(in.data(), K, F, scheme, kf.data());
  out.resize(static_cast<size_t>(K * F));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t f = 0; f < F; ++f) out[f * K + k] = num::bf16_to_f32(kf[k * F + f]);
}

}  // namespace trnsim::ref
