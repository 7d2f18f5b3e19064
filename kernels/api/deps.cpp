#include "kernels/api/deps.h"

#include <algorithm>
#include <bit>
#include <cstdint>

namespace trnsim::kernels {

RegionTracker::RegionTracker(int64_t row_chunk, int64_t byte_chunk)
    : row_chunk_(std::max<int64_t>(1, row_chunk)), byte_chunk_(std::max<int64_t>(1, byte_chunk)) {}

void RegionTracker::set_chunks(uint32_t space, int64_t rows, int64_t bytes) {
  if (spaces_.size() <= space) spaces_.resize(space + 1);
  spaces_[space].row_chunk = std::max<int64_t>(1, rows);
  spaces_[space].byte_chunk = std::max<int64_t>(1, bytes);
}

RegionTracker::Chunks RegionTracker::chunks(uint32_t space, const Rect& r) const {
  // Coordinates below 0 share chunk 0: the mapping stays monotonic, so overlapping rectangles share a chunk.
  const int64_t rch = row_chunk(space), bch = byte_chunk(space);
  const auto at_least_0 = [](int64_t x) { return std::max<int64_t>(0, x); };
  // Chunk sizes are mostly powers of two (SBUF, PSUM): a shift instead of four divisions. (Both are >= 1;
  // x & (x - 1) rather than std::has_single_bit, which without -mpopcnt is a libgcc call.)
  if ((rch & (rch - 1)) == 0 && (bch & (bch - 1)) == 0) {
    const int rs = std::countr_zero(static_cast<uint64_t>(rch)),
              bs = std::countr_zero(static_cast<uint64_t>(bch));
    return {at_least_0(r.r0) >> rs, at_least_0(r.r1 - 1) >> rs, at_least_0(r.c0) >> bs,
            at_least_0(r.c1 - 1) >> bs};
  }
  return {at_least_0(r.r0) / rch, at_least_0(r.r1 - 1) / rch, at_least_0(r.c0) / bch,
          at_least_0(r.c1 - 1) / bch};
}

const RegionTracker::Bucket* RegionTracker::find(uint32_t space, int64_t rc, int64_t cc) const {
  if (space >= spaces_.size()) return nullptr;
  const auto& rows = spaces_[space].buckets;
  if (rc >= static_cast<int64_t>(rows.size())) return nullptr;
  const auto& cols = rows[rc];
  if (cc >= static_cast<int64_t>(cols.size())) return nullptr;
  return &cols[cc];
}

RegionTracker::Bucket& RegionTracker::at(uint32_t space, int64_t rc, int64_t cc) {
  if (spaces_.size() <= space) spaces_.resize(space + 1);
  auto& rows = spaces_[space].buckets;
  if (static_cast<int64_t>(rows.size()) <= rc) rows.resize(rc + 1);
  auto& cols = rows[rc];
  if (static_cast<int64_t>(cols.size()) <= cc) cols.resize(cc + 1);
  return cols[cc];
}

void RegionTracker::collect(uint32_t space, const Rect& r, bool write, std::vector<Event>& deps) const {
  if (r.empty() || space >= spaces_.size()) return;
  const auto scan = [&](const std::vector<Record>& recs) {
    for (const Record& x : recs)
      if (x.r.overlaps(r)) deps.push_back(x.ev);
  };
  const Chunks ch = chunks(space, r);
  for (int64_t rc = ch.rc0; rc <= ch.rc1; ++rc)
    for (int64_t cc = ch.cc0; cc <= ch.cc1; ++cc) {
      const Bucket* b = find(space, rc, cc);
      if (b == nullptr) continue;
      scan(b->writes);
      if (write) scan(b->reads);
    }
}

void RegionTracker::record(uint32_t space, const Rect& r, bool write, Event ev) {
  if (r.empty()) return;
  const Record rec{r, ev};
  // A covered record is already ordered before a write (it waited for it): later accesses that overlap the
  // record also overlap this write and wait for it instead. A later read from the same in-order source
  // completes after the earlier one.
  const auto covered = [&](const Record& x) { return r.covers(x.r); };
  const auto covered_same_sem = [&](const Record& x) { return x.ev.sem == ev.sem && r.covers(x.r); };
  const Chunks ch = chunks(space, r);
  for (int64_t rc = ch.rc0; rc <= ch.rc1; ++rc)
    for (int64_t cc = ch.cc0; cc <= ch.cc1; ++cc) {
      Bucket& b = at(space, rc, cc);
      if (write) {
        std::erase_if(b.writes, covered);
        std::erase_if(b.reads, covered);
        b.writes.push_back(rec);
      } else {
        std::erase_if(b.reads, covered_same_sem);
        b.reads.push_back(rec);
      }
    }
}

size_t RegionTracker::live_records() const {
  size_t n = 0;
  for (const Space& s : spaces_)
    for (const auto& row : s.buckets)
      for (const Bucket& b : row) n += b.writes.size() + b.reads.size();
  return n;
}

}  // namespace trnsim::kernels
