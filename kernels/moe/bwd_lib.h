// blockwise_mm_bwd_mxfp8's default schedule, "nki_library": the instruction stream of nki-library's MXFP8 MoE
// backward (experimental/moe_mxfp8/bwd/bwmm_bwd_dropless_mxfp8.py at e9ef98fc, routed mode; the per-block
// stream of docs/facts/nkilib-kernels.md §2.7), each matmul a generic_matmul_mxfp8_api call as the library
// runs it (kernels/lib/mxfp8/lib_api.h). Per core (both run every step; SHARD_ON_FREE splits I in Phase 1
// and H in Phases 2-4):
//
//   setup     zero the gradients (each core its share, as _initialize_gradient_outputs_shard: the affinity
//             gradient by E/2 experts of [T] per core, the weight gradients by 128-row tiles) and
//             core_barrier them; block_to_expert into [1, N]; an iota [128, 1]; the expert ids broadcast to
//             every partition (stream_shuffle_broadcast: nc_stream_shuffle is no trnsim instruction, so the
//             PE broadcasts them, ones^T x row, once); block 0's token ids by one dma_transpose into [128,
//             B/128].
//   per block b (expert e): the down weight's expert offset (tensor_scalar; pre-quantized: two, data and
//             scales); block b + 1's token ids (dma_transpose); the transposed gathers of the hidden rows
//             (phase3_transpose_mode) and of dY (phase4_transpose_mode) into [H, B] scratch: per 128 tokens
//             and 128 columns [memset,] an indirect dma_copy, then NC: nc_transpose + ACT tensor_copy, or
//             DMA: one SBUF-to-SBUF dma_transpose, then a store; dY's natural gather into [B, H] scratch
//             (per 128 tokens and 512 columns [memset,] gather, store).
//   Phase 1   M = B, K = H, N = I_TP/2: the affinities (offsets t E + e: tensor_scalar, tensor_tensor[,
//             tensor_scalar max]; [memset,] an indirect gather; tensor_copy; the dEA accumulator memset),
//             per (M, N) block an FP32 accumulator and one API call per K block; per (128 tokens x tile_n)
//             tile the SwiGLU backward in bfloat16: two checkpoint dma_transposes ([I, B] -> [B, I]), ACT
//             activation silu_dx and silu, DVE silu_dx up, silu up, d_int inter (FP32), tensor_reduce, the
//             dEA accumulate, inter x affinity, d_int x affinity in place, d_gate, [clamp masks,] d_up, two
//             stores into d_gate_up [B, 2, I], one into scaled_intermediate [B, I], and per 128 columns of
//             d_gate and d_up nc_transpose + ACT tensor_copy + a store into d_gate_up^T [2 I, B]; then per
//             128 tokens a sendrecv and an add of the peer's dEA, per own tile an ACT tensor_copy (to
//             bfloat16) and an indirect scatter; core_barriers on the three scratches.
//   Phase 2   M = B, K = 2 I_TP, N = H/2 (the gate/up weight's expert offset first): per (M, N) block the
//             API calls, then per 128 tokens a tensor_copy to bfloat16 and the read-modify-write scatter
//             ([memset,] indirect gather, tensor_tensor add, indirect scatter) or the scatter alone.
//   Phase 3   M = I_TP (gate rows, then up rows: two calls per K block, two accumulators), K = B, N = H/2;
//             per (tile_m, tile_n) for gate and up: tensor_copy to bfloat16 and per 128 columns
//             nc_transpose, ACT tensor_copy, a load of the gradient (hwdge, scalar_offset = e), an add and a
//             store into [E, H, 2, I].
//   Phase 4   Phase 1's scaled intermediate [B, I] transposed to [I, B] (per 128 tokens a row-tile load, per
//             128 columns NC: nc_transpose + tensor_copy ACT (even) / DVE (odd), or DMA: dma_transpose; a
//             store); core_barriers on it and on dY^T; M = H/2, K = B, N = I_TP; the same transpose and
//             read-modify-write into [E, I, H].
//
// Deviations, each named where it is emitted: the per-block HBM scratches (the library names a fresh
// shared_hbm tensor per block) rotate over two slots, so a block's scratch writes follow the reads of the
// block two before (long finished); the spill buffers are allocated once per phase. The scaled-intermediate
// checkpoint is not read (the documented entry asserts it absent and Phase 1 computes the scaled
// intermediate).
//
// The library schedule runs the library's feature set; the parameters beyond it (AFFINITY_ON_H, no
// gate/up checkpoint, the gate_act / intermediate checkpoints, bias, single_expert_dense and
// num_valid_tokens, quant_scheme 1x32, pe_transpose_only) are refused with a message naming the
// trnsim_optimized schedule, which runs them. Errors: InputError "kernel 'blockwise_mm_bwd_mxfp8': ...".
#pragma once

#include <cstdint>

#include "kernels/api/kernel.h"
#include "kernels/lib/mxfp8/lib_api.h"
#include "kernels/moe/bwd_checks.h"
#include "kernels/moe/bwd_params.h"

namespace trnsim::kernels::moe {

// One phase's resolved config: tile sizes and tile counts (nkilib _resolve_phase_configs), block counts,
// which operands spill, and its scale packing.
struct BwdLibPhase {
  mxfp8::lib::Geometry g;
  int64_t mblocks = 0, nblocks = 0, kblocks = 0;
  int64_t mtiles = 0, ntiles = 0;  // tiles of M and N
  bool spill = false, packing = true;
  bool spill_lhs = false, spill_rhs = false;
};

struct BwdLibPlan {
  int64_t T = 0, rows = 0, H = 0, I = 0, E = 0, B = 0, N = 0, G = 0;  // G: 128-token tiles per block
  int cores = 1;
  int64_t Hc = 0, Ic = 0;
  BwdLibPhase p1, p2, p3, p4;
};

// Checks the parameters for the library schedule and resolves the phases.
BwdLibPlan plan_bwd_lib(const BwdParams& p, const isa::Limits& limits);

// The kernel function of one core.
void emit_bwd_lib(Kernel& k, const BwdParams& p, const BwdLibPlan& plan);

}  // namespace trnsim::kernels::moe
