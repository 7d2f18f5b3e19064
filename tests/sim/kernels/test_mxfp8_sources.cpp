// The MXFP8 pipeline's operand sources on the SystemC model (Trn3): every source and loader gives the
// bit-exact host result (mx_exact: the kernel's quantization and PE accumulation order emulated on the host),
// and the PE loader writes the same bytes as the DGT loader.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>

#include "sim/base/error.h"
#include "tests/sim/kernels/test_mxfp8_pipeline_util.h"

using namespace trnsim;
using namespace trnsim::test;

namespace {

constexpr auto kE4 = num::Fp8Format::E4M3FN;

// Y = X W^T with X [M, K] and W [N, K] BF16 in HBM, X loaded by `lhs_swizzle`, W F-by-K (DGT) or K-by-F.
std::vector<float> run_hbm(int64_t M, int64_t K, int64_t N, const std::vector<uint16_t>& x,
                           const std::vector<uint16_t>& w, mx::Swizzle lhs_swizzle, bool w_k_by_f,
                           num::QuantScheme s, mx::Tiling tiling = {}) {
  mx::MatmulSpec spec =
      pipeline_spec(M, K, N, operand(mx::Source::Hbm, mx::Layout::FByK, "x", lhs_swizzle),
                    operand(mx::Source::Hbm, w_k_by_f ? mx::Layout::KByF : mx::Layout::FByK, "w"), s);
  spec.tiling = tiling;
  const mx::Plan plan = mx::plan_matmul(spec, trn3().limits());
  const auto r = run_fn(
      [&](Kernel& k) {
        mx::MatmulSpec sp = spec;
        sp.lhs.data = k.input("x", isa::DType::BF16, {M, K});
        sp.rhs.data = k.input("w", isa::DType::BF16,
                              w_k_by_f ? std::vector<int64_t>{K, N} : std::vector<int64_t>{N, K});
        mx::StoreRows out(k.output("y", isa::DType::F32, {M, N}));
        mx::emit_matmul(k, sp, plan, out);
      },
      {{"x", as_bytes(x)}, {"w", as_bytes(w_k_by_f ? transposed(w, N, K) : w)}});
  return f32_of(r.tensors.at("y"));
}

}  // namespace

TEST_CASE("mxfp8 sources: HBM F-by-K (DGT and PE loader) and K-by-F operands give the bit-exact result") {
  struct Case {
    int64_t M, K, N, tile_k;
  };
  // K = 640: a 512-row and a 128-row sub-tile; tile_k 256 splits a 512 sub-tile over two K tiles; M = 320
  // leaves a 64-row PE sub-tile.
  for (const Case& c : {Case{256, 1024, 512, 512}, Case{320, 640, 512, 512}, Case{256, 640, 512, 256}})
    for (auto s : {num::QuantScheme::WrapX, num::QuantScheme::OneX32}) {
      INFO(c.M << "x" << c.K << "x" << c.N << " tile_k " << c.tile_k << " 1x32 "
               << (s == num::QuantScheme::OneX32));
      const auto x = random_bf16(c.M, c.K, 1), w = random_bf16(c.N, c.K, 2);
      const auto ref = mx_exact({&x, c.K, c.M, false}, {&w, c.K, c.N, false}, kE4, s, c.tile_k);
      mx::Tiling t;
      t.tile_k = c.tile_k;
      const auto dgt = run_hbm(c.M, c.K, c.N, x, w, mx::Swizzle::Dgt, false, s, t);
      CHECK(same(dgt, ref));
      CHECK(same(run_hbm(c.M, c.K, c.N, x, w, mx::Swizzle::Pe, false, s, t), ref));
      CHECK(same(run_hbm(c.M, c.K, c.N, x, w, mx::Swizzle::Pe, true, s, t), ref));
    }
}

TEST_CASE("mxfp8 sources: a scratch tensor written by one matmul is the next one's operand") {
  // Y1 = X W1^T [M, H] stored as BF16 into a scratch tensor; Y2 = Y1 W2^T reads it F-by-K.
  const int64_t M = 256, K = 512, H = 512, N = 256;
  const auto x = random_bf16(M, K, 3), w1 = random_bf16(H, K, 4), w2 = random_bf16(N, H, 5);
  mx::MatmulSpec s1 = pipeline_spec(M, K, H, operand(mx::Source::Hbm, mx::Layout::FByK, "x"),
                                    operand(mx::Source::Hbm, mx::Layout::FByK, "w1"));
  mx::MatmulSpec s2 = pipeline_spec(M, H, N, operand(mx::Source::Hbm, mx::Layout::FByK, "y1"),
                                    operand(mx::Source::Hbm, mx::Layout::FByK, "w2"));
  s2.scope = "t2";
  const auto p1 = mx::plan_matmul(s1, trn3().limits()), p2 = mx::plan_matmul(s2, trn3().limits());
  const auto r = run_fn(
      [&](Kernel& k) {
        View y1 = k.scratch("y1", isa::DType::BF16, {M, H}, false);
        mx::MatmulSpec a = s1, b = s2;
        a.lhs.data = k.input("x", isa::DType::BF16, {M, K});
        a.rhs.data = k.input("w1", isa::DType::BF16, {H, K});
        mx::StoreRows to_scratch(y1);
        mx::emit_matmul(k, a, p1, to_scratch);
        b.lhs.data = y1;
        b.rhs.data = k.input("w2", isa::DType::BF16, {N, H});
        mx::StoreRows out(k.output("y", isa::DType::F32, {M, N}));
        mx::emit_matmul(k, b, p2, out);
      },
      {{"x", as_bytes(x)}, {"w1", as_bytes(w1)}, {"w2", as_bytes(w2)}});
  const auto y1 = to_bf16(mx_exact({&x, K, M, false}, {&w1, K, H, false}, kE4, num::QuantScheme::WrapX));
  CHECK(u16_of(r.tensors.at("y1")) == y1);
  const auto ref = mx_exact({&y1, H, M, false}, {&w2, H, N, false}, kE4, num::QuantScheme::WrapX);
  CHECK(same(f32_of(r.tensors.at("y")), ref));
}

TEST_CASE("mxfp8 sources: resident SBUF tiles, F-by-K (PE) and K-by-F, and a tile handed over by ToSbuf") {
  const int64_t M = 256, K = 1024, N = 512;
  const auto x = random_bf16(M, K, 6), w = random_bf16(N, K, 7);
  const auto wt = transposed(w, N, K);  // [K, N]
  for (auto sch : {num::QuantScheme::WrapX, num::QuantScheme::OneX32}) {
    INFO("1x32 " << (sch == num::QuantScheme::OneX32));
    const bool wrapx = sch == num::QuantScheme::WrapX;
    // X resident [128, M/128, K]; W^T resident [128, K/128, N] (K-by-F: wrapX only) or W from HBM.
    mx::MatmulSpec spec = pipeline_spec(M, K, N, operand(mx::Source::Sbuf, mx::Layout::FByK, "x"),
                                        wrapx ? operand(mx::Source::Sbuf, mx::Layout::KByF, "w")
                                              : operand(mx::Source::Hbm, mx::Layout::FByK, "w"),
                                        sch);
    const auto plan = mx::plan_matmul(spec, trn3().limits());
    const auto r = run_fn(
        [&](Kernel& k) {
          mx::MatmulSpec s = spec;
          View xh = k.input("x", isa::DType::BF16, {M, K});
          View xs = k.sbuf({128, M / 128, K}, isa::DType::BF16, "x_resident");
          kernels::nki::dma_copy(xs, xh.reshape({M / 128, 128, K}).permute({1, 0, 2}));
          s.lhs.data = xs;
          if (wrapx) {
            View wh = k.input("w", isa::DType::BF16, {K, N});
            View ws = k.sbuf({128, K / 128, N}, isa::DType::BF16, "w_resident");
            kernels::nki::dma_copy(ws, wh.reshape({K / 128, 128, N}).permute({1, 0, 2}));
            s.rhs.data = ws;
          } else {
            s.rhs.data = k.input("w", isa::DType::BF16, {N, K});
          }
          mx::StoreRows out(k.output("y", isa::DType::F32, {M, N}));
          mx::emit_matmul(k, s, plan, out);
        },
        {{"x", as_bytes(x)}, {"w", as_bytes(wrapx ? wt : w)}});
    CHECK(same(f32_of(r.tensors.at("y")), mx_exact({&x, K, M, false}, {&w, K, N, false}, kE4, sch)));
  }

  // ToSbuf: Y1 = X W^T tiles are cast to BF16 into a resident tile that Y2 = Y1 V^T reads (no HBM round
  // trip).
  const int64_t P = 256;
  const auto v = random_bf16(P, N, 8);
  mx::MatmulSpec s1 = pipeline_spec(M, K, N, operand(mx::Source::Hbm, mx::Layout::FByK, "x"),
                                    operand(mx::Source::Hbm, mx::Layout::FByK, "w"));
  mx::MatmulSpec s2 = pipeline_spec(M, N, P, operand(mx::Source::Sbuf, mx::Layout::FByK, "y1"),
                                    operand(mx::Source::Hbm, mx::Layout::FByK, "v"));
  s2.scope = "t2";
  const auto p1 = mx::plan_matmul(s1, trn3().limits()), p2 = mx::plan_matmul(s2, trn3().limits());
  int tiles = 0;
  const auto r = run_fn(
      [&](Kernel& k) {
        mx::MatmulSpec a = s1, b = s2;
        a.lhs.data = k.input("x", isa::DType::BF16, {M, K});
        a.rhs.data = k.input("w", isa::DType::BF16, {N, K});
        View y1 = k.sbuf({128, M / 128, N}, isa::DType::BF16, "y1");
        mx::ToSbuf keep([&](const mx::OutTile& t) {
          ++tiles;
          const int64_t n = t.tile.partitions(), c = t.tile.free_elements();
          kernels::nki::tensor_copy(y1(S(t.row % 128, t.row % 128 + n), t.row / 128, S(t.col, t.col + c)),
                                    t.tile);
        });
        mx::emit_matmul(k, a, p1, keep);
        b.lhs.data = y1;
        b.rhs.data = k.input("v", isa::DType::BF16, {P, N});
        mx::StoreRows out(k.output("y", isa::DType::F32, {M, P}));
        mx::emit_matmul(k, b, p2, out);
      },
      {{"x", as_bytes(x)}, {"w", as_bytes(w)}, {"v", as_bytes(v)}});
  CHECK(tiles == 2);  // one row tile of 128 x 512 per M tile
  const auto y1 = to_bf16(mx_exact({&x, K, M, false}, {&w, K, N, false}, kE4, num::QuantScheme::WrapX));
  CHECK(same(f32_of(r.tensors.at("y")),
             mx_exact({&y1, N, M, false}, {&v, N, P, false}, kE4, num::QuantScheme::WrapX)));
}

TEST_CASE("mxfp8 sources: gathered token rows, F-by-K (PE loader), with -1 padding skipped or a zero row") {
  // B = 256 slots over T = 300 tokens: slot i holds token (7 i) % 300, every fifth slot padding.
  const int64_t T = 300, B = 256, K = 512, N = 256;
  const auto h = random_bf16(T + 1, K, 9), w = random_bf16(N, K, 10);
  auto hz = h;
  std::fill(hz.begin() + T * K, hz.end(), uint16_t{0});  // the extra zero row T
  for (auto pad : {mx::Padding::Skip, mx::Padding::ZeroRow})
    for (auto sch : {num::QuantScheme::WrapX, num::QuantScheme::OneX32}) {
      const bool skip = pad == mx::Padding::Skip;
      INFO("skip " << skip << " 1x32 " << (sch == num::QuantScheme::OneX32));
      std::vector<int32_t> tok(B);
      for (int64_t i = 0; i < B; ++i)
        tok[i] = i % 5 == 4 ? (skip ? -1 : T) : static_cast<int32_t>((7 * i) % T);
      const int64_t rows = skip ? T : T + 1;
      mx::MatmulSpec spec = pipeline_spec(B, K, N, operand(mx::Source::Gather, mx::Layout::FByK, "hidden"),
                                          operand(mx::Source::Hbm, mx::Layout::FByK, "w"), sch);
      const auto plan = mx::plan_matmul(spec, trn3().limits());
      const auto r = run_fn(
          [&](Kernel& k) {
            mx::MatmulSpec s = spec;
            s.lhs.data = k.input("hidden", isa::DType::BF16, {rows, K});
            s.lhs.rows = {load_row_index(k, k.input("tokens", isa::DType::I32, {B})), pad};
            s.rhs.data = k.input("w", isa::DType::BF16, {N, K});
            mx::StoreRows out(k.output("y", isa::DType::F32, {B, N}));
            mx::emit_matmul(k, s, plan, out);
          },
          {{"hidden", as_bytes(std::vector<uint16_t>(hz.begin(), hz.begin() + rows * K))},
           {"tokens", i32_bytes(tok)},
           {"w", as_bytes(w)}});
      const auto g = gathered(hz, T, K, tok);
      const auto ref = mx_exact({&g, K, B, false}, {&w, K, N, false}, kE4, sch);
      const auto y = f32_of(r.tensors.at("y"));
      CHECK(same(y, ref));
      CHECK(y[4 * N] == 0.f);  // slot 4 is padding: a zero row
    }
}

TEST_CASE("mxfp8 sources: gathered token rows as the contraction (K-by-F), -1 padding contributing nothing") {
  // Y[H, I] = sum over the block's tokens of dY[t]^T X[t] (a weight gradient): both operands gathered K-by-F.
  const int64_t T = 700, B = 512, H = 256, I = 384;
  const auto dy = random_bf16(T, H, 11), x = random_bf16(T, I, 12);
  std::vector<int32_t> tok(B);
  for (int64_t i = 0; i < B; ++i) tok[i] = i % 7 == 3 ? -1 : static_cast<int32_t>((3 * i + 5) % T);
  mx::MatmulSpec spec = pipeline_spec(H, B, I, operand(mx::Source::Gather, mx::Layout::KByF, "dy"),
                                      operand(mx::Source::Gather, mx::Layout::KByF, "x"));
  const auto plan = mx::plan_matmul(spec, trn3().limits());
  const auto r = run_fn(
      [&](Kernel& k) {
        mx::MatmulSpec s = spec;
        const View idx = load_row_index(k, k.input("tokens", isa::DType::I32, {B}));
        s.lhs.data = k.input("dy", isa::DType::BF16, {T, H});
        s.rhs.data = k.input("x", isa::DType::BF16, {T, I});
        s.lhs.rows = s.rhs.rows = {idx, mx::Padding::Skip};
        mx::StoreRows out(k.output("y", isa::DType::F32, {H, I}));
        mx::emit_matmul(k, s, plan, out);
      },
      {{"dy", as_bytes(dy)}, {"x", as_bytes(x)}, {"tokens", i32_bytes(tok)}});
  const auto gdy = gathered(dy, T, H, tok), gx = gathered(x, T, I, tok);
  CHECK(same(f32_of(r.tensors.at("y")),
             mx_exact({&gdy, B, H, true}, {&gx, B, I, true}, kE4, num::QuantScheme::WrapX)));
}

TEST_CASE("mxfp8 sources: one expert of a stacked weight, by a view slice and by a device-side row index") {
  // W stacked [E, N, K] (F-by-K per expert), and stacked [E, K, N] for the K-by-F orientation.
  const int64_t E = 3, M = 256, K = 512, N = 256, e = 2;
  const auto x = random_bf16(M, K, 13), w = random_bf16(E * N, K, 14);
  std::vector<uint16_t> we(w.begin() + e * N * K, w.begin() + (e + 1) * N * K), wkn;
  for (int64_t i = 0; i < E; ++i) {
    const std::vector<uint16_t> wi(w.begin() + i * N * K, w.begin() + (i + 1) * N * K);
    const auto t = transposed(wi, N, K);
    wkn.insert(wkn.end(), t.begin(), t.end());
  }
  const auto ref = mx_exact({&x, K, M, false}, {&we, K, N, false}, kE4, num::QuantScheme::WrapX);
  const std::vector<int32_t> expert(128, static_cast<int32_t>(e));
  struct Case {
    const char* what;
    mx::Source src;
    mx::Layout layout;
  };
  for (const Case& c : {Case{"static view slice", mx::Source::Hbm, mx::Layout::FByK},
                        Case{"row index, F-by-K", mx::Source::Gather, mx::Layout::FByK},
                        Case{"row index, K-by-F", mx::Source::Gather, mx::Layout::KByF}}) {
    INFO(c.what);
    const bool kbyf = c.layout == mx::Layout::KByF;
    mx::MatmulSpec spec = pipeline_spec(M, K, N, operand(mx::Source::Hbm, mx::Layout::FByK, "x"),
                                        operand(c.src, c.layout, "w"));
    const auto plan = mx::plan_matmul(spec, trn3().limits());
    const auto r = run_fn(
        [&](Kernel& k) {
          mx::MatmulSpec s = spec;
          s.lhs.data = k.input("x", isa::DType::BF16, {M, K});
          if (c.src == mx::Source::Hbm) {
            s.rhs.data = mx::expert_slice(k.input("w", isa::DType::BF16, {E, N, K}), e);
          } else {
            // The stacked weight's rows are the experts' rows ([E*N, K] or [E*K, N]), so an index can pick
            // them.
            const int64_t R = kbyf ? K : N;
            s.rhs.data = k.input("w", isa::DType::BF16, {E * R, kbyf ? N : K});
            View id = k.sbuf({128, 1}, isa::DType::I32, "expert");
            kernels::nki::dma_copy(id, k.input("expert", isa::DType::I32, {128, 1}));
            s.rhs.rows = {mx::expert_row_index(k, id, R, 0, R), mx::Padding::ZeroRow};
          }
          mx::StoreRows out(k.output("y", isa::DType::F32, {M, N}));
          mx::emit_matmul(k, s, plan, out);
        },
        {{"x", as_bytes(x)}, {"w", as_bytes(kbyf ? wkn : w)}, {"expert", i32_bytes(expert)}});
    CHECK(same(f32_of(r.tensors.at("y")), ref));
  }
}

TEST_CASE("mxfp8 sources: operand views that do not match the spec are rejected") {
  mx::MatmulSpec spec = pipeline_spec(256, 512, 256, operand(mx::Source::Gather, mx::Layout::FByK, "h"),
                                      operand(mx::Source::Hbm, mx::Layout::FByK, "w"));
  const auto plan = mx::plan_matmul(spec, trn3().limits());
  const auto err = [&](const std::function<void(Kernel&, mx::MatmulSpec&)>& bind) {
    try {
      kernels::BuildOptions o;
      o.limits = trn3().limits();
      kernels::build_program(
          [&](Kernel& k) {
            mx::MatmulSpec s = spec;
            s.rhs.data = k.input("w", isa::DType::BF16, {256, 512});
            bind(k, s);
            mx::StoreRows out(k.output("y", isa::DType::F32, {256, 256}));
            mx::emit_matmul(k, s, plan, out);
          },
          o);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(err([](Kernel& k, mx::MatmulSpec& s) {
          s.lhs.data = k.input("h", isa::DType::BF16, {2, 300, 512}).reshape({600, 512});
          s.lhs.rows.index = k.sbuf({128, 2}, isa::DType::I32);
        }) ==
        "pipeline test: lhs operand 'h': gathered rows hbm 'h' [600, 512] bfloat16 must be the rows (dim 0) "
        "of its tensor: an indirect DMA indexes tensor rows");
  CHECK(err([](Kernel& k, mx::MatmulSpec& s) {
          s.lhs.data = k.input("h", isa::DType::BF16, {300, 512});
          s.lhs.rows.index = k.sbuf({128, 1}, isa::DType::I32, "index");
        }) ==
        "pipeline test: lhs operand 'h': row index sbuf 'index' [128, 1] int32 must be [128, >= 2] (row r at "
        "[r % 128, r / 128])");
  CHECK(err([](Kernel& k, mx::MatmulSpec& s) {
          s.lhs.data = k.input("h", isa::DType::BF16, {300, 512});
        }) == "pipeline test: lhs operand 'h': a gathered operand needs a row index");
  mx::MatmulSpec bad =
      pipeline_spec(256, 512, 256, operand(mx::Source::Gather, mx::Layout::KByF, "h"),
                    operand(mx::Source::Hbm, mx::Layout::FByK, "w"), num::QuantScheme::OneX32);
  try {
    mx::plan_matmul(bad, trn3().limits());
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "pipeline test: h is K-by-F and gathered by row indices: quant_scheme 1x32 puts rows 4p..4p+3 on "
          "partition p, which one row index column (or one partition run) cannot pick; use wrapX");
  }
}

TEST_CASE(
    "mxfp8 sources: with Cores::CallingCore each core runs its own matmul (the caller shards the work)") {
  // Core c multiplies its own rows x[c] (as an MoE forward shards blocks over the cores) into y[c].
  const int64_t M = 256, K = 512, N = 256;
  const auto x = random_bf16(2 * M, K, 15), w = random_bf16(N, K, 16);
  mx::MatmulSpec spec = pipeline_spec(M, K, N, operand(mx::Source::Hbm, mx::Layout::FByK, "x"),
                                      operand(mx::Source::Hbm, mx::Layout::FByK, "w"));
  spec.cores = mx::Cores::CallingCore;
  const auto plan = mx::plan_matmul(spec, trn3().limits());
  const auto r = run_fn(
      [&](Kernel& k) {
        const int c = k.program_id();
        mx::MatmulSpec s = spec;
        s.lhs.data = k.input("x", isa::DType::BF16, {2 * M, K})(S(c * M, (c + 1) * M));
        s.rhs.data = k.input("w", isa::DType::BF16, {N, K});
        mx::StoreRows out(k.output("y", isa::DType::F32, {2 * M, N})(S(c * M, (c + 1) * M)));
        mx::emit_matmul(k, s, plan, out);
      },
      {{"x", as_bytes(x)}, {"w", as_bytes(w)}}, 2);
  CHECK(same(f32_of(r.tensors.at("y")),
             mx_exact({&x, K, 2 * M, false}, {&w, K, N, false}, kE4, num::QuantScheme::WrapX)));
  for (int c = 0; c < 2; ++c) {
    size_t pe = 0;
    for (const auto& s : r.program.streams[c])
      for (const auto& i : s) pe += i.op == isa::Opcode::NcMatmulMx;
    CHECK(pe == 2);  // 256 x 256 of tile 128 x 256 (one K tile): two matmuls on each core
  }
}
