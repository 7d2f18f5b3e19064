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

void RegionTracker::collect_groups(const std::vector<Group>& groups, const Rect& r,
                                   std::vector<Event>& deps) {
  for (const Group& g : groups) {
    if (!g.bound.overlaps(r)) continue;
    if (g.ordered) {
      // The latest overlapping record has the largest value of this semaphore: the wait needs only it.
      for (auto it = g.records.rbegin(); it != g.records.rend(); ++it)
        if (it->r.overlaps(r)) {
          deps.push_back(it->ev);
          break;
        }
    } else {
      for (const Record& x : g.records)
        if (x.r.overlaps(r)) deps.push_back(x.ev);
    }
  }
}

namespace {

// The bound of a group without records: overlaps nothing.
constexpr Rect kNoRect{INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN};

// Adds `rec` to group `g` of its semaphore (RegionTracker::Group, RegionTracker::Record).
template <class Group, class Record>
void append(Group& g, const Record& rec) {
  if (g.records.empty()) {
    g.ordered = true;
    g.bound = rec.r;
  } else {
    if (g.records.back().ev.value > rec.ev.value) g.ordered = false;
    g.bound = {std::min(g.bound.r0, rec.r.r0), std::max(g.bound.r1, rec.r.r1), std::min(g.bound.c0, rec.r.c0),
               std::max(g.bound.c1, rec.r.c1)};
  }
  g.records.push_back(rec);
}

}  // namespace

void RegionTracker::add(std::vector<Group>& groups, const Record& rec) {
  for (Group& g : groups)
    if (g.sem == rec.ev.sem) {
      append(g, rec);
      return;
    }
  groups.push_back(Group{rec.ev.sem, true, rec.r, {rec}});
}

void RegionTracker::collect(uint32_t space, const Rect& r, bool write, std::vector<Event>& deps) const {
  if (r.empty() || space >= spaces_.size()) return;
  const Chunks ch = chunks(space, r);
  for (int64_t rc = ch.rc0; rc <= ch.rc1; ++rc)
    for (int64_t cc = ch.cc0; cc <= ch.cc1; ++cc) {
      const Bucket* b = find(space, rc, cc);
      if (b == nullptr) continue;
      collect_groups(b->writes, r, deps);
      if (write) collect_groups(b->reads, r, deps);
    }
}

void RegionTracker::record(uint32_t space, const Rect& r, bool write, Event ev) {
  if (r.empty()) return;
  const Record rec{r, ev};
  const auto covered = [&](const Record& x) { return r.covers(x.r); };
  const auto erase_covered = [&](Group& g) {
    if (!g.bound.overlaps(r)) return;
    if (r.covers(g.bound)) {  // every record: no need to test each
      g.records.clear();
      g.bound = kNoRect;
      return;
    }
    if (std::erase_if(g.records, covered) == 0) return;
    // The bound shrinks to the records left (an emptied group overlaps nothing until append() sets it
    // afresh), so later accesses skip the group more often.
    g.bound = kNoRect;
    for (const Record& x : g.records)
      g.bound = {std::min(g.bound.r0, x.r.r0), std::max(g.bound.r1, x.r.r1), std::min(g.bound.c0, x.r.c0),
                 std::max(g.bound.c1, x.r.c1)};
  };
  const Chunks ch = chunks(space, r);
  for (int64_t rc = ch.rc0; rc <= ch.rc1; ++rc)
    for (int64_t cc = ch.cc0; cc <= ch.cc1; ++cc) {
      Bucket& b = at(space, rc, cc);
      Group* own = nullptr;  // the group of ev.sem
      if (write) {
        // A covered record is already ordered before this write (it waited for it): later accesses that
        // overlap the record also overlap this write and wait for it instead.
        for (Group& g : b.writes) {
          erase_covered(g);
          if (g.sem == ev.sem) own = &g;
        }
        for (Group& g : b.reads) erase_covered(g);
      } else {
        // A later read from the same in-order source completes after the earlier one.
        for (Group& g : b.reads)
          if (g.sem == ev.sem) {
            erase_covered(g);
            own = &g;
            break;
          }
      }
      if (own != nullptr)
        append(*own, rec);
      else
        add(write ? b.writes : b.reads, rec);
    }
}

size_t RegionTracker::live_records() const {
  size_t n = 0;
  for (const Space& s : spaces_)
    for (const auto& row : s.buckets)
      for (const Bucket& b : row) {
        for (const Group& g : b.writes) n += g.records.size();
        for (const Group& g : b.reads) n += g.records.size();
      }
  return n;
}

}  // namespace trnsim::kernels
