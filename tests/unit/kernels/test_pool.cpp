// NKI allocation semantics in the builder: tile pools rotating over `bufs` buffers and the waits that
// implies, one tile outside the loop serialising iterations, the software-pipelined emission order, and
// Trn2 multi-bank PSUM tiles with whole-tile dependencies.
#include <catch2/catch.hpp>

#include "kernels/api/nki.h"
#include "kernels/api/schedule.h"
#include "sim/base/error.h"

using namespace trnsim;
using namespace trnsim::kernels;

namespace {

constexpr uint16_t kPE = 0, kDVE = 1, kACT = 2;
constexpr uint16_t q(int queue) {
  return static_cast<uint16_t>(kDmaSemBase + queue);
}

using Waits = std::vector<std::pair<uint16_t, uint32_t>>;

KernelBuild build(const KernelFn& fn, Generation g = Generation::Trn2) {
  return build_program(fn, {default_limits(g), 1});
}
const isa::Instruction& inst(const KernelBuild& b, Engine e, size_t i) {
  const auto& s = b.program.streams[0][static_cast<int>(e)];
  REQUIRE(i < s.size());
  return s[i];
}
Waits waits(const isa::Instruction& in) {
  Waits w;
  for (const auto& x : in.waits) w.emplace_back(x.sem, x.value);
  return w;
}

// Four iterations of: load a [128, 64] FP32 tile (SP DMA, queues 0-3 round-robin), copy it on DVE into
// column block i of `out`. `bufs` 0: one tile made outside the loop; else a pool of `bufs`.
KernelBuild loop_of_four(int bufs) {
  return build([bufs](Kernel& k) {
    View x = k.input("x", DType::F32, {128, 4 * 64});
    View out = k.sbuf({128, 4, 64}, DType::F32, "out");
    View one = bufs == 0 ? k.sbuf({128, 64}, DType::F32, "t") : View();
    TilePool pool = bufs == 0 ? TilePool() : k.sbuf_pool({128, 64}, DType::F32, "t", bufs);
    for (int i = 0; i < 4; ++i) {
      View t = bufs == 0 ? one : pool.next();
      nki::dma_copy(t, x(all, S(64 * i, 64 * (i + 1))));
      nki::tensor_copy(out(all, i), t);
    }
  });
}

}  // namespace

namespace Catch {
template <>
struct StringMaker<std::pair<uint16_t, uint32_t>> {
  static std::string convert(const std::pair<uint16_t, uint32_t>& w) {
    return "S[" + std::to_string(w.first) + "]>=" + std::to_string(w.second);
  }
};
}  // namespace Catch

TEST_CASE("tile pool: next() rotates over bufs buffers named name[i]", "[kernels][pool]") {
  build([](Kernel& k) {
    TilePool p = k.sbuf_pool({128, 64}, DType::F32, "a_tile", 3);
    CHECK(p.bufs() == 3);
    CHECK(p.name() == "a_tile");
    // [128, 64] FP32: 256 B per partition, 64-byte aligned: buffers at 0, 256, 512.
    for (int i = 0; i < 7; ++i) {
      View t = p.next();
      CHECK(t.offset_bytes() == 256 * (i % 3));
      CHECK(t.name() == "a_tile[" + std::to_string(i % 3) + "]");
    }
    CHECK(p.handed_out() == 7);
    CHECK_THROWS_WITH(p.buffer(3), "tile pool 'a_tile': buffer 3 out of range 0-2");
    TilePool ps = k.psum_pool({128, 512}, DType::F32, "acc", 2);  // one bank each
    CHECK(ps.next().offset_bytes() == 0);
    CHECK(ps.next().offset_bytes() == 2048);
    CHECK(ps.next().offset_bytes() == 0);
  });
  int line = 0;
  try {
    build([&](Kernel& k) {
      line = __LINE__ + 1;
      k.sbuf_pool({128, 64}, DType::F32, "a_tile", 0);
    });
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "test_pool.cpp:" + std::to_string(line) + ": sbuf pool 'a_tile' needs bufs >= 1, got 0");
  }
  CHECK_THROWS_WITH(TilePool().next(), "tile pool: next() on an empty pool (make it with Kernel::sbuf_pool)");
}

TEST_CASE("tile pool: a load into a reused buffer waits for the last read of its previous use",
          "[kernels][pool]") {
  // Loads are SP DMAs on queues 0-3 (transfer #1 of each); copy i is DVE #(i + 1) and waits for its load.
  for (int bufs : {0, 1, 2, 3}) {
    INFO("bufs " << bufs);
    const KernelBuild b = loop_of_four(bufs);
    for (int i = 0; i < 4; ++i) CHECK(waits(inst(b, Engine::DVE, i)) == Waits{{q(i), 1}});
    // Load i reuses the buffer of load i - n (n = bufs, 1 for the tile made outside the loop): WAR on the
    // copy that read it, DVE #(i - n + 1), and WAW on that load's transfer (#1 of queue i - n; already
    // implied by the copy, but SP never waited for it itself). The first n loads start at once.
    const int n = bufs == 0 ? 1 : bufs;
    for (int i = 0; i < 4; ++i) {
      const Waits expect = i < n ? Waits{} : Waits{{kDVE, static_cast<uint32_t>(i - n + 1)}, {q(i - n), 1}};
      CHECK(waits(inst(b, Engine::SP, i)) == expect);
    }
  }
}

TEST_CASE("pipelined_loop: the next iteration's loads are emitted ahead of this iteration's store",
          "[kernels][pool]") {
  // Per iteration: load a and b (SP), add (DVE), store (SP); a, b, res from pools of 2.
  const auto kernel = [](int64_t lookahead) {
    return build([lookahead](Kernel& k) {
      View a = k.input("a", DType::F32, {128, 4 * 8});
      View b = k.input("b", DType::F32, {128, 4 * 8});
      View out = k.output("out", DType::F32, {128, 4 * 8});
      TilePool pa = k.sbuf_pool({128, 8}, DType::F32, "a_tile", 2);
      TilePool pb = k.sbuf_pool({128, 8}, DType::F32, "b_tile", 2);
      TilePool pr = k.sbuf_pool({128, 8}, DType::F32, "res", 2);
      struct Tiles {
        View a, b;
      };
      pipelined_loop(
          4, lookahead,
          [&](int64_t i) {
            Tiles t{pa.next(), pb.next()};
            nki::dma_copy(t.a, a(all, S(8 * i, 8 * (i + 1))));
            nki::dma_copy(t.b, b(all, S(8 * i, 8 * (i + 1))));
            return t;
          },
          [&](int64_t i, Tiles& t) {
            View r = pr.next();
            nki::tensor_tensor(r, t.a, t.b, nki::AluOp::Add);
            nki::dma_copy(out(all, S(8 * i, 8 * (i + 1))), r);
          });
    });
  };
  // The SP stream as (iteration, tensor) of each DMA: loads read a/b, stores write out.
  const auto order = [](const KernelBuild& b) {
    std::vector<std::string> v;
    for (const auto& in : b.program.streams[0][static_cast<int>(Engine::SP)]) {
      const bool store = in.ops[0].space == isa::MemSpace::HBM;
      const auto& hbm = store ? in.ops[0] : in.ops[1];
      v.push_back((store                                       ? "S"
                   : b.program.tensors[hbm.tensor].name == "a" ? "A"
                                                               : "B") +
                  std::to_string(hbm.offset_bytes / 4 / 8));  // column offset / 8 elements = iteration
    }
    return v;
  };
  const KernelBuild in_order = kernel(0);
  CHECK(order(in_order) ==
        std::vector<std::string>{"A0", "B0", "S0", "A1", "B1", "S1", "A2", "B2", "S2", "A3", "B3", "S3"});
  const KernelBuild piped = kernel(1);
  CHECK(order(piped) ==
        std::vector<std::string>{"A0", "B0", "A1", "B1", "S0", "A2", "B2", "S1", "A3", "B3", "S2", "S3"});
  // Queues round-robin over 0-7 in SP order: A0 q0, B0 q1, A1 q2, B1 q3, S0 q4, A2 q5, B2 q6, S1 q7, ...
  // The adds wait for their two loads. S0 waits for add 0 (DVE #1), whose result it stores; A2 reuses
  // buffer 0 of a_tile, read by add 0: SP already waited for DVE #1 at S0, so only the WAW on A0's transfer
  // (queue 0 #1) is left.
  CHECK(waits(inst(piped, Engine::DVE, 0)) == Waits{{q(0), 1}, {q(1), 1}});
  CHECK(waits(inst(piped, Engine::DVE, 1)) == Waits{{q(2), 1}, {q(3), 1}});
  CHECK(waits(inst(piped, Engine::SP, 4)) == Waits{{kDVE, 1}});  // S0
  CHECK(waits(inst(piped, Engine::SP, 5)) == Waits{{q(0), 1}});  // A2
  CHECK_THROWS_WITH(pipelined_loop(
                        2, -1, [](int64_t i) { return i; }, [](int64_t, int64_t&) {}),
                    "pipelined_loop: lookahead must be >= 0");
}

TEST_CASE("Trn2 multi-bank PSUM tile: any access depends on the whole tile; Trn3 tracks regions",
          "[kernels][pool]") {
  // A 4-bank FP32 tile [128, 2048]: the PE writes bank 0, ACT reads bank 3, DVE writes bank 1.
  const auto kernel = [](Kernel& k) {
    View st = k.sbuf({128, 128}, DType::BF16, "stationary");
    View mv = k.sbuf({128, 512}, DType::BF16, "moving");
    View p = k.psum({128, 2048}, DType::F32, "wide");
    View o = k.sbuf({128, 512}, DType::F32, "o");
    nki::nc_matmul(p(all, S(0, 512)), st, mv);                                // PE #1, bank 0
    nki::activation(o, nki::ActFunc::Copy, p(all, S(1536, 2048)));            // ACT #1, bank 3
    nki::memset(p(all, S(512, 1024)), 0.0);                                   // DVE #1, bank 1
    nki::tensor_copy(o(all, S(0, 256)), p(all, S(1024, 1280)), Engine::DVE);  // DVE #2, bank 2
  };
  const KernelBuild t2 = build(kernel, Generation::Trn2);
  CHECK(waits(inst(t2, Engine::ACT, 0)) == Waits{{kPE, 1}});             // RAW on the matmul's tile
  CHECK(waits(inst(t2, Engine::DVE, 0)) == Waits{{kPE, 1}, {kACT, 1}});  // WAW, WAR on the tile
  CHECK(waits(inst(t2, Engine::DVE, 1)).empty());  // same engine as the last writer; ACT already waited
  const KernelBuild t3 = build(kernel, Generation::Trn3);
  CHECK(waits(inst(t3, Engine::ACT, 0)).empty());  // bank 3 was never written
  CHECK(waits(inst(t3, Engine::DVE, 0)).empty());
  // The matmul output must still stay inside one bank on Trn2.
  CHECK_THROWS_AS(build(
                      [](Kernel& k) {
                        View st = k.sbuf({128, 128}, DType::BF16, "stationary");
                        View mv = k.sbuf({128, 512}, DType::BF16, "moving");
                        View p = k.psum({128, 1024}, DType::F32, "wide");
                        nki::nc_matmul(p(all, S(256, 768)), st, mv);
                      },
                      Generation::Trn2),
                  RuleError);
}
