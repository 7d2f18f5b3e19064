// A fast non-cryptographic hash of short strings (8 bytes at a time), for the trace writers' interning
// tables. Not stable across versions: never store its values.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace trnsim {

inline uint64_t fast_string_hash(std::string_view s) {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
    p += 8;
    n -= 8;
  }
  uint64_t w = 0;
  if (n != 0) std::memcpy(&w, p, n);
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 29);
}

}  // namespace trnsim
