// What the library schedule's emitters share (bwd_lib.h): the HBM tensors of one core, the library's tiles
// and the block being processed. Internal to kernels/moe/bwd_lib_*.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/lib_api.h"
#include "kernels/moe/bwd_lib.h"

namespace trnsim::kernels::moe::bwdlib {

struct Tensors {
  View hidden, ea, dy, w_gu, w_down, s_gu, s_down, tokens, b2e, ck_gu;
  View dx, dea, dw_gu, dw_down;
  // Per-block scratch, two slots (rotated by block): dY rows [B, H] (Phase 1's LHS), hidden^T and dY^T
  // [H, B] (Phases 3 and 4), d_gate_up [B, 2 I], d_gate_up^T [2 I, B], scaled [B, I] and scaled^T [I, B].
  View dy_block, hidden_t, dy_t, dgu, dgu_t, scaled, scaled_t;
};

// One phase's operands and spill buffers.
struct PhaseTds {
  mxfp8::lib::Td lhs, rhs, lhsq, rhsq, lhsq2;  // lhsq2: Phase 3's up rows
};

struct State {
  Kernel& k;
  const BwdParams& p;
  const BwdLibPlan& f;
  Tensors t;
  mxfp8::lib::Tiles tiles;
  View expert_ids;    // SBUF [1, N] int32: block_to_expert
  View expert_bcast;  // SBUF [128, N] FP32: the expert ids on every partition
  View tokens[2];     // SBUF [128, G] int32: token ids of a block (double-buffered)
  PhaseTds p1, p2, p3, p4;
  // The block being processed.
  int64_t b = 0;
  int slot = 0;
  View expert;  // SBUF [1, 1] int32: the block's expert

  State(Kernel& kernel, const BwdParams& params, const BwdLibPlan& plan)
      : k(kernel), p(params), f(plan), tiles(kernel) {}
  const View& idx() const { return tokens[slot]; }
  int core() const { return k.program_id(); }
  nki::OobMode oob() const { return p.skip() ? nki::OobMode::Skip : nki::OobMode::Error; }
};

// A generic_matmul_mxfp8_api call of one phase.
mxfp8::lib::Call api_call(const State& s, const BwdLibPhase& ph, const PhaseTds& tds, const char* what);

// Phase 1 of the current block: the affinities, the matmuls, the SwiGLU backward, the affinity gradient.
void phase1(State& s);

}  // namespace trnsim::kernels::moe::bwdlib
