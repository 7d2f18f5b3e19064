// The kernel builder: runs C++ kernel code once per physical core (SPMD over the LNC2 pair) and turns its
// op calls (kernels/api/nki.h) into an isa::Program, with the semaphore waits inserted automatically.
//
//   KernelBuild b = build_program([](Kernel& k) {
//     View x = k.input("x", DType::BF16, {256, 512});
//     View t = k.sbuf({128, 512}, DType::BF16, "t");
//     nki::dma_copy(t, x(S(128 * k.program_id(), 128 * (k.program_id() + 1))));
//     ...
//   }, {.limits = default_limits(Generation::Trn2), .num_programs = 2});
//
// Memory: k.sbuf()/k.psum() allocate tiles of [partitions, free...] (partitions <= 128, starting at
// partition 0) from per-core allocators sized by isa::Limits. SBUF tiles are 64-byte aligned; PSUM tiles take
// whole 2 KiB banks. A PSUM tile may span several banks: on Trn3 any number (multi-bank matmul); on Trn2 up
// to 4 (8 KiB per partition) for Vector/Scalar access, with whole-tile dependencies (any access to it waits
// as if it touched the whole tile; a matmul output must still stay inside one bank, isa::check). A tile that
// does not fit is an InputError naming the kernel line. Storage is released when the last view of the tile is
// destroyed.
// Allocation semantics (pool.h): a tile made once with k.sbuf()/k.psum() outside the loops is one buffer,
// reused by every iteration (each write waits for the previous iteration's reads); a tile allocated inside a
// loop is a k.sbuf_pool()/psum_pool() whose next() rotates over its buffers: as many as the compiler's
// allocation rule gives the site (alloc_rule.h, an InLoop), or an explicit `bufs` (direct allocation, a
// what-if). Each site's choice is in KernelBuild::allocations (stats.json "allocations").
// Program order (schedule.h): instructions are emitted in the order the kernel calls the ops, and each engine
// runs its stream in that order. A kernel that ports NKI code emits in the order the NKI compiler's schedule
// gives (pipelined_loop: the next iteration's loads ahead of this iteration's stores); the builder never
// reorders.
// HBM tensors: input()/output() are shared by both cores (declaring the same name again on the other core
// returns the same tensor; shape and dtype must agree); scratch() is shared or private to each core.
//
// Dependencies: see deps.h for the semaphore scheme and the regions. Every op records its reads and writes
// and waits (RAW, WAR, WAW) for the last conflicting instructions of this core. Only the strongest wait per
// semaphore is kept, and a wait the same issuing engine already performed is not repeated. Ordering HBM
// accesses between the two cores needs core_barrier. InstRef::depends_on adds an explicit edge.
//
// DMA queues (16 per core, shared by its DMA engines): a queue is used by one issuing engine only (so its
// completions count in program order); by default SP round-robins over queues 0-7, ACT over 8-11 and
// POOL over 12-15. An explicit queue must not already belong to another issuing engine.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/alloc.h"
#include "kernels/api/alloc_rule.h"
#include "kernels/api/deps.h"
#include "kernels/api/pool.h"
#include "kernels/api/view.h"
#include "kernels/api/written.h"
#include "sim/isa/instruction.h"
#include "sim/isa/semantics.h"

namespace trnsim::kernels {

using isa::DType;
using isa::Engine;
using isa::Generation;

// A kernel source location: the file and line of the op call, recorded in each instruction (isa::SourceLoc)
// and named in errors. C++ kernels get it from the call site (`Loc loc = Loc::current()` as a default
// argument, like std::source_location); the Python bindings make one from the Python file and line of the
// nki call. `file` must stay valid for the life of the process (a string literal, or a name interned by the
// bindings): the builder keeps the pointer.
class Loc {
 public:
  static constexpr Loc current(const char* file = __builtin_FILE(),
                               uint32_t line = __builtin_LINE()) noexcept {
    return Loc(file, line);
  }
  constexpr Loc(const char* file, uint32_t line) noexcept : file_(file), line_(line) {}
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr uint32_t line() const noexcept { return line_; }

 private:
  const char* file_;
  uint32_t line_;
};

// isa::Limits with the documented sizes of a generation: SBUF per partition Trn1 192 KiB, Trn2 224 KiB, Trn3
// 256 KiB; HBM a kernel may use Trn1 32 GiB (one chip, two cores), Trn2 24 GiB, Trn3 36 GiB.
isa::Limits default_limits(Generation g);

struct BuildOptions {
  isa::Limits limits = default_limits(Generation::Trn2);
  int num_programs = 1;  // 1 (one physical core) or 2 (LNC2: the kernel runs on both cores)
  // Instructions a build may emit (both cores): a program of ~0.5 KB per instruction beyond this would
  // exhaust the host's memory, so the build stops with an InputError naming the kernel line instead.
  uint64_t max_instructions = 4'000'000;
  // The values of the inputs a kernel's build reads (KernelPackage::build_reads: small integer tensors that
  // bound an on-device loop, e.g. a token count), by input name, flattened. Absent (a build outside a
  // workload): the build emits the largest trip count.
  std::map<std::string, std::vector<int64_t>> input_values{};
  // A declaration build: the kernel function runs for its HBM tensor declarations only (KernelBuild's
  // inputs, outputs and Program::tensors), e.g. to learn how to make the inputs a later build reads. Nothing
  // is emitted: Kernel::emit records, tracks and checks nothing (so max_instructions does not apply) and the
  // program's streams stay empty; rule errors surface in the real build. A kernel whose loop count comes
  // from input_values runs that loop zero times here (its declarations must not depend on the count).
  bool declare_only = false;
  // Warn (KernelBuild::warnings, at the output's declaration) about each output tensor some of whose bytes no
  // instruction writes, naming the rows or flat element ranges: they keep whatever HBM held (NaN in trnsim).
  // An output no instruction writes at all is the front ends' to report (an error for an nki.jit kernel).
  // Python kernels set it (a launch grid that does not cover the rows, a loop bound off by one); C++ kernels
  // may leave rows undefined on purpose (an MoE's slots past its token count), so it is off by default.
  bool warn_unwritten_outputs = false;
};

// The program plus which HBM tensors are the kernel's inputs and outputs (by name, in declaration order).
struct KernelBuild {
  isa::Program program;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  // The in-loop allocation sites of core 0 (Kernel::sbuf_pool / psum_pool), in declaration order.
  std::vector<AllocationRecord> allocations;
  // What the kernel did that is legal but most likely a mistake, each starting with its source line: a read
  // of SBUF or PSUM bytes no instruction wrote before (their values are undefined; written.h), an output
  // some of whose bytes no instruction writes (BuildOptions::warn_unwritten_outputs). One per source line,
  // at most kMaxWarnings then a count of the rest.
  std::vector<std::string> warnings;
  static constexpr size_t kMaxWarnings = 10;
};

// "kernel.cpp:42" (file base name and line).
std::string where(const Loc& loc);

class Kernel;

// An emitted instruction, for explicit ordering edges.
struct InstRef {
  Kernel* kernel = nullptr;
  Engine engine = Engine::SP;
  uint32_t index = 0;  // position in the engine's stream
  Event done;          // its completion event
  uint64_t seq = 0;    // emission order on this core

  // Makes this instruction wait for `earlier` (which must have been emitted before it, on the same core).
  void depends_on(const InstRef& earlier, Loc loc = Loc::current()) const;
};

// What an instruction touches, for the dependency tracker.
struct Access {
  const View* view = nullptr;
  bool write = false;
  bool whole_rows = false;    // the indexed HBM side of an indirect DMA
  bool any_row = false;       // the HBM side of a scalar_offset DMA (moved by whole tensor rows at run time)
  bool any_place = false;     // with any_row: moved by a scalar_offset_stride, anywhere in its tensor
  bool collect = true;        // wait for earlier conflicting accesses
  bool record = true;         // later accesses wait for this one
  std::optional<Event> as{};  // recorded with this event instead of the instruction's (e.g. the peer's write)
  // PE: read by the LoadStationary (the stationary operand): its waits are the LoadStationary's
  // (Instruction::waits, the others go to mm_waits), and it is recorded with the LoadStationary's completion
  // (kPeLoadStationarySem), so a later writer waits only until the array has latched it.
  bool load_stationary = false;
};

class Kernel;

// Tags every instruction the kernel emits while it lives with a phase name ("P1", "gate_up", ...): stats.json
// reports the time of each phase. Phases do not nest: a new scope replaces the current phase until it ends.
class PhaseScope {
 public:
  PhaseScope(Kernel& k, const std::string& name);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Kernel& k_;
  uint16_t prev_;
};

// Per-core builder context handed to the kernel function.
class Kernel {
 public:
  int program_id() const { return core_; }
  uint64_t serial() const { return serial_; }  // unique per core context, process-wide
  // BuildOptions::declare_only: this build only declares tensors (emit() records nothing).
  bool declare_only() const;
  // Adds a warning to the build (KernelBuild::warnings): `at` is its source line ("k.py:12"), `message` what
  // follows it. One per source line (both cores' and every iteration's are one mistake).
  void warn(const std::string& at, const std::string& message);
  // The context build_program is currently running the kernel function with (null outside).
  static Kernel* current();
  int num_programs() const { return num_programs_; }
  Generation generation() const { return limits_.generation; }
  const isa::Limits& limits() const { return limits_; }

  // HBM tensors. Shapes are in elements, outermost first; dim 0 becomes the row (partition) axis of views.
  View input(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
             Loc loc = Loc::current());
  View output(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
              Loc loc = Loc::current());
  View scratch(const std::string& name, DType dtype, const std::vector<int64_t>& shape, bool private_to_core,
               Loc loc = Loc::current());
  // Tracks the dependencies of HBM tensor `t` (a view of it) in chunks of all its rows, for a tensor accessed
  // mostly through a scalar_offset (e.g. one expert of a stacked [E, ...] gradient, picked on device): such
  // an access may touch any row and is otherwise looked up in every row chunk. Call before accessing it.
  void track_rows_together(const View& t);

  // The instruction limit (BuildOptions::max_instructions, workload key "max_instructions"): how many more
  // instructions this build may emit (both cores; 0 once at the limit), and the error past it, InputError
  // "<kernel file:line>: the kernel emits more than N instructions (max_instructions ...)". emit() checks
  // each instruction; a front end that records instructions before emitting them (the NKI Python tracer)
  // checks its record against instructions_left() as it grows, so an endless loop stops at the limit.
  uint64_t instructions_left() const;
  [[noreturn]] void fail_instruction_limit(const Loc& loc) const;

  // On-chip tiles: shape = {partitions, free dims...}.
  View sbuf(const std::vector<int64_t>& shape, DType dtype, const std::string& name = "",
            Loc loc = Loc::current());
  View psum(const std::vector<int64_t>& shape, DType dtype, const std::string& name = "",
            Loc loc = Loc::current());
  // A tile at a byte offset the caller planned (the NKI front end's pools, kernels/api/alloc_rule.h
  // plan_pools): SBUF or PSUM, [partitions, free...] from partition 0. InputError naming the tile if any of
  // [offset, offset + bytes) is taken on those partitions, or the offset is not a multiple of the granule.
  View tile_at(isa::MemSpace space, int64_t offset, const std::vector<int64_t>& shape, DType dtype,
               const std::string& name = "", Loc loc = Loc::current());
  // A tile allocated inside a loop (pool.h): buffers of `shape`, named "name[i]", handed out in rotation by
  // next(). With an InLoop the allocation rule (alloc_rule.h) chooses the count from the free space now:
  // the pool holds bufs x loop.tiles tiles. With `bufs` (>= 1) the kernel states it (direct allocation or a
  // what-if). InputError if bufs < 1, the InLoop is malformed or the buffers do not fit.
  TilePool sbuf_pool(const std::vector<int64_t>& shape, DType dtype, const std::string& name,
                     const InLoop& loop, Loc loc = Loc::current());
  TilePool psum_pool(const std::vector<int64_t>& shape, DType dtype, const std::string& name,
                     const InLoop& loop, Loc loc = Loc::current());
  TilePool sbuf_pool(const std::vector<int64_t>& shape, DType dtype, const std::string& name, int64_t bufs,
                     Loc loc = Loc::current());
  TilePool psum_pool(const std::vector<int64_t>& shape, DType dtype, const std::string& name, int64_t bufs,
                     Loc loc = Loc::current());

  // Records an allocation site that the caller placed itself (the NKI front end plans its pools from the
  // whole trace, kernels/api/alloc_rule.h plan_pools, and makes their buffers with sbuf()/psum()): it shows
  // in KernelBuild::allocations like a pool's. Core 0 only; a site recorded again adds its declarations.
  void record_allocation(AllocationRecord r);

  // The sequencer that triggers this kernel's stores (on-chip -> HBM dma_copy) that name no engine or
  // dge_mode; unset: as dma_mode.h resolves them (ACT). A kernel that issues its loads from ACT sets SP here,
  // so a store waiting for compute never holds its loads back.
  void set_store_engine(Engine e) { store_engine_ = e; }
  std::optional<Engine> store_engine() const { return store_engine_; }

  // The Neuron compiler's --disable-dge option (nki.benchmark(additional_compile_opt="--disable-dge"), as
  // the CS149 Trn2 harness compiles its profiled runs): a DMA left to the compiler (dge_mode unknown) uses
  // precomputed descriptors, triggered where the hardware DGE would be (dma_mode.h), as on Trn1. An explicit
  // dge_mode is kept.
  void set_disable_dge(bool on) { disable_dge_ = on; }
  bool disable_dge() const { return disable_dge_; }

  // Builder internals used by the op functions (nki.h).
  InstRef emit(isa::Instruction inst, const std::vector<Access>& accesses, const Loc& loc,
               const std::vector<Event>& extra_waits = {}) {
    return emit(std::move(inst), accesses.data(), accesses.size(), loc, extra_waits);
  }
  InstRef emit(isa::Instruction&& inst, const Access* accesses, size_t num_accesses, const Loc& loc,
               const std::vector<Event>& extra_waits);
  uint8_t pick_queue(Engine engine, int queue, const Loc& loc);
  isa::SourceLoc intern(const Loc& loc);
  void add_wait(const InstRef& later, const Event& ev);
  uint32_t next_barrier(Engine e) { return ++barriers_[static_cast<int>(e)]; }
  // The one engine of this core's core_barriers (and sendrecv ready barriers), fixed by the first call
  // (POOL when the first is a sendrecv): the model pairs the two cores' barriers by count per core, so
  // barriers on two engines could pair out of program order. InputError if `requested` names another.
  Engine use_barrier_engine(std::optional<Engine> requested, const Loc& loc);
  uint32_t next_sendrecv() { return ++sendrecvs_; }
  // Records this core's sendrecv (its transfer instruction) for build_program's pairing of the two cores'
  // calls.
  void record_sendrecv(const View& src, const View& dst, const InstRef& transfer, const Loc& loc);
  // The one queue of this core's sendrecvs (fixed by the first call): InputError if `queue` names another.
  uint8_t sendrecv_queue(Engine engine, int queue, const Loc& loc);
  const std::array<uint32_t, isa::kNumEngines>& barriers() const { return barriers_; }
  uint32_t sendrecvs() const { return sendrecvs_; }
  const RegionTracker& tracker(isa::MemSpace s) const;
  // The phase instructions are tagged with (see PhaseScope); set_phase returns the previous one.
  uint16_t set_phase(uint16_t phase) {
    const uint16_t prev = phase_;
    phase_ = phase;
    return prev;
  }
  uint16_t intern_phase(const std::string& name);

  struct Shared;  // state shared by the cores of one build (program, tensor names, file names)
  Kernel(Shared& shared, int core, int num_programs, const isa::Limits& limits);

 private:
  View make_hbm(const std::string& name, DType dtype, const std::vector<int64_t>& shape, int kind,
                bool private_to_core, const Loc& loc);
  RegionTracker& tracker_mut(isa::MemSpace s);
  // Warns at `loc` about a read of SBUF/PSUM bytes nothing wrote, then marks what the instruction writes.
  void check_written(const isa::Instruction& inst, const Access* accesses, size_t num_accesses,
                     const Loc& loc);
  View make_tile(isa::MemSpace space, const std::vector<int64_t>& shape, DType dtype, const std::string& name,
                 const Loc& loc, std::optional<int64_t> offset = std::nullopt);
  TilePool make_pool(isa::MemSpace space, const std::vector<int64_t>& shape, DType dtype,
                     const std::string& name, int64_t bufs, const Loc& loc);
  TilePool make_loop_pool(isa::MemSpace space, const std::vector<int64_t>& shape, DType dtype,
                          const std::string& name, const InLoop& loop, const Loc& loc);
  TilePool make_explicit_pool(isa::MemSpace space, const std::vector<int64_t>& shape, DType dtype,
                              const std::string& name, int64_t bufs, const Loc& loc);

  Shared& shared_;
  std::optional<Engine> store_engine_;
  bool disable_dge_ = false;
  uint64_t serial_;
  int core_;
  int num_programs_;
  isa::Limits limits_;
  std::shared_ptr<Allocator> sbuf_alloc_;
  std::shared_ptr<Allocator> psum_alloc_;
  RegionTracker sbuf_deps_;
  RegionTracker psum_deps_;
  RegionTracker hbm_deps_;
  WrittenMap sbuf_written_;
  WrittenMap psum_written_;
  std::array<uint32_t, isa::kNumEngines> engine_count_{};
  uint32_t ls_count_ = 0;  // PE LoadStationaries that post kPeLoadStationarySem
  std::vector<uint32_t> queue_count_;
  std::vector<int> queue_owner_;  // issuing engine per queue, -1 = unused
  std::array<uint32_t, isa::kNumEngines> rr_{};
  // waited_[e][sem]: the strongest wait engine e's stream has already performed.
  std::array<std::vector<uint32_t>, isa::kNumEngines> waited_;
  uint64_t seq_ = 0;
  std::array<uint32_t, isa::kNumEngines> barriers_{};
  uint32_t sendrecvs_ = 0;
  int sendrecv_queue_ = -1;
  std::optional<Engine> barrier_engine_;
  int tiles_ = 0;
  uint16_t phase_ = 0;
  // Per HBM tensor on this core: a kernel input (its reads need no tracking until something writes it: the
  // inputs are in place before the program starts), written, and read without records (a later write then
  // waits for everything before it).
  struct HbmUse {
    bool input = false, written = false, untracked_reads = false;
  };
  std::vector<HbmUse> hbm_use_;
  // emit()'s working buffers, kept between calls so emitting an instruction allocates no scratch memory.
  struct EmitScratch {
    Needs need, ls_need;  // the MultiplyMoving's (or the only) waits, the LoadStationary's
    std::vector<View::Region> regions;
    std::vector<char> state;  // per access: skipped, tracked, recorded (kernel.cpp)
  };
  EmitScratch scratch_;
  // intern()'s last file: a Loc's file_name() is one pointer per file (a string literal, or a Python file
  // name interned once by the bindings), so a repeated file is found without a string lookup.
  const char* last_file_ = nullptr;
  uint32_t last_file_index_ = 0;
  // Per engine stream: its buffer and how many instruction slots of it prefault_ahead() mapped so far.
  std::array<const isa::Instruction*, isa::kNumEngines> mapped_buffer_{};
  std::array<size_t, isa::kNumEngines> mapped_slots_{};
  void prefault_ahead(std::vector<isa::Instruction>& stream, int e);
};

using KernelFn = std::function<void(Kernel&)>;

// Runs `fn` once per physical core (program_id 0 .. num_programs-1) and returns the program. Errors from
// kernel code propagate (InputError / RuleError naming the kernel line). Both cores must call core_barrier
// and sendrecv the same number of times.
KernelBuild build_program(const KernelFn& fn, const BuildOptions& options);

}  // namespace trnsim::kernels
