#include "kernels/api/alloc.h"

#include <algorithm>

namespace trnsim::kernels {

namespace {

bool shares_partitions(const Allocator::Block& b, uint32_t p0, uint32_t np) {
  return b.partition_start < p0 + np && p0 < b.partition_start + b.partitions;
}

}  // namespace

Allocator::Allocator(uint32_t partitions, uint32_t bytes_per_partition, uint32_t granule)
    : partitions_(partitions), bytes_per_partition_(bytes_per_partition), granule_(std::max(1u, granule)) {}

uint32_t Allocator::round_up(uint64_t v) const {
  return static_cast<uint32_t>((v + granule_ - 1) / granule_ * granule_);
}

std::optional<Allocator::Block> Allocator::allocate(uint32_t partition_start, uint32_t partitions,
                                                    uint32_t bytes) {
  if (partitions == 0 || bytes == 0 || partition_start + partitions > partitions_) return std::nullopt;
  const uint64_t size = round_up(bytes);
  uint64_t cursor = 0;
  for (const Block& u : blocks_) {
    if (!shares_partitions(u, partition_start, partitions)) continue;
    if (cursor + size <= u.offset) break;
    cursor = std::max<uint64_t>(cursor, round_up(uint64_t{u.offset} + u.bytes));
  }
  if (cursor + size > bytes_per_partition_) return std::nullopt;
  Block b{next_id_++, partition_start, partitions, static_cast<uint32_t>(cursor),
          static_cast<uint32_t>(size)};
  blocks_.insert(std::upper_bound(blocks_.begin(), blocks_.end(), b,
                                  [](const Block& x, const Block& y) { return x.offset < y.offset; }),
                 b);
  return b;
}

std::optional<Allocator::Block> Allocator::allocate_at(uint32_t partition_start, uint32_t partitions,
                                                       uint32_t offset, uint32_t bytes) {
  if (partitions == 0 || bytes == 0 || partition_start + partitions > partitions_ || offset % granule_ != 0)
    return std::nullopt;
  const uint64_t size = round_up(bytes);
  if (offset + size > bytes_per_partition_) return std::nullopt;
  for (const Block& u : blocks_)
    if (shares_partitions(u, partition_start, partitions) && u.offset < offset + size &&
        offset < uint64_t{u.offset} + u.bytes)
      return std::nullopt;
  Block b{next_id_++, partition_start, partitions, offset, static_cast<uint32_t>(size)};
  blocks_.insert(std::upper_bound(blocks_.begin(), blocks_.end(), b,
                                  [](const Block& x, const Block& y) { return x.offset < y.offset; }),
                 b);
  return b;
}

void Allocator::release(uint64_t id) {
  std::erase_if(blocks_, [id](const Block& b) { return b.id == id; });
}

uint32_t Allocator::largest_free(uint32_t partition_start, uint32_t partitions) const {
  uint64_t best = 0, cursor = 0;
  for (const Block& u : blocks_) {
    if (!shares_partitions(u, partition_start, partitions)) continue;
    if (u.offset > cursor) best = std::max<uint64_t>(best, u.offset - cursor);
    cursor = std::max<uint64_t>(cursor, round_up(uint64_t{u.offset} + u.bytes));
  }
  if (bytes_per_partition_ > cursor) best = std::max<uint64_t>(best, bytes_per_partition_ - cursor);
  return static_cast<uint32_t>(best / granule_ * granule_);
}

}  // namespace trnsim::kernels
