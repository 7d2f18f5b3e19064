// transpose_2d: out[N, M] = in[M, N]^T in FP32, one 128 x 128 tile at a time: DMA in, nc_transpose on the PE
// into PSUM, copy PSUM -> SBUF (DVE), DMA out (loads triggered from SP, stores from ACT). Tiles rotate
// through `bufs` SBUF/PSUM slots.
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/package.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

constexpr int64_t kT = 128;

struct Params {
  int64_t M = 0, N = 0, bufs = 4;

  static void describe(Schema<Params>& s) {
    s.dim(&Params::M, "M", "rows of in (multiple of 128)");
    s.dim(&Params::N, "N", "columns of in (multiple of 128)");
    s.add(&Params::bufs, "bufs", "tile slots (SBUF in/out tiles and PSUM banks) rotated over the tiles", 4).range(1, 8);
  }
};

void kernel(Kernel& k, const Params& p) {
  View in = k.input("in", DType::F32, {p.M, p.N});
  View out = k.output("out", DType::F32, {p.N, p.M});
  if (p.M % kT || p.N % kT)
    throw InputError(fmt::format("kernel 'transpose_2d': M, N = {}, {} must be multiples of 128", p.M, p.N));
  std::vector<View> src, ps, dst;
  for (int64_t i = 0; i < p.bufs; ++i) {
    src.push_back(k.sbuf({kT, kT}, DType::F32, "in_tile"));
    ps.push_back(k.psum({kT, kT}, DType::F32, "t_psum"));
    dst.push_back(k.sbuf({kT, kT}, DType::F32, "out_tile"));
  }
  int64_t i = 0;
  for (int64_t r = 0; r < p.M / kT; ++r)
    for (int64_t c = 0; c < p.N / kT; ++c, ++i) {
      const size_t s = static_cast<size_t>(i % p.bufs);
      nki::dma_copy(src[s], in(S(r * kT, (r + 1) * kT), S(c * kT, (c + 1) * kT)));
      nki::nc_transpose(ps[s], src[s]);
      nki::tensor_copy(dst[s], ps[s]);
      nki::dma_copy(out(S(c * kT, (c + 1) * kT), S(r * kT, (r + 1) * kT)), dst[s], {.engine = Engine::ACT});
    }
}

}  // namespace

std::unique_ptr<KernelDef> transpose_2d_kernel() {
  KernelPackage<Params> k;
  k.name = "transpose_2d";
  k.doc = "out[N,M] = in[M,N]^T in FP32 by 128 x 128 tiles: DMA in, PE nc_transpose, PSUM -> SBUF, DMA out";
  k.kernel = kernel;
  // A transpose moves bits: the output equals the host's transpose byte for byte.
  k.checks = [](const Params&) {
    return std::vector{bit_exact_check("out", [](const CheckContext& c) {
      const tensor::HostTensor& in = c.input("in");
      const int64_t R = in.shape[0], C = in.shape[1];
      tensor::HostTensor t = tensor::HostTensor::zeros(in.dtype, {C, R});
      for (int64_t r = 0; r < R; ++r)
        for (int64_t col = 0; col < C; ++col)
          std::memcpy(&t.bytes[(col * R + r) * 4], &in.bytes[(r * C + col) * 4], 4);
      return t;
    })};
  };
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
