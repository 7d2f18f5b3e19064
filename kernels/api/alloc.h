// On-chip memory allocator of one physical core: SBUF or PSUM, partitions x bytes per partition.
// An allocation reserves the same byte range [offset, offset + bytes) on a contiguous partition range.
// First fit by byte offset; SBUF allocations are 64-byte aligned, PSUM allocations are whole 2 KiB banks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace trnsim::kernels {

class Allocator {
 public:
  // `granule`: allocation sizes and offsets are multiples of it (PSUM: the bank size).
  Allocator(uint32_t partitions, uint32_t bytes_per_partition, uint32_t granule);

  struct Block {
    uint64_t id = 0;
    uint32_t partition_start = 0;
    uint32_t partitions = 0;
    uint32_t offset = 0;  // bytes inside each partition
    uint32_t bytes = 0;   // reserved (rounded up to the granule)
  };

  // Reserves `bytes` on partitions [partition_start, partition_start + partitions); nullopt if no room.
  std::optional<Block> allocate(uint32_t partition_start, uint32_t partitions, uint32_t bytes);
  // Reserves exactly [offset, offset + bytes) on those partitions (offset a multiple of the granule);
  // nullopt if any of it is taken or out of range.
  std::optional<Block> allocate_at(uint32_t partition_start, uint32_t partitions, uint32_t offset,
                                   uint32_t bytes);
  void release(uint64_t id);  // unknown ids are ignored

  // Largest allocatable size (bytes, a multiple of the granule) on the given partitions.
  uint32_t largest_free(uint32_t partition_start, uint32_t partitions) const;
  uint32_t bytes_per_partition() const { return bytes_per_partition_; }
  uint32_t granule() const { return granule_; }
  size_t live() const { return blocks_.size(); }

 private:
  uint32_t round_up(uint64_t v) const;

  uint32_t partitions_;
  uint32_t bytes_per_partition_;
  uint32_t granule_;
  uint64_t next_id_ = 1;
  std::vector<Block> blocks_;  // by offset: first fit walks them in order, without a sorted copy
};

}  // namespace trnsim::kernels
