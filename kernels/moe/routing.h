// MoE routing for the blockwise MoE kernels (aws-neuron/nki-library experimental/moe_mxfp8 and the block
// formation of its MoE tests, test_bwmm_bwd_common.py generate_token_position_to_id_and_experts): which
// experts each token goes to, with what affinity, and how the (token, expert) pairs are laid out in blocks.
//
// The three routing tensors of the kernels:
//   token_position_to_id [N*B] int32   slot p of block b = p / B holds a token id, or the padding value:
//                                      -1 (skip_dma.skip_token: the DMAs skip it) or T (an extra zero row T
//                                      of hidden_states and the affinities).
//   block_to_expert [N, 1] int32       the expert of each block.
//   expert_affinities_masked [T*E, 1]  element t*E + e = token t's affinity for expert e, 0 where t is not
//                                      routed to e ([(T+1)*E, 1] with T padding: row T is all zero).
// Blocks (as the library's test generator forms them): expert-major; expert e gets ceil(tokens_e / B)
// blocks holding its tokens in increasing id, the last one padded; an expert without tokens gets none; the
// blocks left over up to N go to the last expert, fully padded. N = ceil((T*K - (E-1)) / B) + E - 1 (Python
// ceil of the signed quotient), the tight worst case: each expert wastes at most B-1 slots.
//
// Router (our generator): logits[t, e] = -zipf * ln(e + 1) + g[t, e], g standard Gumbel noise from the seed,
// so expert e's popularity (the chance it is a token's first choice) is proportional to 1 / (e + 1)^zipf
// (zipf 0: uniform; expert 0 the most popular) and the top-k set is a popularity-weighted draw without
// replacement (the Gumbel top-k trick). Affinities are the softmax over all E logits at the chosen experts,
// optionally renormalised to sum to 1 per token. Top-k takes the largest logits, a tie going to the lower
// expert id. All arithmetic is deterministic double precision (io::det_log / det_exp): the same bits on
// every platform and thread count.
//
// Errors: InputError naming the tensor and index ("token_position_to_id[37] = 5000 is not ...").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trnsim::kernels::moe {

// N for T tokens, top-k, E experts and blocks of B (at least 1).
int64_t block_count(int64_t T, int64_t top_k, int64_t E, int64_t B);

// Router logits [T, E] (row-major) as described above.
std::vector<double> router_logits(uint64_t seed, int64_t T, int64_t E, double zipf);

// Each token's top-k experts (largest logit first, ties to the lower id) and affinities, [T, K] row-major.
struct TopK {
  std::vector<int32_t> experts;
  std::vector<double> affinities;
};
// InputError if K is not in [1, E].
TopK route_topk(const std::vector<double>& logits, int64_t T, int64_t E, int64_t K, bool renormalize);

// The blocks of a routing: `experts` [T, K] (each row distinct expert ids in [0, E)). `pad` is -1 or T.
// InputError if the routing needs more than N blocks.
struct Blocks {
  std::vector<int32_t> token_position_to_id;  // [N * B]
  std::vector<int32_t> block_to_expert;       // [N]
};
Blocks form_blocks(const std::vector<int32_t>& experts, int64_t T, int64_t E, int64_t K, int64_t B, int64_t N,
                   int32_t pad);

// The routing tensors as the kernel reads them, checked: every block's expert in [0, E), every slot a
// token id in [0, T) or `pad`, no token twice in one block nor in two blocks of one expert. InputError naming
// the tensor and the index.
struct RoutingView {
  const std::vector<int32_t>* token_position_to_id = nullptr;  // [N * B]
  const std::vector<int32_t>* block_to_expert = nullptr;       // [N]
  int64_t T = 0, E = 0, B = 0, N = 0;
  int32_t pad = -1;
};
void validate_routing(const RoutingView& r);

// What an MoE author asks of a routing (inputs of a run): tokens per expert and padding.
struct RoutingStats {
  int64_t tokens_min = 0, tokens_max = 0;  // routed (token, expert) pairs per expert
  double tokens_mean = 0;
  int64_t experts_without_tokens = 0;
  int64_t routed_slots = 0, padding_slots = 0;  // slots of all N blocks holding a token / the padding
  int64_t padding_only_blocks = 0;              // blocks with no token at all
};
RoutingStats routing_stats(const RoutingView& r);

}  // namespace trnsim::kernels::moe
