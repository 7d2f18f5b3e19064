// Host references of the cross-entropy kernels.
//
//  - FP64 math (what the kernels approximate): per row, m = max x (NaN if any x is NaN), shift s = m or 0
//  when
//    m = -inf, d = sum exp(x - s), lse = s + log d, loss = lse - (1 - ls) x_y - (ls / V) sum x (0 for ignored
//    rows), argmax the lowest index of the maximum; gradient gc (softmax - (1 - ls)[i = y] - ls / V) with
//    gc = g c (0 for ignored rows). An all -inf row gives NaN (loss and gradient), a -inf target logit +Inf
//    loss, as in PyTorch. An ignored row's gradient is 0, or NaN when its maximum is not finite (a NaN or
//    +Inf logit, or all -inf), as PyTorch's softmax backward gives.
//  - The kernel's own BF16 gradient, bit for bit: the same FP32 operations in the same order, through the
//    ALU and activation functions the simulator executes (sim/isa/alu.h), so the MXFP8 outputs can be
//    checked byte for byte against num::quantize of it.
//
// Logits are a host tensor [rows, V] of bfloat16 or float32; target int32 [rows]; row statistics float32.
// Work is split over host threads by rows; results do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cross_entropy/ce_params.h"
#include "sim/tensor/host_tensor.h"

namespace trnsim::kernels::ce {

// A per-thread memo of a row's values as a function of a BF16 logit's bits: a BF16 row of V ~ 10^5 logits
// holds a few thousand distinct values, so the exps (the references' main cost) are computed once per
// distinct value and row. Stamps mark the entries of the current row, so nothing is cleared between rows.
template <class T>
class Bf16Memo {
 public:
  Bf16Memo() : val_(65536), stamp_(65536, 0) {}
  void next_row() {
    if (++gen_ == 0) {  // wrapped: stamps of 2^32 rows ago would look current
      std::fill(stamp_.begin(), stamp_.end(), 0u);
      gen_ = 1;
    }
  }
  // The value of `bits` in this row, computed by f(bits) on first use.
  template <class F>
  T get(uint16_t bits, F&& f) {
    if (stamp_[bits] != gen_) {
      val_[bits] = f(bits);
      stamp_[bits] = gen_;
    }
    return val_[bits];
  }

 private:
  std::vector<T> val_;
  std::vector<uint32_t> stamp_;
  uint32_t gen_ = 0;
};

// Row r of logits [rows, V] (bfloat16 or float32) as FP32 into out[0, V) (exact).
void logits_row(const tensor::HostTensor& logits, int64_t r, float* out);

struct FwdReference {
  std::vector<double> loss;        // [rows]
  std::vector<double> row_max;     // [rows]
  std::vector<double> row_sumexp;  // [rows], relative to the shift
  std::vector<int32_t> argmax;     // [rows]
  std::vector<uint8_t> has_nan;    // [rows]: the row holds a NaN logit (argmax unspecified)
  int64_t valid = 0;               // non-ignored rows
  double mean = 0;                 // sum of loss / max(valid, 1)
};
FwdReference fwd_reference(const tensor::HostTensor& x, const std::vector<int32_t>& target,
                           const CommonParams& p, int threads);

// FP64 gradient of rows [r0, r1) (row-major [r1 - r0, V]); grad_output has 1 or rows values.
std::vector<double> grad_reference(const tensor::HostTensor& x, const std::vector<int32_t>& target,
                                   const std::vector<float>& grad_output, const CommonParams& p, int64_t r0,
                                   int64_t r1, int threads);
// Same into g [r1 - r0, V].
void grad_reference(const tensor::HostTensor& x, const std::vector<int32_t>& target,
                    const std::vector<float>& grad_output, const CommonParams& p, int64_t r0, int64_t r1,
                    int threads, double* g);

// The kernel's BF16 gradient from its inputs, bit for bit, a row range at a time (any thread may run any
// range: the result does not depend on the split). The vectors are referenced, not copied.
class GradEmulation {
 public:
  GradEmulation(const tensor::HostTensor& x, const std::vector<int32_t>& target,
                const std::vector<float>& row_max, const std::vector<float>& row_sumexp,
                const std::vector<float>& grad_output, const CommonParams& p);
  // Rows [r0, r1) as raw BF16 bits into out [r1 - r0, V].
  void rows(int64_t r0, int64_t r1, uint16_t* out) const;

 private:
  const tensor::HostTensor& x_;
  const std::vector<int32_t>& target_;
  const std::vector<float>&row_max_, &row_sumexp_, &grad_output_;
  CommonParams p_;
  float c_ = 1.0f, g_scalar_ = 0.0f;
  bool scalar_ = false;
};

// The kernel's BF16 gradient [rows, V] (raw bits) from its inputs, bit for bit.
std::vector<uint16_t> emulate_grad_bf16(const tensor::HostTensor& x, const std::vector<int32_t>& target,
                                        const std::vector<float>& row_max,
                                        const std::vector<float>& row_sumexp,
                                        const std::vector<float>& grad_output, const CommonParams& p,
                                        int threads);

// Runs fn(begin, end) over [0, n) in at most `threads` contiguous pieces.
void parallel_rows(int64_t n, int threads, const std::function<void(int64_t, int64_t)>& fn);

// Host threads for references: hardware concurrency, 1..16.
int reference_threads();

}  // namespace trnsim::kernels::ce
