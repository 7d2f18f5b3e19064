#include "kernels/api/deps.h"

#include <algorithm>
#include <bit>
#include <cstdint>

namespace trnsim::kernels {
namespace {

// Which half of a node split at `mid` along `dim` holds all of `r`: 0 or 1, or -1 when it straddles.
int side(const Rect& r, int dim, int64_t mid) {
  const int64_t lo = dim == 0 ? r.r0 : r.c0, hi = dim == 0 ? r.r1 : r.c1;
  if (hi <= mid) return 0;
  if (lo >= mid) return 1;
  return -1;
}

// Whether `r` reaches into half `h` of a node split at `mid` along `dim`.
bool reaches(const Rect& r, int dim, int64_t mid, int h) {
  const int64_t lo = dim == 0 ? r.r0 : r.c0, hi = dim == 0 ? r.r1 : r.c1;
  return h == 0 ? lo < mid : hi > mid;
}

// Whether an access (rectangle r, a write or not, of semaphore `sem`) drops an earlier record of its space
// (record() and collect_and_record() alike): a covered record is already ordered before a write (it waited
// for it), so later accesses that overlap the record also overlap this write and wait for it instead; a
// later read from the same in-order source completes after the earlier one. Reads drop only reads.
struct Drops {
  const Rect& r;
  bool write;
  uint16_t sem;
  template <class Record>
  bool operator()(const Record& x) const {
    return (write || x.ev.sem == sem) && r.covers(x.r);
  }
};

// std::erase_if, inlined: most walks drop nothing.
template <class V, class Drop>
[[gnu::always_inline]] inline void drop_if(V& v, const Drop& drop) {
  auto* const first = v.data();
  auto* const end = first + v.size();
  auto* out = first;
  while (out != end && !drop(*out)) ++out;
  if (out == end) return;
  for (auto* in = out + 1; in != end; ++in)
    if (!drop(*in)) *out++ = *in;
  v.resize(static_cast<size_t>(out - first));
}

}  // namespace

RegionTracker::RegionTracker(int64_t row_chunk, int64_t byte_chunk)
    : row_chunk_(std::max<int64_t>(1, row_chunk)), byte_chunk_(std::max<int64_t>(1, byte_chunk)) {}

void RegionTracker::set_chunks(uint32_t space, int64_t rows, int64_t bytes) {
  if (spaces_.size() <= space) spaces_.resize(space + 1);
  spaces_[space].row_chunk = std::max<int64_t>(1, rows);
  spaces_[space].byte_chunk = std::max<int64_t>(1, bytes);
}

// Inline: twice for an access collected then recorded (collect(), record()), once for one collected and
// recorded in one walk (collect_and_record()).
inline RegionTracker::Chunks RegionTracker::chunks(uint32_t space, const Rect& r) const {
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

RegionTracker::Bucket& RegionTracker::at(uint32_t space, int64_t rc, int64_t cc) {
  if (spaces_.size() <= space) spaces_.resize(space + 1);
  auto& rows = spaces_[space].buckets;
  if (static_cast<int64_t>(rows.size()) <= rc) rows.resize(rc + 1);
  auto& cols = rows[rc];
  if (static_cast<int64_t>(cols.size()) <= cc) cols.resize(cc + 1);
  Bucket& b = cols[cc];
  if (b.box.empty()) {
    const int64_t rch = row_chunk(space), bch = byte_chunk(space);
    b.box = {rc * rch, (rc + 1) * rch, cc * bch, (cc + 1) * bch};
  }
  return b;
}

template <class Visit>
void RegionTracker::for_buckets(uint32_t space, const Rect& r, const Visit& visit) {
  const Chunks ch = chunks(space, r);
  // at()'s growth once per row of buckets, not per bucket.
  if (spaces_.size() <= space) spaces_.resize(space + 1);
  auto& rows = spaces_[space].buckets;
  if (static_cast<int64_t>(rows.size()) <= ch.rc1) rows.resize(ch.rc1 + 1);
  for (int64_t rc = ch.rc0; rc <= ch.rc1; ++rc) {
    auto& cols = rows[rc];
    if (static_cast<int64_t>(cols.size()) <= ch.cc1) cols.resize(ch.cc1 + 1);
    for (int64_t cc = ch.cc0; cc <= ch.cc1; ++cc) {
      Bucket& b = cols[cc];
      if (b.box.empty()) at(space, rc, cc);  // its first record: at() sets its box
      visit(b);
    }
  }
}

// Once per instruction: one copy of the floors, and raised_ cleared where the last instruction raised.
void Needs::reset(const std::vector<uint32_t>& floor, int never) {
  for (const uint16_t s : sems_) raised_[s] = 0;
  sems_.clear();
  best_.assign(floor.begin(), floor.end());
  raised_.resize(floor.size(), 0);
  if (never >= 0 && static_cast<size_t>(never) < best_.size()) best_[never] = ~uint32_t{0};
}

const std::vector<Event>& Needs::events() {
  std::sort(sems_.begin(), sems_.end());
  events_.clear();
  for (const uint16_t s : sems_) events_.push_back({s, best_[s]});
  return events_;
}

// Inline into collect(): most buckets are not split, and most records are of a semaphore the access
// already waits for as far (the cheap test first).
inline void RegionTracker::collect_in(const Node& n, const Rect& r, bool write, Needs& need) const {
  const Node* at = &n;
  for (;;) {
    examined_ += at->writes.size() + (write ? at->reads.size() : 0);
    const uint32_t* const best = need.best_.data();
    const size_t num_sems = need.best_.size();
    for (const Record& x : at->writes) need.add_overlapping(x.ev, x.r, r, best, num_sems);
    if (write)
      for (const Record& x : at->reads) need.add_overlapping(x.ev, x.r, r, best, num_sems);
    if (at->dim < 0) return;
    const bool lo = reaches(r, at->dim, at->mid, 0), hi = reaches(r, at->dim, at->mid, 1);
    if (lo && hi) collect_in(at->half[0], r, write, need);
    at = &at->half[lo && !hi ? 0 : 1];
  }
}

// `list` null: both lists, in one walk of the parts (a write drops the records of either kind it covers).
template <class Drop>
void RegionTracker::erase_in(Node& n, const Rect& r, std::vector<Record> Node::*list, const Drop& drop) {
  if (list != nullptr) {
    examined_ += (n.*list).size();
    drop_if(n.*list, drop);
  } else {
    examined_ += n.writes.size() + n.reads.size();
    drop_if(n.writes, drop);
    drop_if(n.reads, drop);
  }
  if (n.dim < 0) return;
  for (int h = 0; h < 2; ++h)
    if (reaches(r, n.dim, n.mid, h)) erase_in(n.half[h], r, list, drop);
}

void RegionTracker::split(Node& n) {
  // Across rows or bytes, whichever sends more records into a half (records that straddle the middle stay).
  int best_dim = -1;
  size_t best = 0;
  int64_t best_mid = 0;
  for (int dim = 0; dim < 2; ++dim) {
    const int64_t lo = dim == 0 ? n.box.r0 : n.box.c0, hi = dim == 0 ? n.box.r1 : n.box.c1;
    if (hi - lo < 2) continue;
    const int64_t mid = lo + (hi - lo) / 2;
    size_t down = 0;
    for (const auto* list : {&n.writes, &n.reads})
      for (const Record& x : *list) down += side(x.r, dim, mid) >= 0;
    if (down > best) best = down, best_dim = dim, best_mid = mid;
  }
  const size_t held = n.writes.size() + n.reads.size();
  if (best_dim < 0 ||
      best * 2 < held) {  // the records do not separate: try again when there are twice as many
    n.split_at = held * 2;
    return;
  }
  n.dim = best_dim;
  n.mid = best_mid;
  n.half = std::make_unique<Node[]>(2);
  n.half[0].box = n.half[1].box = n.box;
  if (best_dim == 0) {
    n.half[0].box.r1 = n.half[1].box.r0 = best_mid;
  } else {
    n.half[0].box.c1 = n.half[1].box.c0 = best_mid;
  }
  for (auto list : {&Node::writes, &Node::reads}) {
    std::vector<Record> stay;
    for (const Record& x : n.*list) {
      const int h = side(x.r, n.dim, n.mid);
      if (h < 0)
        stay.push_back(x);
      else
        (n.half[h].*list).push_back(x);
    }
    n.*list = std::move(stay);
  }
  for (int h = 0; h < 2; ++h)
    if (n.half[h].writes.size() + n.half[h].reads.size() > n.half[h].split_at) split(n.half[h]);
}

void RegionTracker::insert(Node& n, const Record& rec, bool write) {
  Node* at = &n;
  while (at->dim >= 0) {
    const int h = side(rec.r, at->dim, at->mid);
    if (h < 0) break;
    at = &at->half[h];
  }
  (write ? at->writes : at->reads).push_back(rec);
  if (at->dim < 0 && at->writes.size() + at->reads.size() > at->split_at) split(*at);
}

void RegionTracker::collect(uint32_t space, const Rect& r, bool write, Needs& need) const {
  if (r.empty() || space >= spaces_.size()) return;
  const Chunks ch = chunks(space, r);
  // The chunks grown so far (find()'s bounds, checked once per row of buckets rather than per bucket).
  const auto& rows = spaces_[space].buckets;
  const int64_t rc_end = std::min<int64_t>(ch.rc1 + 1, static_cast<int64_t>(rows.size()));
  for (int64_t rc = ch.rc0; rc < rc_end; ++rc) {
    const auto& cols = rows[rc];
    const int64_t cc_end = std::min<int64_t>(ch.cc1 + 1, static_cast<int64_t>(cols.size()));
    for (int64_t cc = ch.cc0; cc < cc_end; ++cc) collect_in(cols[cc], r, write, need);
  }
}

void RegionTracker::record(uint32_t space, const Rect& r, bool write, Event ev) {
  if (r.empty()) return;
  const Record rec{r, ev};
  const Drops drops{r, write, ev.sem};
  for_buckets(space, r, [&](Bucket& b) {
    erase_in(b, r, write ? nullptr : &Node::reads, drops);
    insert(b, rec, write);
  });
}

// collect_in() and erase_in() of record() in one walk: each record is tested for the access's needs, then
// for being dropped (as record() drops it).
void RegionTracker::collect_erase_in(Node& n, const Rect& r, bool write, Event ev, Needs& need) {
  examined_ += n.writes.size() + n.reads.size();
  const uint32_t* const best = need.best_.data();
  const size_t num_sems = need.best_.size();
  const auto wait_for = [&](const Record& x) { need.add_overlapping(x.ev, x.r, r, best, num_sems); };
  const Drops drops{r, write, ev.sem};
  if (write) {
    // drop_if tests each record once, in order.
    const auto wait_then_drop = [&](const Record& x) {
      wait_for(x);
      return drops(x);
    };
    drop_if(n.writes, wait_then_drop);
    drop_if(n.reads, wait_then_drop);
  } else {
    for (const Record& x : n.writes) wait_for(x);
    drop_if(n.reads, drops);
  }
  if (n.dim < 0) return;
  for (int h = 0; h < 2; ++h)
    if (reaches(r, n.dim, n.mid, h)) collect_erase_in(n.half[h], r, write, ev, need);
}

void RegionTracker::collect_and_record(uint32_t space, const Rect& r, bool write, Needs& need, Event ev) {
  if (r.empty()) return;
  const Record rec{r, ev};
  for_buckets(space, r, [&](Bucket& b) {
    collect_erase_in(b, r, write, ev, need);
    insert(b, rec, write);
  });
}

size_t RegionTracker::count(const Node& n) {
  size_t c = n.writes.size() + n.reads.size();
  if (n.dim >= 0) c += count(n.half[0]) + count(n.half[1]);
  return c;
}

size_t RegionTracker::live_records() const {
  size_t n = 0;
  for (const Space& s : spaces_)
    for (const auto& row : s.buckets)
      for (const Bucket& b : row) n += count(b);
  return n;
}

}  // namespace trnsim::kernels
