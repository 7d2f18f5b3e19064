#include "sim/isa/mx_pair_cache.h"

#include <algorithm>
#include <cstring>

namespace trnsim::isa {

bool MxPairCache::same_source(const Entry& e, std::span<const uint8_t* const> rows,
                              std::span<const uint8_t> scales) const {
  const size_t row_bytes = 4 * e.layout.cols;
  const uint8_t* s = e.source.data();
  // Scales first: they differ between most tiles and are short.
  if (std::memcmp(s + rows.size() * row_bytes, scales.data(), scales.size()) != 0) return false;
  for (size_t r = 0; r < rows.size(); ++r)
    if (std::memcmp(s + r * row_bytes, rows[r], row_bytes) != 0) return false;
  return true;
}

MxPairCache::Image MxPairCache::get(const MxPairLayout& layout, std::span<const uint8_t* const> rows,
                                    std::span<const uint8_t> scales) {
  const size_t row_bytes = 4 * layout.cols;
  const size_t source_bytes = rows.size() * row_bytes + scales.size();
  for (auto& e : entries_) {
    if (!e->ready || !(e->layout == layout) || e->source.size() != source_bytes ||
        !same_source(*e, rows, scales))
      continue;
    e->used = tick_;
    return {e->pairs, &e->range, true, e.get()};
  }
  // A miss: room from the least recently used entries this instruction does not hold; one of the same layout
  // is reused whole.
  size_t total = 0;
  for (const auto& e : entries_) total += e->bytes();
  const size_t need = source_bytes + 4 * (layout.words + 16);
  Entry* slot = nullptr;
  while (total + need > budget_) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if ((*it)->used < tick_ && (victim == entries_.end() || (*it)->used < (*victim)->used)) victim = it;
    if (victim == entries_.end()) break;
    if ((*victim)->layout == layout) {
      slot = victim->get();
      break;
    }
    total -= (*victim)->bytes();
    entries_.erase(victim);
  }
  if (slot == nullptr) {
    entries_.push_back(std::make_unique<Entry>());
    slot = entries_.back().get();
    slot->layout = layout;
    slot->storage.reset(new uint32_t[layout.words + 16]);
    slot->pairs =
        reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(slot->storage.get()) + 63) & ~uintptr_t{63});
  }
  slot->ready = false;
  slot->wide_ready = false;
  slot->used = tick_;
  slot->range = {};
  slot->source.resize(source_bytes);
  for (size_t r = 0; r < rows.size(); ++r)
    std::memcpy(slot->source.data() + r * row_bytes, rows[r], row_bytes);
  if (!scales.empty())
    std::memcpy(slot->source.data() + rows.size() * row_bytes, scales.data(), scales.size());
  return {slot->pairs, &slot->range, false, slot};
}

void MxPairCache::commit(const Image& image) {
  image.entry->ready = true;
}

}  // namespace trnsim::isa
