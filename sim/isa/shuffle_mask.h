// nc_stream_shuffle's shuffle_mask inside an Instruction, which has no 32-byte field of its own (a field
// would grow every instruction of every program). Each of the 32 entries is a 6-bit code: the source
// partition 0-31 inside the quadrant, or 32 for NKI's 255 (the output partition is left unmodified).
// Entries 0-19 fill iota_steps (five codes a word), entries 20-31 imm0, imm1 and imm2 (four codes each, an
// integer below 2^24, which FP32 holds exactly).
#pragma once

#include <array>
#include <cstdint>

#include "sim/isa/instruction.h"

namespace trnsim::isa {

inline constexpr uint8_t kShuffleKeep = 255;  // NKI: the output partition is not modified
using ShuffleMask = std::array<uint8_t, 32>;  // entries 0-31 or kShuffleKeep

// Whether `v` is a shuffle_mask entry NKI accepts: a source partition 0-31 of the quadrant, or 255.
inline bool shuffle_entry_ok(int64_t v) {
  return (v >= 0 && v <= 31) || v == kShuffleKeep;
}

// Stores `mask` in `inst` (every entry must be below 32 or kShuffleKeep: program_json and the builder check).
void set_shuffle_mask(Instruction& inst, const ShuffleMask& mask);
ShuffleMask shuffle_mask(const Instruction& inst);

}  // namespace trnsim::isa
