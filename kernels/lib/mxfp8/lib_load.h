// The loads of one generic_matmul_mxfp8_api call (lib_api.h): nki-library's load_block.load_lhs_and_rhs and
// the loaders of load_apis.py, as lib_api.cpp calls them. Internal to the library-faithful pipeline.
#pragma once

#include <cstdint>

#include "kernels/lib/mxfp8/lib_api.h"

namespace trnsim::kernels::mxfp8::lib {

// What one operand of a call loads: the descriptor, its load tile (logical tile_k for BF16, physical for x4)
// and F sizes, and where it lands.
struct OperandLoad {
  const Td* td = nullptr;   // null: not loaded by this call
  int64_t tile_f = 0;       // matmul tile F (tile_m or tile_n)
  int64_t load_tiles = 1;   // TILES_IN_LOAD_M / N
  int64_t block_tiles = 1;  // TILES_IN_BLOCK_M / N
  int64_t f_block = 0;      // block index along F (mb or nb)
  int64_t f_offset = 0;     // lhs_m_offset / rhs_n_offset (0 when reloading from a spill buffer)
  // Filled by load_operands: BF16 staging [kp, bk, 4 block_f], or x4 data [kp, bk, block_f] and scales.
  View staging, data, scales;
};

// load_lhs_and_rhs for block (kb) of the geometry: allocates, zeroes and loads both operands (either may be
// absent) in the library's order.
void load_operands(Tiles& t, const Call& c, OperandLoad& lhs, OperandLoad& rhs);

// Scale-packing group and partition offset of K tile `k` (nkilib get_scale_packing_info): group k / 4,
// offset 4 (k % 4).
inline int64_t packing_group(int64_t k) {
  return k / 4;
}
inline uint8_t packing_offset(int64_t k) {
  return static_cast<uint8_t>(4 * (k % 4));
}

}  // namespace trnsim::kernels::mxfp8::lib
