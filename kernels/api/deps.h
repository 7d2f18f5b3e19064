// Dependency tracking for the builder: which earlier instructions an access must wait for.
//
// Semaphore scheme (per physical core; the model just applies the updates the builder emits):
//   - S[engine_sem(E)] = S[int(E)]: every non-DMA instruction of engine E increments it by 1 at completion,
//     so "instruction #n of E is done" is S[E] >= n (n counts from 1).
//   - S[kPeLoadStationarySem]: every PE LoadStationary increments it by 1 at its end
//   (Instruction::ls_updates),
//     so "the stationary operand of PE LoadStationary #n is latched" is S[kPeLoadStationarySem] >= n: a later
//     writer of a stationary region waits for that, not for the MultiplyMoving. The LoadStationary waits only
//     for its stationary operand, the MultiplyMoving (Instruction::mm_waits) for the rest.
//   - S[dma_queue_sem(q)] = S[kDmaSemBase + q]: every transfer on DMA queue q increments it by 1 when the
//     transfer completes (transfers of one queue complete in FIFO order), so "transfer #n of q is done" is
//     S[kDmaSemBase + q] >= n. A DMA trigger does not count on its issuing engine's semaphore.
//   - core_barrier is the model's own: it signals the peer when it issues and completes once the peer has
//     issued as many barriers (sim/model/run.h); it counts on its engine's semaphore like any instruction. A
//     sendrecv is a barrier ("both dst buffers are free") then a transfer whose completion increments the
//     peer's S[kSendRecvDoneSem] (all sendrecvs of a core use one queue, so these arrive in order).
// A dependency on an instruction of the same engine needs no wait (each engine runs its stream in order);
// a dependency on a DMA always waits on its queue's semaphore, even from the issuing engine.
//
// Regions are rectangles: rows x bytes. SBUF/PSUM: partitions x byte offsets inside each partition (the
// bounding box of the access pattern). HBM: rows of the tensor (its first dimension) x byte offsets inside a
// row, when the access pattern walks whole rows; otherwise the full rows its byte range touches. Tracking is
// per core, HBM included: ordering HBM accesses across the two cores needs core_barrier.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace trnsim::kernels {

inline constexpr uint16_t kPeLoadStationarySem = 5;  // PE LoadStationary completions
inline constexpr uint16_t kDmaSemBase = 8;           // queue q uses semaphore 8 + q (q < 16)
inline constexpr uint16_t kSendRecvDoneSem = 46;     // the peer's sendrecv transfers into this core

// Rows [r0, r1) x bytes [c0, c1). Empty if either range is empty.
struct Rect {
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;

  bool empty() const { return r0 >= r1 || c0 >= c1; }
  bool overlaps(const Rect& o) const { return r0 < o.r1 && o.r0 < r1 && c0 < o.c1 && o.c0 < c1; }
  bool covers(const Rect& o) const { return r0 <= o.r0 && o.r1 <= r1 && c0 <= o.c0 && o.c1 <= c1; }
};

// "Done when S[sem] >= value" on the accessing core.
struct Event {
  uint16_t sem = 0;
  uint32_t value = 0;
};

// The strongest event per semaphore an instruction must wait for beyond what its engine already waited for:
// what collect() gathers. Each semaphore has a floor (waits up to it are implied: the engine waited for them
// earlier, or program order); an event at or below its floor, or of a semaphore past the floors' count, is
// not needed.
class Needs {
 public:
  // Starts over with these floors, and none of semaphore `never` needed (the engine's own: program order).
  void reset(const std::vector<uint32_t>& floor, int never = -1);
  bool wants(const Event& e) const { return wants(e, best_.data(), best_.size()); }
  void add(const Event& e) {
    if (wants(e)) raise(e);
  }
  // add() of an earlier access's event when its rectangle `was` overlaps `r`, the cheap test first (most
  // events are no longer wanted). For the tracker's hot loops, which hold best_'s buffer and size in locals:
  // raise() updates the values in place, never the buffer.
  void add_overlapping(const Event& e, const Rect& was, const Rect& r, const uint32_t* best, size_t sems) {
    if (wants(e, best, sems) && was.overlaps(r)) raise(e);
  }
  // The needed events, in semaphore order.
  const std::vector<Event>& events();

 private:
  static bool wants(const Event& e, const uint32_t* best, size_t sems) {
    return e.sem < sems && e.value > best[e.sem];
  }
  void raise(const Event& e) {
    if (!raised_[e.sem]) raised_[e.sem] = 1, sems_.push_back(e.sem);
    best_[e.sem] = e.value;
  }
  friend class RegionTracker;
  // best_ starts at the floors (the `never` semaphore's at the top, so it is never wanted); raised_ marks the
  // semaphores raised above their floor, the ones listed in sems_ (reset() clears just those).
  std::vector<uint32_t> best_;
  std::vector<char> raised_;
  std::vector<uint16_t> sems_;
  std::vector<Event> events_;
};

// Readers and writers of a family of address spaces (one per SBUF, PSUM, or HBM tensor id), bucketed in
// chunks of rows x bytes so an access only looks at the records near it. A record is dropped once a later
// write covers it (that write already waited for it), and a read record is dropped once a later read of the
// same semaphore source covers it. Inside a bucket, records sit in a binary space partition: a bucket that
// holds more than a few dozen records splits in two (across rows or bytes, whichever separates more of
// them), and so on, each record kept in the deepest part that contains it. An access looks only at the
// parts it overlaps, so its cost follows the records near it, not the number of accesses the region has
// seen (a loop writing 10^6 disjoint column blocks of one tensor row stays linear in its length).
class RegionTracker {
 public:
  RegionTracker(int64_t row_chunk, int64_t byte_chunk);
  // Rows and bytes per chunk of one space (default: the constructor's), e.g. one row for an HBM tensor whose
  // rows are megabytes long, so accesses to different rows never share a bucket, and wider byte chunks for
  // such rows, so an access spanning a row visits a few buckets, not hundreds. Chunking only decides which
  // records an access looks at; the overlap tests are exact, so the events found do not depend on it. Call
  // it before the space's first access.
  void set_chunks(uint32_t space, int64_t rows, int64_t bytes);
  int64_t row_chunk(uint32_t space) const {
    return space < spaces_.size() && spaces_[space].row_chunk > 0 ? spaces_[space].row_chunk : row_chunk_;
  }
  int64_t byte_chunk(uint32_t space) const {
    return space < spaces_.size() && spaces_[space].byte_chunk > 0 ? spaces_[space].byte_chunk : byte_chunk_;
  }

  // Adds to `need` the events an access of `r` in space `space` must wait for: for a read the overlapping
  // writes (RAW), for a write the overlapping writes and reads (WAW, WAR); per semaphore the latest. Does
  // not record the access.
  void collect(uint32_t space, const Rect& r, bool write, Needs& need) const;
  // Records the access (call after collect() for every operand of the instruction).
  void record(uint32_t space, const Rect& r, bool write, Event ev);
  // collect() then record() of one access in one walk, each record looked at once: for an access meeting no
  // other access of its instruction, or for the one recorded first once every other one is collected.
  void collect_and_record(uint32_t space, const Rect& r, bool write, Needs& need, Event ev);

  size_t live_records() const;  // for tests and stats (a record in several chunks counts once per chunk)
  // Records looked at by every collect() and record() so far (for tests: the cost of the accesses).
  uint64_t records_examined() const { return examined_; }

 private:
  static constexpr size_t kSplitAt = 48;
  // One access as recorded in a bucket (the rectangle, then its event: 40 bytes).
  struct Record {
    Rect r;
    Event ev;
  };
  // A part of a bucket: the records that lie in it and not in one of its halves (all of them while it is
  // not split), and, once split at `mid` across rows (dim 0) or bytes (dim 1), its two halves.
  struct Node {
    std::vector<Record> writes;
    std::vector<Record> reads;
    Rect box{};                    // the part of the bucket it covers (records may reach beyond it)
    int dim = -1;                  // -1: not split
    int64_t mid = 0;               // halves: [box.r0, mid) and [mid, box.r1) across rows, or c0/c1
    size_t split_at = kSplitAt;    // split when it holds more records than this
    std::unique_ptr<Node[]> half;  // two when split
  };
  using Bucket = Node;
  // One space's buckets, by row chunk then byte chunk (grown on demand).
  struct Space {
    int64_t row_chunk = 0, byte_chunk = 0;  // 0: the tracker's defaults
    std::vector<std::vector<Bucket>> buckets;
  };
  struct Chunks {
    int64_t rc0, rc1, cc0, cc1;  // inclusive ranges of row and byte chunks
  };
  Chunks chunks(uint32_t space, const Rect& r) const;
  Bucket& at(uint32_t space, int64_t rc, int64_t cc);
  void collect_in(const Node& n, const Rect& r, bool write, Needs& need) const;
  static void insert(Node& n, const Record& rec, bool write);
  template <class Drop>
  void erase_in(Node& n, const Rect& r, std::vector<Record> Node::*list, const Drop& drop);
  void collect_erase_in(Node& n, const Rect& r, bool write, Event ev, Needs& need);
  // The buckets of `r` in `space`, grown (and their boxes set) as needed, each passed to `visit`.
  template <class Visit>
  void for_buckets(uint32_t space, const Rect& r, const Visit& visit);
  static void split(Node& n);
  static size_t count(const Node& n);

  int64_t row_chunk_;
  int64_t byte_chunk_;
  std::vector<Space> spaces_;
  mutable uint64_t examined_ = 0;
};

}  // namespace trnsim::kernels
