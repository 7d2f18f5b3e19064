#include "kernels/lib/mxfp8/layout.h"

#include <algorithm>
#include <utility>

namespace trnsim::kernels::mxfp8 {

isa::DType x4_dtype(num::Fp8Format f) {
  return f == num::Fp8Format::E4M3FN ? isa::DType::FP8_E4M3FN_X4 : isa::DType::FP8_E5M2_X4;
}

std::vector<int64_t> unpacked_scales(int64_t K, int64_t F) {
  return {K / 4, F};
}
std::vector<int64_t> packed_scales(int64_t K, int64_t F) {
  return {cdiv(K, 2048) * 128, F};
}

int64_t scale_slots(int64_t bk, int64_t TK, bool packed) {
  if (!packed) return bk;
  int64_t best = 0;
  for (int64_t kt0 = 0; kt0 < TK; kt0 += bk) {
    const int64_t kt1 = std::min(kt0 + bk, TK);
    best = std::max(best, (kt1 - 1) / 4 - kt0 / 4 + 1);
  }
  return best;
}

std::vector<Segment> segments(int64_t r0, int64_t r1, int64_t K, num::QuantScheme s) {
  if (s == num::QuantScheme::OneX32) return {{r0, r1 - r0, 4 * r0, 4, 1}};
  std::vector<Segment> out;
  // Sub-tiles: full 512-row tiles, then a 256-row and a 128-row remainder.
  std::vector<std::pair<int64_t, int64_t>> subs;  // (first k, size)
  int64_t k = 0;
  for (; k + 512 <= K; k += 512) subs.push_back({k, 512});
  if (K - k >= 256) subs.push_back({k, 256}), k += 256;
  if (K - k >= 128) subs.push_back({k, 128}), k += 128;
  for (const auto& [ks, size] : subs) {
    const int64_t a = std::max(r0, ks / 4), b = std::min(r1, (ks + size) / 4);
    if (a < b) out.push_back({a, b - a, ks + (a - ks / 4), 1, size / 4, ks});
  }
  return out;
}

namespace {
// Partitions an operand starting at partition `start` (a multiple of 32) may span.
int64_t span_cap(int64_t start) {
  return start == 0 ? 128 : start == 64 ? 64 : 32;
}
}  // namespace

void partition_runs(int64_t start, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  while (n > 0) {
    const int64_t m = std::min(n, span_cap(start));
    fn(start, m);
    start += m, n -= m;
  }
}

void row_runs(int64_t r, int64_t n, int64_t d,
              const std::function<void(int64_t, int64_t, int64_t, int64_t)>& fn) {
  for (int64_t done = 0; done < n;) {
    const int64_t p = (r + done) % 128, q = (d + done) % 128;
    const int64_t m = std::min({n - done, 128 - p, span_cap(p), span_cap(q)});
    fn(p, m, (r + done) / 128, done);
    done += m;
  }
}

}  // namespace trnsim::kernels::mxfp8
