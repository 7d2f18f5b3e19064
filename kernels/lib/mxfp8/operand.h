// Operand sources of the MXFP8 matmul pipeline. Every operand is logically [K, F], K the contraction, F its
// free dim (M for the LHS, N for the RHS). Where its bytes come from (Source) and how they are laid out
// (Layout) are independent:
//
//   Source::Hbm     an HBM view: a kernel input, a scratch tensor (e.g. an earlier phase's intermediate) or a
//                   slice of either, such as one expert of a stacked [E, ...] weight (expert_slice, or with
//                   a scalar_offset: the expert picked on device).
//   Source::Gather  rows of an HBM tensor picked by int32 row indices in SBUF (RowIndex): the token rows of
//   an
//                   MoE block, or one expert's rows picked on device (expert_row_index). The view's rows
//                   must be the tensor's rows (dim 0), because an indirect DMA indexes those.
//   Source::Sbuf    a resident BF16 SBUF tile [128, R/128, C] (row r at partition r % 128 of group r / 128),
//                   e.g. the previous phase's result kept on chip.
//
//   Layout::FByK       BF16 [F, K] (K the fast axis).    Hbm: DGT (one outer-axes dma_transpose per swizzle
//                      segment, straight into the interleave quantize_mx reads contiguously) or the PE loader
//                      (rows by DMA, nc_transpose on the PE into PSUM, copy to SBUF; wrapX in BF16, 1x32 by
//                      the FP32 reinterpret). Gather and Sbuf: the PE loader.
//   Layout::KByF       BF16 [K, F]: rows go straight onto partitions in interleave order (Hbm: plain DMA;
//                      Gather: one indirect DMA per sub-tile and slot; Sbuf: a view or an SBUF-to-SBUF
//                      DMA; both wrapX, or 1x32 with interleaved_rows) and quantize_mx reads the staging
//                      through a strided pattern, which the DVE cost model charges at its strided rate
//                      (timing::CostModel). nkilib forces its PE loader here; this pipeline uses no PE or
//                      engine pass.
//   Layout::Swizzled   BF16 pre-swizzled [K/4, 4F]: one DMA (Hbm only).
//   Layout::Quantized  x4 data [K/4, F] (float8_*_x4) plus E8M0 scales [K/4, F] unpacked or
//                      [ceil(K/2048)*128, F] packed (Hbm only).
//
// Facts: nkilib TensorDescriptor and load_apis (load_tile_dgt, load_tile_PE_swizzle_wrapX,
// load_tile_PE_Swizzle_1x32, indirect dma_copy with vector_offset and oob_mode skip), NKI ISA docs
// (dma_copy, nc_transpose).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/api/view.h"

namespace trnsim::kernels::mxfp8 {

enum class Source { Hbm, Gather, Sbuf };
enum class Layout { FByK, KByF, Swizzled, Quantized };
// How an F-by-K BF16 operand in HBM reaches the interleaved layout (nkilib load_with_PE_swizzle /
// disable_dma_transpose).
enum class Swizzle { Dgt, Pe };
// Padding entries of a row index: -1 (the indirect DMA skips them, oob_mode skip; the SBUF destination is
// zeroed first, so they read as zero and their writes are dropped) or a valid row that holds zeros (e.g. T
// with an extra zero row of hidden_states; read and written like any row).
enum class Padding { Skip, ZeroRow };

// Row indices in SBUF: int32 [128, n]; logical row r of the operand (or of the output, for an epilogue) is
// tensor row index[r % 128, r / 128].
struct RowIndex {
  View index;
  Padding padding = Padding::Skip;
};

struct Operand {
  Source source = Source::Hbm;
  Layout layout = Layout::FByK;
  Swizzle swizzle = Swizzle::Dgt;
  // Plan time (Layout::Quantized): the shape of the scales, to check it and to tell packed from unpacked.
  std::vector<int64_t> scales_shape;

  // Emit time: Hbm [F, K] / [K, F] / [K/4, 4F] / [K/4, F] x4 by layout; Gather: the indexed tensor's rows
  // [rows, C] (C = K for F-by-K, F for K-by-F); Sbuf: [128, R/128, C] BF16.
  View data;
  View scales;    // Quantized: HBM E8M0 of scales_shape
  RowIndex rows;  // Gather
  // K-by-F Gather or Sbuf under quant_scheme 1x32 only: the row index (Gather) or the resident tile (Sbuf)
  // holds the rows in the 1x32 interleave order instead of row r at [r % 128, r / 128]: logical row 4 R + j
  // (partition row R, slot j) at [R % 128, 4 (R / 128) + j], so that one index column (or one partition run)
  // picks the rows of one slot. The caller lays them out so (e.g. a strided DMA of the token ids).
  bool interleaved_rows = false;
  // Hbm only, optional: an SBUF int32 [1, 1] whose run-time value moves every load of `data` (and `scales`)
  // by that many rows of its tensor's dim 0 (the DMAs' scalar_offset; hardware DGE, SP queues). `data` and
  // `scales` are then views of row 0, e.g. expert 0's slice of a stacked [E, ...] weight, and the value the
  // expert id (nkilib TensorDescriptor scalar_offset, set per block from block_to_expert).
  View scalar_offset;

  // Names used in messages: the tensor, the parameter prefix ("x" in "x_is_f_by_k"), the scales tensor and
  // the user-facing name of F ("M", "N", or e.g. "K" for the weights of a backward phase).
  std::string name, param, scales_name, f_name;

  bool quantized() const { return layout == Layout::Quantized; }
  // The PE loader brings rows into an SBUF staging tile by DMA first.
  bool pe_rows_by_dma() const {
    return layout == Layout::FByK && source != Source::Sbuf &&
           (swizzle == Swizzle::Pe || source == Source::Gather);
  }
  bool uses_pe() const { return layout == Layout::FByK && (swizzle == Swizzle::Pe || source != Source::Hbm); }
};

// One expert's [R, C] slice of a stacked HBM weight [E, ...] (R = the second dim, C the product of the rest),
// for an expert id known when the program is built (dense single-expert mode, tests).
View expert_slice(const View& stacked, int64_t expert);

// Row indices of one expert's rows, computed on device from its id (block_to_expert is device data): an SBUF
// int32 [128, ceil(nrows/128)] tile whose entry for logical row r is expert * rows_per_expert + row0 + r.
// `expert` is an SBUF [128, 1] int32 (or FP32) column holding the expert id on every partition. Emits one
// iota (POOL) and two tensor_scalar (DVE). Indices are exact up to 2^24 rows (FP32 ALU).
View expert_row_index(Kernel& k, const View& expert, int64_t rows_per_expert, int64_t row0, int64_t nrows);

}  // namespace trnsim::kernels::mxfp8
