#include "sim/model/memory_occupancy.h"

#include <algorithm>

#include "sim/isa/opcode_table.h"
#include "sim/isa/semantics.h"

namespace trnsim::model {
namespace {

constexpr uint64_t kMaxOffset = (uint64_t{1} << 28) - 1;

// isa::dtype_size of every DType value, read without a call (one per operand of every record).
const std::array<uint8_t, 256> kElementBytes = [] {
  std::array<uint8_t, 256> a{};
  for (size_t t = 0; t < a.size(); ++t)
    a[t] = static_cast<uint8_t>(isa::dtype_size(static_cast<isa::DType>(t)));
  return a;
}();

uint64_t range_key(int core, isa::MemSpace space, uint32_t q_lo, uint32_t q_hi, uint64_t lo, uint64_t hi) {
  return (uint64_t(core) << 61) | (uint64_t(space == isa::MemSpace::PSUM) << 60) | (uint64_t(q_lo) << 58) |
         (uint64_t(q_hi) << 56) | (lo << 28) | hi;
}

}  // namespace

MemoryOccupancy::Interval& MemoryOccupancy::RangeTable::insert(uint64_t key) {
  if (2 * (used_ + 1) > slots_.size()) {  // keep the load at most 1/2
    std::vector<std::pair<uint64_t, Interval>> old(slots_.size() * 2);
    old.swap(slots_);
    used_ = 0;
    for (const auto& [k, iv] : old)
      if (k != 0) insert(k) = iv;
  }
  const size_t mask = slots_.size() - 1;
  for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & mask;; i = (i + 1) & mask) {
    auto& slot = slots_[i];
    if (slot.first == key) return slot.second;
    if (slot.first == 0) {
      slot.first = key;
      ++used_;
      return slot.second;
    }
  }
}

void MemoryOccupancy::touch(int core, const isa::AccessPattern& a, uint64_t from_ps, uint64_t to_ps) {
  if (!a.present() || a.space == isa::MemSpace::HBM || core < 0 || core > 1) return;
  // Extent of the access pattern inside one partition, in elements from offset_bytes.
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < a.ndim; ++d) {
    const int64_t step = a.strides[d] * (static_cast<int64_t>(a.sizes[d]) - 1);
    (step < 0 ? lo : hi) += step;
  }
  const int64_t esize = kElementBytes[static_cast<uint8_t>(a.dtype)];
  const int64_t b_lo = a.offset_bytes + lo * esize, b_hi = a.offset_bytes + (hi + 1) * esize;
  if (b_lo < 0 || b_hi <= b_lo || static_cast<uint64_t>(b_hi) > kMaxOffset) return;  // checked earlier
  const uint32_t q_lo = std::min<uint32_t>(a.partition_start / 32, 3);
  const uint32_t q_hi = std::min<uint32_t>((a.partition_start + a.partitions - 1) / 32, 3);
  Interval& iv = ranges_[range_key(core, a.space, q_lo, q_hi, b_lo, b_hi)];
  iv.first = std::min(iv.first, from_ps);
  iv.last = std::max(iv.last, to_ps);
}

void MemoryOccupancy::on_instruction(const InstructionRecord& r) {
  const isa::Instruction& inst = *r.inst;
  if (isa::is_dma(inst.op)) return;  // its on-chip operands are touched by the transfer (on_dma)
  const uint64_t from = std::min(r.ls_start, r.start).count();
  for (int i = 0; i < inst.nops; ++i) touch(r.core, inst.ops[i], from, r.end.count());
}

void MemoryOccupancy::on_dma(const DmaRecord& r) {
  const isa::Instruction& inst = *r.inst;
  for (int i = 0; i < inst.nops; ++i)
    touch(isa::operand_core(inst.op, i, r.core), inst.ops[i], r.data_start.count(), r.data_end.count());
}

std::vector<std::pair<uint64_t, uint64_t>> MemoryOccupancy::quadrant_use(int core, isa::MemSpace space,
                                                                         uint32_t q) const {
  struct Range {
    uint64_t lo, hi;
    Interval iv;
  };
  std::vector<Range> rs;
  std::vector<uint64_t> bounds;
  ranges_.for_each([&](uint64_t key, const Interval& iv) {
    if (static_cast<int>(key >> 61) != core || ((key >> 60) & 1) != (space == isa::MemSpace::PSUM)) return;
    const uint32_t q_lo = (key >> 58) & 3, q_hi = (key >> 56) & 3;
    if (q < q_lo || q > q_hi) return;
    const uint64_t lo = (key >> 28) & kMaxOffset, hi = key & kMaxOffset;
    rs.push_back({lo, hi, iv});
    bounds.push_back(lo);
    bounds.push_back(hi);
  });
  if (rs.empty()) return {};
  // Elementary byte segments between range bounds: each is in use from the first to the last touch of any
  // range covering it.
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  std::vector<Interval> seg(bounds.size() - 1);
  for (const Range& r : rs)
    for (size_t i = std::lower_bound(bounds.begin(), bounds.end(), r.lo) - bounds.begin(); bounds[i] < r.hi;
         ++i) {
      seg[i].first = std::min(seg[i].first, r.iv.first);
      seg[i].last = std::max(seg[i].last, r.iv.last);
    }
  // Sweep over time: [first, last) intervals; the use at a time counts every change at that time.
  std::vector<std::pair<uint64_t, int64_t>> events;
  for (size_t i = 0; i < seg.size(); ++i) {
    if (seg[i].first >= seg[i].last) continue;
    const auto len = static_cast<int64_t>(bounds[i + 1] - bounds[i]);
    events.emplace_back(seg[i].first, len);
    events.emplace_back(seg[i].last, -len);
  }
  std::sort(events.begin(), events.end());
  std::vector<std::pair<uint64_t, uint64_t>> use;
  int64_t u = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    u += events[i].second;
    if (i + 1 == events.size() || events[i + 1].first != events[i].first)
      use.emplace_back(events[i].first, static_cast<uint64_t>(u));
  }
  return use;
}

MemoryPeak MemoryOccupancy::peak(isa::MemSpace space, uint64_t capacity) const {
  MemoryPeak m;
  m.capacity_per_partition = capacity;
  for (int core = 0; core < 2; ++core)
    for (uint32_t q = 0; q < 4; ++q) {
      uint64_t peak = 0, at = 0;
      for (const auto& [t, u] : quadrant_use(core, space, q))
        if (u > peak) {
          peak = u;
          at = t;
        }
      m.quadrant[q] = std::max(m.quadrant[q], peak);
      if (peak > m.bytes_per_partition || (peak == m.bytes_per_partition && peak > 0 && at < m.at.count())) {
        m.bytes_per_partition = peak;
        m.at = Picoseconds(at);
      }
    }
  return m;
}

std::vector<UseStep> MemoryOccupancy::use_over_time(int core, isa::MemSpace space) const {
  // Merge the quadrants' step functions, keeping the largest at each time.
  std::array<std::vector<std::pair<uint64_t, uint64_t>>, 4> qs;
  bool any = false;
  for (uint32_t q = 0; q < 4; ++q) {
    qs[q] = quadrant_use(core, space, q);
    any = any || !qs[q].empty();
  }
  if (!any) return {};
  std::array<size_t, 4> pos{};
  std::array<uint64_t, 4> cur{};
  std::vector<UseStep> out{{Picoseconds(0), 0}};
  for (;;) {
    uint64_t t = UINT64_MAX;
    for (uint32_t q = 0; q < 4; ++q)
      if (pos[q] < qs[q].size()) t = std::min(t, qs[q][pos[q]].first);
    if (t == UINT64_MAX) break;
    for (uint32_t q = 0; q < 4; ++q)
      if (pos[q] < qs[q].size() && qs[q][pos[q]].first == t) cur[q] = qs[q][pos[q]++].second;
    const uint64_t v = *std::max_element(cur.begin(), cur.end());
    if (v == out.back().bytes) continue;
    if (out.back().t.count() == t)
      out.back().bytes = v;
    else
      out.push_back({Picoseconds(t), v});
  }
  return out;
}

}  // namespace trnsim::model
