// The instruction streams of blockwise_mm_bwd_mxfp8 (aws-neuron/nki-library experimental/moe_mxfp8/bwd/
// bwmm_bwd_dropless_mxfp8.py), on the MXFP8 pipeline (kernels/lib/mxfp8/). Both cores walk all N blocks in
// order (SHARD_ON_FREE: core c owns rows [c I/2, (c+1) I/2) of I in Phase 1 and columns [c H/2, (c+1) H/2)
// of H in Phases 2-4; one core owns everything). Per block b with expert e:
//
//   gather    token indices (one DMA into [128, B/128]); affinity offsets t*E + e (FP32 ALU), kept for the
//             whole run; the affinities gathered and broadcast to [128, B]; the block's dY rows gathered
//             into a per-core HBM scratch [B, H] (and the hidden rows too when gate/up are recomputed).
//   P0        only without gate_up_proj_act_checkpoint_T: G^T, U^T = W_gate[e]^T-slices x X^T [I/2, B] (the
//             forward's gate/up GEMMs, the weight slices of expert e stationary, read K-by-F), clamped and
//             cast into a per-core scratch in the checkpoint's layout.
//   P1        d_int^T [I/2, B] = W_down[e] dY^T (contraction H; the down weight of expert e stationary, moved
//             by a scalar_offset holding e). Per finished [128 (i), tokens] tile, with gate/up from the
//             checkpoint (already [I, B]: no transposes): sig = sigmoid(gate), silu = gate sig, inter = silu
//             up, the affinity-gradient partial += d_int inter (unscaled, FP32), d_int *= affinity
//             (AFFINITY_ON_I), d_up = d_int silu, d_gate = d_int silu' up with silu' = sig (1 + gate (1 -
//             sig)), both masked by the strict clamp limits; d_gate_up^T [2I, B] and the scaled intermediate
//             inter x affinity [I, B] stored in bfloat16 to scratch shared by the cores. After the GEMM the
//             partial is summed over partitions on the PE (ones x partial) into one FP32 column per
//             128-token tile. LNC2: core_barrier on the shared scratch.
//   P2        dX [B, H/2] = d_gate_up W_gu[e]^T (contraction 2I: the gate and up products fused), d_gate_up^T
//             K-by-F (resident in SBUF when it fits, else read from the scratch), added to hidden_states_grad
//             rows by read-modify-write (accumulate_hidden_states_grad) or scattered.
//   P3        dW_gu[e] [H/2, 2I] += X^T d_gate_up (contraction over the block's tokens: X rows gathered
//             K-by-F straight from hidden_states, d_gate_up^T F-by-K from the scratch), read-modify-written
//             into gate_up_proj_weight_grad [E, H, 2, I] at expert e (scalar_offset).
//   P4        dW_down[e] [I, H/2] += S^T dY (S the scaled intermediate: its checkpoint when given, else
//             Phase 1's), read-modify-written into down_proj_weight_grad [E, I, H].
// single_expert_dense (E = 1): block b's slots are tokens [b B, (b + 1) B) (an iota, no routing tensors).
// With num_valid_tokens the block loop is dynamic: it runs blocks [0, ceil(count / B)) (NKI
// nl.fori_loop / nl.dynamic_range with a VirtualRegister bound: the count is DMA'd to SBUF, register_load
// puts it in a sequencer register, and the loop is a compare-and-branch on it; NKI docs, "NKI Dynamic
// Loops", nki.isa.register_load). The blocks from ceil(count / B) on emit nothing: no instruction, no DMA,
// and the affinity-gradient exchange and scatter cover the executed blocks' tiles only; in the last
// executed block the slots from the count on become -1 and are skipped like padding, and Phase 1 selects 0
// for their checkpoint values (undefined, perhaps NaN, which 0 x NaN would carry into the weight gradients).
// The rows past the count are never computed (nkilib: undefined; here they keep the setup's zeros). How it is
// modelled: the count is an input known before the run, so the builder reads it (BuildOptions::input_values)
// and emits the loop with its trip count; the count's DMA into SBUF is emitted as before (the valid-slot mask
// reads it, so block 0 waits for it), while register_load and the per-iteration compare-and-branch are
// sequencer control instructions this model does not charge (no public latency figure; a few cycles against a
// block's microseconds). Without the count's value (a build outside a workload) every block is emitted; a
// workload's declaration build (BuildOptions::declare_only, made to learn the inputs) runs none. Dense mode
// zeroes the weight gradients and accumulates (nkilib overwrites on block 0: the same values, as
// bfloat16(0 + x) = bfloat16(x), for one more read per block 0).
// With bias, Phase 1 also sums the bfloat16 d_gate and d_up of each tile over its tokens (tensor_reduce) into
// the block's gate/up bias gradient, and after the GEMM the PE sums affinity x dY over the block's slots into
// the down bias gradient; both are read-modify-written at expert e (nkilib: the same sums).
// AFFINITY_ON_H (the forward multiplied the down output by the affinity): in the gather phase, per 128 slots
// and H chunk, the dY rows and down_proj_act_checkpoint are multiplied and summed over this core's columns of
// H into the slot's affinity-gradient partial (DVE), and the dY rows are scaled by the affinity in place in
// the scratch (ACT, bfloat16); Phase 1 then reads the scaled rows and its epilogue neither multiplies d_int
// by the affinity nor sums d_int x inter; Phase 4 gathers the scaled rows back from the scratch (a row index
// of the ring's rows) against the unscaled intermediate (intermediate_checkpoint_T, or Phase 1's); the down
// bias gradient would sum the scaled rows (ones, not the affinities, on the PE), but bias with AFFINITY_ON_H
// is rejected: the affinity gradient needs the down output with its bias, which down_proj_act_checkpoint
// lacks and the backward has no input for.
// Pre-quantized weights (x4 data and E8M0 scales along the reading phase's contraction) are the Phase 1 /
// Phase 2 operands as given, moved to the block's expert by the same scalar_offset (data and scales).
// Setup zeroes each core's part of every gradient (skip_grad_initialization: not) and loads block_to_expert.
// After the loop the cores swap their affinity-gradient partials (sendrecv), add them, and each scatters
// its half of the 128-token tiles into expert_affinities_masked_grad at t*E + e.
//
// Per phase: spill_reload, scale packing and the quant_scheme of its matmul (BwdPhaseConfig). Under 1x32 the
// block's token ids are also loaded (routed: a strided DMA; dense: an iota) in the 1x32 interleave order for
// the K-by-F gathers of Phases 3 and 4, and the resident d_gate_up^T is loaded in that order. The swizzle
// modes pick DGT or the PE loader for each F-by-K HBM operand: dY rows and down weight (P1), gate/up weight
// (P2), d_gate_up^T (P3), scaled intermediate (P4), hidden rows (P0); the other nkilib modes name operands
// this kernel reads K-by-F (no transpose to choose).
//
// Deviations from nkilib, same data movement class and numerics: the Phase 1 GEMM runs transposed (weights
// stationary) so its tiles meet the checkpoint's [I, B] layout without PE transposes; Phases 3 and 4 choose
// M and N so their results land in the weight gradients' own orientation (no 128 x 128 PE transposes
// before the read-modify-write); the block's X and dY rows for Phases 3/4 are gathered straight into
// the pipeline's K-by-F staging instead of transposed scratch copies.
//
// Errors: InputError "kernel 'blockwise_mm_bwd_mxfp8': ..." naming the parameter and the reason.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/api/kernel.h"
#include "kernels/lib/mxfp8/plan.h"
#include "kernels/moe/bwd_checks.h"
#include "kernels/moe/bwd_params.h"

namespace trnsim::kernels::moe {

struct BwdPlan {
  int64_t T = 0, rows = 0, H = 0, I = 0, E = 0, B = 0, N = 0;
  int64_t run_blocks = 0;  // blocks the loop runs: N, or ceil(num_valid_tokens / B) when the count is known
  int cores = 1;
  int64_t Hc = 0, Ic = 0;    // H and I per core
  bool recompute = false;    // gate/up recomputed (no gate_up_proj_act_checkpoint_T)
  bool dense = false;        // single_expert_dense: one expert, block b = tokens [b B, (b + 1) B)
  bool dgu_resident = true;  // Phase 2 reads d_gate_up^T from SBUF
  int64_t chunk = 0;         // token columns per Phase 1 epilogue step
  int64_t wchunk = 0;        // columns per weight-gradient read-modify-write
  int64_t dy_chunk = 0;      // columns per step of the AFFINITY_ON_H dY pass
  num::QuantScheme scheme = num::QuantScheme::WrapX;  // every phase's
  int64_t dgu_groups = 0;  // 128-row groups of the resident d_gate_up^T (1x32: in its interleave order)
  mxfp8::MatmulSpec p0, p1, p2, p3, p4;
  mxfp8::Plan p0_plan, p1_plan, p2_plan, p3_plan, p4_plan;
  int64_t reserved_sbuf = 0;  // bytes per partition
};

// Validates the parameters (InputError naming the parameter and the reason) and plans the phases;
// `num_valid_tokens`: the count's value when known (single_expert_dense), which sets run_blocks.
BwdPlan plan_bwd(const BwdParams& p, const isa::Limits& limits,
                 std::optional<int64_t> num_valid_tokens = std::nullopt);

// The kernel function of one core.
void emit_bwd(Kernel& k, const BwdParams& p, const BwdPlan& plan);

}  // namespace trnsim::kernels::moe
