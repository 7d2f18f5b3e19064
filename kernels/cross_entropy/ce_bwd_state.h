// What the pieces of cross_entropy_bwd share (cross_entropy_bwd.cpp, ce_bwd_te.cpp, ce_bwd_t2.cpp,
// ce_bwd_fixup.cpp): the kernel's context, the chunks of work, and the pipelines and fix-up the kernel
// function calls. Internal to kernels/cross_entropy.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/cross_entropy/ce_lib.h"
#include "kernels/cross_entropy/ce_params.h"
#include "kernels/cross_entropy/ce_quant.h"

namespace trnsim::kernels::ce::bwd {

struct Ctx {
  Ctx(Kernel& k_, const BwdParams& bp_) : k(k_), bp(bp_), p(bp_.c) {}
  Kernel& k;
  const BwdParams& bp;
  const CommonParams& p;
  Consts cs;
  ColRange cr;
  int64_t W = 0;   // chunk columns
  int64_t nt = 0;  // 128-row tiles
  View logits, target, row_max, row_sumexp, grad_output;
  View grad_dst;  // BF16 destination (input_grad or the scratch)
  View rdata, cdata, rscale, cscale;
  ScaleGeom geom;
  // Natural-layout per-row tiles [128, nt].
  View tgt, b, gcd, h, hy, valid, cvec, gvec;
  int it = 0;  // chunk counter (buffer rotation, engine alternation)
};

// A chunk of work: row tile t (rows [r0, r0 + rr)), columns [c0, c0 + w), sequence number it.
struct Item {
  int64_t t, r0, rr, c0, w, it;
  bool last;  // the last chunk of its row tile
};
// The chunks of every row tile of `rows_per_tile` rows (128, or 512 for the T2 layout), in order.
std::vector<Item> chunk_items(const Ctx& c, int64_t rows_per_tile);

// How a pipeline gets each chunk's BF16 tile: load(item) issues its input DMA (kPrefetch chunks ahead, from
// the ACT queue, so no store waits in front of it); compute(item, g) turns the loaded data into the tile g.
inline constexpr int64_t kPrefetch = 2;
struct Producer {
  std::function<void(const Item&)> load;
  std::function<void(const Item&, const View& g)> compute;
};

// In-range mask (valid and the target in this core's columns), [128, nt] FP32.
View target_in_range(Ctx& c);

// The TE-rule pipeline (ce_bwd_te.cpp) and the Trn3-rule pipeline (ce_bwd_t2.cpp) over every chunk, each
// chunk's BF16 tile from `prod` into the rotating tiles given.
void te_pipeline(Ctx& c, const std::vector<View>& gs, const Producer& prod);
void t2_pipeline(Ctx& c, const std::vector<View>& g2s, const Producer& prod);
// Loads [rows] values of `src` into the T2 tile [128, nt2, 4] (row 512 t + 4 p + j).
void load_rows_t2(const View& dst, const View& src, int64_t rows);
// The fused path's fix-up (ce_bwd_fixup.cpp): the two MXFP8 blocks holding each row's target recomputed.
void fixup(Ctx& c);

}  // namespace trnsim::kernels::ce::bwd
