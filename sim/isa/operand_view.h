// Element access to one operand of an instruction: resolves an AccessPattern against the machine's storage
// and reads/writes single elements in its dtype. Used by execute() and by tests that set up or inspect
// memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/isa/element.h"
#include "sim/isa/instruction.h"
#include "sim/isa/semantics.h"

namespace trnsim::isa {

// A resolved operand: `rows()` partitions (SBUF/PSUM) or tensor rows (HBM) by `cols()` free elements, the
// free index running row-major over ap's free dims (dim 0 outermost). Every element address is bounds-checked
// once at construction: a pattern reaching outside its memory throws RuleError "<prefix>: <rule>: <operand>
// ..."; so does a total size above kMaxElements (bounds the host work of one instruction).
class OperandView {
 public:
  static constexpr uint64_t kMaxElements = uint64_t{1} << 26;

  // indirect_rows: HBM rows come from an index vector (at_tensor_row), so the pattern's own rows are not
  // checked.
  OperandView(const AccessPattern& ap, int core, const Program& program, const Limits& limits,
              MachineState& state, const std::string& prefix, const char* operand,
              bool indirect_rows = false);

  uint32_t rows() const { return rows_; }
  uint64_t cols() const { return col_off_.size(); }
  DType dtype() const { return ap_.dtype; }
  const AccessPattern& ap() const { return ap_; }

  uint8_t* at(uint32_t row, uint64_t col) { return base_ + (base_off_ + row_off(row) + col_off_[col]); }
  // True if each row's free elements are consecutive in memory (a row is one byte run), for bulk copies.
  bool contiguous_rows() const { return contiguous_; }
  // False when no byte of this operand can be a byte of `o` (another memory, disjoint partitions or
  // disjoint byte ranges within the partitions), so whole rows can be read before any is written.
  bool may_overlap(const OperandView& o) const;

  // HBM only (indirect DMA): the address of free element `col` in pattern row `index` (NKI's vector_offset on
  // the indirect dim): the index steps by the pattern's row stride from its offset, so a whole-row pattern
  // indexes tensor rows and a pattern with row stride 1 indexes single elements. nullptr when the index is
  // negative or any byte of the element lies outside the tensor.
  uint8_t* at_tensor_row(int64_t index, uint64_t col);
  // HBM only: the base of pattern row `index` when the pattern's rows step forward (row stride > 0) and every
  // free element of that row lies inside the tensor (element `col` at base + col_offset(col), the address
  // at_tensor_row gives); nullptr otherwise (then at_tensor_row decides element by element).
  uint8_t* tensor_row(int64_t index) {
    if (row_stride_ <= 0 || index < 0 || index >= index_rows_) return nullptr;
    return base_ + (base_off_ + index * row_stride_);
  }
  // Byte offset of free element `col` from its row's base.
  int64_t col_offset(uint64_t col) const { return col_off_[col]; }
  // How many indices [0, n) keep every element of a row inside the tensor (for messages).
  int64_t tensor_rows() const { return index_rows_; }

  // Value as FP32: floats exactly, ints converted (RNE for |v| > 2^24). x4 types are not numbers: RuleError.
  float load(uint32_t row, uint64_t col) { return load_value(at(row, col)); }
  void store(uint32_t row, uint64_t col, float v) { store_value(at(row, col), v); }
  float load_value(const uint8_t* p) const;
  // FP32 -> dtype: RNE; FP8 satfinite; ints RNE then saturate, NaN -> 0; E8M0 keeps the FP32 exponent
  // (rounds down to a power of two; NaN, Inf and negatives -> 0xFF, zero -> 0x00).
  void store_value(uint8_t* p, float v) const;
  // Integer view: int dtypes exactly; floats truncated toward zero (NaN -> 0) and saturated to int64.
  int64_t load_int(uint32_t row, uint64_t col);
  // Integer write: int dtypes wrap to their width (two's complement); float dtypes get the value converted.
  void store_int(uint32_t row, uint64_t col, int64_t v);

  // Whole rows (cols() elements) with the conversions of load / store / load_int / store_int, element for
  // element the same results; the dtype is resolved once per row instead of once per element.
  void load_row(uint32_t row, float* out);
  void store_row(uint32_t row, const float* in);
  void load_row_int(uint32_t row, int64_t* out);
  void store_row_int(uint32_t row, const int64_t* in);

 private:
  int64_t row_off(uint32_t row) const { return static_cast<int64_t>(row) * row_stride_; }

  AccessPattern ap_;
  uint8_t* base_ = nullptr;
  int64_t base_off_ = 0;  // bytes from the memory start to row 0's base
  uint64_t mem_bytes_ = 0;
  uint32_t rows_ = 0;
  int64_t row_stride_ = 0;  // bytes between rows
  int64_t index_rows_ = 0;
  int64_t min_col_ = 0, max_col_ = 0;  // byte range of the free pattern relative to the row base
  std::vector<int64_t> col_off_;       // byte offset of each free element, from the row base
  bool contiguous_ = true;
};

}  // namespace trnsim::isa
