// nki-library's generic_matmul_mxfp8_api as the library runs it (experimental/matmul_mxfp8/
// matmul_mxfp8_generic_api.py with mxfp_utils/mxfp8_utils load_block.py, load_apis.py,
// quantize_mxfp8_block.py, common_dataclasses.py and matmul_mxfp8/matmul_mxfp8_blocks.py, at e9ef98fc): one
// call loads, quantizes (and spills) one (M, N, K) block of Y[M, N] = L^T R and accumulates it into the
// caller's SBUF accumulator, instruction for instruction in the library's order. The library-faithful MoE
// kernels (kernels/moe/*_lib_*) are built from it; the pipeline of matmul.h is this project's faster
// restructuring of the same algorithm.
//
// Per call (block indices mb, nb, kb; TILES_IN_BLOCK / TILES_IN_LOAD of Geometry):
//   load (load_lhs_and_rhs): an operand is loaded from HBM when it is pre-quantized, has no spill buffer or
//     is at the first block of the other dim (LHS at nb == 0, RHS at mb == 0), else reloaded from its spill
//     buffer; each loaded operand's staging tile is zeroed first when a dim needs masking (memset); a DGT
//     operand regenerates its vector-offset pattern (one iota on POOL, four 32 x 32 nc_transposes on DVE, per
//     pattern: tile_k and the 256/128 remainders); loads run for tile_m, tile_n, tile_k of the load tiles
//     (LHS at tile_n 0, RHS at tile_m 0): DGT = tensor_scalar (+ tile base; + the expert's vector offset
//     when the descriptor has one) then one indirect dma_transpose [vs, 4 tile_f] of 4 tile_f gathered rows
//     of vs = tile_k / 4 elements (software DGE on POOL); fast DMA transpose = one outer-axes dma_transpose
//     (no vector offsets); PE = the rows by one DMA (K-by-F: one dma_transpose per 128 F), then per 128 F:
//     four nc_transposes into PSUM and a copy out (DVE and ACT alternately); a K remainder (DGT and PE) = a
//     256- and a 128-row sub-tile, the second at partition 64 through a 32-partition tile and a tensor_copy
//     (fast DMA transpose: the whole remainder as one sub-tile); quant_scheme 1x32 (F-by-K; K-by-F and K
//     tiles other than 512 rows asserted out) = load_tile_PE_Swizzle_1x32: the rows by DMA read as FP32, per
//     128 F two stride-2 FP32 nc_transposes into PSUM and a copy out (in DGT mode the tile's vector offsets
//     are still made: tensor_scalar); pre-swizzled BF16 = one dma_copy per tile; pre-quantized and spilled x4
//     = one dma_copy of the data and the scales (packed scales at group boundaries only).
//   quantize (quantize_mxfp8_block): one quantize_mx per (F tile of the block, K tile), DVE.
//   spill (spill_block): per K tile one data dma_copy and the scales (packed: one per 4-row slot, 4 per
//     128-partition tile).
//   matmul (matmul_mxfp8_blocks): per output tile ('mnk' or 'nmk'), with the PSUM copy-in on every third
//     tile of a block when accumulating, the inputs were BF16 and PSUM is FP32 (tensor_copy SBUF -> PSUM),
//     one nc_matmul_mx per K tile, then tensor_tensor add into the accumulator when accumulating without the
//     copy-in, else tensor_copy PSUM -> accumulator.
// Engines the library leaves to the compiler (engine unknown) take trnsim's NKI defaults (nki.h: DVE for
// tensor_copy, tensor_scalar, tensor_tensor, memset; POOL for iota); DMAs take the descriptor mode and
// sequencer dma_mode.h resolves for dge_mode unknown, or hwdge where the library names it.
//
// Tiles: every SBUF tile the library allocates (SbufManager.alloc_stack, which nki-library's MXFP8 kernels
// run in auto-allocation mode: a plain nl.ndarray the compiler places) is one allocation site with the
// compiler's default in-loop buffers (alloc_rule.h: double buffering, as space allows; with a SitePlan, each
// site leaving free what the sites declared after it need, one buffer each); every PSUM tile takes the next
// banks of one ring over the 8 banks (alloc_rule.h: every free bank). A Tiles::Scope releases the sites made
// inside it (the compiler frees a tile after its last use: one phase's tiles do not outlive it).
//
// Errors: InputError "<kernel>: ..." for shapes the library asserts out (DGT vector-offset columns above 32,
// K remainders below a tile).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/api/pool.h"
#include "kernels/api/view.h"
#include "kernels/lib/mxfp8/operand.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/scale_layout.h"

namespace trnsim::kernels::mxfp8::lib {

// The SBUF sites one build of a kernel declares, per core in declaration order, and what each must leave
// free for the sites declared after it while it lives: the reserve of the allocation rule (alloc_rule.h:
// "what the other tiles declared in the same loop body still need, one buffer each"). The compiler sees the
// whole loop body before it gives a site its buffers; the builder declares sites one by one, so a kernel
// that wants the reserve builds twice: a probe (every site one buffer, recording), then the real build, whose
// Tiles read each site's reserve from the probe. Without a plan every site is asked with no reserve.
class SitePlan {
 public:
  bool probing() const { return probing_; }
  // Ends the probe: computes each site's reserve (the largest one-buffer bytes per partition of later
  // sites live at once while it lives).
  void finish();
  // Recording (probe) and reading (real build) for the `n`-th site core `core` declares.
  void declare(int core, int64_t bytes);
  void release(int core, size_t first);  // sites first.. of the core are released
  int64_t reserve(int core, size_t n, int64_t bytes) const;

 private:
  struct Site {
    int64_t bytes = 0;
    size_t released_at = SIZE_MAX;  // the core's declaration count when it was released
  };
  bool probing_ = true;
  std::vector<Site> sites_[2];
  std::vector<int64_t> reserve_[2];
};

// The library's tiles of one kernel (see above).
class Tiles {
 public:
  // `plan`: null, or a SitePlan probing (every site one buffer) or finished (reserves).
  explicit Tiles(Kernel& k, SitePlan* plan = nullptr);
  // The next buffer of the allocation site `site` for tiles of this shape and dtype.
  View sbuf(const std::string& site, const std::vector<int64_t>& shape, DType dtype);
  // A PSUM tile [partitions, cols] of `dtype` in the next free banks of the ring.
  View psum(int64_t partitions, int64_t cols, DType dtype);
  Kernel& kernel() const { return k_; }

  // The compiler's liveness: the sites made while a Scope lives (one phase of one block) are released when it
  // ends, so the next phase's tiles take their space.
  class Scope {
   public:
    explicit Scope(Tiles& t) : t_(t), mark_(t.order_.size()) {}
    ~Scope() { t_.release_from(mark_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Tiles& t_;
    size_t mark_;
  };

 private:
  using Key = std::tuple<std::string, std::vector<int64_t>, DType>;
  void release_from(size_t mark);
  Kernel& k_;
  SitePlan* plan_;
  std::map<Key, TilePool> pools_;
  std::vector<Key> order_;
  std::vector<size_t> declared_;  // the declaration index of each site of order_
  size_t declarations_ = 0;
  View ring_;
  int64_t next_bank_ = 0;
};

// A TensorDescriptor: one HBM operand, logically [K, F].
struct Td {
  enum class Form { FByK, KByF, Swizzled, Quantized };
  Form form = Form::FByK;
  // FByK: BF16 [F, K], a whole contiguous tensor or a contiguous slice of one (the DGT gathers rows of its
  // flattened [F K / vs, vs] view). KByF: BF16 [K, F], always loaded through the PE swizzle (nkilib
  // TensorDescriptor.__post_init__ forces load_with_PE_swizzle for it). Swizzled: BF16 pre-swizzled
  // [K/4, 4F], loaded by one dma_copy per tile (load_apis.py load_tile). Quantized: x4 [K/4, F] with `scales`
  // E8M0 [K/4, F] or packed [ceil(K / 2048) 128, F].
  View data, scales;
  bool packed = false;
  Swizzle swizzle = Swizzle::Dgt;
  // The descriptor's quant_scheme: an unswizzled BF16 operand under 1x32 is loaded by
  // load_tile_PE_Swizzle_1x32 whatever its swizzle mode (load_apis.py load_tile).
  num::QuantScheme scheme = num::QuantScheme::WrapX;
  bool fast_dma_transpose = false;
  int64_t effective_f = 0;  // the F rows one expert spans (effective_f_dim); 0: all of data's F
  // The descriptor's expert: DGT: an SBUF FP32 [128, 1] with the expert's offset in vector units (tile_k/4
  // elements), added to every vector offset; Quantized: SBUF int32 [1, 1] row offsets of data and scales
  // (the DMAs' scalar_offset, hardware DGE).
  View expert_vs, expert_rows, expert_scale_rows;

  bool quantized() const { return form == Form::Quantized; }
  int64_t K() const;  // logical contraction
  int64_t F() const;  // logical free size (all of it, every expert)
};

// Tile shapes (logical) and the BlockDescriptor's tile counts.
struct Geometry {
  int64_t tile_m = 128, tile_k = 512, tile_n = 512;
  int64_t bm = 1, bn = 1, bk = 1;  // TILES_IN_BLOCK_M/N/K
  int64_t load_m = 1, load_n = 1;  // TILES_IN_LOAD_M/N
  int64_t block_m() const { return bm * tile_m; }
  int64_t block_n() const { return bn * tile_n; }
};

// The quantized LHS one call makes and a later call reuses (the library's lhs_sbuf_td: the forward's gate
// and up GEMMs share the quantized hidden block).
struct SharedLhs {
  View data, scales;
};

// One generic_matmul_mxfp8_api call for block (mb, nb, kb).
struct Call {
  const char* kernel = "";  // for messages
  const Td* lhs = nullptr;
  const Td* rhs = nullptr;
  Geometry g;
  int64_t mb = 0, nb = 0, kb = 0;
  int64_t lhs_m_offset = 0, rhs_n_offset = 0;
  // SBUF [tile_m, bm * block_n] (FP32, or the output dtype when one K block fills it): output tile (mt, nt)
  // at columns mt block_n + nt tile_n.
  View out;
  // The PSUM tiles' dtype (generic_matmul_mxfp8_api: the output dtype when TILES_IN_BLOCK_K is 1 and the
  // output is not FP32, else FP32); the copy-in needs FP32 (a BF16 PSUM write must come from a matmul).
  DType psum_dtype = DType::F32;
  bool initialize = true;    // the first K block of this accumulator (else += into it)
  const Td* lhsq = nullptr;  // spill buffers: their presence enables spill / reload of that operand
  const Td* rhsq = nullptr;
  bool packing = false;
  num::Fp8Format fp8 = num::Fp8Format::E4M3FN;
  bool nmk = false;
  bool psum_copy_in = true;  // enable_psum_copy_in
  SharedLhs* lhs_sbuf = nullptr;
};

// Emits one call on the calling core.
void generic_matmul(Tiles& t, const Call& c);

// An HBM spill buffer of one operand (nkilib _allocate_spill_buffer): x4 data [kblocks bk tile_k/4, fblocks
// block_f] and its scales, private to each core under LNC2.
Td spill_buffer(Kernel& k, const std::string& name, int64_t kblocks, int64_t fblocks, int64_t block_f,
                const Geometry& g, bool packing, num::Fp8Format fp8);

}  // namespace trnsim::kernels::mxfp8::lib
