#include "sim/isa/top8.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace trnsim::isa::top8 {

std::array<float, kWidth> largest(const float* x, uint64_t n) {
  // Positions ranked by value (NaN last), ties by position: a total order, so the result is reproducible.
  static thread_local std::vector<uint32_t> pos;
  pos.resize(n);
  for (uint64_t i = 0; i < n; ++i) pos[i] = static_cast<uint32_t>(i);
  const auto before = [x](uint32_t a, uint32_t b) {
    const bool na = std::isnan(x[a]), nb = std::isnan(x[b]);
    if (na != nb) return nb;
    if (!na && x[a] != x[b]) return x[a] > x[b];
    return a < b;
  };
  const uint64_t k = std::min<uint64_t>(kWidth, n);
  std::partial_sort(pos.begin(), pos.begin() + static_cast<int64_t>(k), pos.end(), before);
  std::array<float, kWidth> out{};
  for (uint64_t i = 0; i < k; ++i) out[i] = x[pos[i]];
  return out;
}

std::array<uint32_t, kWidth> pair_positions(const float* x, uint64_t n, const float* vals, bool from_last) {
  std::array<uint32_t, kWidth> out{};
  std::vector<bool> taken(n, false);
  for (int t = 0; t < kWidth; ++t) {
    const int v = from_last ? kWidth - 1 - t : t;
    out[v] = kNotFound;
    for (uint64_t i = 0; i < n; ++i)
      if (!taken[i] && x[i] == vals[v]) {
        taken[i] = true;
        out[v] = static_cast<uint32_t>(i);
        break;
      }
  }
  return out;
}

}  // namespace trnsim::isa::top8
