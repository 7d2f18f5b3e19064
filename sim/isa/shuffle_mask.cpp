#include "sim/isa/shuffle_mask.h"

namespace trnsim::isa {
namespace {

constexpr uint32_t kKeepCode = 32;

uint32_t code(uint8_t entry) {
  return entry == kShuffleKeep ? kKeepCode : entry & 31u;
}
uint8_t entry(uint32_t code) {
  return code == kKeepCode ? kShuffleKeep : static_cast<uint8_t>(code & 31u);
}
// The word that holds entry e, and e's position in it.
uint32_t word_of(const Instruction& in, int e) {
  if (e < 20) return static_cast<uint32_t>(in.iota_steps[e / 5]);
  const float imm = e < 24 ? in.imm0 : e < 28 ? in.imm1 : in.imm2;
  return static_cast<uint32_t>(imm);
}
int shift_of(int e) {
  return 6 * (e < 20 ? e % 5 : (e - 20) % 4);
}

}  // namespace

void set_shuffle_mask(Instruction& in, const ShuffleMask& mask) {
  uint32_t words[7] = {};
  for (int e = 0; e < 32; ++e) words[e < 20 ? e / 5 : 4 + (e - 20) / 4] |= code(mask[e]) << shift_of(e);
  for (int w = 0; w < 4; ++w) in.iota_steps[w] = static_cast<int32_t>(words[w]);
  in.imm0 = static_cast<float>(words[4]);
  in.imm1 = static_cast<float>(words[5]);
  in.imm2 = static_cast<float>(words[6]);
}

ShuffleMask shuffle_mask(const Instruction& in) {
  ShuffleMask m{};
  for (int e = 0; e < 32; ++e) m[e] = entry((word_of(in, e) >> shift_of(e)) & 63u);
  return m;
}

}  // namespace trnsim::isa
