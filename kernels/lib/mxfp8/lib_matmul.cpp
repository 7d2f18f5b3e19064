#include "kernels/lib/mxfp8/lib_matmul.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"

namespace trnsim::kernels::mxfp8::lib {
namespace {

// The TensorDescriptor of a bound operand; `f0, nf` the core's share of F (its LNC2 shard).
// fast_dma_transpose goes to every unswizzled BF16 operand, as matmul_mxfp8 passes it (it changes their K
// remainder loads, load_block.py _load_single_tensor, and which loads take vector offsets).
Td descriptor(const Operand& o, int64_t K, int64_t f0, int64_t nf, bool fast, num::QuantScheme scheme) {
  Td td;
  td.scheme = scheme;
  switch (o.layout) {
    case Layout::FByK:
      td.form = Td::Form::FByK;
      td.swizzle = o.swizzle;
      td.fast_dma_transpose = fast;
      td.data = o.data(S(f0, f0 + nf), all);
      break;
    case Layout::KByF:
      td.form = Td::Form::KByF;
      td.fast_dma_transpose = fast;
      td.data = o.data(all, S(f0, f0 + nf));
      break;
    case Layout::Swizzled:
      td.form = Td::Form::Swizzled;
      td.data = o.data(all, S(4 * f0, 4 * (f0 + nf)));
      break;
    default:
      td.form = Td::Form::Quantized;
      td.data = o.data(all, S(f0, f0 + nf));
      td.scales = o.scales(all, S(f0, f0 + nf));
      td.packed = o.scales.size(0) != K / 4;  // nkilib are_scales_packed
      break;
  }
  return td;
}

}  // namespace

std::string unsupported(const MatmulSpec& spec) {
  if (spec.scheme != num::QuantScheme::OneX32) return "";
  for (const Operand* o : {&spec.lhs, &spec.rhs}) {
    if (o->layout == Layout::KByF)
      return fmt::format(
          "quant_scheme 1x32 with {} K-by-F BF16: nki-library's load_tile asserts 1x32 out for a K-by-F "
          "tensor (load_apis.py at e9ef98fc, load_tile: \"1x32 quantization currently requires F-by-K tensor "
          "layout\")",
          o->name);
    if (o->layout == Layout::FByK && (spec.K % 512 != 0 || spec.tiling.tile_k != 512))
      return fmt::format(
          "quant_scheme 1x32 with {} F-by-K BF16 and {}: nki-library loads it by load_tile_PE_Swizzle_1x32, "
          "which asserts tile_k == 512 for every K tile it loads, remainder sub-tiles included (load_apis.py "
          "at e9ef98fc, load_tile_PE_Swizzle_1x32)",
          o->name,
          spec.K % 512 != 0 ? fmt::format("K = {} (a remainder of {} rows)", spec.K, spec.K % 512)
                            : fmt::format("tile_k = {}", spec.tiling.tile_k));
  }
  return "";
}

void emit_matmul(Tiles& t, const MatmulSpec& spec, const Plan& p, const View& out, bool fast_dma_transpose) {
  Kernel& k = t.kernel();
  const int c = k.program_id();
  if (!p.lnc2 && c == 1) return;  // core 0 computes all of Y
  Tiles::Scope scope(t);
  const CoreShare share = core_share(spec, p, c);
  const int64_t Mc = share.M, Nc = share.N, m_lo = share.m_lo, n_lo = share.n_lo;
  const Td lhs = descriptor(spec.lhs, spec.K, m_lo, Mc, fast_dma_transpose, spec.scheme);
  const Td rhs = descriptor(spec.rhs, spec.K, n_lo, Nc, fast_dma_transpose, spec.scheme);
  Geometry g;
  g.tile_m = p.tile_m, g.tile_k = p.tile_k, g.tile_n = p.tile_n;
  g.bm = p.block_m, g.bn = p.block_n, g.bk = p.block_k;
  g.load_m = p.load_m, g.load_n = p.load_n;
  const int64_t nbm = cdiv(Mc, g.block_m()), nbn = cdiv(Nc, g.block_n());
  const int64_t nbk = cdiv(spec.K, g.bk * g.tile_k);
  const bool bf16_out = spec.out_dtype == DType::BF16;
  const DType acc_dtype = bf16_out && nbk > 1 ? DType::F32 : spec.out_dtype;
  Td lhsq, rhsq;
  if (spec.spill_reload && !lhs.quantized())
    lhsq = spill_buffer(k, spec.scope + "_lhsq", nbk, nbm, g.block_m(), g, spec.use_scale_packing, spec.fp8);
  if (spec.spill_reload && !rhs.quantized())
    rhsq = spill_buffer(k, spec.scope + "_rhsq", nbk, nbn, g.block_n(), g, spec.use_scale_packing, spec.fp8);
  for (int64_t mb = 0; mb < nbm; ++mb)
    for (int64_t nb = 0; nb < nbn; ++nb) {
      View acc = t.sbuf(spec.scope + "_output_sbuf", {g.tile_m, g.bm * g.block_n()}, acc_dtype);
      for (int64_t kb = 0; kb < nbk; ++kb) {
        Call call;
        call.kernel = spec.kernel.c_str();
        call.lhs = &lhs, call.rhs = &rhs, call.g = g;
        call.mb = mb, call.nb = nb, call.kb = kb;
        call.out = acc, call.initialize = kb == 0;
        if (lhsq.data.valid()) call.lhsq = &lhsq;
        if (rhsq.data.valid()) call.rhsq = &rhsq;
        call.packing = spec.use_scale_packing;
        call.fp8 = spec.fp8;
        call.nmk = spec.nmk;
        call.psum_dtype = g.bk == 1 && bf16_out ? DType::BF16 : DType::F32;
        generic_matmul(t, call);
      }
      // _store_output_block_to_hbm: one DMA per tile row of the block.
      const int64_t n0 = nb * g.block_n(), wn = std::min(g.block_n(), Nc - n0);
      for (int64_t mt = 0; mt < g.bm; ++mt) {
        const int64_t m0 = mb * g.block_m() + mt * g.tile_m, wm = std::min(g.tile_m, Mc - m0);
        if (wm <= 0 || wn <= 0) continue;
        nki::dma_copy(out(S(m_lo + m0, m_lo + m0 + wm), S(n_lo + n0, n_lo + n0 + wn)),
                      acc(S(0, wm), S(mt * g.block_n(), mt * g.block_n() + wn)));
      }
    }
}

}  // namespace trnsim::kernels::mxfp8::lib
