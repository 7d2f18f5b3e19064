#include "kernels/api/deps.h"

#include <algorithm>

namespace trnsim::kernels {

RegionTracker::RegionTracker(int64_t row_chunk, int64_t byte_chunk)
    : row_chunk_(std::max<int64_t>(1, row_chunk)), byte_chunk_(std::max<int64_t>(1, byte_chunk)) {}

void RegionTracker::set_chunks(uint32_t space, int64_t rows, int64_t bytes) {
  if (row_chunks_.size() <= space) row_chunks_.resize(space + 1, 0), byte_chunks_.resize(space + 1, 0);
  row_chunks_[space] = std::max<int64_t>(1, rows);
  byte_chunks_[space] = std::max<int64_t>(1, bytes);
}

template <class F>
void RegionTracker::for_chunks(uint32_t space, const Rect& r, F&& f) const {
  const int64_t rch = row_chunk(space), bch = byte_chunk(space);
  for (int64_t rc = r.r0 / rch; rc <= (r.r1 - 1) / rch; ++rc)
    for (int64_t cc = r.c0 / bch; cc <= (r.c1 - 1) / bch; ++cc) f(rc, cc);
}

void RegionTracker::collect(uint32_t space, const Rect& r, bool write, std::vector<Event>& deps) const {
  if (r.empty()) return;
  for_chunks(space, r, [&](int64_t rc, int64_t cc) {
    auto it = buckets_.find(Key{space, rc, cc});
    if (it == buckets_.end()) return;
    for (const Record& w : it->second.writes)
      if (w.r.overlaps(r)) deps.push_back(w.ev);
    if (!write) return;
    for (const Record& rd : it->second.reads)
      if (rd.r.overlaps(r)) deps.push_back(rd.ev);
  });
}

void RegionTracker::record(uint32_t space, const Rect& r, bool write, Event ev) {
  if (r.empty()) return;
  for_chunks(space, r, [&](int64_t rc, int64_t cc) {
    Bucket& b = buckets_[Key{space, rc, cc}];
    if (write) {
      // A covered record is already ordered before this write (it waited for it): later accesses that
      // overlap the record also overlap this write and wait for it instead.
      std::erase_if(b.writes, [&](const Record& x) { return r.covers(x.r); });
      std::erase_if(b.reads, [&](const Record& x) { return r.covers(x.r); });
      b.writes.push_back({r, ev});
    } else {
      // A later read from the same in-order source completes after the earlier one.
      std::erase_if(b.reads, [&](const Record& x) { return x.ev.sem == ev.sem && r.covers(x.r); });
      b.reads.push_back({r, ev});
    }
  });
}

size_t RegionTracker::live_records() const {
  size_t n = 0;
  for (const auto& [k, b] : buckets_) n += b.writes.size() + b.reads.size();
  return n;
}

}  // namespace trnsim::kernels
