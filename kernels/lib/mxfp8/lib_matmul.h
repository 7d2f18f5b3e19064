// nki-library's matmul_mxfp8 as the library runs it (experimental/matmul_mxfp8/matmul_mxfp8_generic_kernel.py
// at 092a49dc): the caller's operands as TensorDescriptors, the LNC2 split, and one generic_matmul_mxfp8_api
// pass over the core's blocks on the library-faithful pipeline (lib_api.h). The library-faithful default of
// matmul_mxfp8_backward is two of these calls; mxfp8::emit_matmul (matmul.h) is the restructured one.
//
// Per core, blocks in 'mnk' order (the library's only block_loop_order): for each (M block, N block) an SBUF
// accumulator [tile_m, TILES_IN_BLOCK_M * block_n] (FP32 when the output is BF16 and K has several blocks,
// else the output dtype), one generic_matmul call per K block (load, quantize, spill, matmul), then one
// dma_copy per tile row into the output (the DMA casts FP32 to BF16). PSUM is the output dtype when
// TILES_IN_BLOCK_K is 1 and the output is BF16, else FP32. With spill_reload, each BF16 operand gets its HBM
// spill buffer (private per core under LNC2).
//
// Operand forms: BF16 F-by-K (DGT with vector offsets, fast_dma_transpose's direct pattern, or the PE
// swizzle; under quant_scheme 1x32 always load_tile_PE_Swizzle_1x32), BF16 K-by-F (PE swizzle, the library's
// only K-by-F loader), BF16 pre-swizzled (one dma_copy per tile), pre-quantized x4. K remainders: the DGT
// and PE loaders take a 256- and a 128-row sub-tile (fast_dma_transpose: one sub-tile of the remainder).
// Blocking comes from `plan` (plan.h) of a spec whose tiling the caller resolved: matmul_mxfp8_backward fills
// null fields with the library's auto_generate_default fallback (lib_config.h; its autotune table is not
// copied).
//
// Errors: InputError "<spec.kernel>: ..." from the loaders (lib_api.h); unsupported() names what this stream
// does not run.
#pragma once

#include <string>

#include "kernels/api/kernel.h"
#include "kernels/lib/mxfp8/lib_api.h"
#include "kernels/lib/mxfp8/plan.h"

namespace trnsim::kernels::mxfp8::lib {

// Why the library stream cannot run `spec` (its tiling resolved), or "" when it can: what the library
// asserts out and the restructured pipeline runs. quant_scheme 1x32 with a BF16 K-by-F operand (load_tile's
// 1x32 branch asserts F-by-K) or with a BF16 F-by-K operand whose K tiles are not all 512 rows
// (load_tile_PE_Swizzle_1x32 asserts tile_k == 512; a K remainder's 256/128-row sub-tiles go to it too).
std::string unsupported(const MatmulSpec& spec);

// Emits Y = L^T R of `spec` (operand views bound, operand.h) into `out` [M, N] on the calling core, with the
// tiles of `t`; `fast_dma_transpose` selects load_tile_dgt's direct access pattern for DGT operands.
void emit_matmul(Tiles& t, const MatmulSpec& spec, const Plan& plan, const View& out,
                 bool fast_dma_transpose);

}  // namespace trnsim::kernels::mxfp8::lib
