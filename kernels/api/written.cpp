#include "kernels/api/written.h"

#include <algorithm>
#include <bit>

namespace trnsim::kernels {

WrittenMap::Rows WrittenMap::rows_of(int64_t r0, int64_t r1) {
  const auto bits = [](int64_t a, int64_t b) -> uint64_t {  // bits [a, b) of a 64-bit word, 0 <= a <= b <= 64
    if (a >= b) return 0;
    const uint64_t upto = b >= 64 ? ~uint64_t{0} : (uint64_t{1} << b) - 1;
    return upto & ~((uint64_t{1} << a) - 1);
  };
  r0 = std::clamp<int64_t>(r0, 0, kRows);
  r1 = std::clamp<int64_t>(r1, 0, kRows);
  return {bits(std::min<int64_t>(r0, 64), std::min<int64_t>(r1, 64)),
          bits(std::max<int64_t>(r0, 64) - 64, std::max<int64_t>(r1, 64) - 64)};
}

void WrittenMap::split_at(int64_t x) {
  auto it = ranges_.upper_bound(x);
  if (it == ranges_.begin()) return;
  --it;
  if (it->first < x && x < it->second.end) {
    const Range right{it->second.end, it->second.rows};
    it->second.end = x;
    ranges_.emplace_hint(std::next(it), x, right);
  }
}

void WrittenMap::mark(const Rect& r) {
  // Most writes land on bytes written before (a tile rewritten every iteration): the ranges stay as they are.
  if (!first_unwritten(r)) return;
  const Rows m = rows_of(r.r0, r.r1);
  split_at(r.c0);
  split_at(r.c1);
  int64_t pos = r.c0;
  auto it = ranges_.lower_bound(r.c0);
  while (pos < r.c1) {
    if (it == ranges_.end() || it->first > pos) {  // a gap: [pos, next start or c1)
      const int64_t end = it == ranges_.end() ? r.c1 : std::min(it->first, r.c1);
      it = std::next(ranges_.emplace_hint(it, pos, Range{end, m}));
      pos = end;
      continue;
    }
    it->second.rows.lo |= m.lo;
    it->second.rows.hi |= m.hi;
    pos = it->second.end;
    ++it;
  }
  // Merge neighbours with the same partitions, from the range before c0 to the one at c1.
  auto cur = ranges_.lower_bound(r.c0);
  if (cur != ranges_.begin()) --cur;
  while (cur != ranges_.end() && cur->first <= r.c1) {
    auto next = std::next(cur);
    if (next != ranges_.end() && next->first == cur->second.end && next->second.rows == cur->second.rows) {
      cur->second.end = next->second.end;
      ranges_.erase(next);
    } else {
      cur = next;
    }
  }
}

std::optional<std::pair<int64_t, int64_t>> WrittenMap::first_unwritten(const Rect& r) const {
  const Rows m = rows_of(r.r0, r.r1);
  if (r.c0 >= r.c1 || (m.lo == 0 && m.hi == 0)) return std::nullopt;
  const auto first_missing = [&](const Rows& have) -> int64_t {
    const uint64_t lo = m.lo & ~have.lo, hi = m.hi & ~have.hi;
    return lo != 0 ? std::countr_zero(lo) : 64 + std::countr_zero(hi);
  };
  int64_t pos = r.c0;
  auto it = ranges_.upper_bound(r.c0);
  if (it != ranges_.begin() && std::prev(it)->second.end > r.c0) --it;
  while (pos < r.c1) {
    if (it == ranges_.end() || it->first > pos) return std::make_pair(std::max<int64_t>(r.r0, 0), pos);
    if (!it->second.rows.has(m)) return std::make_pair(first_missing(it->second.rows), pos);
    pos = it->second.end;
    ++it;
  }
  return std::nullopt;
}

void ByteSpans::mark(int64_t begin, int64_t end) {
  if (begin >= end) return;
  auto it = spans_.upper_bound(begin);
  if (it != spans_.begin()) {
    const auto prev = std::prev(it);
    if (prev->second >= begin) {
      begin = prev->first;
      end = std::max(end, prev->second);
      it = spans_.erase(prev);
    }
  }
  while (it != spans_.end() && it->first <= end) {
    end = std::max(end, it->second);
    it = spans_.erase(it);
  }
  spans_.emplace(begin, end);
}

std::vector<std::pair<int64_t, int64_t>> ByteSpans::gaps(int64_t size) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t at = 0;
  for (const auto& [b, e] : spans_) {
    if (b >= size) break;
    if (b > at) out.emplace_back(at, b);
    at = std::max(at, e);
  }
  if (at < size) out.emplace_back(at, size);
  return out;
}

}  // namespace trnsim::kernels
