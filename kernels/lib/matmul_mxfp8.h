// The MXFP8 matmul kernels' shared registry pieces (aws-neuron/nki-library matmul_mxfp8_generic_kernel
// and matmul_mxfp8_generic_backward_kernel), on the MXFP8 pipeline in kernels/lib/mxfp8/ (operand forms,
// loaders, tiling, schedule and epilogues are described there).
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
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/api/kernel.h"
#include "kernels/api/registry.h"
#include "kernels/lib/mxfp8/plan.h"

namespace trnsim::kernels {

// The tiling fields of a config object ("tile_m", ..., "TILES_IN_LOAD_N"; each an integer or null).
extern const std::vector<std::string> kMxTilingFields;
// Tiling from a JSON object (null = all auto); InputError "<kernel>: parameter '<param>': ..." for unknown
// fields or values that are not null or a positive integer.
mxfp8::Tiling parse_mx_tiling(const nlohmann::json& j, const std::string& kernel, const std::string& param);
// The parameters every MXFP8 matmul entry shares (tile_loop_order, float8_dtype, output_dtype, run_with_lnc2,
// lnc_2_shard_rhs, use_scale_packing, spill_reload, quant_scheme), with `shard_default` for lnc_2_shard_rhs.
std::vector<ParamSpec> mx_shared_params(const nlohmann::json& shard_default,
                                        const std::string& float8_default);
// Applies those parameters to `spec`.
void apply_mx_shared_params(const nlohmann::json& j, mxfp8::MatmulSpec& spec);

// Names of a kernel-input operand: its tensor, parameter prefix ("x" in "x_is_f_by_k"), scales tensor and the
// user-facing name of F.
struct MxInputNames {
  std::string tensor, param, scales, f_name;
};
// The form of a kernel-input operand from the entry's flags (`scales_shape` null = BF16); `pe_transpose`
// loads an F-by-K BF16 operand with the PE loader. InputError for a pre-swizzled K-by-F operand.
mxfp8::Operand mx_input_operand(const std::string& kernel, const MxInputNames& names, bool f_by_k,
                                bool swizzled, const nlohmann::json& scales_shape, bool pe_transpose);
// Declares the operand's kernel inputs on this core and binds them to it.
void bind_mx_input(Kernel& k, mxfp8::Operand& o, int64_t K, int64_t F, num::Fp8Format fp8);
// One matmul of kernel inputs into the kernel output `output` [M, N] (row stores).
void emit_mx_kernel_matmul(Kernel& k, const mxfp8::MatmulSpec& spec, const mxfp8::Plan& plan,
                           const std::string& output);

}  // namespace trnsim::kernels
