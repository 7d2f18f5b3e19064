// Host references for matmuls: exact FP64 (ref::gemm_f64 on the unquantized inputs) and MX-quantized
// (each operand quantized along its contraction axis with the kernel's scale rule, group scheme and FP8
// format, dequantized exactly, then FP64 matmul).
//
// An operand is a row-major 2-D FP32 array [rows, cols] (BF16 inputs decoded exactly) plus the axis the
// matmul contracts. The product is out[R, C] = sum_t L(r, t) * Rhs(t, c) with
//   L(r, t)   = lhs[r, t] if lhs.axis == Cols (lhs is [R, T]),   lhs[t, r] if Rows (lhs is [T, R]);
//   Rhs(t, c) = rhs[t, c] if rhs.axis == Rows (rhs is [T, C]),   rhs[c, t] if Cols (rhs is [C, T]).
// So Y = X W^T is (X, Cols) x (W, Cols); dX = dY W is (dY, Cols) x (W, Rows); dW = dY^T X is (dY, Rows) x
// (X, Rows) (docs/facts/nkilib-kernels.md §1.1).
//
// MX groups run along the contraction axis T: group g holds the 32 indices mx_group_k_indices(g, T, scheme)
// (sim/numerics/scale_layout.h; WrapX needs T % 128 == 0, OneX32 T % 32 == 0, else InputError), quantized by
// num::quantize_block. Dequantized value = fp8 value x 2^(scale - 127), exact in FP64.
//
// The reference is computed by ref::gemm_f64, whose order of additions per element is fixed (whichever rows
// share a call): reference values and the error figures computed from them are the same bytes on every run,
// thread count, machine and OPENBLAS_NUM_THREADS.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "kernels/ref/metrics.h"
#include "sim/numerics/mx.h"
#include "sim/numerics/scale_layout.h"

namespace trnsim::ref {

enum class Contract : uint8_t { Rows, Cols };

struct Operand {
  const float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  Contract axis = Contract::Cols;
  // The values are MX values already (a pre-quantized input, dequantized): the MX reference takes them as
  // they are instead of quantizing them again.
  bool mx_values = false;
  int64_t contraction() const { return axis == Contract::Rows ? rows : cols; }
  int64_t free() const { return axis == Contract::Rows ? cols : rows; }
};

struct MxQuant {
  num::Fp8Format format = num::Fp8Format::E4M3FN;
  num::ScaleRule rule = num::ScaleRule::Trn3;
  num::QuantScheme scheme = num::QuantScheme::WrapX;
};

struct MatmulDims {
  int64_t R = 0, T = 0, C = 0;
};

// R = lhs.free(), T = contraction, C = rhs.free(). InputError if the contraction lengths differ, a dim is not
// positive or a pointer is null.
MatmulDims matmul_dims(const Operand& lhs, const Operand& rhs);

// The operand's values in FP64, same layout: an exact copy, or MX fake-quantized along its contraction axis.
std::vector<double> to_f64(const Operand& a);
std::vector<double> mx_fake_quantize(const Operand& a, const MxQuant& q);

// out[R, C] in FP64 from FP64 operand values (layouts as `lhs` / `rhs` describe).
std::vector<double> matmul_f64(const Operand& lhs, const double* lhs_vals, const Operand& rhs,
                               const double* rhs_vals);
// Exact reference, and the MX reference (quant) of the whole output [R, C].
std::vector<double> matmul_exact(const Operand& lhs, const Operand& rhs);
std::vector<double> matmul_mx(const Operand& lhs, const Operand& rhs, const MxQuant& q);

// Compares a kernel output [R, C] (FP32 values) with the reference computed in blocks of `block_rows` output
// rows, without holding the FP64 output: exact if quant is empty, else MX-quantized. With block_stride s > 1
// only every s-th block (blocks 0, s, 2s, ...) is computed and compared: a deterministic sample of the rows
// for outputs whose FP64 reference would cost more than the simulation itself.
ErrorMetrics compare_matmul(const float* kernel_out, const Operand& lhs, const Operand& rhs,
                            const std::optional<MxQuant>& quant, int64_t block_rows = 256,
                            int64_t block_stride = 1);
// The reference values compare_matmul compares with, computed ahead (e.g. while the simulation runs): the
// sampled row blocks' rows [rows, C] in row order. compare_sampled then gives compare_matmul's result from
// them (same arguments; Error if `golden` does not have the sample's size).
std::vector<double> sampled_reference(const Operand& lhs, const Operand& rhs,
                                      const std::optional<MxQuant>& quant, int64_t block_rows = 256,
                                      int64_t block_stride = 1);
ErrorMetrics compare_sampled(const float* kernel_out, const MatmulDims& d, int64_t block_rows,
                             int64_t block_stride, const std::vector<double>& golden);
// Rows compared by a sample of block_rows-row blocks every block_stride blocks of R rows.
int64_t sampled_rows(int64_t R, int64_t block_rows, int64_t block_stride);
// Those row blocks, [first row, end row) each, in row order: the only rows of the kernel's output that
// compare_matmul and compare_sampled read.
std::vector<std::pair<int64_t, int64_t>> sample_blocks(int64_t R, int64_t block_rows, int64_t block_stride);

// Logical [K, F] values of Trainium x4 data [K/4, F] with its E8M0 scale tile ([K/4, F] unpacked, or
// packed [ceil(K/2048)*128, F]), in the x4 interleave `scheme`: out[f * K + k], i.e. [F, K] row-major.
void dequantize_x4(const uint8_t* data, const uint8_t* tile, int64_t K, int64_t F, bool packed,
                   num::Fp8Format fmt, std::vector<float>& out,
                   num::QuantScheme scheme = num::QuantScheme::WrapX);
// Logical [F, K] values of a BF16 array pre-swizzled as [K/4, 4F] in the x4 interleave `scheme`.
void unswizzle_bf16(const uint8_t* bytes, int64_t K, int64_t F, std::vector<float>& out,
                    num::QuantScheme scheme = num::QuantScheme::WrapX);

}  // namespace trnsim::ref
