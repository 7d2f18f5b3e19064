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

// Host bytes the checks hold at most (OutputCheck::reference_bytes, the memory check before a run): the
// sampled slots' FP64 rows, one expert's FP32 weights and FP64 copies at a time, and the FP64 weight
// gradients of the sampled experts the prepare step keeps, from the parameters alone (each token taken to
// hold its top_k slots, as the routing makes them). Without --full-reference.
double bwd_reference_bytes(const BwdParams& p);

}  // namespace trnsim::kernels::moe
