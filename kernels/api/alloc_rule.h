// The allocation rule: how many rotating buffers the Neuron compiler gives a tile declared inside a loop.
//
// In NKI a tile declared in a loop body is a fresh tile every iteration; the compiler backs it with a few
// physical buffers and rotates over them, so the loads of iteration i + 1 can run while iteration i's
// compute still reads its buffer (pool.h). How many is the compiler's choice, made from what it knows when
// it allocates: the memory space, the tile's bytes per partition, the loop around the declaration and the
// free space. This file is that choice, written once: the kernel builder (Kernel::sbuf_pool / psum_pool
// with an InLoop) and the NKI front end call it; an explicit `bufs` (direct allocation, or a what-if)
// bypasses it.
//
// The rule, with its public sources:
//   - A dynamic loop (nl.dynamic_range: one hardware loop body, not unrolled): 1 buffer. "Tensors allocated
//     inside the loop body are allocated once and reused across iterations" (NKI dynamic-loops guide,
//     aws-neuron-sdk nki/deep-dives/nki-dynamic-loops.rst, "Register Allocation Implications").
//   - A declaration that runs once (trip count 1): 1 buffer, there is nothing to rotate.
//   - SBUF: double buffering, kCompilerMultiBuffer = 2 buffers. The compiler's allocator is
//     "heuristic-driven": it decides "how many physical tiles are allocated to each tensor", its goal
//     "instruction parallelism across different engines ... while minimizing memory usage", and its
//     canonical answer is two physical tiles that the loop rotates over so the DMA writing one overlaps the
//     engine reading the other (NKI Direct Allocation Developer Guide, "Background: NKI Tensors Semantics",
//     Neuron 2.21+; the same picture in the Block Dimension Migration Guide: "compiler could choose to
//     allocate 2 physical tiles"). The compiler's own multi-buffer directive defaults to that count
//     (nki.compiler multi_buffer(factor=2), Neuron 2.2x API source). [I] that the default allocator gives
//     exactly 2 wherever 2 fit: the documentation gives no other number.
//   - PSUM: every free bank, up to the trip count. PSUM is 8 banks of 2 KiB per partition, each an
//     independent accumulation group, "up to 8 groups can be outstanding" (NKI architecture guide, v2,
//     PSUM); nki-autotune's hand-tuned matmul (awslabs/nki-autotune @d57bcc3 kernel_library/README.md),
//     which declares its PSUM tile inside the m-tile loop with default allocation, reports that the
//     compiled kernel "saturates PSUM at 8 banks"; the NKI allocator's RING mode, documented later,
//     "rotates through the 8 banks" (nki.compiler.AllocationMode). [I] for the default flow beyond that
//     observation.
//   - Whatever the count, the buffers must fit: at most (free - reserve) / tile buffers, where `reserve`
//     is what the other tiles declared in the same loop body still need (one buffer each); the compiler
//     spills rather than fail (NKI performance guide, "Optimization Gotchas"), which is not modelled: a
//     tile that does not fit once is an error of the builder (Kernel::make_tile).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/isa/instruction.h"

namespace trnsim::kernels {

// Buffers the compiler's default allocation gives an SBUF tile declared in a loop (see above).
inline constexpr int64_t kCompilerMultiBuffer = 2;

// A tile declared inside a loop, as the kernel states it (the allocation site).
struct InLoop {
  // How many times the declaration runs while its buffers live (the iterations of the loops around it); >= 1.
  int64_t trip_count = 2;
  // Tiles of the pool's shape one iteration declares together (an NKI tensor [P, tiles, F...] handed out
  // tile by tile): the rule counts buffers of the whole set; the pool holds bufs x tiles tiles. >= 1.
  int64_t tiles = 1;
  // nl.dynamic_range: the loop runs as one hardware loop body (1 buffer).
  bool dynamic = false;
  // Bytes per partition the other tiles declared in the same loop body still need after this one (their
  // first buffer each), so this one's extra buffers leave room for them. >= 0.
  int64_t reserve_bytes_per_partition = 0;
  // Set: the kernel states the buffer count (direct allocation, or a what-if) and the rule is not asked.
  std::optional<int64_t> bufs{};
};

// What the compiler knows when it allocates the site.
struct LoopTileQuery {
  isa::MemSpace space = isa::MemSpace::SBUF;  // SBUF or PSUM
  int64_t bytes_per_partition = 0;            // one buffer: all `tiles` of one iteration, rounded to granules
  InLoop loop;
  int64_t free_bytes_per_partition =
      0;  // largest free run on the partitions the tile spans, at the declaration
};

struct BufferChoice {
  int64_t bufs = 1;    // buffers the site rotates over, >= 1
  std::string reason;  // which clause of the rule decided, e.g. "double buffering (compiler default)"
};

// The rule above. InputError for a query outside its domain (HBM, bytes <= 0, trip count or tiles < 1,
// negative free space or reserve). When not even one buffer fits it still answers 1 (the allocation then
// fails with the builder's message naming the tile).
BufferChoice loop_tile_buffers(const LoopTileQuery& q);

// One allocation site as stats.json reports it ("allocations"): the site's name and source line, its
// memory space, the bytes per partition of one buffer (all its tiles), the trip count, the buffers it got,
// and whether the rule or an explicit `bufs` chose them.
struct AllocationRecord {
  std::string name;
  std::string source;  // "file.cpp:42"
  isa::MemSpace space = isa::MemSpace::SBUF;
  int64_t bytes_per_partition = 0;
  int64_t tiles = 1;
  int64_t trip_count = 0;  // 0: not stated (an explicit bufs)
  int64_t bufs = 1;
  bool by_rule = true;
  std::string reason;
  int64_t declarations = 1;  // times the site was declared (a pool made again per outer iteration)
};

}  // namespace trnsim::kernels
