#include "kernels/api/pool.h"

#include <fmt/format.h>

#include "sim/base/error.h"

namespace trnsim::kernels {

View TilePool::next() {
  if (buffers_.empty())
    throw InputError("tile pool: next() on an empty pool (make it with Kernel::sbuf_pool)");
  return buffers_[static_cast<size_t>(next_++ % bufs())];
}

const View& TilePool::buffer(int64_t i) const {
  if (i < 0 || i >= bufs())
    throw InputError(fmt::format("tile pool '{}': buffer {} out of range 0-{}", name_, i, bufs() - 1));
  return buffers_[static_cast<size_t>(i)];
}

}  // namespace trnsim::kernels
