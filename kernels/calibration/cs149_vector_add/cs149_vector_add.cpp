// cs149_vector_add: out[n] = a[n] + b[n] in FP32, the vector-add exercise of a public accelerator
// programming course, written from its description.
//   tiled   [row_chunk, 1] tiles: n / row_chunk iterations of two loads, one add, one store
//   stream  a viewed as [n / free_dim, free_dim]: [128, free_dim] tiles, n / (128 free_dim) iterations
// The loop is a rolled hardware loop: every iteration reuses the same SBUF tiles (bufs = 1), so the builder's
// region tracking serializes an iteration's loads after the previous add (WAR) and its add after the previous
// store. Loads are triggered from SP, stores from ACT. bufs > 1 rotates that many tile sets instead (an
// unrolled, multi-buffered loop).
#include <fmt/format.h>

#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/package.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

struct Params {
  int64_t n = 0;
  bool stream = true;
  int64_t row_chunk = 128, free_dim = 2, bufs = 1;

  static void describe(Schema<Params>& s) {
    s.add(&Params::n, "n", "vector length").range(1, 1 << 30);
    s.choice(&Params::stream, "variant", "tiled: [row_chunk, 1] tiles; stream: [128, free_dim] tiles",
             {{"tiled", false}, {"stream", true}}, true);
    s.add(&Params::row_chunk, "row_chunk", "partitions of a tile (tiled)", 128).range(1, 128);
    s.add(&Params::free_dim, "free_dim", "elements per partition of a tile (stream)", 2).range(1, 1 << 16);
    s.add(&Params::bufs, "bufs", "tile sets rotated over the iterations (1: a rolled loop reusing its tiles)", 1)
        .range(1, 64);
  }
};

void kernel(Kernel& k, const Params& p) {
  View a = k.input("a", DType::F32, {p.n});
  View b = k.input("b", DType::F32, {p.n});
  View out = k.output("out", DType::F32, {p.n});
  const int64_t rows = p.stream ? 128 : p.row_chunk, cols = p.stream ? p.free_dim : 1;
  if (p.n % (rows * cols))
    throw InputError(fmt::format("kernel 'cs149_vector_add': n = {} is not a multiple of the tile, {} x {}",
                                 p.n, rows, cols));
  const View a2 = a.reshape({p.n / cols, cols}), b2 = b.reshape({p.n / cols, cols}),
             o2 = out.reshape({p.n / cols, cols});
  struct Set {
    View a, b, r;
  };
  std::vector<Set> sets;
  for (int64_t i = 0; i < p.bufs; ++i)
    sets.push_back({k.sbuf({rows, cols}, DType::F32, "a_tile"), k.sbuf({rows, cols}, DType::F32, "b_tile"),
                    k.sbuf({rows, cols}, DType::F32, "res")});
  for (int64_t i = 0; i < p.n / (rows * cols); ++i) {
    const Set& s = sets[i % sets.size()];
    const auto r = S(i * rows, (i + 1) * rows);
    nki::dma_copy(s.a, a2(r));
    nki::dma_copy(s.b, b2(r));
    nki::tensor_tensor(s.r, s.a, s.b, nki::AluOp::Add);
    nki::dma_copy(o2(r), s.r, {.engine = Engine::ACT});
  }
}

}  // namespace

std::unique_ptr<KernelDef> cs149_vector_add_kernel() {
  KernelPackage<Params> k;
  k.name = "cs149_vector_add";
  k.doc = "out[n] = a[n] + b[n] in FP32 with [row_chunk, 1] tiles (tiled) or [128, free_dim] tiles (stream)";
  k.kernel = kernel;
  k.checks = [](const Params&) {
    return std::vector{elementwise_check("out", [](const CheckContext& c) {
      const std::vector<float> a = c.input("a").values(), b = c.input("b").values();
      std::vector<double> g(a.size());
      for (size_t i = 0; i < a.size(); ++i) g[i] = static_cast<double>(a[i]) + static_cast<double>(b[i]);
      return g;
    })};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
