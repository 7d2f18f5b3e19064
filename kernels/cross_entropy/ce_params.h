// Cross entropy on an LM head's logits: cross_entropy_fwd and cross_entropy_bwd (Trn3; Trn2 wherever no
// Trn3-only instruction is needed). TransformerEngine's parallel_cross_entropy brought to Trainium, with the
// logits gradient written directly as MXFP8 as TransformerEngine PR #3758 does ("MxFP8 gradient cross
// entropy option"), bit-identical to TransformerEngine's MXFP8 quantizer applied to the BF16 gradient.
//
// cross_entropy_fwd
//   inputs   logits [rows, V] bfloat16 (or float32), target [rows] int32 (an int64 .npy is accepted)
//   outputs  loss [rows] float32 (0 for ignored rows), or [1] = sum over non-ignored rows / max(count, 1)
//            with reduce_loss; row_max [rows], row_sumexp [rows] float32 (the backward recomputes the
//            softmax from them: softmax_i = exp(x_i - shift) / row_sumexp, shift = row_max, or 0 when
//            row_max is -inf); argmax [rows] int32 (the lowest index among ties).
//   loss_r = lse_r - (1 - ls) x_r[y_r] + sum_i (-ls / V) x_r[i],  lse = shift + log(row_sumexp)
//   (label smoothing ls spreads ls over the whole vocabulary; V is the global vocabulary, also under LNC2).
//   Online softmax over vocab chunks of `chunk` columns: running max m, running sum d relative to the shift
//   s(m) = m, or 0 while m is -inf (no finite logit seen yet: a masked vocabulary prefix), and the running
//   sum is rescaled by exactly 0 when the first finite chunk arrives (never by exp of something huge, whose
//   0 * Inf would be NaN: flash-attention issue #1930). Rows whose logits are all -inf give NaN loss (as
//   PyTorch); a -inf target logit gives +Inf; a +Inf or NaN logit makes the row NaN. Targets outside [0, V)
//   other than ignore_idx count as x[y] = -inf (+Inf loss). argmax of a row containing NaN is unspecified.
//
// cross_entropy_bwd
//   inputs   logits, target, row_max, row_sumexp (the forward's), grad_output [1] (a scalar) or [rows]
//   gradient dL/dx_ri = g_r c (softmax_ri - (1 - ls)[i = y_r] - ls / V), c = 1 / max(count, 1) with
//            reduce_loss else 1, zero rows for ignored targets; computed in FP32 as
//            q = exp(x + b) (b = -(s(m) + log d)), q_y -= (1 - ls), g = bf16(q * gc + h) with gc = g_r c and
//            h = -(ls / V) gc, then rounded once to BF16 (RNE). An ignored row is zero, or all NaN when its
//            row_max is NaN or +-Inf (a NaN or +Inf logit, or all -inf), as PyTorch's softmax backward
//            (0 x NaN) gives.
//   grad_quantizer none: input_grad [rows, V] bfloat16.
//   grad_quantizer mxfp8_e4m3 / mxfp8_e5m2: TransformerEngine's MXFP8 tensors of that BF16 gradient
//            input_grad_rowwise_data [rows, V] (FP8 bytes, blocks of 32 along V),
//            input_grad_columnwise_data [rows, V] (FP8 bytes, blocks of 32 along rows),
//            input_grad_rowwise_scale_inv [roundup(rows, 128), roundup(V/32, 4)] and
//            input_grad_columnwise_scale_inv [roundup(rows/32, 4), roundup(V, 128)] (E8M0 bytes), in TE's
//            compact layout (padding bytes 0x00) or, with scale_layout swizzled, TE's GEMM-swizzled one
//            (scale_layout swizzled with grad_quantizer none is an error).
//            rows and V must be multiples of 32.
//   rowwise_usage / columnwise_usage (TransformerEngine MXFP8Quantizer's usages, both true by default): with
//            one of them false the kernel neither writes that orientation's two tensors nor does its work
//            (its transposes, block maxima, scale chain entries, FP8 multiplies, stores and fix-up).
//   quantize_rule te (default): TransformerEngine's rule, bit for bit (amax ignoring NaN, FP32 multiply by
//            fl32(1/max_norm), E8M0 rounded up, elements x * 2^(127 - e) RNE satfinite), made with ALU
//            operations on chip; the bytes equal `trnsim quantize --rule te` of the BF16 gradient that the
//            same kernel writes with grad_quantizer none. quantize_rule trn3: Trn3's native quantize_mx
//            (another scale rule: other bytes, less time).
//   fused: auto quantizes the gradient on chip when the logits are BF16 and rows and V are multiples of 128
//            (the PR's conditions); otherwise (or with fused never) the BF16 gradient goes to an HBM scratch
//            and is quantized from there. Both give the same bytes.
//
// LNC2 (run_with_lnc2): the vocabulary is split between the two physical cores in 128-column blocks; the
// forward merges (max, sumexp, target logit, sum of logits, argmax) across the cores with sendrecv, as -inf
// safe as one core.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/api/params.h"
#include "sim/isa/instruction.h"
#include "sim/numerics/float_formats.h"

namespace trnsim::kernels::ce {

using isa::DType;

enum class GradQuantizer { None, Mxfp8E4M3, Mxfp8E5M2 };
enum class QuantizeRule { Te, Trn3 };
enum class ScaleLayout { Compact, Swizzled };
enum class Fused { Auto, Never };
enum class GradOutput { Scalar, PerRow };

// Parameters both kernels take.
struct CommonParams {
  int64_t rows = 0, V = 0;
  DType logits_dtype = DType::BF16;
  double label_smoothing = 0.0;
  int64_t ignore_idx = -100;
  bool reduce_loss = false;
  bool run_with_lnc2 = true;
  std::optional<int64_t> chunk;

  static void describe(Schema<CommonParams>& s) {
    s.dim(&CommonParams::rows, "rows", "tokens: rows of logits (batch x sequence)");
    s.dim(&CommonParams::V, "V", "vocabulary: columns of logits (global, also under LNC2)");
    s.choice(&CommonParams::logits_dtype, "logits_dtype", "dtype of logits",
             {{"bfloat16", DType::BF16}, {"float32", DType::F32}}, DType::BF16);
    s.add(&CommonParams::label_smoothing, "label_smoothing", "label smoothing ls in [0, 1]", 0.0).range(0, 1);
    s.add(&CommonParams::ignore_idx, "ignore_idx",
          "target value of rows that are ignored (loss 0, zero gradient); |value| <= 2^24", -100)
        .range(-(1 << 24), 1 << 24);
    s.add(&CommonParams::reduce_loss, "reduce_loss",
          "mean over non-ignored rows (count clamped to >= 1) instead of per-row losses", false);
    s.add(&CommonParams::run_with_lnc2, "run_with_lnc2",
          "split the vocabulary between both physical cores (LNC2); false: one core", true);
    s.add(&CommonParams::chunk, "chunk",
          "vocab columns per on-chip tile, a multiple of 128 (512 for quantize_rule trn3); null: 4096 "
          "forward, 2048 backward (1024 with an MXFP8 gradient and quantize_rule te)")
        .range(128, 16384);
  }
};

struct FwdParams {
  CommonParams c;
  static void describe(Schema<FwdParams>& s) { s.include(&FwdParams::c); }
};

struct BwdParams {
  CommonParams c;
  GradOutput grad_output = GradOutput::Scalar;
  GradQuantizer grad_quantizer = GradQuantizer::None;
  QuantizeRule quantize_rule = QuantizeRule::Te;
  ScaleLayout scale_layout = ScaleLayout::Compact;
  Fused fused = Fused::Auto;
  bool rowwise_usage = true, columnwise_usage = true;

  static void describe(Schema<BwdParams>& s) {
    s.include(&BwdParams::c);
    s.choice(&BwdParams::grad_output, "grad_output",
             "shape of input grad_output: scalar [1] or per_row [rows]",
             {{"scalar", GradOutput::Scalar}, {"per_row", GradOutput::PerRow}}, GradOutput::Scalar);
    s.choice(&BwdParams::grad_quantizer, "grad_quantizer",
             "none: BF16 input_grad; mxfp8_e4m3 / mxfp8_e5m2: TransformerEngine's MXFP8 gradient tensors",
             {{"none", GradQuantizer::None},
              {"mxfp8_e4m3", GradQuantizer::Mxfp8E4M3},
              {"mxfp8_e5m2", GradQuantizer::Mxfp8E5M2}},
             GradQuantizer::None);
    s.choice(&BwdParams::quantize_rule, "quantize_rule",
             "te: TransformerEngine's scale rule, bit for bit, with ALU operations; trn3: native quantize_mx",
             {{"te", QuantizeRule::Te}, {"trn3", QuantizeRule::Trn3}}, QuantizeRule::Te);
    s.choice(&BwdParams::scale_layout, "scale_layout",
             "E8M0 scale layout of an MXFP8 gradient: TE compact or GEMM-swizzled (swizzled with "
             "grad_quantizer none is an error)",
             {{"compact", ScaleLayout::Compact}, {"swizzled", ScaleLayout::Swizzled}}, ScaleLayout::Compact);
    s.choice(&BwdParams::fused, "fused",
             "auto: quantize on chip when logits are BF16 and rows, V are multiples of 128; never: BF16 "
             "gradient to an HBM scratch, then quantize",
             {{"auto", Fused::Auto}, {"never", Fused::Never}}, Fused::Auto);
    s.add(&BwdParams::rowwise_usage, "rowwise_usage",
          "MXFP8: write the rowwise tensors (TransformerEngine's quantizer usage); false skips the rowwise "
          "work too",
          true);
    s.add(&BwdParams::columnwise_usage, "columnwise_usage",
          "MXFP8: write the columnwise tensors; false skips the columnwise work (the PE transposes, column "
          "maxima and multiplies) too",
          true);
  }
  // Whether the MXFP8 gradient has its rowwise (axis 0) or columnwise (axis 1) tensors.
  bool uses(int axis) const { return axis == 0 ? rowwise_usage : columnwise_usage; }
  bool mxfp8() const { return grad_quantizer != GradQuantizer::None; }
  num::Fp8Format fp8() const {
    return grad_quantizer == GradQuantizer::Mxfp8E5M2 ? num::Fp8Format::E5M2 : num::Fp8Format::E4M3FN;
  }
  DType fp8_dtype() const { return fp8() == num::Fp8Format::E5M2 ? DType::FP8_E5M2 : DType::FP8_E4M3FN; }
  // The PR's conditions for quantizing on chip.
  bool is_fused() const {
    return mxfp8() && fused == Fused::Auto && c.logits_dtype == DType::BF16 && c.rows % 128 == 0 &&
           c.V % 128 == 0;
  }
};

}  // namespace trnsim::kernels::ce
