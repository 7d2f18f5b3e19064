// The input recipes of blockwise_mm_bwd_mxfp8 (kernels/api/package.h Recipe): the routing, the activation
// checkpoints as the forward kernel writes them (computed on the host), and pre-quantized weights.
#pragma once

#include <vector>

#include "kernels/api/package.h"
#include "kernels/moe/bwd_params.h"
#include "kernels/moe/moe_common.h"

namespace trnsim::kernels::moe {

// The routing the backward reads: T, E, top_k, block_size, N, the padding value, and whether it is routed
// (not single_expert_dense).
RoutingShape bwd_routing_shape(const BwdParams& p);

// "routing", "checkpoints" and "prequantized_weights", in that order.
std::vector<Recipe<BwdParams>> bwd_recipes();

}  // namespace trnsim::kernels::moe
