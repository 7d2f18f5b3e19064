// Kernel's reads of SBUF and PSUM bytes no instruction wrote (warnings, written.h) and, with
// BuildOptions::warn_unwritten_outputs, the output bytes no instruction writes.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <optional>

#include "kernels/api/assume_written.h"
#include "kernels/api/kernel.h"
#include "kernels/api/kernel_shared.h"
#include "sim/isa/names.h"
#include "sim/isa/opcodes.h"

namespace trnsim::kernels {
namespace {

// assume_written's views not yet marked: (kernel serial, space, region); Kernel::check_written takes them.
struct Assumed {
  uint64_t serial;
  isa::MemSpace space;
  View::Region region;
};
thread_local std::vector<Assumed> t_assumed;

// Rectangles of SBUF/PSUM found written in whole. A written map only gains bytes, so such a rectangle stays
// written: a read or write of a tile written before (most accesses: a loop reuses its tiles) is answered
// here without walking the map. Keyed by the kernel context's serial (never reused) and the space; a
// direct-mapped table, an entry replaced by the next rectangle of its slot.
class WrittenWhole {
 public:
  bool has(uint64_t serial, isa::MemSpace space, const Rect& r) const {
    const Entry& e = table_[slot(serial, space, r)];
    return e.serial == serial && e.space == space && e.r.r0 == r.r0 && e.r.r1 == r.r1 && e.r.c0 == r.c0 &&
           e.r.c1 == r.c1;
  }
  void add(uint64_t serial, isa::MemSpace space, const Rect& r) {
    table_[slot(serial, space, r)] = {serial, space, r};
  }

 private:
  struct Entry {
    uint64_t serial = 0;  // 0: empty (serials start at 1)
    isa::MemSpace space{};
    Rect r;
  };
  static size_t slot(uint64_t serial, isa::MemSpace space, const Rect& r) {
    uint64_t h = static_cast<uint64_t>(r.c0) * 0x9E3779B97F4A7C15ull;
    h ^= (static_cast<uint64_t>(r.c1) + (static_cast<uint64_t>(r.r0) << 20) +
          (static_cast<uint64_t>(r.r1) << 28) + (serial << 40) + static_cast<uint64_t>(space)) *
         0xC2B2AE3D27D4EB4Full;
    return static_cast<size_t>(h >> 54);  // 10 bits
  }
  std::array<Entry, 1024> table_{};
};
thread_local WrittenWhole t_written_whole;

using CoreWrites = std::map<int64_t, Kernel::Shared::CoreWrite>;

// Records core 0's write of [begin, end) with `site`, replacing what earlier writes recorded there.
void mark_core0(CoreWrites& m, int64_t begin, int64_t end, const Kernel::Shared::CoreWrite& site) {
  auto it = m.lower_bound(begin);
  if (it != m.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > begin) {  // starts before: keep its head, and its tail past `end`
      Kernel::Shared::CoreWrite head = prev->second;
      if (head.end > end) m.emplace(end, head);
      prev->second.end = begin;
    }
  }
  while (it != m.end() && it->first < end) {
    if (it->second.end > end) m.emplace(end, it->second);
    it = m.erase(it);
  }
  Kernel::Shared::CoreWrite w = site;
  w.end = end;
  m[begin] = std::move(w);
}

// Calls f(lo, hi, site) for each byte range of [begin, end) core 0 accessed after `barriers` core_barriers
// (and before the next), with that access's site.
template <typename F>
void for_each_racing(const CoreWrites& m, int64_t begin, int64_t end, uint32_t barriers, F&& f) {
  auto it = m.upper_bound(begin);
  if (it != m.begin()) --it;
  for (; it != m.end() && it->first < end; ++it)
    if (it->second.end > begin && it->second.barriers == barriers)
      f(std::max(begin, it->first), std::min(end, it->second.end), it->second.at);
}

// "0-127, 200-255": inclusive index ranges, sorted and apart. More than 3 are shortened: equal runs at an
// equal stride as "0-3, 8-11, ..., 120-123" (exact), others as the first 3 "and N more ranges".
std::string index_ranges(const std::vector<std::pair<int64_t, int64_t>>& r) {
  const auto one = [](const std::pair<int64_t, int64_t>& x) {
    return x.first == x.second ? fmt::format("{}", x.first) : fmt::format("{}-{}", x.first, x.second);
  };
  bool regular = r.size() > 3;
  for (size_t i = 2; regular && i < r.size(); ++i)
    regular = r[i].second - r[i].first == r[0].second - r[0].first &&
              r[i].first - r[i - 1].first == r[1].first - r[0].first;
  if (regular) return fmt::format("{}, {}, ..., {}", one(r[0]), one(r[1]), one(r.back()));
  std::vector<std::string> parts;
  for (size_t i = 0; i < r.size() && i < 3; ++i) parts.push_back(one(r[i]));
  std::string list = fmt::format("{}", fmt::join(parts, ", "));
  if (r.size() > 3) list += fmt::format(" and {} more range{}", r.size() - 3, r.size() == 4 ? "" : "s");
  return list;
}

// Which elements of tensor t the byte ranges `bytes` (sorted, apart) hold, a partial element counted whole:
// "rows 0-255" when whole rows, else the rows grouped by the columns they hold, "rows 0-127, columns 0-63"
// ("; " between groups, at most 3, then "and N more row groups"); "elements 0-63" for a 1-D tensor. The
// columns of a tensor of more than 2 dims are its rows' elements, flat over dims 1 on. `whole_rows` is set
// when the ranges are whole rows.
std::string tensor_part(const isa::TensorDecl& t, const std::vector<std::pair<int64_t, int64_t>>& bytes,
                        bool* whole_rows) {
  using Runs = std::vector<std::pair<int64_t, int64_t>>;  // inclusive index ranges
  const int64_t es = std::max<int64_t>(1, elem_bytes(t.dtype));
  int64_t cols = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) cols *= t.shape[i];
  const bool rank1 = t.shape.size() < 2;
  if (rank1) cols = std::numeric_limits<int64_t>::max();
  cols = std::max<int64_t>(1, cols);
  // Row blocks [r0, r1] holding the same columns, in row order.
  struct Block {
    int64_t r0, r1;
    Runs cols;
  };
  std::vector<Block> blocks;
  const auto add = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    if (!blocks.empty() && blocks.back().r0 == r0 && blocks.back().r1 == r0 && r1 == r0) {
      Runs& c = blocks.back().cols;  // another run of the same row
      if (c.back().second + 1 >= c0)
        c.back().second = std::max(c.back().second, c1);
      else
        c.emplace_back(c0, c1);
      return;
    }
    blocks.push_back({r0, r1, {{c0, c1}}});
  };
  for (const auto& [b, e] : bytes) {
    const int64_t lo = b / es, hi = (e - 1) / es;  // elements, inclusive
    int64_t r = lo / cols;
    const int64_t rlast = hi / cols;
    if (lo % cols != 0 || r == rlast) {  // the first row's part
      add(r, r, lo % cols, r == rlast ? hi % cols : cols - 1);
      if (r++ == rlast) continue;
    }
    const int64_t full_end = hi % cols == cols - 1 ? rlast : rlast - 1;  // whole rows from r
    if (full_end >= r) add(r, full_end, 0, cols - 1);
    if (full_end < rlast) add(rlast, rlast, 0, hi % cols);  // the last row's part
  }
  // Adjacent blocks with the same columns merged; then grouped by columns, in order of first appearance.
  std::vector<Block> merged;
  for (Block& b : blocks) {
    if (!merged.empty() && merged.back().r1 + 1 == b.r0 && merged.back().cols == b.cols)
      merged.back().r1 = b.r1;
    else
      merged.push_back(std::move(b));
  }
  std::vector<std::pair<Runs, Runs>> groups;  // columns -> rows
  for (const Block& b : merged) {
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == b.cols; });
    if (g == groups.end()) g = groups.insert(groups.end(), {b.cols, {}});
    g->second.emplace_back(b.r0, b.r1);
  }
  const auto single = [](const Runs& r) { return r.size() == 1 && r[0].first == r[0].second; };
  if (rank1) {
    const Runs& c = groups.empty() ? Runs{} : groups[0].first;
    if (whole_rows != nullptr) *whole_rows = false;
    return fmt::format("{} {}", single(c) ? "element" : "elements", index_ranges(c));
  }
  const bool whole = groups.size() == 1 && groups[0].first == Runs{{0, cols - 1}};
  if (whole_rows != nullptr) *whole_rows = whole;
  const std::string col_word = t.shape.size() == 2 ? "column" : "element";
  const std::string flat =
      t.shape.size() == 2 ? "" : fmt::format(" (flat over dims 1-{})", t.shape.size() - 1);
  std::vector<std::string> parts;
  for (size_t i = 0; i < groups.size() && i < 3; ++i) {
    const auto& [c, r] = groups[i];
    std::string part = fmt::format("{} {}", single(r) ? "row" : "rows", index_ranges(r));
    if (!whole) part += fmt::format(", {}{} {}{}", col_word, single(c) ? "" : "s", index_ranges(c), flat);
    parts.push_back(part);
  }
  std::string out = fmt::format("{}", fmt::join(parts, "; "));
  if (groups.size() > 3) out += fmt::format("; and {} more row groups", groups.size() - 3);
  return out;
}

// "output 'y' float32 [256, 64] declared at k.py:3: core 1 writes rows 0-255, which core 0 also writes
// (k.py:9) ...": core 1's accesses at one line (`write`) to the bytes `race.bytes` core 0 accessed
// (`core0_write`) between the same core_barriers.
std::string core_race_warning(const Kernel::Shared& shared, const Kernel::Shared::Race& race) {
  const isa::TensorDecl& t = shared.program.tensors[race.tensor];
  const bool output = shared.kinds.count(t.name) != 0 && shared.kinds.at(t.name) == 1;
  int64_t size = elem_bytes(t.dtype);
  for (const int64_t d : t.shape) size *= d;
  // The bytes marked: the gaps' complement within the tensor.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t at = 0;
  for (const auto& [b, e] : race.bytes.gaps(size)) {
    if (b > at) ranges.emplace_back(at, b);
    at = e;
  }
  if (at < size) ranges.emplace_back(at, size);
  const std::string what = tensor_part(t, ranges, nullptr);
  const std::string tensor = hbm_label(shared, race.tensor);
  std::string core0_at = race.core0_at.front();
  if (race.core0_at.size() > 1)
    core0_at +=
        fmt::format(" and {} more line{}", race.core0_at.size() - 1, race.core0_at.size() > 2 ? "s" : "");
  if (race.write && race.core0_write)
    return fmt::format(
        "{}: core 1 writes {}, which core 0 also writes ({}), with no core_barrier between the two writes: "
        "on hardware the two cores' writes race and which lands last is undefined (this run keeps one "
        "order); give each core its own rows (nl.program_id){}, or order the writes with nisa.core_barrier",
        tensor, what, core0_at, output ? "" : " or its own scratch (nl.private_hbm)");
  return fmt::format(
      "{}: core 1 {} {}, which core 0 {} ({}), with no core_barrier between the write and the read: on "
      "hardware the read sees the bytes before or after the other core's write, undefined (this run keeps "
      "one order); order them with nisa.core_barrier",
      tensor, race.write ? "writes" : "reads", what, race.core0_write ? "writes" : "reads", core0_at);
}

}  // namespace

std::string hbm_label(const Kernel::Shared& shared, uint32_t tensor) {
  const isa::TensorDecl& t = shared.program.tensors.at(tensor);
  const auto kind = shared.kinds.find(t.name);
  const int k = kind == shared.kinds.end() ? 2 : kind->second;
  const char* what = k == 0                  ? "input"
                     : k == 1                ? "output"
                     : t.private_to_core < 0 ? "shared_hbm tensor"
                                             : "scratch";
  const bool made = t.name.size() > 2 && t.name.front() == '<' && t.name.back() == '>';
  const std::string name = made ? t.name.substr(1, t.name.size() - 2) : fmt::format("'{}'", t.name);
  const std::string at = tensor < shared.hbm_at.size() ? shared.hbm_at[tensor] : "";
  return fmt::format("{} {} {} [{}]{}{}", what, name, dtype_str(t.dtype), fmt::join(t.shape, ", "),
                     at.empty() ? "" : " declared at " + at, made ? ", without name=" : "");
}

void forget_assumed_written() {
  t_assumed.clear();
}

void assume_written(const View& v) {
  if (!v.valid() || (v.space() != isa::MemSpace::SBUF && v.space() != isa::MemSpace::PSUM)) return;
  t_assumed.push_back({v.kernel_serial(), v.space(), v.region()});
}

void Kernel::warn(const std::string& at, const std::string& message) {
  if (!shared_.warned_at.insert(at).second) return;
  if (shared_.warnings.size() < KernelBuild::kMaxWarnings) shared_.warnings.push_back(at + ": " + message);
}

void Kernel::check_written(const isa::Instruction& inst, const Access* accesses, size_t num_accesses,
                           const Loc& loc) {
  const auto map_of = [&](const Access& a) -> WrittenMap* {
    if (a.view == nullptr || !a.view->valid()) return nullptr;
    const isa::MemSpace s = a.view->space();
    return s == isa::MemSpace::SBUF ? &sbuf_written_ : s == isa::MemSpace::PSUM ? &psum_written_ : nullptr;
  };
  for (const Assumed& a : t_assumed) {
    if (a.serial != serial_) continue;
    WrittenMap& m = a.space == isa::MemSpace::SBUF ? sbuf_written_ : psum_written_;
    m.mark({a.region.r0, a.region.r1, a.region.c0, a.region.c1});
  }
  t_assumed.clear();
  // Reads first: an instruction that reads and writes a region (an accumulation) reads what was there.
  for (size_t i = 0; i < num_accesses; ++i) {
    const Access& a = accesses[i];
    WrittenMap* m = a.write ? nullptr : map_of(a);
    if (m == nullptr) continue;
    const View::Region& r = scratch_.regions[i];
    const Rect rect{r.r0, r.r1, r.c0, r.c1};
    if (t_written_whole.has(serial_, a.view->space(), rect)) continue;
    const auto miss = m->first_unwritten(rect);
    if (!miss) {
      t_written_whole.add(serial_, a.view->space(), rect);
      continue;
    }
    const std::string at = where(loc);
    if (shared_.warned_at.count(at) > 0) continue;  // said once per line (a loop reads it every iteration)
    const auto made = shared_.tile_locs.find(a.view->name());
    const std::string allocated = made != shared_.tile_locs.end() && made->second
                                      ? " allocated at " + where(*made->second)
                                      : std::string();
    warn(at, fmt::format(
                 "{} reads {}{} where no instruction wrote before (partition {}, byte {} of the read is the "
                 "first such): its values are undefined (a tile starts uninitialised, as numpy.empty's "
                 "contents; trnsim's memory starts as NaN)",
                 isa::opcode_name(inst.op), a.view->describe(), allocated, miss->first, miss->second - r.c0));
  }
  for (size_t i = 0; i < num_accesses; ++i) {
    const Access& a = accesses[i];
    WrittenMap* m = a.write ? map_of(a) : nullptr;
    if (m == nullptr) continue;
    const View::Region& r = scratch_.regions[i];
    const Rect rect{r.r0, r.r1, r.c0, r.c1};
    if (t_written_whole.has(serial_, a.view->space(), rect)) continue;
    m->mark(rect);
    t_written_whole.add(serial_, a.view->space(), rect);  // written in whole now
  }
  // LNC2 (a Python kernel's build): the bytes of HBM tensors both cores see, for the race check.
  const bool cores = num_programs_ == 2 && shared_.warn_unwritten_outputs;
  if (shared_.output_writes.empty() && !cores) return;
  for (size_t i = 0; i < num_accesses; ++i) {
    const Access& a = accesses[i];
    if (a.view == nullptr || !a.view->valid() || a.view->space() != isa::MemSpace::HBM) continue;
    const uint32_t tensor = a.view->tensor();
    const auto w = shared_.output_writes.find(tensor);
    const bool output = w != shared_.output_writes.end();
    // Not an input (both cores read those), not private_hbm (each core its own).
    const bool both = cores && tensor < hbm_use_.size() && !hbm_use_[tensor].input &&
                      shared_.program.tensors[tensor].private_to_core < 0;
    if (!both && !(a.write && output)) continue;
    // The view's bytes: each contiguous run of its innermost dims, walked over its outer dims. A view of
    // more than kMaxRuns runs, or whose rows are picked at run time (any_row, whole_rows: an indirect or
    // scalar-offset DMA), counts as the bounding span of its region: lenient, never a false warning.
    constexpr int64_t kMaxRuns = 4096;
    const View& v = *a.view;
    ByteSpans* spans = a.write && output ? &w->second.written : nullptr;
    // Core 0 records its accesses; core 1 checks its writes against core 0's writes and reads, its reads
    // against core 0's writes.
    CoreWrites* mine =
        both && core_ == 0 ? &(a.write ? shared_.core0_writes : shared_.core0_reads)[tensor] : nullptr;
    const CoreWrites* their_writes = both && core_ == 1 ? &shared_.core0_writes[tensor] : nullptr;
    const CoreWrites* their_reads = both && core_ == 1 && a.write ? &shared_.core0_reads[tensor] : nullptr;
    const uint32_t barriers = both ? std::accumulate(barriers_.begin(), barriers_.end(), 0u) : 0;
    const std::string site = both ? where(loc) : std::string();
    // Core 1's race at this line, once found: every later racing byte of the same kind adds to it.
    Shared::Race* race = nullptr;
    bool changed = false;
    // `exact`: the bytes accessed (a bounding span only counts for the unwritten-output check: lenient there,
    // it would make false races).
    const auto mark = [&](int64_t begin, int64_t end, bool exact) {
      if (spans != nullptr) spans->mark(begin, end);
      if (!both || !exact) return;
      if (mine != nullptr) return mark_core0(*mine, begin, end, {end, barriers, site});
      for (const CoreWrites* theirs : {their_writes, their_reads}) {
        if (theirs == nullptr) continue;
        const bool core0_write = theirs == their_writes;
        for_each_racing(*theirs, begin, end, barriers, [&](int64_t lo, int64_t hi, const std::string& at) {
          if (race == nullptr) {
            const auto found = shared_.races.find(site);
            if (found != shared_.races.end()) {
              race = &found->second;
            } else if (shared_.warned_at.count(site) == 0) {
              race =
                  &shared_.races
                       .emplace(site,
                                Shared::Race{tensor, a.write, core0_write, {}, {}, shared_.warnings.size()})
                       .first->second;
              warn(site, "");  // (the message is written below, when the access's bytes are all in)
            } else {
              return;  // this line was warned about for another reason
            }
          }
          if (race->tensor != tensor || race->write != a.write || race->core0_write != core0_write) return;
          race->bytes.mark(lo, hi);
          if (std::find(race->core0_at.begin(), race->core0_at.end(), at) == race->core0_at.end())
            race->core0_at.push_back(at);
          changed = true;
        });
      }
    };
    if (a.any_row || a.whole_rows) {
      const View::Region& r = scratch_.regions[i];
      const int64_t rb = std::max<int64_t>(1, v.storage_->hbm_row_bytes);
      mark(r.r0 * rb + r.c0, (r.r1 - 1) * rb + r.c1, false);
      continue;
    }
    const int64_t es = elem_bytes(v.dtype_);
    std::vector<View::D> outer;
    for (const View::D& d : v.dims_)
      if (d.size > 1) outer.push_back(d);
    int64_t run = 1;  // elements
    while (!outer.empty() && outer.back().stride == run) {
      run *= outer.back().size;
      outer.pop_back();
    }
    int64_t runs = 1, lo = 0, hi = 0;
    for (const View::D& d : outer) {
      runs = runs > kMaxRuns ? runs : runs * d.size;
      (d.stride < 0 ? lo : hi) += (d.size - 1) * d.stride;
    }
    if (runs > kMaxRuns) {
      mark(v.offset_bytes_ + lo * es, v.offset_bytes_ + (hi + run) * es, false);
      continue;
    }
    std::vector<int64_t> idx(outer.size(), 0);
    for (int64_t n = 0; n < runs; ++n) {
      int64_t at = 0;
      for (size_t k = 0; k < outer.size(); ++k) at += idx[k] * outer[k].stride;
      mark(v.offset_bytes_ + at * es, v.offset_bytes_ + (at + run) * es, true);
      for (size_t k = outer.size(); k-- > 0;) {
        if (++idx[k] < outer[k].size) break;
        idx[k] = 0;
      }
    }
    if (changed && race->index < shared_.warnings.size())
      shared_.warnings[race->index] = site + ": " + core_race_warning(shared_, *race);
  }
}

// "<at>: output 'y' float32 [256, 64]: no instruction writes rows 255 (256 of its 65536 bytes): ..." for an
// output with bytes no instruction writes (BuildOptions::warn_unwritten_outputs); "" when it is all written.
std::string unwritten_output_warning(const isa::TensorDecl& t, const std::string& at, int64_t bytes,
                                     const ByteSpans& written) {
  const auto gaps = written.gaps(bytes);
  // None missing; or all of it, which the front ends say their own way (an NKI kernel returning a tensor it
  // never writes is an error; simulate_kernel warns about an all-NaN output).
  if (gaps.empty() || (gaps.size() == 1 && gaps[0].second - gaps[0].first == bytes)) return "";
  int64_t missing = 0;
  for (const auto& [b, e] : gaps) missing += e - b;
  bool whole_rows = false;
  std::string what = tensor_part(t, gaps, &whole_rows);
  if (whole_rows || t.shape.size() < 2) what += fmt::format(" of its {}", t.shape.empty() ? 1 : t.shape[0]);
  return fmt::format(
      "{}: output '{}' {} [{}]: no instruction writes {} ({} of its {} bytes): those elements keep whatever "
      "HBM held (undefined; trnsim's HBM starts as NaN)",
      at, t.name, dtype_str(t.dtype), fmt::join(t.shape, ", "), what, missing, bytes);
}

}  // namespace trnsim::kernels
