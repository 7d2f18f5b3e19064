#include "kernels/api/alloc_rule.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "kernels/api/alloc.h"

#include "sim/base/error.h"
#include "sim/isa/names.h"

namespace trnsim::kernels {

BufferChoice loop_tile_buffers(const LoopTileQuery& q) {
  const InLoop& l = q.loop;
  if (q.space == isa::MemSpace::HBM)
    throw InputError("allocation rule: HBM tensors are not tiles declared in a loop");
  if (q.bytes_per_partition <= 0 || l.trip_count < 1 || l.tiles < 1 || q.free_bytes_per_partition < 0 ||
      l.reserve_bytes_per_partition < 0)
    throw InputError(fmt::format(
        "allocation rule: needs bytes per partition > 0, trip count >= 1, tiles >= 1, free space and reserve "
        ">= 0 (got {} B, {} trips, {} tiles, {} B free, {} B reserve)",
        q.bytes_per_partition, l.trip_count, l.tiles, q.free_bytes_per_partition,
        l.reserve_bytes_per_partition));
  if (l.dynamic) return {1, "dynamic loop: one buffer, reused by every iteration"};
  if (l.trip_count == 1) return {1, "declared once: nothing to rotate"};
  const bool psum = q.space == isa::MemSpace::PSUM;
  const int64_t want = std::max<int64_t>(
      1, std::min(psum ? q.free_bytes_per_partition / q.bytes_per_partition : kCompilerMultiBuffer,
                  l.trip_count));
  const int64_t fit = std::max<int64_t>(0, q.free_bytes_per_partition - l.reserve_bytes_per_partition) /
                      q.bytes_per_partition;
  if (fit < want)
    return {std::max<int64_t>(1, fit),
            fmt::format("{} of {} buffers fit in the free {} ({} B per partition, {} B reserved)",
                        std::max<int64_t>(1, fit), want, isa::mem_name(q.space), q.free_bytes_per_partition,
                        l.reserve_bytes_per_partition)};
  if (psum) return {want, want < l.trip_count ? "every free PSUM bank" : "one PSUM bank per iteration"};
  return {want,
          want < kCompilerMultiBuffer ? "one buffer per iteration" : "double buffering (compiler default)"};
}

int site_scope(const std::vector<bool>& crossed) {
  return crossed.empty() || crossed.front() ? -1 : 0;
}

namespace {

struct Held {  // a buffer's space, as the occupancy record of one memory space keeps it
  int64_t lo, hi, placement, index;
};

}  // namespace

PoolPlan plan_pools(const isa::Limits& limits, const std::vector<PoolSite>& sites,
                    const std::vector<PoolInstance>& instances) {
  PoolPlan plan;
  plan.sites.resize(sites.size());
  plan.placement_of.assign(instances.size(), -1);
  Allocator sbuf(limits.partitions, limits.sbuf_bytes_per_partition, 64);
  Allocator psum(limits.partitions, limits.psum_bytes_per_partition, limits.psum_bank_bytes);
  const auto alloc_of = [&](isa::MemSpace s) -> Allocator& { return s == isa::MemSpace::PSUM ? psum : sbuf; };
  for (const PoolSite& s : sites)
    if (s.space == isa::MemSpace::HBM || s.tile_bytes <= 0 || s.partitions < 1 ||
        s.partitions > static_cast<int64_t>(limits.partitions) || s.loop.tiles < 1)
      throw InputError(
          fmt::format("pool plan: a site needs SBUF or PSUM, tile bytes > 0, 1-{} partitions "
                      "and tiles >= 1",
                      limits.partitions));
  // Events in program order: an instance starts at its first access and ends after its last (an end at the
  // same position as a start comes first: that space is free again).
  struct Ev {
    int64_t at;
    int kind;  // 0 end, 1 start
    int64_t inst;
  };
  std::vector<Ev> evs;
  for (size_t i = 0; i < instances.size(); ++i) {
    const PoolInstance& in = instances[i];
    if (in.site < 0 || in.site >= static_cast<int64_t>(sites.size()) || in.first > in.last)
      throw InputError("pool plan: an instance names no site or ends before it starts");
    evs.push_back({in.first, 1, static_cast<int64_t>(i)});
    evs.push_back({in.last + 1, 0, static_cast<int64_t>(i)});
  }
  std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
    return a.at != b.at ? a.at < b.at : a.kind != b.kind ? a.kind < b.kind : a.inst < b.inst;
  });
  std::vector<char> decided(sites.size(), 0);
  std::vector<int64_t> last_placement(sites.size(), -1);
  std::vector<std::vector<uint64_t>> blocks;  // per placement: its Allocator blocks while it holds them
  std::vector<char> taken;                    // per placement: its space was given to another since it ended
  std::map<int, std::vector<Held>> held;      // per space: who held each range last
  for (const Ev& e : evs) {
    const PoolInstance& in = instances[e.inst];
    const PoolSite& s = sites[in.site];
    Allocator& a = alloc_of(s.space);
    const auto np = static_cast<uint32_t>(s.partitions);
    if (e.kind == 0) {  // the instance's scope iteration is over: its space is free for other sites
      const int64_t p = plan.placement_of[e.inst];
      for (uint64_t id : blocks[p]) a.release(id);
      blocks[p].clear();
      continue;
    }
    if (!decided[in.site]) {
      decided[in.site] = 1;
      const int64_t g = a.granule();
      const int64_t unit = (s.tile_bytes + g - 1) / g * g * s.loop.tiles;
      plan.sites[in.site] = s.loop.bufs
                                ? BufferChoice{*s.loop.bufs, "explicit bufs"}
                                : loop_tile_buffers({.space = s.space,
                                                     .bytes_per_partition = unit,
                                                     .loop = s.loop,
                                                     .free_bytes_per_partition = a.largest_free(0, np)});
    }
    const int64_t n = plan.sites[in.site].bufs * s.loop.tiles;
    // The site keeps its previous buffers when nothing took their space since its last instance ended.
    const int64_t prev = last_placement[in.site];
    if (prev >= 0 && !taken[prev] && blocks[prev].empty()) {
      bool ok = true;
      std::vector<uint64_t> ids;
      for (int64_t off : plan.placements[prev].offsets) {
        auto b = a.allocate_at(0, np, static_cast<uint32_t>(off), static_cast<uint32_t>(s.tile_bytes));
        if (!b) {
          ok = false;
          break;
        }
        ids.push_back(b->id);
      }
      if (ok) {
        blocks[prev] = std::move(ids);
        plan.placement_of[e.inst] = prev;
        continue;
      }
      for (uint64_t id : ids) a.release(id);
    }
    // Fresh buffers, first fit one by one (as Kernel::sbuf_pool makes a pool).
    const auto p = static_cast<int64_t>(plan.placements.size());
    PoolPlan::Placement pl;
    pl.site = in.site;
    blocks.emplace_back();
    taken.push_back(0);
    std::vector<Held>& record = held[static_cast<int>(s.space)];
    for (int64_t i = 0; i < n; ++i) {
      auto b = a.allocate(0, np, static_cast<uint32_t>(s.tile_bytes));
      if (!b)
        throw InputError(fmt::format(
            "pool plan: site {}: buffer {} of {} ({} B per partition) does not fit: {} B free in {} (of {} B "
            "per partition) at its first access",
            in.site, i + 1, n, s.tile_bytes, a.largest_free(0, np), isa::mem_name(s.space),
            s.space == isa::MemSpace::PSUM ? limits.psum_bytes_per_partition
                                           : limits.sbuf_bytes_per_partition));
      blocks[p].push_back(b->id);
      pl.offsets.push_back(b->offset);
      const int64_t lo = b->offset, hi = lo + b->bytes;
      std::vector<std::pair<int64_t, int64_t>> after;
      std::vector<Held> keep;
      for (const Held& h : record) {
        if (h.lo < hi && lo < h.hi) {
          after.emplace_back(h.placement, h.index);
          if (h.placement != p && blocks[h.placement].empty()) taken[h.placement] = 1;
          if (lo <= h.lo && h.hi <= hi) continue;  // wholly covered: the new buffer is its space's holder
        }
        keep.push_back(h);
      }
      keep.push_back({lo, hi, p, i});
      record = std::move(keep);
      pl.after.push_back(std::move(after));
    }
    plan.placements.push_back(std::move(pl));
    last_placement[in.site] = p;
    plan.placement_of[e.inst] = p;
  }
  return plan;
}

}  // namespace trnsim::kernels
