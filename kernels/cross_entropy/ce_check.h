// Output checks of the cross-entropy kernels (kernels/api/checks.h kinds).
//
// cross_entropy_fwd
//   loss        tolerance against the FP64 loss (per row, or the mean); NaN/Inf only where FP64 has them
//   row_max     exact (the maximum of the logits is exact in FP32); NaN for rows holding NaN
//   row_sumexp  tolerance, rel L2 <= 1e-4 (FP32 sequential sums of up to V terms)
//   argmax      bit-exact against the lowest index of the maximum (rows holding NaN: any value accepted)
// cross_entropy_bwd
//   input_grad (grad_quantizer none)  tolerance against the FP64 gradient, plus "input_grad:emulation":
//               bit-exact against the host emulation of the kernel's BF16 gradient (ce_reference.h)
//   MXFP8 outputs  bit-exact against num::quantize (rule te or trn3) of that emulated BF16 gradient, with
//               TE's compact (zero padding) or swizzled scales; "input_grad:emulation_vs_fp64" reports how
//               far that BF16 gradient is from the FP64 one.
// Expected non-finite values, stated and accepted exactly: NaN loss and NaN gradient rows for rows whose
// logits are all -inf, +Inf loss for a -inf target logit (and with label smoothing for any -inf logit).
// Large outputs compare FP64 references on evenly spaced 32-row blocks (about 2^26 values) unless
// --full-reference; bit-exact checks always cover every byte. Both stream over row steps (emulate, quantize,
// compare 128 rows at a time per host thread; FP64 references 32 rows at a time): no copy of a whole
// [rows, V] gradient, reference or expected tensor is held.
#pragma once

#include <vector>

#include "kernels/api/checks.h"
#include "kernels/cross_entropy/ce_params.h"

namespace trnsim::kernels::ce {

std::vector<OutputCheck> fwd_checks(const FwdParams& p);
std::vector<OutputCheck> bwd_checks(const BwdParams& p);

// special_tolerance streamed: add() chunks of (kernel, golden) values in order, then finish(); the same
// result as one call on the concatenation.
class SpecialTolerance {
 public:
  explicit SpecialTolerance(const Tolerance& tol) : tol_(tol), acc_(tol.rtol) {}
  void add(const float* k, const double* g, size_t n);
  tensor::CheckResult finish(const std::string& output, const tensor::HostTensor& out, int64_t rows_compared,
                             int64_t rows_total, const std::string& what_nonfinite) const;

 private:
  Tolerance tol_;
  ref::MetricsAccumulator acc_;
  int64_t expected_ = 0, mismatched_ = 0, kernel_nonfinite_ = 0;
};

// Tolerance result of kernel values k against FP64 golden values g (same length) where non-finite golden
// values must be matched exactly by the kernel (NaN by NaN, +-Inf by the same Inf) and the metrics cover the
// finite ones. `what_nonfinite` explains the expected non-finite values in the note.
tensor::CheckResult special_tolerance(const std::string& output, const tensor::HostTensor& out,
                                      const std::vector<float>& k, const std::vector<double>& g,
                                      const Tolerance& tol, int64_t rows_compared, int64_t rows_total,
                                      const std::string& what_nonfinite);

}  // namespace trnsim::kernels::ce
