// MXFP8 matmul on Trn3 (nkilib matmul_mxfp8, reference/nkilib-kernels.md §1): Y[M, N] = L^T R, where the LHS
// L is logically [K, M] and the RHS R logically [K, N], K the contraction. BF16 operands are quantized on
// chip with quantize_mx (the trn3 scale rule) after an x4 interleave of K, multiplied with nc_matmul_mx,
// accumulated in PSUM over the K tiles of a K block and in an FP32 SBUF accumulator over K blocks, then
// written as BF16 or FP32.
//
// Operand forms in HBM (per operand, K = contraction, F = its free dim M or N):
//   BF16 F-by-K [F, K]         K is the fast axis; loaded with dma_transpose into the interleaved layout.
//   BF16 K-by-F [K, F]         rows loaded naturally (partition p of a 512-row K tile gets rows p, p+128,
//   p+256,
//                              p+384 for wrapX; rows 4p..4p+3 for 1x32) as [p][j][f]; quantize_mx reads that
//                              staging through a strided access pattern in [p][f][j] order, so no PE or DVE
//                              reshuffle pass is needed (the ISA allows any <= 4-D pattern; the cost model
//                              charges quantize_mx by elements only).
//   BF16 pre-swizzled [K/4, 4F]  the interleaved layout already; a plain DMA (F-by-K operands only).
//   pre-quantized              x4 data [K/4, F] (float8_*_x4) plus E8M0 scales [K/4, F] (unpacked: group row
//   g
//                              in row (g/4)*32 + g%4 of its 128-row tile) or [ceil(K/2048)*128, F] (packed:
//                              K tile t at offset 4*(t%4) of row group t/4).
// The interleave is global over K (num::swizzle_pos): wrapX splits K into 512-row tiles (remainder 256 then
// 128), 1x32 puts rows 4P..4P+3 on partition row P. A K tile of tile_k logical rows is tile_k/4 partition
// rows.
//
// Errors: InputError "kernel '<name>': ..." naming the parameter for every combination the algorithm cannot
// serve (nkilib §1.8), for Trn2 hardware, and for blocks that do not fit in SBUF.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/kernel.h"
#include "sim/numerics/scale_layout.h"

namespace trnsim::kernels {

// One operand of the MX matmul, logically [K, F].
struct MxOperand {
  std::string name;       // HBM input tensor (BF16, or x4 data when pre-quantized)
  std::string param;      // parameter prefix used in messages, e.g. "x" or "weights"
  bool f_by_k = true;     // BF16 layout [F, K] (true) or [K, F] (false); ignored when swizzled/quantized
  bool swizzled = false;  // BF16 pre-swizzled [K/4, 4F]
  std::optional<std::vector<int64_t>> scales_shape;  // pre-quantized: shape of the E8M0 scales input
  std::string scales_name;                           // HBM input tensor of the scales
  std::string f_name;  // user-facing name of F in messages (default: "M" for the LHS, "N" for the RHS)
};

// Tiling of one matmul call (nkilib MatmulMxfp8KernelConfig tiling fields). 0 = auto.
struct MxTiling {
  int64_t tile_m = 0, tile_k = 0, tile_n = 0;
  int64_t blocks_m = 0, blocks_n = 0, blocks_k = 0;  // TILES_IN_BLOCK_M/N/K
  int64_t load_m = 0, load_n = 0;                    // TILES_IN_LOAD_M/N
};

struct MxMatmulSpec {
  std::string kernel;  // for messages: "kernel 'matmul_mxfp8'" or "... (input_grad phase)"
  std::string scope;   // prefix of scratch tensor names (unique per call in one program)
  int64_t M = 0, K = 0, N = 0;
  MxOperand lhs, rhs;
  std::string out_name;  // HBM output tensor [M, N]
  DType out_dtype = DType::BF16;
  num::Fp8Format fp8 = num::Fp8Format::E4M3FN;
  num::QuantScheme scheme = num::QuantScheme::WrapX;
  MxTiling tiling;
  bool nmk = false;  // tile_loop_order 'nmk' (else 'mnk')
  bool run_with_lnc2 = true;
  std::optional<bool> shard_rhs;  // lnc_2_shard_rhs; nullopt = auto (N if N >= M)
  bool use_scale_packing = false;
  bool spill_reload = false;
};

// The resolved plan of one call (for tests and the backward's num_programs choice).
struct MxPlan {
  bool lnc2 = false;    // two programs, one half of the sharded dim each
  bool shard_n = true;  // which dim is split under LNC2
  int64_t tile_m = 0, tile_k = 0, tile_n = 0;
  int64_t block_m = 0, block_n = 0, block_k = 0;  // tiles per block
  int64_t load_m = 0, load_n = 0;                 // tiles per load
  int nbuf_lhs = 2, nbuf_rhs = 2;  // SBUF slots per operand (2: the next block loads during the matmuls)
  int64_t sbuf_bytes = 0;          // SBUF bytes per partition the blocks use
};

// Validates `spec` for `limits` and resolves every auto field (InputError on any violation).
MxPlan plan_matmul_mxfp8(const MxMatmulSpec& spec, const isa::Limits& limits);

// Emits the matmul on the calling core (declares the HBM inputs, output and scratch tensors).
void emit_matmul_mxfp8(Kernel& k, const MxMatmulSpec& spec, const MxPlan& plan);

}  // namespace trnsim::kernels
