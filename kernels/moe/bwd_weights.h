// The expert-weight inputs of blockwise_mm_bwd_mxfp8, declared the same way by both schedules: BF16
// gate_up_proj_weight [E, H, 2, I_TP] and down_proj_weight [E, I_TP, H], or, with the *_weight_scales
// parameters, x4-packed MXFP8 data (gate/up [E, 2 I_TP / 4, H], down [E, H / 4, I_TP]) and E8M0 scales of the
// parameters' shapes.
#pragma once

#include <cstdint>

#include "kernels/api/kernel.h"
#include "kernels/moe/bwd_params.h"

namespace trnsim::kernels::moe {

struct BwdWeights {
  View w_gu, s_gu, w_down, s_down;  // s_*: unset for BF16 weights
};

// Declares the inputs in this order: gate/up data, its scales, down data, its scales.
BwdWeights declare_bwd_weights(Kernel& k, const BwdParams& p, int64_t I_TP);

}  // namespace trnsim::kernels::moe
