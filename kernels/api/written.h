// Which bytes of one core's SBUF or PSUM some instruction has written: the builder's check for reads of
// memory nothing wrote (Kernel::emit warns at the reading instruction's source line). An nl.ndarray or
// k.sbuf() tile starts with undefined contents, as numpy.empty's do; the simulator's memory starts as NaN.
//
// Rows are partitions (0-127), columns byte offsets inside a partition, accesses the bounding boxes the
// dependency tracker uses (deps.h). Kept as disjoint byte ranges, each with the set of partitions written
// across all of it; neighbours with the same set merge, so a tile written whole is one range and the cost of
// an access follows the ranges it overlaps. Bounding boxes make the check lenient, never strict: a strided
// write counts as writing the gaps between its elements.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/api/deps.h"

namespace trnsim::kernels {

class WrittenMap {
 public:
  static constexpr int64_t kRows = 128;

  // Marks the rectangle as written (rows beyond kRows are ignored).
  void mark(const Rect& r);
  // The first (partition, byte) of `r` not written yet, scanning bytes then partitions; nullopt if every
  // byte of `r` was written (rows beyond kRows count as written).
  std::optional<std::pair<int64_t, int64_t>> first_unwritten(const Rect& r) const;
  size_t ranges() const { return ranges_.size(); }  // for tests

 private:
  struct Rows {
    uint64_t lo = 0, hi = 0;  // partitions 0-63, 64-127
    bool operator==(const Rows&) const = default;
    bool has(const Rows& o) const { return (lo & o.lo) == o.lo && (hi & o.hi) == o.hi; }
  };
  struct Range {
    int64_t end;
    Rows rows;
  };
  static Rows rows_of(int64_t r0, int64_t r1);
  void split_at(int64_t x);
  std::map<int64_t, Range> ranges_;  // start -> [start, end) and its partitions
};

// Byte ranges [begin, end) of one HBM tensor that some instruction wrote, merged: the builder's check for
// outputs left partly unwritten (BuildOptions::warn_unwritten_outputs). Accesses are bounding byte spans
// (lenient, as WrittenMap's boxes: a strided write counts its gaps as written).
class ByteSpans {
 public:
  void mark(int64_t begin, int64_t end);
  // The ranges of [0, size) no mark covered, in order.
  std::vector<std::pair<int64_t, int64_t>> gaps(int64_t size) const;

 private:
  std::map<int64_t, int64_t> spans_;  // begin -> end, disjoint and not touching
};

}  // namespace trnsim::kernels
