#include "kernels/moe/routing.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "sim/base/error.h"
#include "sim/io/generators.h"

namespace trnsim::kernels::moe {

int64_t block_count(int64_t T, int64_t top_k, int64_t E, int64_t B) {
  // Python's math.ceil of the signed quotient.
  const int64_t a = T * top_k - (E - 1);
  const int64_t q = a >= 0 ? (a + B - 1) / B : -((-a) / B);
  return std::max<int64_t>(1, q + E - 1);
}

std::vector<double> router_logits(uint64_t seed, int64_t T, int64_t E, double zipf) {
  std::vector<double> logits(static_cast<size_t>(T * E));
  std::vector<double> bias(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) bias[e] = zipf == 0 ? 0.0 : -zipf * io::det_log(static_cast<double>(e + 1));
  const uint64_t key = io::mix64(seed ^ 0x6d6f655f726f7574ull);  // "moe_rout"
  for (int64_t i = 0; i < T * E; ++i) {
    // u uniform in (0, 1): 53 random bits, offset by half a step.
    const uint64_t bits = io::mix64(key + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
    const double u = (static_cast<double>(bits >> 11) + 0.5) * 0x1p-53;
    logits[i] = bias[i % E] - io::det_log(-io::det_log(u));
  }
  return logits;
}

TopK route_topk(const std::vector<double>& logits, int64_t T, int64_t E, int64_t K, bool renormalize) {
  if (K < 1 || K > E) throw InputError(fmt::format("top_k = {} must be in [1, E = {}]", K, E));
  if (static_cast<int64_t>(logits.size()) != T * E)
    throw InputError(fmt::format("router logits: {} values for T*E = {}", logits.size(), T * E));
  TopK r;
  r.experts.resize(static_cast<size_t>(T * K));
  r.affinities.resize(static_cast<size_t>(T * K));
  std::vector<int32_t> order(static_cast<size_t>(E));
  std::vector<double> p(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const double* l = &logits[t * E];
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    const double mx = l[order[0]];
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = io::det_exp(l[e] - mx);
    double chosen = 0;
    for (int64_t k = 0; k < K; ++k) chosen += p[order[k]] / sum;
    for (int64_t k = 0; k < K; ++k) {
      r.experts[t * K + k] = order[k];
      const double a = p[order[k]] / sum;
      r.affinities[t * K + k] = renormalize ? a / chosen : a;
    }
  }
  return r;
}

Blocks form_blocks(const std::vector<int32_t>& experts, int64_t T, int64_t E, int64_t K, int64_t B, int64_t N,
                   int32_t pad) {
  // Tokens of each expert in increasing id (each token lists an expert at most once).
  std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = experts[t * K + k];
      if (e < 0 || e >= E) throw InputError(fmt::format("token {} is routed to expert {} of {}", t, e, E));
      tokens[e].push_back(static_cast<int32_t>(t));
    }
  int64_t used = 0;
  for (const auto& v : tokens) used += (static_cast<int64_t>(v.size()) + B - 1) / B;
  if (used > N)
    throw InputError(fmt::format("the routing needs {} blocks of {} tokens, more than N = {}", used, B, N));
  Blocks b;
  b.token_position_to_id.assign(static_cast<size_t>(N * B), pad);
  b.block_to_expert.reserve(static_cast<size_t>(N));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t first = static_cast<int64_t>(b.block_to_expert.size());
    const int64_t nb = (static_cast<int64_t>(tokens[e].size()) + B - 1) / B + (e == E - 1 ? N - used : 0);
    for (int64_t i = 0; i < nb; ++i) b.block_to_expert.push_back(static_cast<int32_t>(e));
    std::copy(tokens[e].begin(), tokens[e].end(), b.token_position_to_id.begin() + first * B);
  }
  return b;
}

void validate_routing(const RoutingView& r) {
  const auto& tp = *r.token_position_to_id;
  const auto& be = *r.block_to_expert;
  if (static_cast<int64_t>(tp.size()) != r.N * r.B)
    throw InputError(fmt::format("token_position_to_id has {} entries, expected N*B = {}*{} = {}", tp.size(),
                                 r.N, r.B, r.N * r.B));
  if (static_cast<int64_t>(be.size()) != r.N)
    throw InputError(fmt::format("block_to_expert has {} entries, expected N = {}", be.size(), r.N));
  for (int64_t b = 0; b < r.N; ++b)
    if (be[b] < 0 || be[b] >= r.E)
      throw InputError(
          fmt::format("block_to_expert[{}] = {} is not an expert id in [0, E = {})", b, be[b], r.E));
  std::vector<int64_t> seen(static_cast<size_t>(r.T), -1);  // slot of the token in the current block
  for (int64_t p = 0; p < r.N * r.B; ++p) {
    const int32_t t = tp[p];
    if (t == r.pad) continue;
    if (t < 0 || t >= r.T)
      throw InputError(fmt::format(
          "token_position_to_id[{}] = {} is not a token id in [0, T = {}) or the padding value {}", p, t, r.T,
          r.pad));
    if (seen[t] >= (p / r.B) * r.B)
      throw InputError(
          fmt::format("token_position_to_id[{}] = {}: token {} appears twice in block {} (also at [{}])", p,
                      t, t, p / r.B, seen[t]));
    seen[t] = p;
  }
  // A token in two blocks of one expert would have its gradient summed twice and its affinity-gradient
  // element written twice (the library's generator puts each routed (token, expert) pair in one slot).
  std::vector<std::vector<int64_t>> blocks(static_cast<size_t>(r.E));
  for (int64_t b = 0; b < r.N; ++b) blocks[be[b]].push_back(b);
  std::vector<int64_t> at(static_cast<size_t>(r.T), -1);     // the token's slot within the current expert
  std::vector<int64_t> owner(static_cast<size_t>(r.T), -1);  // the expert `at` belongs to
  for (int64_t e = 0; e < r.E; ++e)
    for (int64_t b : blocks[e])
      for (int64_t p = b * r.B; p < (b + 1) * r.B; ++p) {
        const int32_t t = tp[p];
        if (t == r.pad) continue;
        if (owner[t] == e)
          throw InputError(
              fmt::format("token_position_to_id[{}] = {}: token {} appears in blocks {} and {} of expert {} "
                          "(also at [{}]); "
                          "a routed (token, expert) pair has one slot",
                          p, t, t, at[t] / r.B, b, e, at[t]));
        owner[t] = e, at[t] = p;
      }
}

RoutingStats routing_stats(const RoutingView& r) {
  const auto& tp = *r.token_position_to_id;
  const auto& be = *r.block_to_expert;
  std::vector<int64_t> per_expert(static_cast<size_t>(r.E), 0);
  RoutingStats s;
  for (int64_t b = 0; b < r.N; ++b) {
    int64_t n = 0;
    for (int64_t j = 0; j < r.B; ++j) n += tp[b * r.B + j] != r.pad;
    per_expert[be[b]] += n;
    s.routed_slots += n;
    s.padding_only_blocks += n == 0;
  }
  s.padding_slots = r.N * r.B - s.routed_slots;
  s.tokens_min = *std::min_element(per_expert.begin(), per_expert.end());
  s.tokens_max = *std::max_element(per_expert.begin(), per_expert.end());
  s.tokens_mean = static_cast<double>(s.routed_slots) / static_cast<double>(r.E);
  s.experts_without_tokens = std::count(per_expert.begin(), per_expert.end(), 0);
  return s;
}

}  // namespace trnsim::kernels::moe
