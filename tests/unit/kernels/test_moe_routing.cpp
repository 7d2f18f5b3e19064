// MoE routing (kernels/moe/routing.h): N, top-k with ties, affinities, the Zipf skew, block formation as
// nkilib's MoE tests form blocks (worked by hand below, both padding values, an expert without tokens,
// surplus blocks on the last expert), and the checks of routing tensors with their exact messages.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/moe/routing.h"
#include "sim/base/error.h"

using namespace trnsim;
using namespace trnsim::kernels::moe;

TEST_CASE("moe routing: N is the tight worst case, Python's ceil of the signed quotient", "[moe]") {
  CHECK(block_count(4096, 8, 128, 512) == 64 + 127);  // ceil(32641 / 512) + 127
  CHECK(block_count(4096, 8, 256, 512) == 64 + 255);  // ceil(32513 / 512) + 255
  CHECK(block_count(4096, 2, 8, 1024) == 8 + 7);      // ceil(8185 / 1024) + 7
  CHECK(block_count(8, 1, 3, 4) == 2 + 2);            // ceil(6 / 4) + 2
  CHECK(block_count(3, 1, 8, 128) == 0 + 7);          // ceil(-4 / 128) = 0
  CHECK(block_count(1, 1, 300, 128) == -2 + 299);     // ceil(-298 / 128) = -2
  CHECK(block_count(1, 1, 1, 128) == 1);
}

TEST_CASE("moe routing: top-k takes the largest logits, a tie going to the lower expert id", "[moe]") {
  const std::vector<double> logits{1, 3, 3, 2, /* token 1 */ 5, 5, 5, 5};
  const TopK k2 = route_topk(logits, 2, 4, 2, false);
  CHECK(k2.experts == std::vector<int32_t>{1, 2, 0, 1});
  const TopK k3 = route_topk(logits, 2, 4, 3, false);
  CHECK(k3.experts == std::vector<int32_t>{1, 2, 3, 0, 1, 2});
  // Affinities: the softmax over all four logits at the chosen experts, or those renormalised.
  const double z = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0);
  CHECK(k2.affinities[0] == Approx(std::exp(3.0) / z).epsilon(1e-12));
  CHECK(k2.affinities[2] == Approx(0.25).epsilon(1e-12));
  const TopK n2 = route_topk(logits, 2, 4, 2, true);
  CHECK(n2.affinities == std::vector<double>{0.5, 0.5, 0.5, 0.5});
  const TopK n3 = route_topk(logits, 2, 4, 3, true);
  CHECK(n3.affinities[2] == Approx(std::exp(2.0) / (2 * std::exp(3.0) + std::exp(2.0))).epsilon(1e-12));
  CHECK_THROWS_WITH(route_topk(logits, 2, 4, 5, false), "top_k = 5 must be in [1, E = 4]");
}

TEST_CASE("moe routing: the Zipf exponent skews the first choices as 1/(e+1)^zipf", "[moe]") {
  const int64_t T = 20000, E = 8;
  for (double zipf : {0.0, 1.0}) {
    INFO("zipf " << zipf);
    const TopK r = route_topk(router_logits(7, T, E, zipf), T, E, 1, true);
    std::vector<int64_t> n(E, 0);
    for (int32_t e : r.experts) ++n[e];
    double hsum = 0;
    for (int64_t e = 0; e < E; ++e) hsum += std::pow(e + 1.0, -zipf);
    for (int64_t e = 0; e < E; ++e) {
      const double p = std::pow(e + 1.0, -zipf) / hsum, mean = T * p, sd = std::sqrt(T * p * (1 - p));
      CHECK(std::abs(static_cast<double>(n[e]) - mean) < 5 * sd);
    }
  }
  // The skew is exactly a per-expert bias on the same noise: skewed - uniform logits = -zipf * ln(e + 1),
  // so expert 0 is unbiased and expert 3 is lowered by 2 ln 4 at zipf 2.
  const std::vector<double> flat = router_logits(5, 3, 4, 0.0), skewed = router_logits(5, 3, 4, 2.0);
  for (int64_t i = 0; i < 12; ++i)
    CHECK(skewed[i] - flat[i] == Approx(-2.0 * std::log(i % 4 + 1.0)).margin(1e-12));
  // The same seed gives the same logits, another seed others.
  CHECK(router_logits(3, 4, 8, 1.0) == router_logits(3, 4, 8, 1.0));
  CHECK(router_logits(3, 4, 8, 1.0) != router_logits(4, 4, 8, 1.0));
  // A strong skew leaves experts without tokens; they get no block (the last expert keeps the surplus).
  const int64_t T2 = 64, B = 128, N = block_count(T2, 1, E, B);
  const TopK s = route_topk(router_logits(11, T2, E, 8.0), T2, E, 1, true);
  const Blocks b = form_blocks(s.experts, T2, E, 1, B, N, -1);
  std::vector<int64_t> tok(E, 0);
  for (int32_t e : s.experts) ++tok[e];
  CHECK(tok[4] + tok[5] + tok[6] + tok[7] == 0);
  for (int32_t e = 1; e < E - 1; ++e)
    CHECK(std::count(b.block_to_expert.begin(), b.block_to_expert.end(), e) == (tok[e] + B - 1) / B);
  CHECK(std::count(b.block_to_expert.begin(), b.block_to_expert.end(), E - 1) ==
        N - std::count_if(b.block_to_expert.begin(), b.block_to_expert.end(),
                          [&](int32_t e) { return e < E - 1; }));
}

TEST_CASE("moe routing: blocks are expert-major, tokens ascending, the last block padded (-1 or T)",
          "[moe]") {
  // T = 8 tokens, top-1, E = 3, B = 4: N = ceil(6 / 4) + 2 = 4. Expert 0 gets tokens 0, 1, 3, 4, 6 (two
  // blocks, the second padded), expert 1 tokens 2 and 7, expert 2 token 5.
  const std::vector<int32_t> experts{0, 0, 1, 0, 0, 2, 0, 1};
  const Blocks skip = form_blocks(experts, 8, 3, 1, 4, 4, -1);
  CHECK(skip.block_to_expert == std::vector<int32_t>{0, 0, 1, 2});
  CHECK(skip.token_position_to_id ==
        std::vector<int32_t>{0, 1, 3, 4, 6, -1, -1, -1, 2, 7, -1, -1, 5, -1, -1, -1});
  const Blocks zero_row = form_blocks(experts, 8, 3, 1, 4, 4, 8);
  CHECK(zero_row.token_position_to_id ==
        std::vector<int32_t>{0, 1, 3, 4, 6, 8, 8, 8, 2, 7, 8, 8, 5, 8, 8, 8});
  // T = 6, top-1, E = 4, B = 2: N = ceil(3 / 2) + 3 = 5; expert 2 gets no token and no block; the one
  // block left over goes to the last expert, fully padded.
  const Blocks z = form_blocks({3, 0, 3, 0, 3, 1}, 6, 4, 1, 2, 5, -1);
  CHECK(z.block_to_expert == std::vector<int32_t>{0, 1, 3, 3, 3});
  CHECK(z.token_position_to_id == std::vector<int32_t>{1, 3, 5, -1, 0, 2, 4, -1, -1, -1});
  // Top-2 (T = 4, E = 3, B = 2, N = ceil(6 / 2) + 2 = 5): a token appears once per expert, in two blocks.
  const Blocks k2 = form_blocks({1, 0, 0, 2, 2, 1, 0, 1}, 4, 3, 2, 2, 5, -1);
  CHECK(k2.block_to_expert == std::vector<int32_t>{0, 0, 1, 1, 2});
  CHECK(k2.token_position_to_id == std::vector<int32_t>{0, 1, 3, -1, 0, 2, 3, -1, 1, 2});
  CHECK_THROWS_WITH(form_blocks(experts, 8, 3, 1, 4, 3, -1),
                    "the routing needs 4 blocks of 4 tokens, more than N = 3");
}

TEST_CASE("moe routing: bad routing tensors are errors naming the tensor and the index", "[moe]") {
  std::vector<int32_t> tp{0, 1, 3, 4, 6, -1, -1, -1, 2, 7, -1, -1, 5, -1, -1, -1}, be{0, 0, 1, 2};
  const auto check = [&](int32_t pad = -1) { validate_routing({&tp, &be, 8, 3, 4, 4, pad}); };
  CHECK_NOTHROW(check());
  be[2] = 3;
  CHECK_THROWS_WITH(check(), "block_to_expert[2] = 3 is not an expert id in [0, E = 3)");
  be[2] = -1;
  CHECK_THROWS_WITH(check(), "block_to_expert[2] = -1 is not an expert id in [0, E = 3)");
  be[2] = 1;
  tp[9] = 8;
  CHECK_THROWS_WITH(check(),
                    "token_position_to_id[9] = 8 is not a token id in [0, T = 8) or the padding value -1");
  std::vector<int32_t> tp_t = tp;  // padding T = 8 when skip_token is off
  std::replace(tp_t.begin(), tp_t.end(), -1, 8);
  CHECK_NOTHROW(validate_routing({&tp_t, &be, 8, 3, 4, 4, 8}));
  tp[9] = -1;
  CHECK_THROWS_WITH(check(8),
                    "token_position_to_id[5] = -1 is not a token id in [0, T = 8) or the padding value 8");
  tp[9] = 1;  // token 1 is in block 0 already: allowed (another expert's block)
  CHECK_NOTHROW(check());
  tp[6] = 1;  // but not in a second block of expert 0 (blocks 0 and 1)
  CHECK_THROWS_WITH(
      check(),
      "token_position_to_id[6] = 1: token 1 appears in blocks 0 and 1 of expert 0 (also at [1]); a "
      "routed (token, expert) pair has one slot");
  tp[6] = -1;
  tp[10] = 1;
  CHECK_THROWS_WITH(check(), "token_position_to_id[10] = 1: token 1 appears twice in block 2 (also at [9])");
  tp.pop_back();
  CHECK_THROWS_WITH(check(), "token_position_to_id has 15 entries, expected N*B = 4*4 = 16");
  tp.push_back(-1);
  be.pop_back();
  CHECK_THROWS_WITH(check(), "block_to_expert has 3 entries, expected N = 4");
}

TEST_CASE("moe routing: stats count tokens per expert and padding", "[moe]") {
  const std::vector<int32_t> tp{1, 3, 5, -1, 0, 2, 4, -1, -1, -1}, be{0, 1, 3, 3, 3};
  const RoutingStats s = routing_stats({&tp, &be, 6, 4, 2, 5, -1});
  CHECK(s.tokens_min == 0);  // expert 2
  CHECK(s.tokens_max == 3);
  CHECK(s.tokens_mean == 1.5);
  CHECK(s.experts_without_tokens == 1);
  CHECK(s.routed_slots == 6);
  CHECK(s.padding_slots == 4);
  CHECK(s.padding_only_blocks == 1);
}
