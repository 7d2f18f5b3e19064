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
#include "kernels/api/registry.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

struct Params {
  int64_t n;
  bool stream;
  int64_t row_chunk, free_dim, bufs;
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

void register_cs149_vector_add(Registry& r) {
  KernelInfo info;
  info.name = "cs149_vector_add";
  info.doc =
      "out[n] = a[n] + b[n] in FP32 with [row_chunk, 1] tiles (tiled) or [128, free_dim] tiles (stream)";
  info.params = {
      {.name = "n", .type = ParamType::Int, .min = 1, .max = 1 << 30, .doc = "vector length"},
      {.name = "variant",
       .type = ParamType::Enum,
       .default_value = "stream",
       .allowed = {"tiled", "stream"},
       .doc = "tiled: [row_chunk, 1] tiles; stream: [128, free_dim] tiles"},
      {.name = "row_chunk",
       .type = ParamType::Int,
       .default_value = 128,
       .min = 1,
       .max = 128,
       .doc = "partitions of a tile (tiled)"},
      {.name = "free_dim",
       .type = ParamType::Int,
       .default_value = 2,
       .min = 1,
       .max = 1 << 16,
       .doc = "elements per partition of a tile (stream)"},
      {.name = "bufs",
       .type = ParamType::Int,
       .default_value = 1,
       .min = 1,
       .max = 64,
       .doc = "tile sets rotated over the iterations (1: a rolled loop reusing its tiles)"},
  };
  info.build = [](const nlohmann::json& j, const BuildOptions& options) {
    Params p{j.at("n").get<int64_t>(), j.at("variant") == "stream", j.at("row_chunk").get<int64_t>(),
             j.at("free_dim").get<int64_t>(), j.at("bufs").get<int64_t>()};
    return build_program([&p](Kernel& k) { kernel(k, p); }, options);
  };
  r.add(std::move(info));
}

}  // namespace trnsim::kernels
