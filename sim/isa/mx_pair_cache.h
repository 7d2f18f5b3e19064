// nc_matmul_mx operands dequantized to the PE's BF16 pair layout (num::dequantize_x4_pairs), kept across
// instructions. A kernel reads one SBUF tile as an operand of many matmuls in a row (nki-library's blocks
// read each moving K tile once per output tile of the block), and the image is a pure function of the tile's
// x4 bytes, its E8M0 scale bytes and the layout. An image is served only when the bytes and scales it was
// made from equal those in memory now, compared byte for byte: a tile rewritten in between is dequantized
// again, whoever wrote it. Plain C++.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sim/numerics/pair_range.h"

namespace trnsim::isa {

// The layout of an image: `rows` partition rows of `cols` x4 elements in FP8 format `fmt`, written with
// `panel_step` (dequantize_x4_pairs' argument) into `words` uint32 pairs.
struct MxPairLayout {
  uint32_t rows = 0;
  uint64_t cols = 0;
  int64_t panel_step = 0;
  int fmt = 0;
  size_t words = 0;
  bool operator==(const MxPairLayout&) const = default;
};

class MxPairCache {
 public:
  // At most `budget` bytes of images and their sources, beyond the operands of the current instruction.
  explicit MxPairCache(size_t budget) : budget_(budget) {}

  struct Entry;
  struct Image {
    uint32_t* pairs = nullptr;  // 64-byte aligned, layout.words words
    num::PairRange* range = nullptr;
    bool hit = false;  // false: the caller writes *pairs and *range, then calls commit()
    Entry* entry = nullptr;
  };

  // Starts an instruction: the images get() returns until the next begin() are not evicted meanwhile.
  void begin() { ++tick_; }
  // The image of the operand whose partition row r is the 4 cols bytes at rows[r] and whose scale bytes are
  // `scales` (in any fixed order the caller keeps for this layout).
  Image get(const MxPairLayout& layout, std::span<const uint8_t* const> rows,
            std::span<const uint8_t> scales);
  // The image of a miss is written: later get()s may serve it.
  void commit(const Image& image);
  // A committed image's pairs as `floats` FP32 values that widen(float*) writes, once: kept with the image
  // (counted in the budget) until the image is rewritten or evicted.
  template <class F>
  const float* widened(const Image& image, size_t floats, F&& widen) {
    Entry& e = *image.entry;
    if (e.wide_floats != floats) {
      e.wide.reset(new float[floats]);  // every element written by widen
      e.wide_floats = floats;
      e.wide_ready = false;
    }
    if (!e.wide_ready) widen(e.wide.get());
    e.wide_ready = true;
    return e.wide.get();
  }

  size_t entries() const { return entries_.size(); }

  struct Entry {
    MxPairLayout layout;
    std::vector<uint8_t> source;  // rows' bytes, one after the other, then the scale bytes
    std::unique_ptr<uint32_t[]> storage;
    uint32_t* pairs = nullptr;
    num::PairRange range;
    uint64_t used = 0;
    bool ready = false;
    std::unique_ptr<float[]> wide;  // widened(): wide_floats values, valid while wide_ready
    size_t wide_floats = 0;
    bool wide_ready = false;
    size_t bytes() const { return source.size() + 4 * (layout.words + 16) + 4 * wide_floats; }
  };

 private:
  bool same_source(const Entry& e, std::span<const uint8_t* const> rows,
                   std::span<const uint8_t> scales) const;

  size_t budget_;
  uint64_t tick_ = 0;
  std::vector<std::unique_ptr<Entry>> entries_;  // pointers: an Image outlives later get()s
};

}  // namespace trnsim::isa
