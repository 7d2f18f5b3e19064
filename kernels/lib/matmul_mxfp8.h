// The MXFP8 matmul kernels' shared pieces (aws-neuron/nki-library matmul_mxfp8_generic_kernel and
// matmul_mxfp8_generic_backward_kernel), on the MXFP8 pipeline in kernels/lib/mxfp8/ (operand forms, loaders,
// tiling, schedule and epilogues are described there).
//
// Kernel inputs by operand form (K = contraction, F = the operand's free dim M or N):
//   BF16 F-by-K [F, K]          dma_transpose into the interleaved layout, or PE transposes
//                               (disable_dma_transpose).
//   BF16 K-by-F [K, F]          rows straight onto partitions in interleave order.
//   BF16 pre-swizzled [K/4, 4F] the interleaved layout already (F-by-K operands only).
//   pre-quantized               x4 data [K/4, F] plus E8M0 scales [K/4, F] unpacked or [ceil(K/2048)*128, F]
//                               packed.
//
// Errors: InputError "kernel '<name>': ..." naming the parameter (mxfp8/plan.h for the planner's).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/api/params.h"
#include "kernels/lib/mxfp8/lib_api.h"
#include "kernels/lib/mxfp8/plan.h"

namespace trnsim::kernels {

// Which instruction stream an MXFP8 matmul kernel emits (the names the MoE kernels use for the same choice):
// nki-library's own (mxfp8/lib_matmul.h) or this project's restructured pipeline (mxfp8/matmul.h).
enum class MxSchedule { NkiLibrary, TrnsimOptimized };
extern const char* const kMxScheduleDoc;
// The kernel's `schedule` parameter, default nki_library (a port of a library kernel runs its stream).
template <class P>
void describe_mx_schedule(Schema<P>& s, MxSchedule P::*m) {
  s.choice(m, "schedule", kMxScheduleDoc,
           {{"nki_library", MxSchedule::NkiLibrary}, {"trnsim_optimized", MxSchedule::TrnsimOptimized}},
           MxSchedule::NkiLibrary);
}

// Names of a kernel-input operand: its tensor, parameter prefix ("x" in "x_is_f_by_k"), scales tensor and the
// user-facing name of F.
struct MxInputNames {
  std::string tensor, param, scales, f_name;
};
// The form of a kernel-input operand from the entry's flags (`scales_shape` empty = BF16); `pe_transpose`
// loads an F-by-K BF16 operand with the PE loader. InputError for a pre-swizzled K-by-F operand.
mxfp8::Operand mx_input_operand(const std::string& kernel, const MxInputNames& names, bool f_by_k,
                                bool swizzled, const std::optional<std::vector<int64_t>>& scales_shape,
                                bool pe_transpose);
// KernelPackage::input_hint of the MXFP8 matmul kernels: for the kernel input `input` of one of `specs`'
// operands (its x4 data, or its BF16 array), given as `file` of `shape`, when that shape is the operand's
// in another form (F-by-K [F, K], K-by-F [K, F], pre-swizzled [K/4, 4F]): the parameters that read the file
// as it is and the `trnsim quantize` command that makes the declared form from it; "" otherwise.
// `contraction`: the name of each input's K in the kernel's terms (absent: "K"); inputs in `fixed` have no
// *_is_swizzled / *_is_f_by_k parameters (only the command is suggested).
std::string mx_input_hint(const std::vector<mxfp8::MatmulSpec>& specs, const std::string& input,
                          const std::string& file, const std::vector<int64_t>& shape,
                          const std::map<std::string, std::string>& contraction = {},
                          const std::vector<std::string>& fixed = {});
// Declares the operand's kernel inputs on this core and binds them to it.
void bind_mx_input(Kernel& k, mxfp8::Operand& o, int64_t K, int64_t F, num::Fp8Format fp8);
// One matmul of kernel inputs into the kernel output `output` [M, N] (row stores).
void emit_mx_kernel_matmul(Kernel& k, const mxfp8::MatmulSpec& spec, const mxfp8::Plan& plan,
                           const std::string& output);
// The same on nki-library's own instruction stream (mxfp8/lib_matmul.h), with the kernel's tiles `t`.
void emit_mx_kernel_matmul_lib(mxfp8::lib::Tiles& t, const mxfp8::MatmulSpec& spec, const mxfp8::Plan& plan,
                               const std::string& output, bool fast_dma_transpose);

// One matmul of an MXFP8 kernel: its spec (operands not yet bound) and the kernel output it writes.
struct MxKernelMatmul {
  mxfp8::MatmulSpec spec;
  std::string output;
};
// Builds a kernel that runs `matmuls` in order on `schedule`. nki_library: InputError for what the library
// stream does not run (lib::unsupported, naming trnsim_optimized), null tiling fields filled by the library's
// fallback (lib_config.h), and two builds, a probe and the real one (lib_api.h SitePlan);
// `fast_dma_transpose` is matmul_mxfp8's flag (nki_library only). `named_phases`: each matmul in a
// PhaseScope named by its output.
KernelBuild build_mx_kernel(std::vector<MxKernelMatmul> matmuls, MxSchedule schedule, bool fast_dma_transpose,
                            bool named_phases, const BuildOptions& options);

}  // namespace trnsim::kernels
