// Loaders of the MXFP8 pipeline: bring the BF16 rows of one K tile and a range of F columns of an operand
// (operand.h) into SBUF in the interleaved layout quantize_mx reads. Every loader writes the same logical
// data in a staging tile [128, 4 load_f] BF16: DGT and the pre-swizzled loader in [partition row][f][slot j]
// order (quantize_mx reads it contiguously), the others in [partition row][slot j][f] order (read strided).
//
//   DGT          one outer-axes dma_transpose (axes (2, 1, 0)) per swizzle segment, written in the interleave
//                [partition row][f][slot] quantize_mx reads contiguously (SP queues).
//   PE           rows by DMA into a [128 F rows, K columns] tile (slot-major for wrapX), or read in place
//   from
//                a resident tile; nc_transpose on the PE into a PSUM bank (wrapX: 4 BF16 transposes of
//                [F, kp]; 1x32: 2 transposes of the rows reinterpreted as FP32, each FP32 holding two
//                adjacent K), then one ACT tensor_copy PSUM -> staging per 128-row sub-tile. nkilib
//                load_tile_PE_swizzle_wrapX / load_tile_PE_Swizzle_1x32; their PSUM layouts differ from
//                ours only in where the transposes land (we put slot j at a fixed offset, nkilib interleaves
//                and unscrambles in the copy), the staging bytes are the same.
//   K-by-F rows  the operand's rows straight onto partitions: a strided DMA (HBM), one indirect DMA per
//                segment and slot (gather, POOL queues), or an SBUF-to-SBUF DMA / an in-place view
//                (resident).
// Gathers with Padding::Skip zero the destination first (memset on POOL) and use oob_mode skip.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/api/view.h"
#include "kernels/lib/mxfp8/operand.h"
#include "kernels/lib/mxfp8/plan.h"

namespace trnsim::kernels::mxfp8 {

// The PSUM tiles of one matmul call ([128, width] FP32 each, width a multiple of one 512-column bank: wider
// tiles span banks), handed out round robin to the matmul tiles and to the PE loader's and epilogues'
// transposes (which use the first 512 columns); the builder orders a tile's reuse after its last reader.
class PsumBanks {
 public:
  PsumBanks(Kernel& k, int n, const std::string& name, int64_t width = 512);
  const View& next() { return banks_[rr_++ % banks_.size()]; }

 private:
  std::vector<View> banks_;
  size_t rr_ = 0;
};

// The BF16 loads of one operand.
class Loader {
 public:
  // `K` the contraction, `F` the operand's free size, `load_f` the widest F range one load brings.
  Loader(const MatmulSpec& spec, const Operand& op, int64_t F, int64_t tile_k, int64_t load_f);
  // Allocates the staging tiles (and the PE row tiles) of `scope`_`tag`.
  void allocate(Kernel& k, const std::string& scope, const std::string& tag);

  // Loads partition rows [r0, r0 + kpt) of the interleave (one K tile) and F columns [c, c + nf) (nf <=
  // load_f); returns the [kpt, nf, 4]-ordered view of them that quantize_mx reads as [kpt, 4 nf].
  View load(PsumBanks& banks, int64_t r0, int64_t kpt, int64_t c, int64_t nf);

 private:
  View pe_rows(int64_t r0, int64_t kpt, int64_t f0, int64_t nfs);
  void pe_interleave(PsumBanks& banks, const View& s3, int64_t kpt, int64_t f0, int64_t nfs,
                     const View& rows);
  void pe_interleave_resident(PsumBanks& banks, const View& s3, int64_t r0, int64_t kpt, int64_t c,
                              int64_t f0, int64_t nfs);
  void k_by_f_rows(const View& s3, int64_t r0, int64_t kpt, int64_t c, int64_t nf);
  bool resident_in_place(int64_t r0, int64_t kpt) const;

  const MatmulSpec& spec_;
  const Operand& op_;
  int64_t F_, K_, tile_k_, load_f_;
  std::vector<View> staging_, rows_;
  size_t stage_rr_ = 0, rows_rr_ = 0;
};

}  // namespace trnsim::kernels::mxfp8
