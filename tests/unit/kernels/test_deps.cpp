// Automatic semaphore waits: RAW, WAR, WAW, independence, same-engine order, DMA queues, LNC2 streams.
#include <catch2/catch.hpp>

#include "kernels/api/nki.h"
#include "sim/base/error.h"

using namespace trnsim;
using namespace trnsim::kernels;
using nki::ActFunc;
using nki::AluOp;

namespace {

constexpr uint16_t kPE = 0, kDVE = 1, kACT = 2, kPOOL = 3;
constexpr uint16_t q(int queue) {
  return static_cast<uint16_t>(kDmaSemBase + queue);
}

using Waits = std::vector<std::pair<uint16_t, uint32_t>>;

KernelBuild build(const KernelFn& fn, int programs = 1) {
  return build_program(fn, {default_limits(Generation::Trn2), programs});
}
const isa::Instruction& inst(const KernelBuild& b, Engine e, size_t i, int core = 0) {
  const auto& s = b.program.streams[core][static_cast<int>(e)];
  REQUIRE(i < s.size());
  return s[i];
}
Waits waits(const isa::Instruction& in) {
  Waits w;
  for (const auto& x : in.waits) w.emplace_back(x.sem, x.value);
  return w;
}
Waits mm_waits(const isa::Instruction& in) {
  Waits w;
  for (const auto& x : in.mm_waits) w.emplace_back(x.sem, x.value);
  return w;
}
const nki::DmaOpts kOnSp{.engine = Engine::SP};  // a store pinned to SP (the default puts stores on ACT)

}  // namespace

namespace Catch {
template <>
struct StringMaker<std::pair<uint16_t, uint32_t>> {
  static std::string convert(const std::pair<uint16_t, uint32_t>& w) {
    return "S[" + std::to_string(w.first) + "]>=" + std::to_string(w.second);
  }
};
}  // namespace Catch

TEST_CASE("RAW: a DVE read of a DMA-loaded tile waits for the queue", "[kernels][deps]") {
  KernelBuild b = build([](Kernel& k) {
    View x = k.input("x", DType::F32, {128, 64});
    View t = k.sbuf({128, 64}, DType::F32, "t");
    View u = k.sbuf({128, 64}, DType::F32, "u");
    nki::dma_copy(t, x);
    nki::tensor_copy(u, t);
  });
  const isa::Instruction& dma = inst(b, Engine::SP, 0);
  CHECK(dma.op == isa::Opcode::DmaCopy);
  CHECK(dma.dma_queue == 0);
  REQUIRE(dma.updates.size() == 1);
  CHECK(dma.updates[0].sem == q(0));
  CHECK(dma.updates[0].delta == 1);
  CHECK(waits(dma).empty());
  const isa::Instruction& copy = inst(b, Engine::DVE, 0);
  CHECK(waits(copy) == Waits{{q(0), 1}});
  REQUIRE(copy.updates.size() == 1);
  CHECK(copy.updates[0].sem == kDVE);
  CHECK(b.inputs == std::vector<std::string>{"x"});
  CHECK(b.program.files.size() == 2);
  // Named relative to the source tree whatever the build folder (and with ccache's CCACHE_BASEDIR, which
  // makes the compiler's name "../tests/..."), so a program's bytes do not depend on where it was built.
  CHECK(b.program.files[copy.loc.file] == "tests/unit/kernels/test_deps.cpp");
  for (const std::string& f : b.program.files) CHECK((f.front() != '/' && f.rfind("../", 0) != 0));
  CHECK(copy.loc.line > 0);
}

TEST_CASE("WAR and WAW keep only the strongest wait per semaphore", "[kernels][deps]") {
  KernelBuild b = build([](Kernel& k) {
    View t = k.sbuf({128, 64}, DType::F32, "t");
    View u = k.sbuf({128, 64}, DType::F32, "u");
    nki::memset(t, 1.0);                  // DVE #1 writes t
    nki::tensor_copy(u, t);               // DVE #2 reads t
    nki::activation(t, ActFunc::Exp, u);  // ACT #1: WAR on #2 and WAW on #1, RAW on u (#2)
    nki::memset(u, 0.0, Engine::POOL);    // POOL #1: WAR on ACT #1 (reads u), WAW on DVE #2
    nki::tensor_copy(t, t, Engine::ACT);  // ACT #2: same engine as the last writer: nothing
  });
  CHECK(waits(inst(b, Engine::ACT, 0)) == Waits{{kDVE, 2}});
  CHECK(waits(inst(b, Engine::POOL, 0)) == Waits{{kDVE, 2}, {kACT, 1}});
  CHECK(waits(inst(b, Engine::ACT, 1)).empty());
  CHECK(waits(inst(b, Engine::DVE, 1)).empty());  // same engine as the memset
}

TEST_CASE("WAW alone, and disjoint slices of one tile are independent", "[kernels][deps]") {
  KernelBuild b = build([](Kernel& k) {
    View t = k.sbuf({128, 512}, DType::F32, "t");
    nki::memset(t(all, S(0, 256)), 0.0);                     // DVE #1
    nki::memset(t(all, S(256, 512)), 0.0, Engine::ACT);      // ACT #1: other columns
    nki::memset(t(S(0, 32), S(0, 512)), 0.0, Engine::POOL);  // POOL #1: overlaps both
    View p = k.psum({128, 512}, DType::F32, "p");
    nki::memset(p(S(0, 64)), 0.0);                 // DVE #2
    nki::memset(p(S(64, 128)), 0.0, Engine::ACT);  // ACT #2: other partitions
  });
  CHECK(waits(inst(b, Engine::ACT, 0)).empty());
  CHECK(waits(inst(b, Engine::POOL, 0)) == Waits{{kDVE, 1}, {kACT, 1}});
  CHECK(waits(inst(b, Engine::ACT, 1)).empty());
}

TEST_CASE("an in-place operand pair beside a separate operand: each keeps its waits and its records",
          "[kernels][deps]") {
  // emit() collects and records an operand that meets no other operand of its instruction in one walk, and
  // the in-place dst / data1 pair apart (collects first, records after): the waits are the same either way.
  KernelBuild b = build([](Kernel& k) {
    View a = k.sbuf({128, 64}, DType::F32, "a");
    View c = k.sbuf({128, 64}, DType::F32, "c");
    View t = k.sbuf({128, 64}, DType::F32, "t");
    nki::memset(a, 1.0);                                    // DVE #1 writes a
    nki::memset(c, 2.0, Engine::ACT);                       // ACT #1 writes c
    nki::tensor_tensor(a, a, c, AluOp::Add, Engine::POOL);  // POOL #1: RAW on a and c
    nki::memset(c, 0.0);                                    // DVE #2: WAW on ACT #1, WAR on POOL #1
    nki::tensor_copy(t, a, Engine::ACT);                    // ACT #2: RAW on POOL #1's write of a
    nki::tensor_tensor(t(all, S(0, 32)), a(all, S(0, 32)), c(all, S(0, 32)),
                       AluOp::Add);  // DVE #3: WAW on ACT #2
  });
  CHECK(waits(inst(b, Engine::POOL, 0)) == Waits{{kDVE, 1}, {kACT, 1}});
  CHECK(waits(inst(b, Engine::DVE, 1)) == Waits{{kACT, 1}, {kPOOL, 1}});
  // POOL #1's write covers DVE #1's, which it replaced: only POOL #1 is waited for.
  CHECK(waits(inst(b, Engine::ACT, 1)) == Waits{{kPOOL, 1}});
  // POOL #1 is implied (DVE #2 waited for it), DVE #2 is program order.
  CHECK(waits(inst(b, Engine::DVE, 2)) == Waits{{kACT, 2}});
}

TEST_CASE("DMA queues: round-robin per engine, FIFO counts, explicit queues", "[kernels][deps]") {
  KernelBuild b = build([](Kernel& k) {
    View x = k.input("x", DType::F32, {128, 9 * 64});
    View t = k.sbuf({128, 9, 64}, DType::F32, "t");
    for (int i = 0; i < 9; ++i) nki::dma_copy(t(all, i), x(all, S(64 * i, 64 * (i + 1))));  // queues 0..7, 0
    View u = k.sbuf({128, 64}, DType::F32, "u");
    nki::tensor_copy(u, t(all, 8));  // written by transfer #2 of queue 0
    nki::tensor_copy(u, t(all, 3));  // transfer #1 of queue 3
    nki::tensor_copy(u, t(all, 0));  // queue 0 #1: already waited for #2, no new wait
    View y = k.output("y", DType::F32, {128, 64});
    nki::dma_copy(y, u, {.engine = Engine::ACT});  // ACT's queues start at 8
    nki::dma_copy(y, u, {.engine = Engine::POOL, .queue = 15});
  });
  for (int i = 0; i < 9; ++i) CHECK(inst(b, Engine::SP, i).dma_queue == i % 8);
  CHECK(inst(b, Engine::SP, 8).updates[0].sem == q(0));
  CHECK(waits(inst(b, Engine::DVE, 0)) == Waits{{q(0), 2}});
  CHECK(waits(inst(b, Engine::DVE, 1)) == Waits{{q(3), 1}});
  CHECK(waits(inst(b, Engine::DVE, 2)).empty());
  const isa::Instruction& out = inst(b, Engine::ACT, 0);
  CHECK(out.dma_queue == 8);
  CHECK(waits(out) == Waits{{kDVE, 3}});
  // WAW on y behind queue 8's transfer; RAW on u from DVE #3.
  CHECK(waits(inst(b, Engine::POOL, 0)) == Waits{{kDVE, 3}, {q(8), 1}});
  CHECK(b.outputs == std::vector<std::string>{"y"});

  CHECK_THROWS_WITH(build([](Kernel& k) {
                      View x = k.input("x", DType::F32, {128, 4});
                      View t = k.sbuf({128, 4}, DType::F32);
                      nki::dma_copy(t, x, {.queue = 3});
                      nki::dma_copy(t, x, {.engine = Engine::ACT, .queue = 3});
                    }),
                    Catch::Contains("DMA queue 3 is already used by SP"));
  CHECK_THROWS_WITH(build([](Kernel& k) {
                      View x = k.input("x", DType::F32, {128, 4});
                      View t = k.sbuf({128, 4}, DType::F32);
                      nki::dma_copy(t, x, {.engine = Engine::DVE});
                    }),
                    Catch::Contains("not DVE"));
}

TEST_CASE("HBM tiles: column tiles of one tensor are independent, overlapping reads wait",
          "[kernels][deps]") {
  KernelBuild b = build([](Kernel& k) {
    View y = k.output("y", DType::F32, {256, 1024});
    View t = k.sbuf({128, 512}, DType::F32, "t");
    nki::memset(t, 0.0);
    nki::dma_copy(y(S(0, 128), S(0, 512)), t, kOnSp);     // queue 0
    nki::dma_copy(y(S(0, 128), S(512, 1024)), t, kOnSp);  // queue 1: no wait on queue 0
    nki::dma_copy(y(S(128, 256), S(0, 512)), t, kOnSp);   // queue 2: other rows
    View r = k.sbuf({128, 512}, DType::F32, "r");
    nki::dma_copy(r, y(S(0, 128), S(256, 768)));  // queue 3: RAW on queues 0 and 1
  });
  CHECK(waits(inst(b, Engine::SP, 0)) == Waits{{kDVE, 1}});
  CHECK(waits(inst(b, Engine::SP, 1)).empty());  // DVE #1 already waited for on SP
  CHECK(waits(inst(b, Engine::SP, 2)).empty());
  CHECK(waits(inst(b, Engine::SP, 3)) == Waits{{q(0), 1}, {q(1), 1}});
}

TEST_CASE("PE accumulation and explicit ordering edges", "[kernels][deps]") {
  KernelBuild b = build([](Kernel& k) {
    View a = k.sbuf({128, 128}, DType::BF16, "a");
    View m = k.sbuf({128, 512}, DType::BF16, "m");
    View p = k.psum({128, 512}, DType::F32, "p");
    View o = k.sbuf({128, 512}, DType::F32, "o");
    nki::memset(a, 1.0);
    nki::memset(m, 1.0, Engine::POOL);
    nki::nc_matmul(p, a, m);  // PE #1: LoadStationary RAW on DVE #1, MultiplyMoving on POOL #1
    nki::nc_matmul(p, a, m, {.accumulate = true});                                  // PE #2: nothing new
    InstRef c = nki::tensor_copy(o, p, Engine::ACT);                                // ACT #1: RAW on PE #2
    InstRef z = nki::memset(k.sbuf({128, 4}, DType::F32, "z"), 0.0, Engine::POOL);  // POOL #2: independent
    z.depends_on(c);
  });
  CHECK(waits(inst(b, Engine::PE, 0)) == Waits{{kDVE, 1}});      // the stationary a
  CHECK(mm_waits(inst(b, Engine::PE, 0)) == Waits{{kPOOL, 1}});  // the moving m
  REQUIRE(inst(b, Engine::PE, 0).ls_updates.size() == 1);        // LoadStationary #1 done: S[5] += 1
  CHECK(inst(b, Engine::PE, 0).ls_updates[0].sem == kPeLoadStationarySem);
  CHECK(inst(b, Engine::PE, 1).has(isa::kAccumulate));
  CHECK(waits(inst(b, Engine::PE, 1)).empty());
  CHECK(mm_waits(inst(b, Engine::PE, 1)).empty());
  CHECK(waits(inst(b, Engine::ACT, 0)) == Waits{{kPE, 2}});
  CHECK(waits(inst(b, Engine::POOL, 1)) == Waits{{kACT, 1}});
}

TEST_CASE("hardware rule and API errors name the kernel line", "[kernels][deps]") {
  int line = 0;
  try {
    build([&](Kernel& k) {
      View a = k.sbuf({128, 128}, DType::BF16, "a");
      View d = k.sbuf({128, 128}, DType::F32, "d");
      line = __LINE__ + 1;
      nki::nc_matmul(d, a, a);  // PE cannot write SBUF
    });
    FAIL("no error");
  } catch (const RuleError& e) {
    CHECK(std::string(e.what()).find("test_deps.cpp:" + std::to_string(line) + ": nc_matmul on PE") !=
          std::string::npos);
  }
  CHECK_THROWS_WITH(build([](Kernel& k) {
                      View t = k.sbuf({128, 4}, DType::F32);
                      nki::core_barrier(t);
                    }),
                    Catch::Contains("needs num_programs 2"));
}

TEST_CASE("LNC2: per-core streams, shared and private tensors, cross-core calls", "[kernels][deps][lnc2]") {
  std::unique_ptr<View> leaked;
  KernelBuild b = build(
      [&](Kernel& k) {
        View x = k.input("x", DType::F32, {256, 64});
        View s = k.scratch("spill", DType::F32, {128, 64}, /*private_to_core=*/true);
        View t = k.sbuf({128, 64}, DType::F32, "t");
        nki::dma_copy(t, x(S(128 * k.program_id(), 128 * (k.program_id() + 1))));
        for (int i = 0; i <= k.program_id(); ++i) nki::memset(k.sbuf({128, 4}, DType::F32), 0.0);
        nki::dma_copy(s, t, kOnSp);  // SP queue 1
        nki::core_barrier(s);        // POOL: signal + wait
        nki::dma_copy(t, s);         // SP queue 2: after the barrier
        View r = k.sbuf({128, 64}, DType::F32, "r");
        nki::sendrecv(t, r);     // SP: ready signal + transfer on queue 3
        nki::tensor_copy(t, r);  // DVE waits for the peer's transfer
      },
      2);
  CHECK(b.program.num_cores == 2);
  REQUIRE(b.program.tensors.size() == 3);
  CHECK(b.program.tensors[0].private_to_core == -1);
  CHECK(b.program.tensors[1].private_to_core == 0);
  CHECK(b.program.tensors[2].private_to_core == 1);
  CHECK(b.program.streams[0][static_cast<int>(Engine::DVE)].size() == 2);
  CHECK(b.program.streams[1][static_cast<int>(Engine::DVE)].size() == 3);
  CHECK(inst(b, Engine::SP, 0, 0).ops[1].offset_bytes == 0);
  CHECK(inst(b, Engine::SP, 0, 1).ops[1].offset_bytes == 128 * 64 * 4);
  CHECK(inst(b, Engine::SP, 1, 1).ops[0].tensor == 2);  // core 1 spills to its own tensor

  for (int core = 0; core < 2; ++core) {
    // One model core_barrier on POOL; it waits for the spill of s (queue 1) and counts on S[POOL].
    const isa::Instruction& barrier = inst(b, Engine::POOL, 0, core);
    CHECK(barrier.op == isa::Opcode::CoreBarrier);
    CHECK(waits(barrier) == Waits{{q(1), 1}});
    REQUIRE(barrier.updates.size() == 1);
    CHECK(barrier.updates[0].sem == kPOOL);
    CHECK_FALSE(barrier.updates[0].peer);
    // After the barrier; the WAR on t's reader (queue 1) is kept although the barrier implies it.
    CHECK(waits(inst(b, Engine::SP, 2, core)) == Waits{{kPOOL, 1}, {q(1), 1}});
    // sendrecv: a ready barrier on the barrier engine, after the last writer of r's memory (r reuses the
    // space of the memset temporaries: DVE #1 on core 0, #2 on core 1), then the transfer after the ready
    // barrier (POOL #2) and t's writer (queue 2).
    const isa::Instruction& ready = inst(b, Engine::POOL, 1, core);
    CHECK(ready.op == isa::Opcode::CoreBarrier);
    CHECK(waits(ready) == Waits{{kDVE, static_cast<uint32_t>(core + 1)}});
    const isa::Instruction& xfer = inst(b, Engine::SP, 3, core);
    CHECK(xfer.op == isa::Opcode::SendRecv);
    CHECK(waits(xfer) == Waits{{kPOOL, 2}, {q(2), 1}});
    CHECK(xfer.updates.back().sem == kSendRecvDoneSem);
    CHECK(xfer.updates.back().peer);
    // RAW on r (the peer's transfer), WAW on t (queue 2), WAR on t (this core's transfer reads it).
    CHECK(waits(inst(b, Engine::DVE, core + 1, core)) == Waits{{q(2), 1}, {q(3), 1}, {kSendRecvDoneSem, 1}});
  }

  CHECK_THROWS_WITH(
      build(
          [](Kernel& k) {
            View t = k.sbuf({128, 4}, DType::F32);
            if (k.program_id() == 0) nki::core_barrier(t);
          },
          2),
      Catch::Contains(
          "core 0 made 1 core_barrier on POOL, 0 sendrecv; core 1 made 0 core_barrier, 0 sendrecv"));
  CHECK_THROWS_WITH(build(
                        [&](Kernel& k) {
                          if (k.program_id() == 0)
                            leaked = std::make_unique<View>(k.sbuf({128, 4}, DType::F32));
                          else
                            nki::memset(*leaked, 0.0);
                        },
                        2),
                    Catch::Contains("another core"));
  CHECK_THROWS_WITH(build(
                        [](Kernel& k) {
                          k.input("x", DType::F32, {4 + k.program_id(), 4});
                        },
                        2),
                    Catch::Contains("redeclared"));
}

TEST_CASE("LNC2: one barrier engine per kernel, sendrecvs keep one queue", "[kernels][deps][lnc2]") {
  KernelBuild b = build(
      [](Kernel& k) {
        View h = k.scratch("h", DType::F32, {128, 4}, false);
        nki::core_barrier(h);  // POOL #1
        nki::core_barrier(h);  // POOL #2: same engine, no wait
        View s = k.sbuf({128, 4}, DType::F32, "s");
        View r = k.sbuf({128, 4}, DType::F32, "r");
        nki::memset(s, 1.0);                // DVE #1
        nki::sendrecv(s, r, {.queue = 5});  // ready barrier POOL #3, transfer SP
        nki::sendrecv(s, r);                // reuses queue 5; ready barrier POOL #4
      },
      2);
  CHECK(waits(inst(b, Engine::POOL, 1)).empty());
  CHECK(waits(inst(b, Engine::SP, 0)) == Waits{{kDVE, 1}, {kPOOL, 3}});
  const isa::Instruction& second = inst(b, Engine::SP, 1);
  CHECK(second.op == isa::Opcode::SendRecv);
  CHECK(second.dma_queue == 5);
  CHECK(waits(second) == Waits{{kPOOL, 4}});
  // The second ready barrier waits for the first transfer into r (the peer's) and for r's readers (none).
  CHECK(waits(inst(b, Engine::POOL, 3)) == Waits{{kSendRecvDoneSem, 1}});
  CHECK_THROWS_WITH(build(
                        [](Kernel& k) {
                          View h = k.scratch("h", DType::F32, {128, 4}, false);
                          nki::core_barrier(h);
                          nki::core_barrier(h, Engine::SP);
                        },
                        2),
                    Catch::Contains("core_barrier on SP: this core's barriers already run on POOL"));
  CHECK_THROWS_WITH(build(
                        [](Kernel& k) {
                          View s = k.sbuf({128, 4}, DType::F32, "s");
                          nki::sendrecv(s, s, {.queue = 5});
                          nki::sendrecv(s, s, {.queue = 6});
                        },
                        2),
                    Catch::Contains("every sendrecv of a core uses one queue"));
}

TEST_CASE("LNC2: the n-th sendrecvs of the two cores pair up", "[kernels][deps][lnc2]") {
  // Core 1 allocates a tile first (kept alive), so its s and r sit 256 B further into each partition than
  // core 0's: each transfer writes the peer's r, as the peer allocated it.
  KernelBuild b = build(
      [](Kernel& k) {
        View pad;
        if (k.program_id() == 1) pad = k.sbuf({128, 64}, DType::F32, "pad");
        View s = k.sbuf({128, 4}, DType::F32, "s");
        View r = k.sbuf({128, 4}, DType::F32, "r");
        nki::memset(s, 1.0);
        nki::sendrecv(s, r);
      },
      2);
  const int64_t r0 = 64, r1 = 256 + 64;  // r after s (16 B, 64-byte aligned), on core 1 after pad (256 B)
  CHECK(inst(b, Engine::SP, 0, 0).ops[0].offset_bytes == r1);
  CHECK(inst(b, Engine::SP, 0, 1).ops[0].offset_bytes == r0);
  CHECK(inst(b, Engine::SP, 0, 0).ops[1].offset_bytes == 0);
  CHECK(inst(b, Engine::SP, 0, 1).ops[1].offset_bytes == 256);

  // Core 0 sends 64 columns into core 1's dst of 32 (each call's own src and dst agree): refused, naming
  // both calls' lines, instead of writing past core 1's dst.
  const int line = __LINE__ + 6;
  const auto mismatched = [](Kernel& k) {
    const int64_t n = k.program_id() == 0 ? 64 : 32;
    View s = k.sbuf({128, 64}, DType::F32, "s");
    View r = k.sbuf({128, 64}, DType::F32, "r");
    nki::memset(s, 1.0);
    nki::sendrecv(s(all, S(0, n)), r(all, S(0, n)));
  };
  const std::string at = "test_deps.cpp:" + std::to_string(line);
  CHECK_THROWS_AS(build(mismatched, 2), RuleError);
  CHECK_THROWS_WITH(
      build(mismatched, 2),
      Catch::Contains(at + ": sendrecv: element count: sendrecv 1 of core 0 sends src") &&
          Catch::Contains("(8192 elements) to core 1, whose sendrecv 1 at " + at + " receives into dst") &&
          Catch::Contains("(4096 elements)"));
}

TEST_CASE("a build that would exceed max_instructions stops with the kernel line", "[kernels][deps]") {
  BuildOptions o{default_limits(Generation::Trn2), 2};
  o.max_instructions = 5;
  // Three memsets per core: the sixth instruction (core 1's third) is one too many.
  const int line = __LINE__ + 3;
  const auto fn = [](Kernel& k) {
    View t = k.sbuf({128, 4}, DType::F32);
    for (int i = 0; i < 3; ++i) nki::memset(t, 1.0);
  };
  CHECK_THROWS_WITH(build_program(fn, o), Catch::Contains("test_deps.cpp:" + std::to_string(line) +
                                                          ": the kernel emits more than 5 instructions"));
  o.max_instructions = 6;
  CHECK(build_program(fn, o).program.streams[1][static_cast<int>(Engine::DVE)].size() == 3);
}

TEST_CASE("a declaration build declares the tensors and emits nothing, past max_instructions",
          "[kernels][deps]") {
  BuildOptions o{default_limits(Generation::Trn2), 2};
  o.max_instructions = 5;
  o.declare_only = true;
  // 100 loads and stores per core (400 instructions), an explicit edge and a rule error (PE writes SBUF),
  // which only a real build reports.
  const auto fn = [](Kernel& k) {
    View x = k.input("x", DType::BF16, {128, 64});
    View y = k.output("y", DType::BF16, {128, 64});
    View t = k.sbuf({128, 64}, DType::BF16);
    InstRef last;
    for (int i = 0; i < 100; ++i) {
      InstRef load = nki::dma_copy(t, x);
      last = nki::dma_copy(y, t);
      last.depends_on(load);
    }
    k.scratch("s", DType::F32, {4, 4}, true);
    View d = k.sbuf({128, 128}, DType::F32);
    View a = k.sbuf({128, 128}, DType::BF16);
    nki::nc_matmul(d, a, a);
  };
  const KernelBuild b = build_program(fn, o);
  CHECK(b.inputs == std::vector<std::string>{"x"});
  CHECK(b.outputs == std::vector<std::string>{"y"});
  REQUIRE(b.program.tensors.size() == 4);  // x, y and one private "s" per core
  CHECK(b.program.tensors[2].name == "s");
  CHECK(b.program.tensors[3].private_to_core == 1);
  for (const auto& core : b.program.streams)
    for (const auto& stream : core) CHECK(stream.empty());
  CHECK_FALSE(b.program.checked_limits.has_value());
  o.declare_only = false;
  CHECK_THROWS_WITH(build_program(fn, o), Catch::Contains("the kernel emits more than 5 instructions"));
}

TEST_CASE("HBM tensors must fit the HBM stack", "[kernels][deps]") {
  // Trn2: 24 GiB (one core here: the message says lnc 1, not the LNC2 pair). Two BF16 [65536, 131072] tensors
  // take 16 GiB each: the second does not fit. (The lambda stays outside the CHECK macro: inside it, gcc and
  // clang give its lines different numbers.)
  const int line = __LINE__ + 3;
  const auto two_tensors = [](Kernel& k) {
    k.input("a", DType::BF16, {65536, 131072});
    k.input("b", DType::BF16, {65536, 131072});
  };
  CHECK_THROWS_WITH(
      build(two_tensors),
      Catch::Contains("test_deps.cpp:" + std::to_string(line) +
                      ": hbm tensor 'b' [65536, 131072] bfloat16: the kernel's HBM tensors need "
                      "32 GiB; the HBM stack of the core (lnc 1) holds 24 GiB (hbm.capacity_GiB)"));
  // Shapes whose byte count overflows int64 are caught too, not wrapped.
  CHECK_THROWS_WITH(build([](Kernel& k) {
                      k.input("x", DType::F32, {int64_t{1} << 40, int64_t{1} << 40});
                    }),
                    Catch::Contains("HBM stack"));
}
