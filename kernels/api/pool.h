// Tile pools: NKI's allocation semantics for a tile allocated inside a loop.
//
// In NKI a tile declared inside a loop body (nl.ndarray in the loop) is a fresh tile every iteration: the
// compiler backs it with a few physical buffers and rotates over them, so the DMA filling iteration i + 1's
// tile can overlap the compute still reading iteration i's. A tile declared once outside the loops is one
// buffer: every iteration's write waits for the previous iteration's reads (write-after-read), which
// serialises the loop (NKI Block Dimension Migration Guide, "hoist down the tensor inside the loop":
// a tile allocated outside the loop "carries dependency" from one iteration to the next).
//
// A TilePool is one such allocation site: `bufs` buffers of one shape, allocated when the pool is made
// (Kernel::sbuf_pool / psum_pool) and released when the pool and every view of its buffers are gone.
// next() hands out the next buffer in rotation (call i gets buffer i % bufs). Nothing else is special: the
// dependency tracking (deps.h) makes the first access to a reused buffer wait for the reads and writes of its
// previous use, so `bufs` bounds how far one iteration can run ahead of the iteration that used the buffer
// before. How many buffers the NKI compiler gives a site is its allocator's choice; a port states its count.
//
//   TilePool a = k.sbuf_pool({128, 512}, DType::F32, "a_tile", 2);
//   for (int64_t i = 0; i < n; ++i) {
//     View t = a.next();  // buffer i % 2
//     nki::dma_copy(t, x(...));
//     ...
//   }
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/api/view.h"

namespace trnsim::kernels {

class TilePool {
 public:
  TilePool() = default;
  TilePool(std::string name, std::vector<View> buffers)
      : name_(std::move(name)), buffers_(std::move(buffers)) {}

  // The next buffer in rotation: call i returns buffer(i % bufs()). InputError for an empty pool.
  View next();
  const View& buffer(int64_t i) const;  // i in [0, bufs()); InputError otherwise
  int64_t bufs() const { return static_cast<int64_t>(buffers_.size()); }
  int64_t handed_out() const { return next_; }  // calls to next() so far
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::vector<View> buffers_;
  int64_t next_ = 0;
};

}  // namespace trnsim::kernels
