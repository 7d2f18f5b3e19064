// Views: a region of an SBUF/PSUM tile or of an HBM tensor, as kernel code slices and reshapes it.
//
// A view has a shape whose dim 0 is the partition axis (SBUF/PSUM: contiguous partitions; HBM: rows, any
// stride) followed by free dims (strides in elements, outermost first, as in NKI). Views never copy: they
// are what an instruction's operand (isa::AccessPattern) describes. A tile's storage stays allocated while
// any view of it is alive (RAII: the last view going out of scope releases the SBUF/PSUM bytes).
//
// Errors: InputError for out-of-range slices, impossible reshapes, bad permutations or bitcasts.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/api/alloc.h"
#include "sim/base/small_vector.h"
#include "sim/isa/instruction.h"

namespace trnsim::kernels {

class Kernel;

inline constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

// Python-like slice start:stop:step (step > 0, no negative indices); `single` selects one index and, on a
// free dim, drops that dim.
struct Slice {
  int64_t start = 0;
  int64_t stop = kEnd;
  int64_t step = 1;
  bool single = false;

  Slice() = default;
  Slice(int64_t start_, int64_t stop_, int64_t step_ = 1) : start(start_), stop(stop_), step(step_) {}
  Slice(int64_t index) : start(index), stop(index + 1), single(true) {}  // NOLINT: implicit, as x[3]
  Slice(int index) : Slice(static_cast<int64_t>(index)) {}               // NOLINT
};
inline Slice S(int64_t start, int64_t stop, int64_t step = 1) {
  return Slice(start, stop, step);
}
inline const Slice all{};

// Bytes per element of a dtype (x4 types: one packed 32-bit element).
uint32_t elem_bytes(isa::DType t);
const char* dtype_str(isa::DType t);
const char* space_str(isa::MemSpace s);

namespace detail {
// What a view points into: an SBUF/PSUM allocation (released on destruction) or an HBM tensor.
struct Storage {
  std::string name;                      // the tile's or tensor's, for messages
  std::shared_ptr<Allocator> allocator;  // null for HBM
  uint64_t block = 0;
  int64_t hbm_rows = 1;            // HBM: the tensor's first dim (1 for a 1-D tensor)
  int64_t hbm_row_bytes = 0;       // HBM: bytes of one such row
  std::vector<int64_t> hbm_shape;  // HBM: the shape the tensor was declared with (a 1-D [n] stays [n])
  // Set for a tile whose every access depends on the whole tile (a Trn2 multi-bank PSUM tile): partitions
  // [0, whole_partitions) x bytes [whole_lo, whole_hi) is the region of any view of it.
  int64_t whole_partitions = 0, whole_lo = 0, whole_hi = 0;
  ~Storage() {
    if (allocator) allocator->release(block);
  }
};
}  // namespace detail

class View {
 public:
  View() = default;  // an absent operand

  bool valid() const { return storage_ != nullptr; }
  isa::MemSpace space() const { return space_; }
  isa::DType dtype() const { return dtype_; }
  const std::string& name() const;
  int rank() const { return static_cast<int>(dims_.size()); }
  std::vector<int64_t> shape() const;
  // HBM: the shape its tensor was declared with (Kernel::input/output/scratch), whatever this view selects
  // of it (a 1-D [n] tensor is [n] here while its views have a free dim: [n, 1]). SBUF/PSUM: empty.
  const std::vector<int64_t>& tensor_shape() const;
  int64_t size(int dim) const;
  int64_t partitions() const { return dims_.empty() ? 0 : dims_[0].size; }
  int64_t free_elements() const;                                 // product of the free dims
  uint32_t partition_start() const { return partition_start_; }  // SBUF/PSUM
  int64_t offset_bytes() const { return offset_bytes_; }
  uint32_t tensor() const { return tensor_; }  // HBM: index into Program::tensors
  Kernel* owner() const { return owner_; }
  uint64_t kernel_serial() const { return serial_; }  // Kernel::serial() of the context that made it
  std::string describe() const;                       // e.g. "sbuf 'lhs'[128, 512] bfloat16"

  // Indexing over dims in order (dim 0 first); missing trailing indices take the whole dim.
  View index(const std::vector<Slice>& idx) const;
  template <class... I>
  View operator()(I... idx) const {
    const std::array<Slice, sizeof...(I)> s{Slice(idx)...};
    return index(s.data(), s.size());
  }
  View index(const Slice* idx, size_t n) const;
  View slice(int dim, int64_t start, int64_t stop, int64_t step = 1) const;

  // New shape over the same elements (dim 0 included; SBUF/PSUM keep the partition count). Fails when the
  // strides do not allow it without a copy.
  View reshape(const std::vector<int64_t>& shape) const;
  // Reorders dims: order[i] is the old dim that becomes dim i. SBUF/PSUM keep dim 0 first.
  View permute(const std::vector<int>& order) const;
  // Reinterprets the bytes as another dtype (e.g. float8_e4m3fn <-> float8_e4m3fn_x4, bf16 <-> u16). The
  // innermost dim must be contiguous when sizes differ; its length scales by the size ratio.
  View bitcast(isa::DType dtype) const;
  // Stride-0 repeat of a size-1 free dim (e.g. a [P, 1] operand seen as [P, n]).
  View broadcast(int dim, int64_t size) const;
  // A view of the same storage from an explicit access pattern (the NKI front end's indexing and .ap(), which
  // it computes itself): dims are (stride, size) pairs, dims[0] the partition dim (SBUF/PSUM: partitions
  // [partition_start, partition_start + size), its stride ignored) or the row dim (HBM: its stride is the
  // row stride), the rest free dims; strides in elements of `dtype` (which may differ from this view's: a
  // reinterpretation of the bytes); 0 repeats an element, a negative stride steps backwards from the element
  // at offset_bytes (the engines' access patterns have signed steps: docs/facts/trainium-hardware.md §2.6).
  // offset_bytes and partition_start count from this view's start (SBUF/PSUM: bytes inside each partition;
  // call it on the whole tile or tensor).
  // InputError if any element falls outside this view's partitions and byte range, or a size is below 1.
  View pattern(isa::DType dtype, int64_t offset_bytes, const std::vector<std::pair<int64_t, int64_t>>& dims,
               uint32_t partition_start = 0) const;
  // HBM: the same free pattern over `rows` rows at this view's row stride, for the indexed side of an
  // indirect DMA (its rows come from the vector_offset, so `rows` may exceed the tensor's, e.g. 128 slots
  // gathered from a tensor of 24 rows). InputError for SBUF/PSUM views.
  View index_rows(int64_t rows) const;

  // The ISA operand. Free dims beyond 4 are merged where contiguous; InputError if more than 4 remain.
  isa::AccessPattern ap() const;

  // Rows x bytes bounding rectangle used for dependency tracking (see deps.h); `whole_rows` for the indexed
  // side of an indirect DMA. Any view of a Trn2 multi-bank PSUM tile covers the whole tile.
  struct Region {
    uint32_t space_id;  // 0 for SBUF/PSUM, the tensor index for HBM
    int64_t r0, r1, c0, c1;
  };
  Region region(bool whole_rows = false) const;
  // region() of an HBM view whose tensor row a scalar_offset picks at run time: its in-row bytes in every
  // row of the tensor (whole rows if it spans more than one, or `whole`: a scalar_offset_stride moves it
  // within rows too).
  Region region_any_row(bool whole = false) const;

 private:
  friend class Kernel;
  struct D {
    int64_t stride;  // elements; dim 0 of SBUF/PSUM: unused (0)
    int64_t size;
  };
  std::shared_ptr<detail::Storage> storage_;
  Kernel* owner_ = nullptr;
  uint64_t serial_ = 0;
  isa::MemSpace space_ = isa::MemSpace::SBUF;
  isa::DType dtype_ = isa::DType::F32;
  uint32_t tensor_ = 0;
  uint32_t partition_start_ = 0;
  int64_t offset_bytes_ = 0;
  SmallVector<D, 6> dims_;  // kernels' views have up to 5 or 6 dims
};

}  // namespace trnsim::kernels
