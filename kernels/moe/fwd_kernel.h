// The instruction streams of blockwise_mm_fwd_mxfp8 (aws-neuron/nki-library experimental/moe_mxfp8/fwd/
// bwmm_fwd_dropless_mxfp8.py), on the MXFP8 pipeline (kernels/lib/mxfp8/). Per block b with expert e (core s
// takes blocks s, s + cores, ...: SHARD_ON_BLOCK):
//
//   gather      token indices (one DMA into [128, B/128]); affinity offsets t*E + e (FP32 ALU) and B/128
//               indirect gathers of expert_affinities_masked; the affinities broadcast to [128, B] on the PE;
//               the block's hidden rows gathered 128 at a time (indirect DMA, -1 skipped into a zeroed tile)
//               and stored to a per-core HBM scratch [B, H] (nkilib _gather_block_tokens).
//   gate_up     G^T = W_gate[e] X^T and U^T = W_up[e] X^T, [I, B] each: one pipeline pass with the gate and
//               up weights as paired stationaries (the hidden block quantized once for both, as nkilib shares
//               the quantized hidden tile) and the block's tokens moving; the weights are expert 0's views
//               moved by a scalar_offset holding e (block_to_expert, loaded once).
//   activation  per finished [128 (i), tokens] tile: + bias, the clamps and the cast to compute_dtype; the
//               checkpoints stored straight from these tiles (their layout is [.., I, B]: no transposes);
//               SiLU on ACT, SiLU * up, * affinity (AFFINITY_ON_I; AFFINITY_ON_H: not) into the down GEMM's
//               operand: an SBUF resident [128, I/128, B] tile when it fits, else [I, B] in HBM (the
//               checkpoint itself).
//   down        Y = S W_down[e]^T [B, H]: the scaled intermediate (K-by-F, contraction I on partitions)
//               stationary, the down weight moving.
//   scatter     per finished [128 tokens, H] tile: AFFINITY_ON_H first casts the tile to compute_dtype and
//               stores it to down_proj_act_checkpoint [N, B, H] (save_down_proj_act: the backward's
//               affinity gradient reads it), then multiplies each row by its slot's affinity (FP32);
//               + down_proj_bias x affinity, cast to bfloat16, then a
//               read-modify-write (gather, add, scatter; is_tensor_update_accumulating) or a scatter into
//               this core's [T', H] slab; no_indirect_load stores the rows.
// Setup zeroes each core's slab; at the end both cores meet at a core_barrier and each sums the two slabs
// over every other 128-row tile into output_hidden_states (nkilib _reduce_output_shards). One core scatters
// into the output directly.
//
// Deviations from nkilib, for fewer instructions at the same data movement and numerics: the gate/up GEMMs
// run transposed (weights stationary) so their tiles leave PSUM in the checkpoints' [I, B] layout (nkilib
// computes [B, I] and PE-transposes every 128 x 128 piece), the scaled intermediate stays in SBUF when it
// fits (nkilib stores it to HBM and reloads it with DGT), and the down tiles are scattered from the
// accumulator (nkilib stores the block to HBM and reloads it per tile).
//
// Errors: InputError "kernel 'blockwise_mm_fwd_mxfp8': ..." naming the parameter and the reason.
#pragma once

#include <cstdint>

#include "kernels/api/kernel.h"
#include "kernels/lib/mxfp8/plan.h"
#include "kernels/moe/fwd_params.h"

namespace trnsim::kernels::moe {

inline constexpr const char* kFwdName = "kernel 'blockwise_mm_fwd_mxfp8'";

// The resolved forward: shapes, the two GEMMs and the SBUF the kernel keeps besides the pipeline's blocks.
struct FwdPlan {
  int64_t T = 0, rows = 0, H = 0, I = 0, E = 0, B = 0, N = 0;
  int cores = 1;
  bool indirect = true;  // !no_indirect_load
  bool slabs = false;    // LNC2 with scatters: one slab per core, summed at the end
  bool resident = true;  // the scaled intermediate stays in SBUF for the down GEMM
  int64_t gu_chunk = 0, down_chunk = 0, gather_chunk = 0;  // columns per epilogue / gather step
  mxfp8::MatmulSpec gu, down;                              // operand forms; views are bound per block
  mxfp8::Plan gu_plan, down_plan;
  int64_t reserved_sbuf = 0;  // bytes per partition
};

// The parameter checks both schedules share (InputError naming the parameter and the reason).
void check_fwd(const FwdParams& p, const isa::Limits& limits);

// Validates the parameters (InputError naming the parameter and the reason) and plans both GEMMs.
FwdPlan plan_fwd(const FwdParams& p, const isa::Limits& limits);

// The kernel function of one core.
void emit_fwd(Kernel& k, const FwdParams& p, const FwdPlan& plan);

}  // namespace trnsim::kernels::moe
