// Kernel's emit path (dependencies into semaphore waits, DMA queues, phases, source lines) and
// build_program; its memory is in kernel_memory.cpp, its unwritten-byte warnings in kernel_written.cpp.
#include "kernels/api/kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include "kernels/api/kernel_shared.h"
#include "sim/base/address_limit.h"
#include "sim/base/error.h"
#include "sim/isa/names.h"
#include "sim/isa/opcode_table.h"
#include "sim/isa/opcodes.h"

namespace trnsim::kernels {
namespace {

// Instructions each stream of the first core reserves address space for (build_program).
constexpr uint64_t kFirstReserve = uint64_t{1} << 18;
// Instructions a stream that outgrew it reserves ahead at most (about 1.2 GB of address space).
constexpr size_t kGrowthReserve = size_t{1} << 21;

// Instruction slots of a stream mapped at a time ahead of the builder (prefault_ahead: about 1.1 MB).
constexpr size_t kPrefaultSlots = 2048;

constexpr int64_t kSbufAlign = 64;

// emit()'s access states: not tracked (no valid view, or an untracked input read), tracked, or already
// collected and recorded.
constexpr char kSkipped = 0, kTracked = 1, kRecorded = 2;

// Whether tracked access i's rectangle meets no other tracked access's of the instruction in its space. Then
// its collect and record are one walk wherever they happen: its record cannot drop or add a record another
// access's collect would see (a dropped record lies inside it), nor theirs one its collect would.
bool apart(const Access* accesses, const std::vector<View::Region>& regions, const std::vector<char>& state,
           size_t i) {
  const View::Region& r = regions[i];
  const isa::MemSpace space = accesses[i].view->space();
  for (size_t j = 0; j < state.size(); ++j) {
    if (j == i || state[j] == kSkipped) continue;
    const View::Region& o = regions[j];
    if (accesses[j].view->space() == space && o.space_id == r.space_id &&
        Rect{r.r0, r.r1, r.c0, r.c1}.overlaps({o.r0, o.r1, o.c0, o.c1}))
      return false;
  }
  return true;
}

std::atomic<uint64_t> g_serial{0};
thread_local Kernel* t_current = nullptr;

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

// A C++ kernel's file as the compiler names it (absolute, or relative to the build folder where ccache's
// CCACHE_BASEDIR rewrote it) made relative to the source tree, so that programs, traces and stats.json of
// one commit have the same bytes wherever it was built. A Python kernel's file is kept as it was given.
namespace {
std::string source_relative(const char* file) {
  const std::string_view f(file);
  if (f.ends_with(".py")) return std::string(f);
  for (std::string_view tree :
       {std::string_view(TRNSIM_KERNEL_TREE), std::string_view(TRNSIM_KERNEL_TREE_FROM_BUILD)})
    if (f.size() > tree.size() + 1 && f.substr(0, tree.size()) == tree && f[tree.size()] == '/')
      return std::string(f.substr(tree.size() + 1));
  return std::string(f);
}
}  // namespace

isa::SourceLoc Kernel::intern(const Loc& loc) {
  if (loc.file_name() != last_file_) {
    auto [at, new_pointer] = shared_.file_by_pointer.try_emplace(loc.file_name(), 0);
    if (new_pointer) {
      auto [it, fresh] = shared_.files.try_emplace(loc.file_name(), 0);
      if (fresh) {
        it->second = static_cast<uint32_t>(shared_.program.files.size());
        shared_.program.files.emplace_back(source_relative(loc.file_name()));
      }
      at->second = it->second;
    }
    last_file_ = loc.file_name();
    last_file_index_ = at->second;
  }
  return {last_file_index_, loc.line()};
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

void Kernel::record_sendrecv(const View& src, const View& dst, const InstRef& transfer, const Loc& loc) {
  shared_.sendrecv_calls[core_].push_back({static_cast<uint64_t>(src.partitions() * src.free_elements()),
                                           static_cast<uint64_t>(dst.partitions() * dst.free_elements()),
                                           src.describe(), dst.describe(), where(loc), transfer});
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
  if (isa::is_dma(inst.op)) {
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
  // Strongest wait per semaphore; same-engine and already-performed waits are implied by program order.
  std::vector<uint32_t>& done = waited_[e];
  Needs& need = sc.need;
  Needs& ls_need = sc.ls_need;
  need.reset(done, e);
  if (split) ls_need.reset(done, e);
  for (const Event& w : extra_waits) need.add(w);
  sc.regions.resize(num_accesses);
  sc.state.assign(num_accesses, kSkipped);
  std::vector<View::Region>& regions = sc.regions;
  std::vector<char>& state = sc.state;
  bool fence = false;
  constexpr size_t kNoFused = ~size_t{0}, kNone = kNoFused - 1;  // not found yet; the first has no collect
  size_t fused = kNoFused;
  const auto record_event = [&](const Access& a) {
    return split && a.load_stationary ? ls_ev : a.as.value_or(ev);
  };
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
        continue;
      }
      if (a.write) {
        fence |= u.untracked_reads;
        u.written = true;
      }
    }
    regions[i] = a.any_row ? a.view->region_any_row(a.any_place) : a.view->region(a.whole_rows);
    state[i] = kTracked;
  }
  for (size_t i = 0; i < num_accesses; ++i) {
    if (state[i] != kTracked) continue;
    const Access& a = accesses[i];
    const View::Region& r = regions[i];
    Needs& to = split && a.load_stationary ? ls_need : need;
    if (a.collect && a.record && apart(accesses, regions, state, i)) {
      tracker_mut(a.view->space())
          .collect_and_record(r.space_id, {r.r0, r.r1, r.c0, r.c1}, a.write, to, record_event(a));
      state[i] = kRecorded;
      continue;
    }
    // The first other access to record, if it collects too, is collected last, with its record in the same
    // walk.
    if (fused == kNoFused && a.record) fused = a.collect ? i : kNone;
    if (a.collect && fused != i)
      tracker(a.view->space()).collect(r.space_id, {r.r0, r.r1, r.c0, r.c1}, a.write, to);
  }
  // Every other access is collected, so this one's record cannot hide from them what they wait for (as
  // record() after all the collects). The instruction's checks come after this record: one that fails ends
  // the build.
  if (fused < num_accesses) {
    const Access& a = accesses[fused];
    const View::Region& r = regions[fused];
    tracker_mut(a.view->space())
        .collect_and_record(r.space_id, {r.r0, r.r1, r.c0, r.c1}, a.write,
                            split && a.load_stationary ? ls_need : need, record_event(a));
    state[fused] = kRecorded;
  }

  if (fence) {
    for (int x = 0; x < isa::kNumEngines; ++x)
      if (engine_count_[x] > 0) need.add({static_cast<uint16_t>(x), engine_count_[x]});
    for (size_t q = 0; q < queue_count_.size(); ++q) {
      const uint32_t n = queue_count_[q] - (isa::is_dma(inst.op) && q == inst.dma_queue ? 1 : 0);
      if (n > 0) need.add({static_cast<uint16_t>(kDmaSemBase + q), n});
    }
  }
  // In semaphore order. The LoadStationary's waits come first in the engine's stream, then the
  // MultiplyMoving's (those its LoadStationary waited for as far are implied).
  const auto add_waits = [&](Needs& from, isa::SemWaits& to) {
    for (const Event& d : from.events()) {
      if (d.value <= done[d.sem]) continue;
      to.push_back({d.sem, d.value});
      done[d.sem] = d.value;
    }
  };
  if (split) {
    add_waits(ls_need, inst.waits);
    add_waits(need, inst.mm_waits);
  } else {
    add_waits(need, inst.waits);
  }
  try {
    isa::check(inst, shared_.program, limits_);
  } catch (const RuleError& err) {
    throw RuleError(fmt::format("{}: {}", where(loc), err.what()));
  }

  if (inst.op != isa::Opcode::CoreBarrier) check_written(inst, accesses, num_accesses, loc);

  for (size_t i = 0; i < num_accesses; ++i) {
    const Access& a = accesses[i];
    if (state[i] != kTracked || !a.record) continue;
    const View::Region& r = regions[i];
    tracker_mut(a.view->space()).record(r.space_id, {r.r0, r.r1, r.c0, r.c1}, a.write, record_event(a));
  }
  auto& stream = shared_.program.streams[core_][e];
  // A full stream moves to a new buffer and frees the old one: no range of it may be mapped after that.
  if (stream.size() == stream.capacity()) shared_.prefaulter.drain();
  // A stream that outgrew its reservation (build_program) grows 8x at a time (by at most kGrowthReserve
  // instructions) rather than the vector's 2x: the unused part is address space only, and each growth
  // writes every instruction to fresh pages again.
  if (shared_.reserve_ahead && stream.size() == stream.capacity() && stream.size() >= kFirstReserve)
    stream.reserve(stream.size() + std::min<size_t>(7 * stream.size(), kGrowthReserve));
  stream.push_back(std::move(inst));
  prefault_ahead(stream, e);
  return InstRef{this, static_cast<Engine>(e), static_cast<uint32_t>(stream.size() - 1), ev, ++seq_};
}

// A large program's streams are hundreds of MB of fresh pages: mapping the next slots of the stream's
// reserved buffer in one call costs less than a page fault at each page the instructions reach (issue 27:
// the faults were the larger part of a timing-only build's time writing instructions), and on the
// prefaulter's thread it overlaps the building.
void Kernel::prefault_ahead(std::vector<isa::Instruction>& stream, int e) {
  if (stream.data() != mapped_buffer_[e]) {  // the first instruction, or the stream moved (grew)
    mapped_buffer_[e] = stream.data();
    mapped_slots_[e] = stream.size();
  }
  // One to two blocks of slots ahead: the prefaulter's thread maps the next block while this one is written.
  if (stream.size() + kPrefaultSlots < mapped_slots_[e]) return;
  const size_t from = mapped_slots_[e], to = std::min(stream.capacity(), from + kPrefaultSlots);
  if (to <= from) return;
  shared_.prefaulter.request(stream.data() + from, (to - from) * sizeof(isa::Instruction));
  mapped_slots_[e] = to;
}

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

namespace {

// The n-th transfer of a core lands in the dst of the peer's n-th sendrecv: the element counts must agree
// both ways (isa::check compared each call's own src and dst), else the transfer would write past the peer's
// dst. Each transfer's dst operand is then the peer's dst, wherever the peer allocated it.
void pair_sendrecvs(Kernel::Shared& shared) {
  const auto& calls = shared.sendrecv_calls;
  for (size_t n = 0; n < calls[0].size() && n < calls[1].size(); ++n)
    for (int c = 0; c < 2; ++c) {
      const Kernel::Shared::SendRecvCall& from = calls[c][n];
      const Kernel::Shared::SendRecvCall& to = calls[1 - c][n];
      if (from.src_elements != to.dst_elements)
        throw RuleError(fmt::format(
            "{}: sendrecv: element count: sendrecv {} of core {} sends src {} ({} elements) to core {}, "
            "whose "
            "sendrecv {} at {} receives into dst {} ({} elements); the two cores' n-th sendrecvs must move "
            "as many elements each way",
            from.at, n + 1, c, from.src, from.src_elements, 1 - c, n + 1, to.at, to.dst, to.dst_elements));
    }
  if (shared.declare_only) return;  // nothing was emitted
  for (size_t n = 0; n < calls[0].size() && n < calls[1].size(); ++n) {
    const InstRef& t0 = calls[0][n].transfer;
    const InstRef& t1 = calls[1][n].transfer;
    std::swap(shared.program.streams[0][static_cast<int>(t0.engine)][t0.index].ops[0],
              shared.program.streams[1][static_cast<int>(t1.engine)][t1.index].ops[0]);
  }
}

}  // namespace

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
  forget_assumed_written();  // a declaration build's, never taken
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
    // The reservations are deliberately not advised as transparent huge pages (MADV_HUGEPAGE): on a VM that
    // reports free memory to its host (virtio free page reporting, as on the 2-core machine issue 27's
    // targets are measured on), a fresh 2 MiB page comes from blocks the host took back, and zeroing it costs
    // host faults for all of it. Advised, that zeroing was 28 % of the DeepSeek-V3 backward's timing-only
    // run, 2.4 % without: 4 KiB pages are more often ones the guest freed lately and the host still backs.
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
      if (parts.empty()) parts.push_back("0 core_barrier");  // (each core's count of each call kind)
      parts.push_back(fmt::format("{} sendrecv", s.second));
      return fmt::format("{}", fmt::join(parts, ", "));
    };
    throw InputError(
        fmt::format("the two cores must make the same cross-core calls (control flow must match): "
                    "core 0 made {}; core 1 made {}",
                    describe(sync[0]), describe(sync[1])));
  }
  pair_sendrecvs(shared);
  if (!options.declare_only) shared.program.checked_limits = l;  // emit() checked every instruction
  for (const auto& [index, w] : shared.output_writes) {
    const std::string msg = unwritten_output_warning(shared.program.tensors[index], w.at, w.bytes, w.written);
    if (!msg.empty() && shared.warnings.size() < KernelBuild::kMaxWarnings) shared.warnings.push_back(msg);
  }
  if (shared.warned_at.size() > KernelBuild::kMaxWarnings)
    shared.warnings.push_back(fmt::format("and {} more source lines read memory no instruction wrote",
                                          shared.warned_at.size() - KernelBuild::kMaxWarnings));
  return KernelBuild{std::move(shared.program), std::move(shared.inputs), std::move(shared.outputs),
                     std::move(shared.allocations), std::move(shared.warnings)};
}

}  // namespace trnsim::kernels
