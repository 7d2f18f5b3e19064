// The builder's dependency tracking end to end: small kernels whose result depends on one hazard each (RAW,
// WAR, WAW, PSUM accumulation, a chain over several engines and queues, LNC2 core_barrier and sendrecv),
// run on the SystemC model with numerics on. Each kernel's output is checked byte for byte; then the wait
// the builder inserted for the hazard is removed from a copy of the program and the run must give the
// wrong result the race predicts (poisoned NaN, stale or overwritten values). The races are real: DMAs cost
// about 1.3 us of fixed time plus the data, a DVE/ACT/POOL op on a few hundred bytes per partition about
// 0.1-0.2 us (configs/hw/trn2.json), so an unsynchronised consumer runs long before the producer completes.
// Fresh SBUF, PSUM and HBM scratch are poisoned with 0xFF bytes (FP32 NaN).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "sim/config/hw_config.h"
#include "sim/isa/semantics.h"
#include "sim/model/run.h"
#include "sim/numerics/float_formats.h"
#include "sim/run/session.h"

using namespace trnsim;
using namespace trnsim::kernels;
using nki::ActFunc;
using nki::AluOp;

namespace {

using Floats = std::vector<float>;
using Tensors = std::map<std::string, Floats>;

const config::HwConfig& trn2() {
  static const config::HwConfig hw = config::load_hw_config("trn2");
  return hw;
}

KernelBuild build(const KernelFn& fn, int programs = 1) {
  return build_program(fn, {trn2().limits(), programs});
}

// Distinct, exactly representable values: i mod 1000 plus `base`.
Floats ramp(size_t n, float base = 0.f) {
  Floats v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i % 1000);
  return v;
}

Floats filled(size_t n, float value) {
  return Floats(n, value);
}

// Runs `p` on Trn2 with the FP32 inputs by name; returns every FP32 tensor by name (inputs included).
// BF16 inputs are given as FP32 values (exactly representable) and stored as BF16.
Tensors run_with(const isa::Program& p, const Tensors& inputs) {
  run::Session session(p, trn2());
  for (const isa::TensorDecl& d : p.tensors) {
    const auto it = inputs.find(d.name);
    if (it == inputs.end()) continue;
    tensor::HostTensor t = tensor::HostTensor::zeros(d.dtype, d.shape);
    REQUIRE(t.elements() == static_cast<int64_t>(it->second.size()));
    size_t inexact = 0;
    for (size_t j = 0; j < it->second.size(); ++j) {
      t.set(static_cast<int64_t>(j), it->second[j]);
      inexact += t.value(static_cast<int64_t>(j)) != it->second[j];
    }
    REQUIRE(inexact == 0);
    session.set_input(d.name, t);
  }
  session.run({.numerics = true});
  Tensors out;
  for (const isa::TensorDecl& d : p.tensors)
    if (d.dtype == isa::DType::F32) out[d.name] = session.read(d.name).values();
  return out;
}

bool same_bytes(const Floats& a, const Floats& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool all_nan(const Floats& a) {
  for (float v : a)
    if (!std::isnan(v)) return false;
  return !a.empty();
}

const isa::Instruction& at(const isa::Program& p, const InstRef& r, int core = 0) {
  return p.streams[core][static_cast<int>(r.engine)].at(r.index);
}

// True if instruction `consumer` waits for exactly `producer`'s completion event.
bool waits_for(const isa::Program& p, const InstRef& consumer, const InstRef& producer, int core = 0) {
  for (const isa::SemWait& w : at(p, consumer, core).waits)
    if (w.sem == producer.done.sem && w.value == producer.done.value) return true;
  return false;
}

// A copy of `p` in which instruction `consumer` (on `core`) no longer waits on semaphore `sem`.
isa::Program without_wait(isa::Program p, const InstRef& consumer, uint16_t sem, int core = 0) {
  auto& waits = p.streams[core][static_cast<int>(consumer.engine)].at(consumer.index).waits;
  const size_t before = waits.size();
  waits.erase(std::remove_if(waits.begin(), waits.end(), [&](const isa::SemWait& w) { return w.sem == sem; }),
              waits.end());
  REQUIRE(waits.size() + 1 == before);  // the wait existed, once
  return p;
}

// Rows [r0, r1) of a row-major [rows, cols] array.
Floats rows_of(const Floats& a, int64_t cols, int64_t r0, int64_t r1) {
  return Floats(a.begin() + r0 * cols, a.begin() + r1 * cols);
}

}  // namespace

TEST_CASE("deps RAW: DMA load -> DVE op -> DMA store, and HBM store -> load", "[deps]") {
  const Floats x = ramp(128 * 64);
  Floats expected(x.size());
  for (size_t i = 0; i < x.size(); ++i) expected[i] = x[i] + 1.f;

  SECTION("through SBUF") {
    InstRef load, add, store;
    KernelBuild b = build([&](Kernel& k) {
      View xi = k.input("x", DType::F32, {128, 64});
      View y = k.output("y", DType::F32, {128, 64});
      View t = k.sbuf({128, 64}, DType::F32, "t");
      View u = k.sbuf({128, 64}, DType::F32, "u");
      load = nki::dma_copy(t, xi);
      add = nki::tensor_scalar(u, t, AluOp::Add, 1.0);
      store = nki::dma_copy(y, u);
    });
    const isa::Program& p = b.program;
    REQUIRE(waits_for(p, add, load));
    REQUIRE(waits_for(p, store, add));
    CHECK(same_bytes(run_with(p, {{"x", x}}).at("y"), expected));
    // Without the DVE's wait the add runs right after launch on never-written SBUF: NaN everywhere.
    CHECK(all_nan(run_with(without_wait(p, add, load.done.sem), {{"x", x}}).at("y")));
    // Without the store's wait its transfer (triggered 50 ns after the load, same size) completes before
    // the DVE op that writes u has even started: the store carries poison.
    CHECK(all_nan(run_with(without_wait(p, store, add.done.sem), {{"x", x}}).at("y")));
  }

  SECTION("through an HBM scratch tensor, two queues") {
    // 1 MiB written to scratch (about 3 us of data at 368 B/ns), then 32 rows read back on another queue:
    // the read waits for the store's queue.
    InstRef store, reload;
    const Floats big = ramp(128 * 2048);
    KernelBuild b = build([&](Kernel& k) {
      View xi = k.input("x", DType::F32, {128, 2048});
      View s = k.scratch("s", DType::F32, {128, 2048}, false);
      View y = k.output("y", DType::F32, {32, 64});
      View t = k.sbuf({128, 2048}, DType::F32, "t");
      View u = k.sbuf({32, 64}, DType::F32, "u");
      nki::dma_copy(t, xi);
      store = nki::dma_copy(s, t);
      reload = nki::dma_copy(u, s(S(0, 32), S(0, 64)));
      nki::dma_copy(y, u);
    });
    const isa::Program& p = b.program;
    REQUIRE(at(p, store).dma_queue != at(p, reload).dma_queue);
    REQUIRE(waits_for(p, reload, store));
    const Floats want = [&] {
      Floats w;
      for (int64_t r = 0; r < 32; ++r) w.insert(w.end(), big.begin() + r * 2048, big.begin() + r * 2048 + 64);
      return w;
    }();
    CHECK(same_bytes(run_with(p, {{"x", big}}).at("y"), want));
    // Without the wait the small read (triggered 50 ns after the store) completes microseconds before the
    // 1 MiB store lands: it reads the poisoned scratch.
    CHECK(all_nan(run_with(without_wait(p, reload, store.done.sem), {{"x", big}}).at("y")));
  }
}

TEST_CASE("deps WAR: a fast DVE/ACT overwrite waits for the slow DMA store that reads the tile", "[deps]") {
  // 4 KiB per partition: the store's data phase alone takes about 1.4 us; the memset about 0.1 us.
  const Floats x = ramp(128 * 1024);
  for (Engine e : {Engine::DVE, Engine::ACT}) {
    INFO("overwrite on " << isa::engine_name(e));
    InstRef load, store, overwrite;
    KernelBuild b = build([&](Kernel& k) {
      View xi = k.input("x", DType::F32, {128, 1024});
      View y = k.output("y", DType::F32, {128, 1024});
      View y2 = k.output("y2", DType::F32, {128, 1024});
      View t = k.sbuf({128, 1024}, DType::F32, "t");
      // Both DMAs on SP (the default would put the store on ACT, whose program order would then imply the
      // waits this test checks).
      load = nki::dma_copy(t, xi, {.engine = Engine::SP});
      store = nki::dma_copy(y, t, {.engine = Engine::SP});
      overwrite = nki::memset(t, 7.0, e);
      nki::dma_copy(y2, t, {.engine = Engine::SP});
    });
    const isa::Program& p = b.program;
    REQUIRE(waits_for(p, overwrite, store));  // WAR
    REQUIRE(waits_for(p, overwrite, load));   // WAW with the load
    const Tensors out = run_with(p, {{"x", x}});
    CHECK(same_bytes(out.at("y"), x));
    CHECK(same_bytes(out.at("y2"), filled(x.size(), 7.f)));
    // Without the WAR wait the memset lands right after the load, long before the store's transfer reads
    // t at its completion: the store carries the new values.
    const Tensors bad = run_with(without_wait(p, overwrite, store.done.sem), {{"x", x}});
    CHECK(same_bytes(bad.at("y"), filled(x.size(), 7.f)));
  }
}

TEST_CASE("deps WAW: the later of two writers on different engines wins", "[deps]") {
  SECTION("SBUF: DMA load, then an ACT memset of the same tile") {
    const Floats x = ramp(128 * 1024);
    InstRef load, set;
    KernelBuild b = build([&](Kernel& k) {
      View xi = k.input("x", DType::F32, {128, 1024});
      View y = k.output("y", DType::F32, {128, 1024});
      View t = k.sbuf({128, 1024}, DType::F32, "t");
      load = nki::dma_copy(t, xi);
      set = nki::memset(t, 5.0, Engine::ACT);
      nki::dma_copy(y, t);
    });
    const isa::Program& p = b.program;
    REQUIRE(waits_for(p, set, load));
    CHECK(same_bytes(run_with(p, {{"x", x}}).at("y"), filled(x.size(), 5.f)));
    // Without the wait the memset completes first and the load's transfer lands on top of it; the store
    // (which waits for the memset only, and starts its equal-sized transfer later) then reads x.
    CHECK(same_bytes(run_with(without_wait(p, set, load.done.sem), {{"x", x}}).at("y"), x));
  }

  SECTION("HBM: a large store, then a small store over its first rows on another queue") {
    InstRef first, second;
    KernelBuild b = build([&](Kernel& k) {
      View y = k.output("y", DType::F32, {128, 2048});
      View a = k.sbuf({128, 2048}, DType::F32, "a");
      View c = k.sbuf({32, 2048}, DType::F32, "c");
      nki::memset(a, 1.0);
      nki::memset(c, 2.0, Engine::POOL);
      first = nki::dma_copy(y, a);             // 1 MiB: about 3 us of data
      second = nki::dma_copy(y(S(0, 32)), c);  // 256 KiB
    });
    const isa::Program& p = b.program;
    REQUIRE(at(p, first).dma_queue != at(p, second).dma_queue);
    REQUIRE(waits_for(p, second, first));
    Floats want = filled(128 * 2048, 1.f);
    std::fill(want.begin(), want.begin() + 32 * 2048, 2.f);
    CHECK(same_bytes(run_with(p, {}).at("y"), want));
    // Without the wait the small store completes first and the large one overwrites it.
    CHECK(same_bytes(run_with(without_wait(p, second, first.done.sem), {}).at("y"), filled(128 * 2048, 1.f)));
  }
}

TEST_CASE("deps PSUM: the copy out waits for the last matmul of the accumulation group", "[deps]") {
  // y[m, n] = sum_k a0[k, m] b0[k, n] + a1[k, m] b1[k, n]: two K tiles accumulated in one PSUM tile. Small
  // integers in BF16: products and FP32 sums (|y| <= 2 * 128 * 9) are exact, so the bytes are predictable.
  // The second K tile's moving operand comes with a 1 MiB load (only its first 128 columns are used), so
  // the second matmul runs microseconds after the first.
  const auto small_ints = [](size_t n, int seed) {
    Floats v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(static_cast<int>((i * 7 + seed * 13) % 7) - 3);
    return v;
  };
  const Floats a = small_ints(256 * 128, 1), b0 = small_ints(128 * 128, 2), b1 = small_ints(128 * 4096, 3);
  Floats full(128 * 128, 0.f), partial(128 * 128, 0.f);
  for (int m = 0; m < 128; ++m)
    for (int n = 0; n < 128; ++n) {
      double s0 = 0, s1 = 0;
      for (int k = 0; k < 128; ++k) {
        s0 += double(a[k * 128 + m]) * b0[k * 128 + n];
        s1 += double(a[(128 + k) * 128 + m]) * b1[k * 4096 + n];
      }
      partial[m * 128 + n] = static_cast<float>(s0);
      full[m * 128 + n] = static_cast<float>(s0 + s1);
    }
  InstRef mm0, mm1, copy;
  KernelBuild b = build([&](Kernel& k) {
    View ai = k.input("a", DType::BF16, {256, 128});
    View b0i = k.input("b0", DType::BF16, {128, 128});
    View b1i = k.input("b1", DType::BF16, {128, 4096});
    View y = k.output("y", DType::F32, {128, 128});
    View sa = k.sbuf({128, 2, 128}, DType::BF16, "a");
    View sb0 = k.sbuf({128, 128}, DType::BF16, "b0");
    View sb1 = k.sbuf({128, 4096}, DType::BF16, "b1");
    View acc = k.psum({128, 128}, DType::F32, "acc");
    View o = k.sbuf({128, 128}, DType::F32, "o");
    nki::dma_copy(sa(all, 0), ai(S(0, 128)));
    nki::dma_copy(sa(all, 1), ai(S(128, 256)));
    nki::dma_copy(sb0, b0i);
    nki::dma_copy(sb1, b1i);
    mm0 = nki::nc_matmul(acc, sa(all, 0), sb0);
    mm1 = nki::nc_matmul(acc, sa(all, 1), sb1(all, S(0, 128)), {.accumulate = true});
    copy = nki::tensor_copy(o, acc);
    nki::dma_copy(y, o);
  });
  const isa::Program& p = b.program;
  REQUIRE(waits_for(p, copy, mm1));  // S[PE] >= 2: the group's last matmul
  const Tensors in = {{"a", a}, {"b0", b0}, {"b1", b1}};
  CHECK(same_bytes(run_with(p, in).at("y"), full));
  // A wait for the first matmul only (S[PE] >= 1) copies the partial sum of the first K tile.
  isa::Program weak = p;
  for (isa::SemWait& w : weak.streams[0][static_cast<int>(copy.engine)].at(copy.index).waits)
    if (w.sem == mm1.done.sem) w.value = mm0.done.value;
  CHECK(same_bytes(run_with(weak, in).at("y"), partial));
  // No wait at all: the copy reads the poisoned PSUM right after launch.
  CHECK(all_nan(run_with(without_wait(p, copy, mm1.done.sem), in).at("y")));
}

TEST_CASE("deps chain: SP queue -> ACT -> POOL-queue DMA -> DVE -> POOL -> SP queue: every wait is needed",
          "[deps]") {
  // y = 3 (2 x + 1), one link per engine or queue: x arrives on an SP queue, ACT doubles it, a DMA triggered
  // by POOL copies the result SBUF -> SBUF on a POOL queue, DVE adds 1, POOL triples, and the result leaves
  // on another SP queue. Each link has exactly one producer, so each wait is the only thing that orders it.
  // Values stay exact in FP32.
  const Floats x = ramp(128 * 64);
  Floats want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = 3.f * (2.f * x[i] + 1.f);
  InstRef lx, act, mv, dve, pool, store;
  KernelBuild b = build([&](Kernel& k) {
    View xi = k.input("x", DType::F32, {128, 64});
    View y = k.output("y", DType::F32, {128, 64});
    View a = k.sbuf({128, 64}, DType::F32, "a");
    View bt = k.sbuf({128, 64}, DType::F32, "b");
    View b2 = k.sbuf({128, 64}, DType::F32, "b2");
    View ct = k.sbuf({128, 64}, DType::F32, "c");
    View dt = k.sbuf({128, 64}, DType::F32, "d");
    lx = nki::dma_copy(a, xi);
    act = nki::activation(bt, ActFunc::Identity, a, 0.0, 2.0);
    mv = nki::dma_copy(b2, bt, {.engine = Engine::POOL});
    dve = nki::tensor_scalar(ct, b2, AluOp::Add, 1.0);
    pool = nki::tensor_scalar(dt, ct, AluOp::Multiply, 3.0, false, AluOp::Bypass, 0.0, false, Engine::POOL);
    store = nki::dma_copy(y, dt);
  });
  const isa::Program& p = b.program;
  CHECK(at(p, lx).dma_queue != at(p, mv).dma_queue);
  CHECK(at(p, lx).dma_queue != at(p, store).dma_queue);
  CHECK(at(p, mv).dma_queue != at(p, store).dma_queue);
  // Exactly the five edges of the chain, nothing else.
  REQUIRE(waits_for(p, act, lx));
  REQUIRE(waits_for(p, mv, act));
  REQUIRE(waits_for(p, dve, mv));
  REQUIRE(waits_for(p, pool, dve));
  REQUIRE(waits_for(p, store, pool));
  size_t total = 0;
  for (const auto& stream : p.streams[0])
    for (const auto& inst : stream) total += inst.waits.size();
  REQUIRE(total == 5);
  const Tensors in = {{"x", x}};
  CHECK(same_bytes(run_with(p, in).at("y"), want));
  // Each wait alone protects the result: without it, its consumer runs (or its DMA completes) before the
  // producer has written, reads poisoned SBUF, and the NaN reaches y.
  for (const InstRef* consumer : {&act, &mv, &dve, &pool, &store}) {
    REQUIRE(at(p, *consumer).waits.size() == 1);
    const isa::SemWait w = at(p, *consumer).waits[0];
    INFO(isa::engine_name(consumer->engine)
         << " #" << consumer->index << " without S[" << w.sem << "] >= " << w.value);
    CHECK(all_nan(run_with(without_wait(p, *consumer, w.sem), in).at("y")));
  }
}

TEST_CASE("deps LNC2: sendrecv and core_barrier order the two cores' SBUF and HBM accesses", "[deps][lnc2]") {
  // Core c: t = x[128c, 128c + 128) (512 KiB, about 1.4 us of data), u = t[:, :64] + 1, sendrecv u to the
  // peer's r, v = 2 r, store v to the shared scratch s[128c..], core_barrier(s), then (on ACT's queues) load
  // the peer's half of s and store it to y[128c..]. So y = 2 (x[:, :64] + 1) on every row, each half having
  // crossed between the cores twice.
  const Floats x = ramp(256 * 1024);
  Floats want(256 * 64);
  for (int r = 0; r < 256; ++r)
    for (int c = 0; c < 64; ++c) want[r * 64 + c] = 2.f * (x[r * 1024 + c] + 1.f);
  InstRef add[2], sr[2], dbl[2], st[2], bar[2], reload[2];
  KernelBuild b = build(
      [&](Kernel& k) {
        const int c = k.program_id();
        View xi = k.input("x", DType::F32, {256, 1024});
        View y = k.output("y", DType::F32, {256, 64});
        View s = k.scratch("s", DType::F32, {256, 64}, false);
        View t = k.sbuf({128, 1024}, DType::F32, "t");
        View u = k.sbuf({128, 64}, DType::F32, "u");
        View r = k.sbuf({128, 64}, DType::F32, "r");
        View v = k.sbuf({128, 64}, DType::F32, "v");
        View w = k.sbuf({128, 64}, DType::F32, "w");
        nki::dma_copy(t, xi(S(128 * c, 128 * c + 128)));
        add[c] = nki::tensor_scalar(u, t(all, S(0, 64)), AluOp::Add, 1.0);
        sr[c] = nki::sendrecv(u, r);
        dbl[c] = nki::tensor_scalar(v, r, AluOp::Multiply, 2.0);
        st[c] = nki::dma_copy(s(S(128 * c, 128 * c + 128)), v, {.engine = Engine::SP});
        bar[c] = nki::core_barrier(s);
        const int peer = 1 - c;
        reload[c] = nki::dma_copy(w, s(S(128 * peer, 128 * peer + 128)), {.engine = Engine::ACT});
        nki::dma_copy(y(S(128 * c, 128 * c + 128)), w, {.engine = Engine::ACT});
      },
      2);
  const isa::Program& p = b.program;
  REQUIRE(p.num_cores == 2);
  for (int c = 0; c < 2; ++c) {
    INFO("core " << c);
    REQUIRE(waits_for(p, sr[c], add[c], c));                                   // the transfer reads u
    REQUIRE(waits_for(p, dbl[c], InstRef{.done = {kSendRecvDoneSem, 1}}, c));  // the peer's transfer landed
    REQUIRE(waits_for(p, bar[c], st[c], c));      // the barrier signals the peer after our store to s
    REQUIRE(waits_for(p, reload[c], bar[c], c));  // the peer's half of s is read after the barrier
  }
  const Tensors in = {{"x", x}};
  const Floats good = run_with(p, in).at("y");
  CHECK(same_bytes(good, want));
  const Floats top = rows_of(want, 64, 0, 128), bottom = rows_of(want, 64, 128, 256);

  // Core 0 doubles r before core 1's transfer lands: its v is NaN, which core 1 reloads into y[128..256).
  Floats y = run_with(without_wait(p, dbl[0], kSendRecvDoneSem, 0), in).at("y");
  CHECK(same_bytes(rows_of(y, 64, 0, 128), top));
  CHECK(all_nan(rows_of(y, 64, 128, 256)));

  // Core 0 sends u before its DVE wrote it (the transfer completes while x is still loading): core 1
  // receives poison, which comes back to core 0 through s into y[0..128).
  y = run_with(without_wait(p, sr[0], add[0].done.sem, 0), in).at("y");
  CHECK(all_nan(rows_of(y, 64, 0, 128)));
  CHECK(same_bytes(rows_of(y, 64, 128, 256), bottom));

  // Barriers that do not wait for their core's store to s: both complete right after launch, and each
  // core reads the peer's half of s before anything was written there.
  isa::Program nb = without_wait(without_wait(p, bar[0], st[0].done.sem, 0), bar[1], st[1].done.sem, 1);
  CHECK(all_nan(run_with(nb, in).at("y")));

  // Reloads that do not wait for the barrier: the same.
  isa::Program nr =
      without_wait(without_wait(p, reload[0], bar[0].done.sem, 0), reload[1], bar[1].done.sem, 1);
  CHECK(all_nan(run_with(nr, in).at("y")));
}

TEST_CASE("deps LNC2: sendrecv's ready barrier keeps the peer's next transfer off a buffer still being read",
          "[deps][lnc2]") {
  // Two sendrecv rounds into the same r. Round 1 brings the peer's x; core 1 reads it late (its read also
  // needs a 2 MiB tile of ones, about 6 us of DMA). Round 2 brings the peer's x + 1000. The round-2 transfer
  // waits for this core's ready barrier, which completes only once the peer has issued its own, i.e. after
  // the peer's reads of r: so core 0's second transfer cannot land in core 1's r before core 1 read round 1.
  const Floats x = ramp(256 * 64);
  const Floats ones = filled(128 * 4096, 1.f);
  Floats want_v(256 * 64), want_w(256 * 64);
  for (int r = 0; r < 256; ++r)
    for (int c = 0; c < 64; ++c) {
      const int peer_row = (r + 128) % 256;
      want_v[r * 64 + c] = x[peer_row * 64 + c];
      want_w[r * 64 + c] = x[peer_row * 64 + c] + 1000.f;
    }
  InstRef second[2];
  KernelBuild b = build(
      [&](Kernel& k) {
        const int c = k.program_id();
        View xi = k.input("x", DType::F32, {256, 64});
        View onesi = k.input("ones", DType::F32, {128, 4096});
        View y = k.output("y", DType::F32, {256, 64});
        View y2 = k.output("y2", DType::F32, {256, 64});
        // Same allocation order on both cores: sendrecv tiles at the same addresses.
        View big = k.sbuf({128, 4096}, DType::F32, "ones");
        View u = k.sbuf({128, 64}, DType::F32, "u");
        View u2 = k.sbuf({128, 64}, DType::F32, "u2");
        View r = k.sbuf({128, 64}, DType::F32, "r");
        View v = k.sbuf({128, 64}, DType::F32, "v");
        View w = k.sbuf({128, 64}, DType::F32, "w");
        nki::dma_copy(u, xi(S(128 * c, 128 * c + 128)));
        if (c == 1) nki::dma_copy(big, onesi);
        nki::sendrecv(u, r);
        if (c == 1)
          nki::tensor_tensor(v, r, big(all, S(0, 64)), AluOp::Multiply);
        else
          nki::tensor_copy(v, r);
        nki::tensor_scalar(u2, u, AluOp::Add, 1000.0);
        second[c] = nki::sendrecv(u2, r);
        nki::tensor_copy(w, r);
        nki::dma_copy(y(S(128 * c, 128 * c + 128)), v);
        nki::dma_copy(y2(S(128 * c, 128 * c + 128)), w);
      },
      2);
  const isa::Program& p = b.program;
  const Tensors in = {{"x", x}, {"ones", ones}};
  const Tensors good = run_with(p, in);
  CHECK(same_bytes(good.at("y"), want_v));
  CHECK(same_bytes(good.at("y2"), want_w));
  // The round-2 transfer waits for its ready barrier, POOL's second instruction.
  const uint16_t pool_sem = static_cast<uint16_t>(Engine::POOL);
  REQUIRE(waits_for(p, second[0], InstRef{.done = {pool_sem, 2}}, 0));
  // Without that wait on core 0, its round-2 transfer lands in core 1's r while core 1 still waits for its
  // ones: core 1 reads round 2's values as round 1's. Core 0's own reads are unaffected.
  const Tensors bad = run_with(without_wait(p, second[0], pool_sem, 0), in);
  CHECK(same_bytes(rows_of(bad.at("y"), 64, 0, 128), rows_of(want_v, 64, 0, 128)));
  CHECK(same_bytes(rows_of(bad.at("y"), 64, 128, 256), rows_of(want_w, 64, 128, 256)));
  CHECK(same_bytes(bad.at("y2"), want_w));
}
