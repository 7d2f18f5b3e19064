#include "kernels/api/kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <map>
#include <set>

#include "kernels/api/assume_written.h"
#include "sim/base/address_limit.h"
#include "sim/base/error.h"
#include "sim/io/output_name.h"
#include "sim/isa/names.h"
#include "sim/isa/opcodes.h"

namespace trnsim::kernels {

struct Kernel::Shared {
  uint64_t max_instructions = 0;
  uint64_t instructions = 0;
  bool declare_only = false;
  // Streams reserve address space ahead (build_program): no address-space limit (ulimit -v) is set.
  bool reserve_ahead = false;
  double hbm_bytes = 0;  // HBM tensors declared so far
  isa::Program program;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, int> kinds;  // tensor name -> 0 input, 1 output, 2 scratch
  std::map<std::string, uint32_t> files;
  std::map<std::string, uint16_t> phases;
  std::vector<AllocationRecord> allocations;
  std::vector<std::string> warnings;
  std::set<std::string> warned_at;  // source lines warned about (both cores' reads are one mistake)
  // BuildOptions::warn_unwritten_outputs: what each output tensor (by tensor index) had written, both cores.
  struct OutputWrites {
    std::string at;  // its declaration's source line
    int64_t bytes = 0, row_bytes = 1;
    ByteSpans written;
  };
  bool warn_unwritten_outputs = false;
  std::map<uint32_t, OutputWrites> output_writes;
};

namespace {

enum Kind { kInput = 0, kOutput = 1, kScratch = 2 };
const char* kind_str(int k) {
  return k == kInput ? "input" : k == kOutput ? "output" : "scratch";
}

// Instructions each stream of the first core reserves address space for (build_program).
constexpr uint64_t kFirstReserve = uint64_t{1} << 18;
// Instructions a stream that outgrew it reserves ahead at most (about 1.2 GB of address space).
constexpr size_t kGrowthReserve = size_t{1} << 21;

constexpr int64_t kSbufAlign = 64;
// Banks a Trn2 PSUM tile may span (8 KiB per partition): a Vector/Scalar access of PSUM covers at most 4K
// elements per partition (NKI architecture guide, SBUF/PSUM access rules), 4 banks of 2-byte values.
constexpr int64_t kTrn2PsumTileBanks = 4;

std::atomic<uint64_t> g_serial{0};
thread_local Kernel* t_current = nullptr;
// assume_written's views not yet marked: (kernel serial, space, region); Kernel::check_written takes them.
struct Assumed {
  uint64_t serial;
  isa::MemSpace space;
  View::Region region;
};
thread_local std::vector<Assumed> t_assumed;

// Sets the current kernel context for the duration of one kernel function call.
struct CurrentGuard {
  explicit CurrentGuard(Kernel* k) : prev(t_current) { t_current = k; }
  ~CurrentGuard() { t_current = prev; }
  Kernel* prev;
};

}  // namespace

isa::Limits default_limits(Generation g) {
  isa::Limits l;
  l.generation = g;
  l.sbuf_bytes_per_partition = g == Generation::Trn3   ? 256 * 1024
                               : g == Generation::Trn1 ? 192 * 1024
                                                       : 224 * 1024;
  l.hbm_bytes = g == Generation::Trn3   ? uint64_t{36} << 30
                : g == Generation::Trn1 ? uint64_t{32} << 30
                                        : uint64_t{24} << 30;
  return l;
}

std::string where(const Loc& loc) {
  std::string f = loc.file_name();
  const size_t slash = f.find_last_of('/');
  if (slash != std::string::npos) f = f.substr(slash + 1);
  return fmt::format("{}:{}", f, loc.line());
}

void InstRef::depends_on(const InstRef& earlier, Loc loc) const {
  if (kernel == nullptr || earlier.kernel != kernel)
    throw InputError(where(loc) + ": depends_on: both instructions must come from the same core's kernel");
  if (earlier.seq >= seq)
    throw InputError(where(loc) + ": depends_on: the instruction waited for must be emitted first");
  kernel->add_wait(*this, earlier.done);
}

Kernel::Kernel(Shared& shared, int core, int num_programs, const isa::Limits& limits)
    : shared_(shared),
      serial_(++g_serial),
      core_(core),
      num_programs_(num_programs),
      limits_(limits),
      sbuf_alloc_(
          std::make_shared<Allocator>(limits.partitions, limits.sbuf_bytes_per_partition, kSbufAlign)),
      psum_alloc_(std::make_shared<Allocator>(limits.partitions, limits.psum_bytes_per_partition,
                                              limits.psum_bank_bytes)),
      sbuf_deps_(128, 2048),
      psum_deps_(128, limits.psum_bank_bytes),
      hbm_deps_(128, 64 * 1024),
      queue_count_(limits.num_dma_queues, 0),
      queue_owner_(limits.num_dma_queues, -1) {
  for (auto& w : waited_) w.assign(limits.num_semaphores, 0);
}

PhaseScope::PhaseScope(Kernel& k, const std::string& name)
    : k_(k), prev_(k.set_phase(k.intern_phase(name))) {}
PhaseScope::~PhaseScope() {
  k_.set_phase(prev_);
}

uint16_t Kernel::intern_phase(const std::string& name) {
  if (name.empty()) return 0;
  auto [it, fresh] = shared_.phases.try_emplace(name, 0);
  if (fresh) {
    if (shared_.program.phases.size() >= 65535) throw InputError("a kernel may name at most 65534 phases");
    it->second = static_cast<uint16_t>(shared_.program.phases.size());
    shared_.program.phases.push_back(name);
  }
  return it->second;
}

Kernel* Kernel::current() {
  return t_current;
}

bool Kernel::declare_only() const {
  return shared_.declare_only;
}

const RegionTracker& Kernel::tracker(isa::MemSpace s) const {
  return s == isa::MemSpace::SBUF ? sbuf_deps_ : s == isa::MemSpace::PSUM ? psum_deps_ : hbm_deps_;
}

RegionTracker& Kernel::tracker_mut(isa::MemSpace s) {
  return s == isa::MemSpace::SBUF ? sbuf_deps_ : s == isa::MemSpace::PSUM ? psum_deps_ : hbm_deps_;
}

isa::SourceLoc Kernel::intern(const Loc& loc) {
  if (loc.file_name() != last_file_) {
    auto [it, fresh] = shared_.files.try_emplace(loc.file_name(), 0);
    if (fresh) {
      it->second = static_cast<uint32_t>(shared_.program.files.size());
      shared_.program.files.emplace_back(loc.file_name());
    }
    last_file_ = loc.file_name();
    last_file_index_ = it->second;
  }
  return {last_file_index_, loc.line()};
}

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

uint64_t Kernel::instructions_left() const {
  return shared_.instructions >= shared_.max_instructions ? 0
                                                          : shared_.max_instructions - shared_.instructions;
}

void Kernel::fail_instruction_limit(const Loc& loc) const {
  throw InputError(fmt::format(
      "{}: the kernel emits more than {} instructions (the build's limit, max_instructions: about {:.3g} GB "
      "of program): the shapes are too large to simulate, or the kernel loops without end; use smaller "
      "shapes or larger tiles/blocks, or raise the workload's \"max_instructions\"",
      where(loc), shared_.max_instructions, static_cast<double>(shared_.max_instructions) * 512 / 1e9));
}

void Kernel::track_rows_together(const View& t) {
  if (t.space() != isa::MemSpace::HBM)
    throw InputError(fmt::format("track_rows_together: {} is not in HBM", t.describe()));
  const auto& shape = shared_.program.tensors.at(t.tensor()).shape;
  // One chunk of all rows (a power of two, like every HBM chunk size: see make_hbm).
  hbm_deps_.set_chunks(
      t.tensor(), static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(shape.empty() ? 1 : shape[0]))),
      hbm_deps_.byte_chunk(t.tensor()));
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
    auto& list = kind == kInput ? shared_.inputs : shared_.outputs;
    if (kind != kScratch && std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
    if (kind == kOutput && shared_.warn_unwritten_outputs) {
      Shared::OutputWrites& w = shared_.output_writes[index];
      w.at = where(loc);
      w.bytes = static_cast<int64_t>(bytes);
      w.row_bytes = elem_bytes(dtype);
      for (size_t i = shape.size() >= 2 ? 1 : 0; i < shape.size(); ++i) w.row_bytes *= shape[i];
    }
  }
  // Chunks of about 8 MiB: fewer rows per chunk when rows are long (e.g. [N, I, B] checkpoints, one block
  // per row), so accesses to different rows keep to their own buckets, and at most 8 byte chunks per row
  // (at least 64 KiB), so an access spanning a megabyte row visits a few buckets. Rows per chunk: at most
  // 128 unless the tensor has more than 64 x 128 short rows (e.g. [T*E, 1] affinities), then as many as
  // keep it to 64 row chunks, so an access to every row (an indirect DMA) visits 64 buckets, not thousands.
  // Both rounded up to powers of two: the tracker then finds an access's chunks by shifts, not divisions.
  {
    int64_t row_bytes = elem_bytes(dtype);
    for (size_t i = 1; i < shape.size(); ++i) row_bytes *= shape[i];
    row_bytes = std::max<int64_t>(1, row_bytes);
    const int64_t rows = shape.size() >= 2 ? shape[0] : 1;
    const auto pow2 = [](int64_t v) { return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(v))); };
    hbm_deps_.set_chunks(index,
                         pow2(std::clamp<int64_t>((int64_t{8} << 20) / row_bytes, 1,
                                                  std::max<int64_t>(128, (rows + 63) / 64))),
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

uint8_t Kernel::pick_queue(Engine engine, int queue, const Loc& loc) {
  const int e = static_cast<int>(engine);
  const int nq = static_cast<int>(limits_.num_dma_queues);
  if (queue >= 0) {
    if (queue >= nq)
      throw InputError(fmt::format("{}: DMA queue {} out of range 0-{}", where(loc), queue, nq - 1));
    if (queue_owner_[queue] >= 0 && queue_owner_[queue] != e)
      throw InputError(fmt::format("{}: DMA queue {} is already used by {}; a queue has one issuing engine",
                                   where(loc), queue,
                                   isa::engine_name(static_cast<Engine>(queue_owner_[queue]))));
    queue_owner_[queue] = e;
    return static_cast<uint8_t>(queue);
  }
  int lo, hi;
  switch (engine) {
    case Engine::SP:
      lo = 0, hi = nq / 2;
      break;
    case Engine::ACT:
      lo = nq / 2, hi = 3 * nq / 4;
      break;
    case Engine::POOL:
      lo = 3 * nq / 4, hi = nq;
      break;
    default:
      throw InputError(fmt::format("{}: DMAs are triggered from SP, ACT or POOL, not {}", where(loc),
                                   isa::engine_name(engine)));
  }
  for (int tries = 0; tries < hi - lo; ++tries) {
    const int q = lo + static_cast<int>(rr_[e]++ % static_cast<uint32_t>(hi - lo));
    if (queue_owner_[q] < 0 || queue_owner_[q] == e) {
      queue_owner_[q] = e;
      return static_cast<uint8_t>(q);
    }
  }
  throw InputError(fmt::format("{}: every default DMA queue of {} is taken by another engine", where(loc),
                               isa::engine_name(engine)));
}

Engine Kernel::use_barrier_engine(std::optional<Engine> requested, const Loc& loc) {
  if (!barrier_engine_) barrier_engine_ = requested.value_or(Engine::POOL);
  if (requested && *requested != *barrier_engine_)
    throw InputError(
        fmt::format("{}: core_barrier on {}: this core's barriers already run on {}; all "
                    "core_barriers (and sendrecv's ready barrier) of a kernel use one engine",
                    where(loc), isa::engine_name(*requested), isa::engine_name(*barrier_engine_)));
  return *barrier_engine_;
}

uint8_t Kernel::sendrecv_queue(Engine engine, int queue, const Loc& loc) {
  if (sendrecv_queue_ < 0) {
    sendrecv_queue_ = pick_queue(engine, queue, loc);
  } else if ((queue >= 0 && queue != sendrecv_queue_) ||
             queue_owner_[sendrecv_queue_] != static_cast<int>(engine)) {
    throw InputError(fmt::format(
        "{}: sendrecv: every sendrecv of a core uses one queue and engine (queue {} on {} "
        "so far), so the peer's completions arrive in order",
        where(loc), sendrecv_queue_, isa::engine_name(static_cast<Engine>(queue_owner_[sendrecv_queue_]))));
  }
  return static_cast<uint8_t>(sendrecv_queue_);
}

InstRef Kernel::emit(isa::Instruction&& inst, const Access* accesses, size_t num_accesses, const Loc& loc,
                     const std::vector<Event>& extra_waits) {
  // A declaration build emits nothing: a placeholder reference (its event is never waited for).
  if (shared_.declare_only) return InstRef{this, inst.engine, 0, Event{}, ++seq_};
  if (++shared_.instructions > shared_.max_instructions) fail_instruction_limit(loc);
  const int e = static_cast<int>(inst.engine);
  Event ev;
  if (inst.is_dma()) {
    ev = {static_cast<uint16_t>(kDmaSemBase + inst.dma_queue), ++queue_count_[inst.dma_queue]};
  } else {
    ev = {static_cast<uint16_t>(e), ++engine_count_[e]};
  }
  inst.updates.insert(inst.updates.begin(), isa::SemUpdate{ev.sem, 1, false});
  inst.loc = intern(loc);
  inst.phase = phase_;

  // PE matmuls and transposes: the LoadStationary's accesses have their own waits and event.
  const bool split = std::any_of(accesses, accesses + num_accesses, [](const Access& a) {
    return a.load_stationary && a.view != nullptr && a.view->valid();
  });
  Event ls_ev;
  if (split) {
    ls_ev = {kPeLoadStationarySem, ++ls_count_};
    inst.ls_updates.push_back(isa::SemUpdate{kPeLoadStationarySem, 1, false});
  }
  EmitScratch& sc = scratch_;
  std::vector<Event>& deps = sc.deps;
  std::vector<Event>& ls_deps = sc.ls_deps;
  deps.assign(extra_waits.begin(), extra_waits.end());
  ls_deps.clear();
  sc.regions.resize(num_accesses);
  sc.untracked.assign(num_accesses, 0);
  std::vector<View::Region>& regions = sc.regions;
  std::vector<char>& untracked = sc.untracked;
  bool fence = false;
  for (size_t i = 0; i < num_accesses; ++i) {
    const Access& a = accesses[i];
    if (a.view == nullptr || !a.view->valid()) continue;
    if (a.view->kernel_serial() != serial_)
      throw InputError(
          fmt::format("{}: {} belongs to another core's kernel context", where(loc), a.view->describe()));
    if (a.view->space() == isa::MemSpace::HBM && a.view->tensor() < hbm_use_.size()) {
      // A read of an input nothing wrote yet waits for nothing and is not recorded (a weight read in every
      // block would otherwise pile up records); the first write after such reads waits for everything.
      HbmUse& u = hbm_use_[a.view->tensor()];
      if (!a.write && u.input && !u.written) {
        u.untracked_reads = true;
        untracked[i] = 1;
        continue;
      }
      if (a.write) {
        fence |= u.untracked_reads;
        u.written = true;
      }
    }
    regions[i] = a.any_row ? a.view->region_any_row() : a.view->region(a.whole_rows);
    const View::Region& r = regions[i];
    if (a.collect)
      tracker(a.view->space())
          .collect(r.space_id, {r.r0, r.r1, r.c0, r.c1}, a.write,
                   split && a.load_stationary ? ls_deps : deps);
  }

  if (fence) {
    for (int x = 0; x < isa::kNumEngines; ++x)
      if (engine_count_[x] > 0) deps.push_back({static_cast<uint16_t>(x), engine_count_[x]});
    for (size_t q = 0; q < queue_count_.size(); ++q) {
      const uint32_t n = queue_count_[q] - (inst.is_dma() && q == inst.dma_queue ? 1 : 0);
      if (n > 0) deps.push_back({static_cast<uint16_t>(kDmaSemBase + q), n});
    }
  }
  // Strongest wait per semaphore, in semaphore order; same-engine and already-performed waits are implied by
  // program order. The LoadStationary's waits come first in the engine's stream, then the MultiplyMoving's.
  std::vector<uint32_t>& done = waited_[e];
  if (sc.need.size() < done.size()) sc.need.assign(done.size(), 0);
  const auto add_waits = [&](const std::vector<Event>& from, isa::SemWaits& to) {
    sc.need_sems.clear();
    for (const Event& d : from) {
      if (d.sem == e || d.sem >= done.size() || d.value <= done[d.sem]) continue;
      uint32_t& v = sc.need[d.sem];
      if (v == 0) sc.need_sems.push_back(d.sem);
      v = std::max(v, d.value);
    }
    std::sort(sc.need_sems.begin(), sc.need_sems.end());
    for (const uint16_t sem : sc.need_sems) {
      to.push_back({sem, sc.need[sem]});
      done[sem] = sc.need[sem];
      sc.need[sem] = 0;
    }
  };
  if (split) {
    add_waits(ls_deps, inst.waits);
    add_waits(deps, inst.mm_waits);
  } else {
    add_waits(deps, inst.waits);
  }
  try {
    isa::check(inst, shared_.program, limits_);
  } catch (const RuleError& err) {
    throw RuleError(fmt::format("{}: {}", where(loc), err.what()));
  }

  if (inst.op != isa::Opcode::CoreBarrier) check_written(inst, accesses, num_accesses, loc);

  for (size_t i = 0; i < num_accesses; ++i) {
    const Access& a = accesses[i];
    if (a.view == nullptr || !a.view->valid() || !a.record || untracked[i]) continue;
    const View::Region& r = regions[i];
    const Event rec_ev = split && a.load_stationary ? ls_ev : a.as.value_or(ev);
    tracker_mut(a.view->space()).record(r.space_id, {r.r0, r.r1, r.c0, r.c1}, a.write, rec_ev);
  }
  auto& stream = shared_.program.streams[core_][e];
  // A stream that outgrew its reservation (build_program) grows 8x at a time (by at most kGrowthReserve
  // instructions) rather than the vector's 2x: the unused part is address space only, and each growth
  // writes every instruction to fresh pages again.
  if (shared_.reserve_ahead && stream.size() == stream.capacity() && stream.size() >= kFirstReserve)
    stream.reserve(stream.size() + std::min<size_t>(7 * stream.size(), kGrowthReserve));
  stream.push_back(std::move(inst));
  return InstRef{this, static_cast<Engine>(e), static_cast<uint32_t>(stream.size() - 1), ev, ++seq_};
}

void assume_written(const View& v) {
  if (!v.valid() || (v.space() != isa::MemSpace::SBUF && v.space() != isa::MemSpace::PSUM)) return;
  t_assumed.push_back({v.kernel_serial(), v.space(), v.region()});
}

void Kernel::warn(const std::string& at, const std::string& message) {
  if (!shared_.warned_at.insert(at).second) return;
  if (shared_.warnings.size() < KernelBuild::kMaxWarnings) shared_.warnings.push_back(at + ": " + message);
}

void Kernel::check_written(const isa::Instruction& inst, const Access* accesses, size_t num_accesses,
                           const Loc& loc) {
  const auto map_of = [&](const Access& a) -> WrittenMap* {
    if (a.view == nullptr || !a.view->valid()) return nullptr;
    const isa::MemSpace s = a.view->space();
    return s == isa::MemSpace::SBUF ? &sbuf_written_ : s == isa::MemSpace::PSUM ? &psum_written_ : nullptr;
  };
  for (const Assumed& a : t_assumed) {
    if (a.serial != serial_) continue;
    WrittenMap& m = a.space == isa::MemSpace::SBUF ? sbuf_written_ : psum_written_;
    m.mark({a.region.r0, a.region.r1, a.region.c0, a.region.c1});
  }
  t_assumed.clear();
  // Reads first: an instruction that reads and writes a region (an accumulation) reads what was there.
  for (size_t i = 0; i < num_accesses; ++i) {
    const Access& a = accesses[i];
    WrittenMap* m = a.write ? nullptr : map_of(a);
    if (m == nullptr) continue;
    const View::Region& r = scratch_.regions[i];
    const auto miss = m->first_unwritten({r.r0, r.r1, r.c0, r.c1});
    if (!miss) continue;
    const std::string at = where(loc);
    if (shared_.warned_at.count(at) > 0) continue;  // said once per line (a loop reads it every iteration)
    warn(at, fmt::format(
                 "{} reads {} where no instruction wrote before (partition {}, byte {} of the read is the "
                 "first such): its values are undefined (a tile starts uninitialised, as numpy.empty's "
                 "contents; trnsim's memory starts as NaN)",
                 isa::opcode_name(inst.op), a.view->describe(), miss->first, miss->second - r.c0));
  }
  for (size_t i = 0; i < num_accesses; ++i) {
    const Access& a = accesses[i];
    WrittenMap* m = a.write ? map_of(a) : nullptr;
    if (m == nullptr) continue;
    const View::Region& r = scratch_.regions[i];
    m->mark({r.r0, r.r1, r.c0, r.c1});
  }
  if (shared_.output_writes.empty()) return;
  for (size_t i = 0; i < num_accesses; ++i) {
    const Access& a = accesses[i];
    if (!a.write || a.view == nullptr || !a.view->valid() || a.view->space() != isa::MemSpace::HBM) continue;
    const auto w = shared_.output_writes.find(a.view->tensor());
    if (w == shared_.output_writes.end()) continue;
    // The view's bytes: each contiguous run of its innermost dims, walked over its outer dims. A view of
    // more than kMaxRuns runs, or whose rows are picked at run time (any_row, whole_rows: an indirect or
    // scalar-offset DMA), counts as the bounding span of its region: lenient, never a false warning.
    constexpr int64_t kMaxRuns = 4096;
    const View& v = *a.view;
    ByteSpans& spans = w->second.written;
    if (a.any_row || a.whole_rows) {
      const View::Region& r = scratch_.regions[i];
      const int64_t rb = std::max<int64_t>(1, v.storage_->hbm_row_bytes);
      spans.mark(r.r0 * rb + r.c0, (r.r1 - 1) * rb + r.c1);
      continue;
    }
    const int64_t es = elem_bytes(v.dtype_);
    std::vector<View::D> outer;
    for (const View::D& d : v.dims_)
      if (d.size > 1) outer.push_back(d);
    int64_t run = 1;  // elements
    while (!outer.empty() && outer.back().stride == run) {
      run *= outer.back().size;
      outer.pop_back();
    }
    int64_t runs = 1, lo = 0, hi = 0;
    for (const View::D& d : outer) {
      runs = runs > kMaxRuns ? runs : runs * d.size;
      (d.stride < 0 ? lo : hi) += (d.size - 1) * d.stride;
    }
    if (runs > kMaxRuns) {
      spans.mark(v.offset_bytes_ + lo * es, v.offset_bytes_ + (hi + run) * es);
      continue;
    }
    std::vector<int64_t> idx(outer.size(), 0);
    for (int64_t n = 0; n < runs; ++n) {
      int64_t at = 0;
      for (size_t k = 0; k < outer.size(); ++k) at += idx[k] * outer[k].stride;
      spans.mark(v.offset_bytes_ + at * es, v.offset_bytes_ + (at + run) * es);
      for (size_t k = outer.size(); k-- > 0;) {
        if (++idx[k] < outer[k].size) break;
        idx[k] = 0;
      }
    }
  }
}

namespace {

// "<at>: output 'y' float32 [256, 64]: no instruction writes rows 255 (256 of its 65536 bytes): ..." for an
// output with bytes no instruction writes (BuildOptions::warn_unwritten_outputs); "" when it is all written.
std::string unwritten_output_warning(const isa::TensorDecl& t, const std::string& at, int64_t bytes,
                                     int64_t row_bytes, const ByteSpans& written) {
  const auto gaps = written.gaps(bytes);
  // None missing; or all of it, which the front ends say their own way (an NKI kernel returning a tensor it
  // never writes is an error; simulate_kernel warns about an all-NaN output).
  if (gaps.empty() || (gaps.size() == 1 && gaps[0].second - gaps[0].first == bytes)) return "";
  int64_t missing = 0;
  bool whole_rows = t.shape.size() >= 2;
  for (const auto& [b, e] : gaps) {
    missing += e - b;
    whole_rows = whole_rows && b % row_bytes == 0 && e % row_bytes == 0;
  }
  const int64_t unit = whole_rows ? row_bytes : elem_bytes(t.dtype);
  std::vector<std::string> ranges;
  for (size_t i = 0; i < gaps.size() && i < 3; ++i) {
    const int64_t lo = gaps[i].first / unit, hi = (gaps[i].second + unit - 1) / unit - 1;
    ranges.push_back(lo == hi ? fmt::format("{}", lo) : fmt::format("{}-{}", lo, hi));
  }
  std::string list = fmt::format("{}", fmt::join(ranges, ", "));
  if (gaps.size() > 3) list += fmt::format(" and {} more ranges", gaps.size() - 3);
  const bool one = missing == unit;
  const std::string what = whole_rows
                               ? fmt::format("{} {} of its {}", one ? "row" : "rows", list, t.shape[0])
                               : fmt::format("{} {} (flat index) of its {}", one ? "element" : "elements",
                                             list, bytes / elem_bytes(t.dtype));
  return fmt::format(
      "{}: output '{}' {} [{}]: no instruction writes {} ({} of its {} bytes): those elements keep whatever "
      "HBM held (undefined; trnsim's HBM starts as NaN)",
      at, t.name, dtype_str(t.dtype), fmt::join(t.shape, ", "), what, missing, bytes);
}

}  // namespace

void Kernel::add_wait(const InstRef& later, const Event& ev) {
  if (shared_.declare_only) return;  // nothing was emitted
  isa::Instruction& inst = shared_.program.streams[core_][static_cast<int>(later.engine)][later.index];
  if (ev.sem == static_cast<uint16_t>(later.engine)) return;  // same engine: program order
  // A PE instruction with a split waits for an explicit edge before its LoadStationary (the stricter).
  for (isa::SemWait& w : inst.waits)
    if (w.sem == ev.sem) {
      w.value = std::max(w.value, ev.value);
      return;
    }
  inst.waits.push_back({ev.sem, ev.value});
}

KernelBuild build_program(const KernelFn& fn, const BuildOptions& options) {
  if (options.num_programs != 1 && options.num_programs != 2)
    throw InputError(fmt::format("num_programs must be 1 or 2 (LNC2), got {}", options.num_programs));
  const isa::Limits& l = options.limits;
  if (l.num_semaphores <= kSendRecvDoneSem || kDmaSemBase + l.num_dma_queues > kSendRecvDoneSem)
    throw InputError(
        fmt::format("the builder's semaphore scheme needs {} semaphores and at most {} DMA queues",
                    kSendRecvDoneSem + 1, kSendRecvDoneSem - kDmaSemBase));
  if (l.partitions == 0 || l.partitions > 128 || l.psum_bank_bytes == 0)
    throw InputError("limits: partitions must be 1-128 and psum_bank_bytes positive");
  t_assumed.clear();  // a declaration build's, never taken
  Kernel::Shared shared;
  shared.max_instructions = options.max_instructions;
  shared.declare_only = options.declare_only;
  shared.warn_unwritten_outputs = options.warn_unwritten_outputs && !options.declare_only;
  shared.program.generation = l.generation;
  shared.program.num_cores = options.num_programs;
  shared.program.files = {"?"};
  shared.program.phases = {""};
  std::vector<std::pair<std::array<uint32_t, isa::kNumEngines>, uint32_t>> sync;
  for (int core = 0; core < options.num_programs; ++core) {
    // The second core's streams are usually as long as the first's: reserving that much spares the growing
    // vectors' copies and page faults (a stream of a large kernel holds hundreds of MB). The first core's
    // streams reserve address space for kFirstReserve instructions: the host maps a page only when an
    // instruction is written to it, so the unused part costs nothing, while each doubling of a growing
    // vector would write its instructions to fresh pages again (a quarter of the page faults of the
    // DeepSeek-V3 forward workload).
    // Under an address-space limit (ulimit -v) the reservation itself would fail: nothing is reserved then.
    const bool unlimited = !address_space_limit();
    shared.reserve_ahead = unlimited;
    for (int e = 0; e < isa::kNumEngines && !options.declare_only && (core > 0 || unlimited); ++e)
      shared.program.streams[core][e].reserve(
          core > 0 ? shared.program.streams[0][e].size()
                   : static_cast<size_t>(std::min(options.max_instructions, kFirstReserve)));
    Kernel k(shared, core, options.num_programs, l);
    CurrentGuard guard(&k);
    fn(k);
    sync.emplace_back(k.barriers(), k.sendrecvs());
  }
  if (sync.size() == 2 && sync[0] != sync[1]) {
    const auto describe = [](const auto& s) {
      std::vector<std::string> parts;
      for (int e = 0; e < isa::kNumEngines; ++e)
        if (s.first[e] > 0)
          parts.push_back(
              fmt::format("{} core_barrier on {}", s.first[e], isa::engine_name(static_cast<Engine>(e))));
      parts.push_back(fmt::format("{} sendrecv", s.second));
      return fmt::format("{}", fmt::join(parts, ", "));
    };
    throw InputError(
        fmt::format("the two cores must make the same cross-core calls (control flow must match): "
                    "core 0 made {}; core 1 made {}",
                    describe(sync[0]), describe(sync[1])));
  }
  if (!options.declare_only) shared.program.checked_limits = l;  // emit() checked every instruction
  for (const auto& [index, w] : shared.output_writes) {
    const std::string msg =
        unwritten_output_warning(shared.program.tensors[index], w.at, w.bytes, w.row_bytes, w.written);
    if (!msg.empty() && shared.warnings.size() < KernelBuild::kMaxWarnings) shared.warnings.push_back(msg);
  }
  if (shared.warned_at.size() > KernelBuild::kMaxWarnings)
    shared.warnings.push_back(fmt::format("and {} more source lines read memory no instruction wrote",
                                          shared.warned_at.size() - KernelBuild::kMaxWarnings));
  return KernelBuild{std::move(shared.program), std::move(shared.inputs), std::move(shared.outputs),
                     std::move(shared.allocations), std::move(shared.warnings)};
}

}  // namespace trnsim::kernels
