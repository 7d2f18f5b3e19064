// What the trnsim_optimized backward's emitter and its epilogues share (bwd_emit.cpp, bwd_epilogues.cpp):
// the kernel's HBM tensors, the block being processed, the Phase 1 epilogue scratch and the epilogue makers.
// Internal to kernels/moe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/matmul.h"
#include "kernels/moe/bwd_kernel.h"

namespace trnsim::kernels::moe {

constexpr int kEpilogueSets = 2;  // Phase 1 epilogue scratch rotates over this many sets
// Stores of the epilogues go on POOL's queues: SP's queues keep the GEMMs' loads.
inline const nki::DmaOpts kPool{.engine = isa::Engine::POOL};

struct Hbm {
  View hidden, ea, dy, w_gu, w_down, s_gu, s_down, tokens, b2e, nvt;
  View ck_gu, ck_scaled, ck_gate, ck_inter, ck_down;
  View dx, dea, dw_gu, dw_down, db_gu, db_down;
  View dy_scratch, x_scratch;    // per core [2, B, H]: gathered rows (P1's dY, P0's X); ON_H dY: [2 B, H]
  View dgu_scratch, sc_scratch;  // shared [2, 2I, B], [2, I, B]
  View gu_scratch;               // per core [2, 2, I, B]: recomputed gate/up (P0)
};

// The kernel's HBM inputs, outputs and scratch tensors.
Hbm declare(Kernel& k, const BwdParams& p, const BwdPlan& f);

// State of the block being processed.
struct Block {
  int64_t b = 0;
  int ring = 0;
  View expert;    // SBUF [1, 1] int32: e
  View idx;       // SBUF [128, B/128] int32 token ids
  View idx32;     // quant_scheme 1x32: the same in the 1x32 interleave order (Phases 3 and 4)
  View ea_col;    // SBUF [128, B/128] FP32 affinities
  View ea_bcast;  // SBUF [128, B] FP32: the slots' affinities on every partition
  View dy;        // HBM [B, H]: gathered dY rows
  View x;         // HBM [B, H]: gathered hidden rows (recompute only)
  View gate_up;   // HBM [2, I, B]: the block's gate/up (checkpoint, or recomputed)
  View nvt_col;   // the last block under num_valid_tokens: SBUF [128, 1] FP32, the count on every partition
};

// One Phase 1 epilogue step's scratch: [128, C] each.
struct P1Set {
  View gate, up;                           // bf16 loads
  View sig, silu, inter, prod, dint, tmp;  // FP32
  View dg, du, sc;                         // bf16 results
};

// Phase 1's epilogue: the SwiGLU backward of each d_int^T tile (with the clamp masks), d_gate_up and the
// scaled intermediate into the block's scratch, the affinity-gradient partial and the bias sums.
std::unique_ptr<mxfp8::Epilogue> p1_epilogue(const BwdParams& p, const BwdPlan& f, const Hbm& t,
                                             const Block& blk, std::vector<P1Set>& sets, size_t& rr,
                                             const View& dea_acc, const View& bias_acc,
                                             const View& bias_part);
// Phase 0's epilogue: the recomputed gate/up tiles, clamped and cast, into the per-core scratch.
std::unique_ptr<mxfp8::Epilogue> p0_epilogue(const BwdParams& p, const BwdPlan& f, const Block& blk,
                                             std::vector<std::pair<View, View>>& sets, size_t& rr);
// Phases 3 and 4's epilogue: dst (expert 0's [R, C] placement, moved by the expert's scalar_offset) += the
// tile in bfloat16 (nkilib's weight-gradient read-modify-write).
std::unique_ptr<mxfp8::Epilogue> expert_accumulate(const char* phase, View dst, View expert,
                                                   std::vector<std::pair<View, View>>& sets, size_t& rr);

}  // namespace trnsim::kernels::moe
