#include "kernels/lib/partition_fill.h"

#include <algorithm>

#include "kernels/api/nki.h"

namespace trnsim::kernels {

void broadcast_partitions(const View& dst, const View& row, const View& ones, const View& psum,
                          Engine copy_engine) {
  const int64_t n = row.free_elements(), piece = psum.free_elements();
  for (int64_t j = 0; j < n; j += piece) {
    const int64_t w = std::min(piece, n - j);
    nki::nc_matmul(psum(all, S(0, w)), ones, row(all, S(j, j + w)));
    nki::tensor_copy(dst(all, S(j, j + w)), psum(all, S(0, w)), copy_engine);
  }
}

void zero_region(const View& dst, const View& zeros) {
  const int64_t rows = dst.size(0), cols = dst.size(1), Z = zeros.free_elements();
  const int64_t full = rows / 128;
  for (int64_t c = 0; c < cols; c += Z) {
    const int64_t w = std::min(Z, cols - c);
    if (full > 0)
      nki::dma_copy(dst(S(0, full * 128), S(c, c + w)).reshape({full, 128, w}).permute({1, 0, 2}),
                    zeros(all, S(0, w)).reshape({128, 1, w}).broadcast(1, full));
    if (rows % 128) nki::dma_copy(dst(S(full * 128, rows), S(c, c + w)), zeros(S(0, rows % 128), S(0, w)));
  }
}

}  // namespace trnsim::kernels
