// How a kernel package checks its outputs after a run with numerics: each OutputCheck reads the run's inputs
// and outputs (host tensors) and returns a tensor::CheckResult of one of three kinds
// (sim/tensor/check_result.h):
//
//   tolerance  FP64 references, "exact" (the unquantized math) and "quantized" (with the kernel's MX
//              quantization applied to the operands it quantizes): pass = nki-library's comparator against
//              the exact reference (allclose with atol = 0.2 max|golden| and rtol 1e-3, cosine >= 0.995,
//              normalized Euclidean <= 0.10) AND rel L2 against the quantized reference <= 1e-5 (float32
//              outputs) or 2^-8 (bfloat16 outputs, whose rounding alone is ~1e-3).
//   bit_exact  the output's bytes equal a host emulation's, byte for byte (how many differ is reported).
//   scalar     one value within an absolute or relative tolerance of its reference.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ref/matmul_ref.h"
#include "kernels/ref/metrics.h"
#include "sim/tensor/check_result.h"
#include "sim/tensor/host_tensor.h"

namespace trnsim::kernels {

inline constexpr double kRelL2BoundF32 = 1e-5;
inline constexpr double kRelL2BoundBf16 = 1.0 / 256.0;

class CheckContext {
 public:
  CheckContext(const std::map<std::string, tensor::HostTensor>& inputs,
               const std::map<std::string, tensor::HostTensor>& outputs, bool full_reference)
      : inputs_(inputs), outputs_(&outputs), full_reference_(full_reference) {}
  // The context of OutputCheck::prepare: the inputs only (output() is an Error).
  CheckContext(const std::map<std::string, tensor::HostTensor>& inputs, bool full_reference)
      : inputs_(inputs), full_reference_(full_reference) {}
  // A kernel input or output by name; Error if the kernel did not declare it, or an output is asked of a
  // prepare step's context (package bugs).
  const tensor::HostTensor& input(const std::string& name) const;
  const tensor::HostTensor& output(const std::string& name) const;
  bool has_input(const std::string& name) const { return inputs_.count(name) > 0; }
  // True: compute references on every output row (trnsim run --full-reference); else large outputs may be
  // checked on a sample of rows.
  bool full_reference() const { return full_reference_; }

 private:
  const std::map<std::string, tensor::HostTensor>& inputs_;
  const std::map<std::string, tensor::HostTensor>* outputs_ = nullptr;
  bool full_reference_;
};

// One output's check in two steps. `prepare` (optional) computes what depends on the inputs alone (the FP64
// references) and keeps it in state the check shares with `run`; trnsim calls it on a second host thread
// while the simulation runs, with a context of the inputs only, and it must not touch anything the
// simulation touches. `run` compares the output with the references, computing them itself when `prepare`
// did not run (tests call `run` alone): the result is the same either way. A kernel's checks may share that
// state (the MoE kernels: the first check's prepare step computes the references every check reads).
struct OutputCheck {
  std::string output;  // the kernel output it checks
  std::function<tensor::CheckResult(const CheckContext&)> run;
  double reference_flops = 0;  // host work of the references (for progress messages)
  std::function<void(const CheckContext&)> prepare = nullptr;
  // Host bytes the references hold at most besides the run's inputs and outputs (their copies of the
  // operands), given each kernel input's and output's shape by name: the memory check before a run counts
  // them. Unset: 12 bytes per element of the checked output (its FP32 values and FP64 reference).
  std::function<double(const std::map<std::string, std::vector<int64_t>>& shapes)> reference_bytes = nullptr;
  // Host bytes the prepare step keeps from the simulation until run (the prepared reference rows); the
  // memory check adds them up over the checks. Unset: none.
  std::function<double(const std::map<std::string, std::vector<int64_t>>& shapes)> prepared_bytes = nullptr;
};

// --- tolerance checks

// The pass line of a tolerance check; the rel L2 bound defaults by output dtype.
struct Tolerance {
  double atol_factor = ref::kNkilibAtolFactor;
  double rtol = ref::kNkilibRtol;
  double min_cosine = ref::kNkilibMinCosine;
  double max_norm_euclidean = ref::kNkilibMaxNormEuclidean;
  std::optional<double> max_rel_l2_vs_quantized;
};

// A tolerance result from metrics already computed against the exact and the quantized reference (equal
// when the kernel does not quantize). `rows_compared` < `rows_total` adds a sampling note; `rows_are_experts`
// when the sample is of whole experts (an MoE weight gradient's [E, ...] slices), not of row blocks.
tensor::CheckResult tolerance_result(const std::string& output, const tensor::HostTensor& out,
                                     const ref::ErrorMetrics& vs_exact, const ref::ErrorMetrics& vs_quantized,
                                     bool quantized, const Tolerance& tol = {}, int64_t rows_compared = 0,
                                     int64_t rows_total = 0, bool rows_are_experts = false);

// Elementwise FP64 golden values for every element of `output`; the quantized reference is each value cast to
// the output's dtype as the engines cast (RNE, FP8 saturating). An integer output (int8 to
// uint32) is compared exactly instead: a bit-exact check against the golden values, which must be integers in
// its dtype's range (else a failure naming the first that is not), plus max_abs_err.
OutputCheck elementwise_check(const std::string& output,
                              std::function<std::vector<double>(const CheckContext&)> golden,
                              const Tolerance& tol = {});

// A matmul output: out[R, C] = sum_t L(r, t) Rhs(t, c) over two kernel inputs (kernels/ref/matmul_ref.h
// explains the axes), with optional MX quantization of both operands along the contraction. Outputs whose
// FP64 reference costs more than 32 GFLOP are checked on an evenly spaced sample of 32-row blocks unless
// full_reference.
struct MatmulOperand {
  MatmulOperand(std::string input_, ref::Contract axis_ = ref::Contract::Cols, std::string scales_ = "",
                bool swizzled_ = false)
      : input(std::move(input_)), axis(axis_), scales(std::move(scales_)), swizzled(swizzled_) {}
  std::string input;  // kernel input name
  ref::Contract axis = ref::Contract::Cols;
  // A pre-quantized input: `input` is x4 data [K/4, F] and `scales` names its E8M0 scales input ([K/4, F],
  // or packed [ceil(K/2048)*128, F]); the reference dequantizes them (quant's format and scheme) and takes
  // the values as MX values. `axis` is then ignored (K is the contraction).
  std::string scales;
  // A BF16 input pre-swizzled (wrapX) as [K/4, 4F]; `axis` is ignored.
  bool swizzled = false;
};
OutputCheck matmul_check(const std::string& output, MatmulOperand lhs, MatmulOperand rhs,
                         std::optional<ref::MxQuant> quant, double flops, const Tolerance& tol = {});

// --- bit-exact and scalar checks

// `expected` holds the bytes a host emulation gives for `output` (same dtype and shape).
tensor::CheckResult bit_exact_result(const std::string& output, const tensor::HostTensor& out,
                                     const tensor::HostTensor& expected);
OutputCheck bit_exact_check(const std::string& output,
                            std::function<tensor::HostTensor(const CheckContext&)> expected);

// Element `index` of `output` against `expected`: passes if |value - expected| <= abs_tol or
// <= rel_tol |expected| (equal infinities pass; NaN passes only against a NaN expectation).
tensor::CheckResult scalar_result(const std::string& output, const tensor::HostTensor& out, int64_t index,
                                  double expected, double abs_tol, double rel_tol);

}  // namespace trnsim::kernels
