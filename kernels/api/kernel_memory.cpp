// Kernel's memory: the HBM tensors it declares (input, output, scratch) and its SBUF and PSUM tiles and
// pools.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "kernels/api/kernel.h"
#include "kernels/api/kernel_shared.h"
#include "sim/base/error.h"
#include "sim/io/output_name.h"
#include "sim/isa/names.h"

namespace trnsim::kernels {
namespace {

enum Kind { kInput = 0, kOutput = 1, kScratch = 2 };
const char* kind_str(int k) {
  return k == kInput ? "input" : k == kOutput ? "output" : "scratch";
}

// HBM dependency chunk sizes are powers of two: the tracker finds an access's chunks by shifts.
int64_t pow2(int64_t v) {
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(1, v))));
}

// Bytes of one tensor row as the dependency chunks count them: the dims after the first (at least 1).
int64_t chunk_row_bytes(DType dtype, const std::vector<int64_t>& shape) {
  int64_t row_bytes = elem_bytes(dtype);
  for (size_t i = 1; i < shape.size(); ++i) row_bytes *= shape[i];
  return std::max<int64_t>(1, row_bytes);
}

// Banks a Trn2 PSUM tile may span (8 KiB per partition): a Vector/Scalar access of PSUM covers at most 4K
// elements per partition (NKI architecture guide, SBUF/PSUM access rules), 4 banks of 2-byte values.
constexpr int64_t kTrn2PsumTileBanks = 4;

}  // namespace

View Kernel::input(const std::string& name, DType dtype, const std::vector<int64_t>& shape, Loc loc) {
  return make_hbm(name, dtype, shape, kInput, false, loc);
}
View Kernel::output(const std::string& name, DType dtype, const std::vector<int64_t>& shape, Loc loc) {
  return make_hbm(name, dtype, shape, kOutput, false, loc);
}
View Kernel::scratch(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                     bool private_to_core, Loc loc) {
  return make_hbm(name, dtype, shape, kScratch, private_to_core, loc);
}

void Kernel::track_rows_together(const View& t) {
  if (t.space() != isa::MemSpace::HBM)
    throw InputError(fmt::format("track_rows_together: {} is not in HBM", t.describe()));
  const isa::TensorDecl& decl = shared_.program.tensors.at(t.tensor());
  // One chunk of all rows and all bytes of a row: its accesses span whole rows (a weight gradient's block),
  // and a record in several byte chunks would be looked at once per chunk by every access spanning them;
  // the bucket's own partition separates them.
  hbm_deps_.set_chunks(t.tensor(), pow2(decl.shape.empty() ? 1 : decl.shape[0]),
                       pow2(chunk_row_bytes(decl.dtype, decl.shape)));
}

View Kernel::make_hbm(const std::string& name, DType dtype, const std::vector<int64_t>& shape, int kind,
                      bool private_to_core, const Loc& loc) {
  const std::string shape_s = fmt::format("[{}]", fmt::join(shape, ", "));
  if (name.empty()) throw InputError(where(loc) + ": an HBM tensor needs a name");
  if (kind == kOutput) io::check_output_name(where(loc), name);
  if (shape.empty() || std::any_of(shape.begin(), shape.end(), [](int64_t s) { return s <= 0; }))
    throw InputError(fmt::format("{}: hbm tensor '{}' has an invalid shape {}", where(loc), name, shape_s));
  auto [kit, fresh] = shared_.kinds.try_emplace(name, kind);
  if (kit->second != kind)
    throw InputError(fmt::format("{}: hbm tensor '{}' declared as {} but it is already an {}", where(loc),
                                 name, kind_str(kind), kind_str(kit->second)));
  auto& tensors = shared_.program.tensors;
  const int owner = private_to_core ? core_ : -1;
  uint32_t index = static_cast<uint32_t>(tensors.size());
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name != name) continue;
    if ((tensors[i].private_to_core < 0) != (owner < 0))
      throw InputError(
          fmt::format("{}: hbm tensor '{}' is declared both shared and private", where(loc), name));
    if (tensors[i].private_to_core != owner) continue;
    if (tensors[i].dtype != dtype || tensors[i].shape != shape)
      throw InputError(fmt::format("{}: hbm tensor '{}' redeclared as {} {}; it was {} [{}]", where(loc),
                                   name, shape_s, dtype_str(dtype), dtype_str(tensors[i].dtype),
                                   fmt::join(tensors[i].shape, ", ")));
    index = i;
  }
  if (index == tensors.size()) {
    // The kernel's tensors live in the pair's one HBM stack (counted in double: shapes may overflow int64).
    double bytes = static_cast<double>(elem_bytes(dtype));
    for (int64_t s : shape) bytes *= static_cast<double>(s);
    shared_.hbm_bytes += bytes;
    if (shared_.hbm_bytes > static_cast<double>(limits_.hbm_bytes))
      throw InputError(
          fmt::format("{}: hbm tensor '{}' {} {}: the kernel's HBM tensors need {:.4g} GiB; the HBM stack {} "
                      "holds {:.4g} "
                      "GiB (hbm.capacity_GiB)",
                      where(loc), name, shape_s, dtype_str(dtype), shared_.hbm_bytes / (1 << 30),
                      num_programs_ == 2 ? "of the LNC2 pair" : "of the core (lnc 1)",
                      static_cast<double>(limits_.hbm_bytes) / (1 << 30)));
    isa::TensorDecl decl;
    decl.name = name;
    decl.dtype = dtype;
    decl.shape = shape;
    decl.private_to_core = owner;
    tensors.push_back(std::move(decl));
    shared_.hbm_at.resize(tensors.size());
    shared_.hbm_at.back() = where(loc);
    auto& list = kind == kInput ? shared_.inputs : shared_.outputs;
    if (kind != kScratch && std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
    if (kind == kOutput && shared_.warn_unwritten_outputs) {
      Shared::OutputWrites& w = shared_.output_writes[index];
      w.at = where(loc);
      w.bytes = static_cast<int64_t>(bytes);
    }
  }
  // Chunks of about 8 MiB: fewer rows per chunk when rows are long (e.g. [N, I, B] checkpoints, one block
  // per row), so accesses to different rows keep to their own buckets, and at most 8 byte chunks per row
  // (at least 64 KiB), so an access spanning a megabyte row visits a few buckets. Rows per chunk: at most
  // 128 unless the tensor has more than 8 x 128 short rows (e.g. [T, H] output slabs, [T*E, 1] affinities),
  // then as many as keep it to 8 row chunks: an access to every row (an indirect DMA) looks at each record
  // spanning the rows once per chunk, and a bucket's own partition separates its 128-row tiles' records.
  // Both rounded up to powers of two: the tracker then finds an access's chunks by shifts, not divisions.
  {
    const int64_t row_bytes = chunk_row_bytes(dtype, shape);
    const int64_t rows = shape.size() >= 2 ? shape[0] : 1;
    hbm_deps_.set_chunks(
        index,
        pow2(std::clamp<int64_t>((int64_t{8} << 20) / row_bytes, 1, std::max<int64_t>(128, (rows + 7) / 8))),
        pow2(std::max<int64_t>(64 * 1024, (row_bytes + 7) / 8)));
  }
  if (hbm_use_.size() <= index) hbm_use_.resize(index + 1);
  hbm_use_[index].input = kind == kInput;
  auto st = std::make_shared<detail::Storage>();
  const int64_t es = elem_bytes(dtype);
  int64_t inner = 1;
  for (size_t i = 1; i < shape.size(); ++i) inner *= shape[i];
  st->hbm_rows = shape.size() >= 2 ? shape[0] : 1;
  st->hbm_row_bytes = (shape.size() >= 2 ? inner : shape[0]) * es;
  st->hbm_shape = shape;
  st->name = name;
  View v;
  v.storage_ = std::move(st);
  v.owner_ = this;
  v.serial_ = serial_;
  v.space_ = isa::MemSpace::HBM;
  v.dtype_ = dtype;
  v.tensor_ = index;
  v.dims_.push_back({inner, shape[0]});
  int64_t stride = inner;
  for (size_t i = 1; i < shape.size(); ++i) {
    stride /= shape[i];
    v.dims_.push_back({stride, shape[i]});
  }
  if (shape.size() == 1) v.dims_.push_back({1, 1});
  return v;
}

View Kernel::sbuf(const std::vector<int64_t>& shape, DType dtype, const std::string& name, Loc loc) {
  return make_tile(isa::MemSpace::SBUF, shape, dtype, name, loc);
}
View Kernel::psum(const std::vector<int64_t>& shape, DType dtype, const std::string& name, Loc loc) {
  return make_tile(isa::MemSpace::PSUM, shape, dtype, name, loc);
}
View Kernel::tile_at(isa::MemSpace space, int64_t offset, const std::vector<int64_t>& shape, DType dtype,
                     const std::string& name, Loc loc) {
  if (space == isa::MemSpace::HBM || offset < 0)
    throw InputError(fmt::format("{}: tile_at: an SBUF or PSUM tile at a byte offset >= 0", where(loc)));
  return make_tile(space, shape, dtype, name, loc, offset);
}

TilePool Kernel::sbuf_pool(const std::vector<int64_t>& shape, DType dtype, const std::string& name,
                           int64_t bufs, Loc loc) {
  return make_explicit_pool(isa::MemSpace::SBUF, shape, dtype, name, bufs, loc);
}
TilePool Kernel::psum_pool(const std::vector<int64_t>& shape, DType dtype, const std::string& name,
                           int64_t bufs, Loc loc) {
  return make_explicit_pool(isa::MemSpace::PSUM, shape, dtype, name, bufs, loc);
}

TilePool Kernel::make_explicit_pool(isa::MemSpace space, const std::vector<int64_t>& shape, DType dtype,
                                    const std::string& name, int64_t bufs, const Loc& loc) {
  TilePool pool = make_pool(space, shape, dtype, name, bufs, loc);
  int64_t free = 1;
  for (size_t i = 1; i < shape.size(); ++i) free *= shape[i];
  record_allocation({.name = name,
                     .source = where(loc),
                     .space = space,
                     .bytes_per_partition = free * elem_bytes(dtype),
                     .tiles = 1,
                     .trip_count = 0,
                     .bufs = bufs,
                     .by_rule = false,
                     .reason = "explicit bufs"});
  return pool;
}

TilePool Kernel::sbuf_pool(const std::vector<int64_t>& shape, DType dtype, const std::string& name,
                           const InLoop& loop, Loc loc) {
  return make_loop_pool(isa::MemSpace::SBUF, shape, dtype, name, loop, loc);
}
TilePool Kernel::psum_pool(const std::vector<int64_t>& shape, DType dtype, const std::string& name,
                           const InLoop& loop, Loc loc) {
  return make_loop_pool(isa::MemSpace::PSUM, shape, dtype, name, loop, loc);
}

// One buffer of a site: its tiles, each rounded up to the allocator's granule (SBUF alignment, PSUM bank).
TilePool Kernel::make_loop_pool(isa::MemSpace space, const std::vector<int64_t>& shape, DType dtype,
                                const std::string& name, const InLoop& loop, const Loc& loc) {
  int64_t free = 1;
  for (size_t i = 1; i < shape.size(); ++i) free *= shape[i];
  const Allocator& alloc = space == isa::MemSpace::SBUF ? *sbuf_alloc_ : *psum_alloc_;
  const int64_t g = alloc.granule();
  const int64_t tile_bytes = (std::max<int64_t>(1, free * elem_bytes(dtype)) + g - 1) / g * g;
  const int64_t np = shape.empty() ? 0 : std::clamp<int64_t>(shape[0], 0, limits_.partitions);
  BufferChoice c;
  if (loop.bufs) {
    if (*loop.bufs < 1 || loop.tiles < 1)
      throw InputError(fmt::format("{}: {} pool '{}' needs bufs >= 1 and tiles >= 1, got {} and {}",
                                   where(loc), space_str(space), name, *loop.bufs, loop.tiles));
    c = {*loop.bufs, loop.rule_reason.value_or("explicit bufs")};
  } else {
    try {
      c = loop_tile_buffers(
          {.space = space,
           .bytes_per_partition = tile_bytes * std::max<int64_t>(1, loop.tiles),
           .loop = loop,
           .free_bytes_per_partition = np > 0 ? alloc.largest_free(0, static_cast<uint32_t>(np)) : 0});
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {} pool '{}': {}", where(loc), space_str(space), name, e.what()));
    }
  }
  TilePool pool = make_pool(space, shape, dtype, name, c.bufs * loop.tiles, loc);
  record_allocation({.name = name,
                     .source = where(loc),
                     .space = space,
                     .bytes_per_partition = tile_bytes * loop.tiles,
                     .tiles = loop.tiles,
                     .trip_count = loop.trip_count,
                     .bufs = c.bufs,
                     .by_rule = !loop.bufs || loop.rule_reason.has_value(),
                     .reason = std::move(c.reason),
                     .scope = loop.scope.empty() ? "kernel" : loop.scope});
  return pool;
}

void Kernel::record_allocation(AllocationRecord r) {
  if (core_ != 0 || shared_.declare_only) return;
  for (AllocationRecord& a : shared_.allocations)
    if (a.name == r.name && a.source == r.source && a.bufs == r.bufs && a.by_rule == r.by_rule &&
        a.scope == r.scope) {
      a.declarations += r.declarations;
      return;
    }
  shared_.allocations.push_back(std::move(r));
}

TilePool Kernel::make_pool(isa::MemSpace space, const std::vector<int64_t>& shape, DType dtype,
                           const std::string& name, int64_t bufs, const Loc& loc) {
  if (bufs < 1)
    throw InputError(
        fmt::format("{}: {} pool '{}' needs bufs >= 1, got {}", where(loc), space_str(space), name, bufs));
  std::vector<View> buffers;
  for (int64_t i = 0; i < bufs; ++i)
    buffers.push_back(make_tile(space, shape, dtype, fmt::format("{}[{}]", name, i), loc));
  return TilePool(name, std::move(buffers));
}

View Kernel::make_tile(isa::MemSpace space, const std::vector<int64_t>& shape, DType dtype,
                       const std::string& name_in, const Loc& loc, std::optional<int64_t> offset) {
  const std::string name = name_in.empty() ? fmt::format("tile{}", tiles_) : name_in;
  ++tiles_;
  const char* sp = space_str(space);
  if (shape.size() < 2 || std::any_of(shape.begin(), shape.end(), [](int64_t s) { return s <= 0; }))
    throw InputError(
        fmt::format("{}: {} tile '{}' needs a shape [partitions, free...] of positive sizes, got [{}]",
                    where(loc), sp, name, fmt::join(shape, ", ")));
  if (shape[0] > limits_.partitions)
    throw InputError(fmt::format("{}: {} tile '{}' has {} partitions; the core has {}", where(loc), sp, name,
                                 shape[0], limits_.partitions));
  int64_t free = 1;
  for (size_t i = 1; i < shape.size(); ++i) free *= shape[i];
  const int64_t bytes = free * elem_bytes(dtype);
  const auto np = static_cast<uint32_t>(shape[0]);
  Allocator& alloc = space == isa::MemSpace::SBUF ? *sbuf_alloc_ : *psum_alloc_;
  // Trn2 multi-bank PSUM tiles (Vector/Scalar access) are tracked as a whole; Trn3's multi-bank matmul tiles
  // keep region tracking.
  const bool whole_tile = space == isa::MemSpace::PSUM && bytes > limits_.psum_bank_bytes &&
                          limits_.generation != Generation::Trn3;
  if (whole_tile && bytes > kTrn2PsumTileBanks * limits_.psum_bank_bytes)
    throw InputError(
        fmt::format("{}: psum tile '{}' [{} x {} B] spans more than {} banks of {} B; a {} PSUM tile covers "
                    "at most {} B per partition (Vector/Scalar access; a matmul output stays in one bank)",
                    where(loc), name, np, bytes, kTrn2PsumTileBanks, limits_.psum_bank_bytes,
                    isa::generation_name(limits_.generation), kTrn2PsumTileBanks * limits_.psum_bank_bytes));
  std::optional<Allocator::Block> block;
  if (offset && bytes <= alloc.bytes_per_partition() && *offset <= alloc.bytes_per_partition()) {
    block = alloc.allocate_at(0, np, static_cast<uint32_t>(*offset), static_cast<uint32_t>(bytes));
    if (!block)
      throw InputError(
          fmt::format("{}: {} tile '{}' [{} x {} B] at byte {}: that space is taken (or not on "
                      "the {} B granule)",
                      where(loc), sp, name, np, bytes, *offset, alloc.granule()));
  } else if (bytes <= alloc.bytes_per_partition() && !offset) {
    block = alloc.allocate(0, np, static_cast<uint32_t>(bytes));
  }
  if (!block)
    throw InputError(
        fmt::format("{}: {} tile '{}' [{} x {} B] does not fit: {} B free in partitions 0-{} "
                    "({} B per partition, {} tiles live)",
                    where(loc), sp, name, np, bytes, alloc.largest_free(0, np), np - 1,
                    alloc.bytes_per_partition(), alloc.live()));
  auto st = std::make_shared<detail::Storage>();
  st->allocator = space == isa::MemSpace::SBUF ? sbuf_alloc_ : psum_alloc_;
  st->block = block->id;
  st->name = name;
  const auto [at, fresh] = shared_.tile_locs.try_emplace(name, loc);
  if (!fresh && at->second &&
      (at->second->line() != loc.line() || std::strcmp(at->second->file_name(), loc.file_name()) != 0))
    at->second.reset();
  if (whole_tile) {
    st->whole_partitions = shape[0];
    st->whole_lo = block->offset;
    st->whole_hi = block->offset + bytes;
  }
  View v;
  v.storage_ = std::move(st);
  v.owner_ = this;
  v.serial_ = serial_;
  v.space_ = space;
  v.dtype_ = dtype;
  v.offset_bytes_ = block->offset;
  v.dims_.push_back({0, shape[0]});
  int64_t stride = free;
  for (size_t i = 1; i < shape.size(); ++i) {
    stride /= shape[i];
    v.dims_.push_back({stride, shape[i]});
  }
  return v;
}

}  // namespace trnsim::kernels
