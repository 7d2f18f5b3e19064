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
//   - Scope: a site's pool lives for one iteration of the outermost loop its tiles do not cross (the loop
//     whose iterations the site's tiles all begin and end in; the kernel when a tile outlives an iteration
//     of the outermost loop around its declaration, or the declaration is outside every loop). When that
//     iteration's last access to the site is done the site is dead until the next iteration declares it
//     again: a site declared later in the meantime may take its space (first fit, the builder's Allocator),
//     and the site's next iteration then gets fresh buffers (first fit again) whose first writers wait for
//     the last readers of what held that space (write-after-read, pool to pool). While nothing takes its
//     space the site keeps its buffers and goes on rotating over them. How many buffers is asked once per
//     site (below), with its declarations over the whole kernel: the count belongs to the site's logical
//     tensor over every iteration of its loops; the scope bounds where that tensor lives. Source: NKI Block
//     Dimension Migration Guide: the compiler "analyzes the memory dependency and allocates physical address
//     to each tile", so a loop's tiles "may not be alive in the memory simultaneously", and a tensor declared
//     in a loop body (no longer one tensor of the whole loop) carries no dependency from one iteration to the
//     next. [I] that the allocator frees a site at the end of its outermost loop's iteration and not
//     earlier: the guides give no finer rule, and the NKI matmul guide's fully optimised kernel at its own
//     FP32 size (a published kernel that runs on hardware) fits in SBUF only if its packing tile reuses its
//     operand tiles' space in the same N block, which this gives (plan_pools below; docs/nki.md).
//   - Whatever the count, the buffers must fit: at most (free - reserve) / tile buffers, where `reserve`
//     is what the other tiles declared in the same loop body still need (one buffer each); the compiler
//     spills rather than fail (NKI performance guide, "Optimization Gotchas"), which is not modelled: a
//     tile that does not fit once is an error of the builder (Kernel::make_tile).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  // The site's scope as stats.json names it ("kernel", "n block", "loop at kernel.py:12"); empty: "kernel".
  std::string scope{};
  // Set with `bufs`: the rule was asked by the caller (the NKI front end's plan) and gave `bufs` for this
  // reason; recorded as the rule's choice.
  std::optional<std::string> rule_reason{};
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
  int64_t declarations = 1;      // times the site was declared (a pool made again per outer iteration)
  std::string scope = "kernel";  // what one pool lives for (see "Scope" above)
};

// The scope of a site from the loops around its declaration, outermost first: whether any of its tiles is
// accessed after the iteration of that loop it was declared in ended (`crossed`). 0: one iteration of the
// outermost loop; -1: the kernel (no loop, or a tile outlives the outermost loop's iteration).
int site_scope(const std::vector<bool>& crossed);

// The scoped rule applied to a traced kernel (the NKI front end, which sees every tile's lifetime before it
// emits): each site's buffer count (loop_tile_buffers, asked when its first pool instance starts, with the
// largest free run the builder's first-fit Allocator has then) and where each pool instance goes.
struct PoolSite {
  isa::MemSpace space = isa::MemSpace::SBUF;
  int64_t partitions = 128;  // 1..limits.partitions, from partition 0
  int64_t tile_bytes = 0;    // one tile, bytes per partition (> 0)
  InLoop loop;               // trip_count, tiles (alive at once), reserve, bufs
};
struct PoolInstance {  // one scope iteration of a site
  int64_t site = 0;
  int64_t first = 0, last = 0;  // its first and last access, in program order (first <= last)
};
struct PoolPlan {
  std::vector<BufferChoice> sites;  // per site
  // Per instance: its placement (a run of the site's instances that keep one set of buffers).
  std::vector<int64_t> placement_of;
  struct Placement {
    int64_t site = 0;
    std::vector<int64_t> offsets;  // per buffer (bufs x tiles), bytes per partition
    // Per buffer: the buffers (placement, index) that held any of its space before it and were not wholly
    // covered by a later buffer since: its first writer waits for their last accesses.
    std::vector<std::vector<std::pair<int64_t, int64_t>>> after;
  };
  std::vector<Placement> placements;
};
// InputError naming the site (its index) when an instance's buffers do not fit.
PoolPlan plan_pools(const isa::Limits& limits, const std::vector<PoolSite>& sites,
                    const std::vector<PoolInstance>& instances);

}  // namespace trnsim::kernels
