// blockwise_mm_fwd_mxfp8's default schedule, "nki_library": the instruction stream of nki-library's MXFP8 MoE
// forward (experimental/moe_mxfp8/fwd/bwmm_fwd_dropless_mxfp8.py at 092a49dc, routed, SHARD_ON_BLOCK), each
// GEMM a generic_matmul_mxfp8_api call as the library runs it (kernels/lib/mxfp8/lib_api.h). Core s takes
// blocks s, s + 2, ...:
//
//   setup      block_to_expert into [1, N] and broadcast to every partition (stream_shuffle_broadcast: the PE
//              broadcasts it here, as in the backward); the core's first block's token ids by dma_transpose;
//              its output slab [T, H] zeroed per 128 rows x 512 columns (memset, store) and core_barriered.
//   per block  the next block's token ids (dma_transpose); the hidden rows gathered into a [B, H] scratch
//              (per 128 tokens and 512 columns [memset,] an indirect dma_copy, a store); the affinities
//              (offsets t E + e, [memset,] an indirect gather, tensor_copy); gate/up: the weight's expert
//              offset (tensor_scalar), per (M, N) block and K block two API calls (gate, up: the up call
//              reuses the gate call's quantized hidden tile), then per (128 tokens x tile_n) tile: gate and
//              up copied to bfloat16, the clamps (one tensor_scalar each), the checkpoint (per 128 columns
//              nc_transpose, ACT copy, store), ACT silu, silu x up, x affinity, a store into the scaled
//              intermediate [B, I] scratch [and its checkpoint, transposed the same way]; down: the weight's
//              expert offset, per (M, N) block the API calls over K, per 128 tokens a tensor_copy to
//              bfloat16 and a store into a [B, H] scratch; the scatter: per 128 tokens and 512 columns a
//              load of that scratch, [the read-modify-write gather and add,] an indirect scatter into the
//              core's slab.
//   end        core_barriers on both slabs; each core sums the slabs over its 128-row tiles (t % 2 = s): per
//              512 columns two loads, an add, a store.
//
// The per-block scratches (the library names a fresh shared_hbm tensor per block) rotate over two private
// slots per core here. The entry's auto_generate_default fill of the phase configs (an autotune cache and a
// heuristic) is not modelled: unset fields take the config class's documented defaults (one tile per block,
// tile_n 512). The library schedule runs the library's feature set; the rest (pre-quantized or pre-swizzled
// weights, bias, AFFINITY_ON_H, the gate_act / intermediate / down-output checkpoints, no_indirect_load,
// FP32 compute, one core) is refused with a message naming trnsim_optimized, which runs it.
// Errors: InputError "kernel 'blockwise_mm_fwd_mxfp8': ...".
#pragma once

#include <cstdint>

#include "kernels/api/kernel.h"
#include "kernels/lib/mxfp8/lib_api.h"
#include "kernels/moe/fwd_params.h"

namespace trnsim::kernels::moe {

struct FwdLibGemm {
  mxfp8::lib::Geometry g;
  int64_t mblocks = 0, nblocks = 0, kblocks = 0, mtiles = 0, ntiles = 0;
};

struct FwdLibPlan {
  int64_t T = 0, rows = 0, H = 0, I = 0, E = 0, B = 0, N = 0, G = 0;
  int cores = 1;
  FwdLibGemm gu, down;
};

FwdLibPlan plan_fwd_lib(const FwdParams& p, const isa::Limits& limits);
void emit_fwd_lib(Kernel& k, const FwdParams& p, const FwdLibPlan& plan);

}  // namespace trnsim::kernels::moe
