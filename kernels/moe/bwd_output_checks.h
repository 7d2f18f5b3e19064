// The output checks of blockwise_mm_bwd_mxfp8 (kernels/api/checks.h): every gradient against FP64 host
// references of both numerics (bwd_reference.h), on sampled rows and experts, one shared reference
// evaluation prepared while the simulation runs.
#pragma once

#include <vector>

#include "kernels/api/checks.h"
#include "kernels/moe/bwd_params.h"

namespace trnsim::kernels::moe {

// hidden_states_grad, expert_affinities_masked_grad, the two weight gradients and, with bias, the two bias
// gradients.
std::vector<OutputCheck> bwd_output_checks(const BwdParams& p);

}  // namespace trnsim::kernels::moe
