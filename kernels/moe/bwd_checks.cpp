#include "kernels/moe/bwd_checks.h"

#include <fmt/format.h>

#include <utility>

#include "sim/base/error.h"

namespace trnsim::kernels::moe {

void bwd_fail(const std::string& msg) {
  throw InputError(fmt::format("{}: {}", kBwdName, msg));
}

namespace {

void fail(const std::string& msg) {
  bwd_fail(msg);
}

const char* scheme_name(num::QuantScheme s) {
  return s == num::QuantScheme::OneX32 ? "1x32" : "wrapX";
}

// The swizzle-mode and transpose rejections (nkilib Gen3 blockwise_mm_bwd_mxfp8 entry and config asserts).
void check_modes(const BwdParams& p) {
  const num::QuantScheme q = p.quant_scheme();
  for (int ph = 2; ph <= 4; ++ph) {
    const auto& c = p.phase_config(ph);
    const num::QuantScheme s = c ? c->quant_scheme : num::QuantScheme::WrapX;
    if (s != q)
      fail(fmt::format(
          "parameter 'phase{}_config.quant_scheme' = {} but phase1_config.quant_scheme = {}: every phase "
          "must use the same quantization scheme (nkilib MXFP8MOEBwdConfig; one x4 interleave per tensor "
          "for all the phases that read it)",
          ph, scheme_name(s), scheme_name(q)));
  }
  const mxfp8::Swizzle Pe = mxfp8::Swizzle::Pe;
  if (p.E > 1)
    for (auto [m, name] : {std::pair{p.down_weight_swizzle, "down_weight_swizzle_mode"},
                           std::pair{p.gate_up_weight_swizzle, "gate_up_weight_swizzle_mode"}})
      if (m == Pe)
        fail(fmt::format(
            "parameter '{}' = PE needs E == 1, got E = {}: the PE-transpose loader ignores the per-expert "
            "scalar_offset (nkilib); use DGT",
            name, p.E));
  if (p.pe_transpose_only) {
    if (!p.single_expert_dense) fail("parameter 'pe_transpose_only': needs single_expert_dense");
    if (p.fast_dma_transpose)
      fail(
          "parameters 'pe_transpose_only' and 'fast_dma_transpose': pe_transpose_only keeps every "
          "transpose on the PE, fast_dma_transpose is a DMA transpose");
    if (p.phase3_transpose_mode != TransposeMode::NC || p.phase4_transpose_mode != TransposeMode::NC)
      fail(
          "parameter 'pe_transpose_only': needs phase3_transpose_mode and phase4_transpose_mode NC (the DMA "
          "mode transposes on the DMA engine)");
    for (auto [m, name] : {std::pair{p.output_grad_swizzle, "output_grad_swizzle_mode"},
                           std::pair{p.down_weight_swizzle, "down_weight_swizzle_mode"},
                           std::pair{p.d_gate_up_swizzle, "d_gate_up_swizzle_mode"},
                           std::pair{p.gate_up_weight_swizzle, "gate_up_weight_swizzle_mode"},
                           std::pair{p.d_gate_up_t_swizzle, "d_gate_up_t_swizzle_mode"},
                           std::pair{p.hidden_states_t_swizzle, "hidden_states_t_swizzle_mode"},
                           std::pair{p.output_grad_t_swizzle, "output_grad_t_swizzle_mode"},
                           std::pair{p.scaled_intermediate_t_swizzle, "scaled_intermediate_t_swizzle_mode"}})
      if (m != Pe)
        fail(fmt::format("parameter 'pe_transpose_only': needs {} = PE (DGT is a DMA transpose)", name));
  }
  if (p.fast_dma_transpose && p.E > 1) {
    const char* w = !p.down_weight_scales && p.down_weight_swizzle != Pe         ? "down_proj_weight"
                    : !p.gate_up_weight_scales && p.gate_up_weight_swizzle != Pe ? "gate_up_proj_weight"
                                                                                 : nullptr;
    if (w)
      fail(fmt::format(
          "parameter 'fast_dma_transpose' with E = {}: the direct 4-D DGT pattern ignores the per-expert "
          "scalar_offset (nkilib SwizzleMode DGT_FAST), so the BF16 {} of every block would be expert 0's; "
          "give pre-quantized weights or E = 1",
          p.E, w));
  }
}

}  // namespace

void check_bwd(const BwdParams& p, const isa::Limits& limits) {
  if (limits.generation != isa::Generation::Trn3)
    fail("needs Trn3 (nc_matmul_mx and quantize_mx exist on Trn3 only); the hardware is Trn2");
  if (const std::string why = p.clamp_limits.problem(); !why.empty()) fail(why);
  if (const std::string why = activation_problem(p.activation_type, "blockwise_mm_bwd_mxfp8"); !why.empty())
    fail(why);
  // The documented rejections first (nkilib blockwise_mm_bwd_mxfp8 entry asserts).
  if (p.num_valid_tokens && !p.single_expert_dense)
    fail(
        "parameter 'num_valid_tokens': needs single_expert_dense (the count bounds the dense mode's block "
        "loop; routed blocks are bounded by token_position_to_id)");
  if (p.num_valid_tokens && p.bias)
    fail("parameters 'num_valid_tokens' and 'bias': bias is not supported in single_expert_dense mode");
  if (p.num_valid_tokens && p.scaled_given())
    fail(
        "parameters 'num_valid_tokens' and 'checkpoint_config.save_scaled_intermediate': the forward leaves "
        "the checkpoint's rows past num_valid_tokens undefined; Phase 4 must use Phase 1's scaled "
        "intermediate");
  if (p.single_expert_dense) {
    if (p.E != 1)
      fail(fmt::format("parameter 'single_expert_dense': needs exactly one expert (E = 1), got E = {}", p.E));
    if (p.T % p.block_size != 0)
      fail(fmt::format(
          "parameter 'single_expert_dense': needs T % block_size == 0 (contiguous blocks), got T = {}, "
          "block_size = {}",
          p.T, p.block_size));
    if (p.accumulate_hidden_states_grad)
      fail(
          "parameter 'single_expert_dense': needs accumulate_hidden_states_grad = false (each token is in "
          "one block)");
    if (p.num_blocks && *p.num_blocks != p.T / p.block_size)
      fail(fmt::format("parameter 'num_blocks' = {}: single_expert_dense has T / block_size = {} blocks",
                       *p.num_blocks, p.T / p.block_size));
  }
  if (p.bias && p.single_expert_dense)
    fail("parameters 'bias' and 'single_expert_dense': bias is not supported in single_expert_dense mode");
  if (p.bias && !p.gate_up_given())
    fail(
        "parameters 'bias' and 'checkpoint_config.save_gate_up_proj_act' = false: recomputing gate/up would "
        "need "
        "the gate/up bias, which is not an input of the backward; give the checkpoint");
  const int64_t B = p.block_size;
  if (B != 128 && B != 256 && B != 512 && B != 1024 && B != 2048 && B != 4096)
    fail(fmt::format("parameter 'block_size': must be 128, 256, 512, 1024, 2048 or 4096, got {}", B));
  const int cores = p.cores();
  for (auto [v, name] : {std::pair{p.H, "H"}, std::pair{p.I_TP, "I_TP"}})
    if (v % (128 * cores) != 0)
      fail(fmt::format(
          "parameter '{}' = {} must be a multiple of {} (128 per core: SHARD_ON_FREE gives each of the {} "
          "core(s) {} / {} rows of x4 data in groups of 128; a model whose size is not, e.g. 2880, runs "
          "zero-padded to the next multiple, 3072)",
          name, v, 128 * cores, cores, name, cores));
  if (p.top_k > p.E) fail(fmt::format("parameter 'top_k' = {} is more than E = {} experts", p.top_k, p.E));
  if (p.single_expert_dense && p.top_k != 1)
    fail(fmt::format("parameter 'top_k' = {}: single_expert_dense has one expert per token", p.top_k));
  if (p.top_k > 1 && !p.accumulate_hidden_states_grad)
    fail(fmt::format(
        "parameter 'accumulate_hidden_states_grad' = false overwrites a token's rows with each of its "
        "blocks: only valid for top_k = 1, got top_k = {}",
        p.top_k));
  if (p.on_h() && !p.down_act_given())
    fail(
        "parameter 'affinity_option' = AFFINITY_ON_H: needs checkpoint_config.save_down_proj_act "
        "(down_proj_act_checkpoint): the affinity gradient is the sum over H of the down projection's "
        "output times dY, which the backward does not recompute");
  if (!p.on_h() && p.down_act_given())
    fail(
        "parameter 'checkpoint_config.save_down_proj_act': down_proj_act_checkpoint is for AFFINITY_ON_H "
        "only (AFFINITY_ON_I derives the affinity gradient in Phase 1)");
  if (p.on_h() && p.bias)
    fail(
        "parameters 'affinity_option' = AFFINITY_ON_H and 'bias': the affinity gradient under AFFINITY_ON_H "
        "is the sum over H of dY times the down output with its bias (nkilib: (h W_down + b_down) x "
        "affinity), while down_proj_act_checkpoint holds the down GEMM's output without the bias, which is "
        "not an input of the backward; use AFFINITY_ON_I with bias");
  if (p.on_h() && p.scaled_given())
    fail(
        "parameters 'affinity_option' = AFFINITY_ON_H and 'checkpoint_config.save_scaled_intermediate': "
        "the forward never forms intermediate x affinity under AFFINITY_ON_H; Phase 4 reads the unscaled "
        "intermediate (intermediate_checkpoint_T with save_intermediate, else Phase 1's)");
  if (p.gate_up_weight_scales && !p.gate_up_given())
    fail(
        "parameters 'gate_up_weight_scales' and 'checkpoint_config.save_gate_up_proj_act' = false: "
        "recomputing gate/up contracts the weights over H, but pre-quantized gate/up weights are quantized "
        "along Phase 2's contraction 2*I_TP; give the checkpoint");
  check_modes(p);
  if (p.rows() * p.E >= (int64_t{1} << 24))
    fail(fmt::format(
        "T' * E = {} * {} must be below 2^24: the affinity offsets t * E + e are computed on the FP32 ALU",
        p.rows(), p.E));
}

}  // namespace trnsim::kernels::moe
