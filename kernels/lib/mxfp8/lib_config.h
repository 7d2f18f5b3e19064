// nki-library's automatic blocking for matmul_mxfp8 (experimental/matmul_mxfp8/matmul_mxfp8_config.py at
// 092a49dc, auto_generate_default, as matmul_mxfp8_generic_kernel.py's matmul_mxfp8 calls it): the tiling
// fields a caller leaves null, filled the way the library's fallback fills them. The library first looks
// the per-core shape up in an autotune table (_AUTOTUNE_CACHE, keyed by M x K x N, operand precisions and
// load method); that table is library data and is not copied here, so a shape it lists gets the fallback's
// blocks below instead of the tuned ones. The Llama-3 MLP backward shapes are not in it (the library itself
// takes the fallback for them).
//
// The fallback ("block_count_reducer"), in the library's units (logical elements and bytes of the whole
// SBUF, not per partition):
//   - LNC2: resolve_lnc2_sharding on the full M, N (shard N when lnc_2_shard_rhs is null and N >= M; no LNC2
//     when the sharded dim is <= 128); matmul_mxfp8 hands the per-core M, N to auto_generate_default, which
//     halves the sharded dim once more for its effective sizes (so under LNC2 N-sharding the blocks are
//     sized for N/4; the library's own behaviour at 092a49dc, followed here).
//   - tiles: tile_m 128; tile_k 512 when an operand is not pre-swizzled (every operand of
//     matmul_mxfp8_backward, whose *_is_swizzled flags default to false), else 512/256/128 by K; tile_n the
//     largest of 512/256/128 dividing the effective N (128 if none does).
//   - blocks: start at 16 x 2 x 8 tiles (M x N x K, each capped by the dim's tiles; M and N also by 2048
//     elements); while the block does not fit, halve TILES_IN_BLOCK_K if its elements TILES_IN_BLOCK_K tile_k
//     (BLOCK_M + BLOCK_N) are at least BLOCK_M BLOCK_N, else the larger of M and N (M on a tie); then grow K,
//     M and N in turn, one tile at a time, while the block fits and the dim's block count drops. A block fits
//     when k_bytes BLOCK_K (BLOCK_M + BLOCK_N) + out_bytes BLOCK_M BLOCK_N < 0.8 x 32 MiB x tile_k / 512
//     (k_bytes 4 with two BF16 operands, 3 with one, 2 with none; out_bytes 2 for a BF16 output, 4 for FP32)
//     and each per-partition run (TILES_IN_BLOCK_K BLOCK_M 4, TILES_IN_BLOCK_K BLOCK_N 4, TILES_IN_BLOCK_M
//     BLOCK_N out_bytes) is at most 256 KiB.
//   - loads: an unswizzled BF16 operand loads the largest divisor of its block's tiles that is at most
//     1024 / tile (the DGT vector-offset limit of 32 columns); any other operand its whole block.
// Fields the caller set are kept (the block search still starts from the library's defaults). The
// estimate counts each tile once and the accumulator at out_bytes; what the stream then allocates (an FP32
// accumulator under several K blocks, the compiler's double buffers) is lib_api.h's Tiles.
#pragma once

#include "kernels/lib/mxfp8/plan.h"

namespace trnsim::kernels::mxfp8::lib {

// `spec.tiling` with every null (0) field filled as the library's fallback fills it for `spec` (its M, K,
// N, operand forms, out_dtype, run_with_lnc2 and shard_rhs). A pre-quantized operand counts as unswizzled
// (matmul_mxfp8_backward's flags default to false).
Tiling default_tiling(const MatmulSpec& spec);

}  // namespace trnsim::kernels::mxfp8::lib
