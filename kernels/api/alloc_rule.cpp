#include "kernels/api/alloc_rule.h"

#include <fmt/format.h>

#include <algorithm>

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

}  // namespace trnsim::kernels
