// cross_entropy_bwd: the logits gradient, as BF16 or as TransformerEngine's MXFP8 tensors (ce_params.h).
//
// Gradient (every path): per row tile and vocab chunk, q = exp(x + b) (ACT activation with the per-row bias
// b = -shift), g = bf16(q * gcd + h) (one tensor_scalar; gcd = g c / row_sumexp, ce_lib.h row_factors). The
// target column is not corrected in this pass; it differs from the rest of its row only in its additive term
// (hy = h - g c (1 - ls) instead of h), so:
//   - BF16 output (grad_quantizer none, or the unfused path's HBM scratch): after all chunks, the corrected
//     value of each row's target element is computed from the gathered x_y and written over it by an
//     element-indexed indirect DMA (index r * V + y).
//   - fused MXFP8: the chunks quantize the uncorrected gradient on chip; then for each row the two MXFP8
//     blocks holding its target (the rowwise block of 32 columns and the columnwise block of 32 rows) are
//     recomputed from gathered logits with the correction and written over the first result (data bytes
//     and scale byte) by indirect DMA.
// Rows with an ignored target have b = -inf and gcd = h = 0: a zero gradient row (b = NaN, a NaN row, when
// their row_max is not finite, as PyTorch).
//
// MXFP8, quantize_rule te (natural layout: row r on partition r % 128): keys (an add on ACT, a bitwise and
// on DVE) and the rowwise max-reduce on the BF16 tile; PE transposes of the BF16 tile and of its keys per
// 128 x 128 block; the columnwise max-reduce on the transposed keys (PSUM); one ALU chain (ce_quant.h) for
// all of a chunk's rowwise and columnwise blocks; the FP8 elements by one multiply each way; the columnwise
// FP8 tile transposed back on the PE and written from PSUM. quantize_rule trn3 (T2 layout: 512-row tiles,
// partition p holds rows 4p .. 4p + 3 interleaved): the columnwise blocks (32 rows of a column = 8 partitions
// x 4) are exactly quantize_mx's groups; the rowwise blocks come from PE transposes of every 4th column
// (T[p', 4p + j'] = g[4p + j, v0 + 4p' + j']) into the same group shape, and the x4 result is transposed back
// (as 32-bit words) to row-major bytes. Unfused: the BF16 gradient (patched) goes to an HBM scratch, then
// each 128- or 512-row tile is loaded back in the layout its rule needs and quantized as above.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/package.h"
#include "kernels/cross_entropy/ce_bwd_state.h"
#include "kernels/cross_entropy/ce_check.h"
#include "kernels/cross_entropy/ce_recipes.h"
#include "sim/base/error.h"

namespace trnsim::kernels::ce::bwd {
namespace {

using isa::AluOp;
using nki::ActFunc;

constexpr const char* kName = "kernel 'cross_entropy_bwd'";

// The per-row factors: row_max, row_sumexp, the targets and grad_output loaded, then b, gcd, h and hy.
void load_factors(Ctx& c) {
  Kernel& k = c.k;
  const CommonParams& p = c.p;
  const int64_t nt = c.nt;
  View m = k.sbuf({kP, nt}, DType::F32, "bwd_row_max");
  View d = k.sbuf({kP, nt}, DType::F32, "bwd_row_sumexp");
  c.tgt = k.sbuf({kP, nt}, DType::I32, "bwd_target");
  nki::memset(m, 0.0);
  nki::memset(d, 1.0);
  nki::memset(c.tgt, static_cast<double>(p.ignore_idx));
  load_rows(m, c.row_max, p.rows);
  load_rows(d, c.row_sumexp, p.rows);
  load_rows(c.tgt, c.target, p.rows);
  c.valid = k.sbuf({kP, nt}, DType::F32, "bwd_valid");
  nki::tensor_scalar(c.valid, c.tgt, AluOp::NotEqual, static_cast<double>(p.ignore_idx));
  // c = 1 / max(count, 1) with reduce_loss, else 1.
  c.cvec = k.sbuf({kP, 1}, DType::F32, "bwd_c");
  if (p.reduce_loss) {
    View cnt = count_valid(k, c.valid);
    nki::tensor_scalar(c.cvec, cnt, AluOp::Max, 1.0, false, AluOp::Divide, 1.0, true);
  } else {
    nki::memset(c.cvec, 1.0);
  }
  View g;
  if (c.bp.grad_output == GradOutput::Scalar) {
    View one = k.sbuf({1, 1}, DType::F32, "bwd_grad_output");
    nki::dma_copy(one, c.grad_output.reshape({1, 1}));
    c.gvec = broadcast_partitions(k, one);
    g = c.gvec.broadcast(1, nt);
  } else {
    g = k.sbuf({kP, nt}, DType::F32, "bwd_grad_output_rows");
    nki::memset(g, 0.0);
    load_rows(g, c.grad_output, p.rows);
  }
  c.b = k.sbuf({kP, nt}, DType::F32, "bwd_b");
  c.gcd = k.sbuf({kP, nt}, DType::F32, "bwd_gcd");
  c.h = k.sbuf({kP, nt}, DType::F32, "bwd_h");
  c.hy = k.sbuf({kP, nt}, DType::F32, "bwd_hy");
  row_factors(k, {c.b, c.gcd, c.h, c.hy, c.valid}, m, d, c.tgt, g, c.cvec, p, c.cs);
}

}  // namespace

View target_in_range(Ctx& c) {
  Kernel& k = c.k;
  View in = k.sbuf({kP, c.nt}, DType::F32, "bwd_in_range");
  View tmp = k.sbuf({kP, c.nt}, DType::F32, "bwd_tmp");
  nki::tensor_scalar(in, c.tgt, AluOp::IsGe, static_cast<double>(c.cr.lo));
  nki::tensor_scalar(tmp, c.tgt, AluOp::IsLt, static_cast<double>(c.cr.hi));
  nki::tensor_tensor(in, in, tmp, AluOp::Multiply);
  nki::tensor_tensor(in, in, c.valid, AluOp::Multiply);
  return in;
}

namespace {

// Gradient of one chunk: g = bf16(exp(x + b) * gcd + h), natural layout.
void gradient_chunk(Ctx& c, const View& g, const View& x, const View& q, int64_t t, Engine scale_engine) {
  nki::activation(q, ActFunc::Exp, x, c.b(all, S(t, t + 1)));
  nki::tensor_scalar(g, q, AluOp::Multiply, c.gcd(all, S(t, t + 1)), false, AluOp::Add, c.h(all, S(t, t + 1)),
                     false, scale_engine);
}

Engine alternate(int i) {
  return i % 2 ? Engine::POOL : Engine::DVE;
}

}  // namespace

std::vector<Item> chunk_items(const Ctx& c, int64_t rows_per_tile) {
  std::vector<Item> items;
  for (int64_t r0 = 0, t = 0; r0 < c.p.rows; r0 += rows_per_tile, ++t) {
    const int64_t rr = std::min(rows_per_tile, c.p.rows - r0);
    for (int64_t c0 = c.cr.lo; c0 < c.cr.hi; c0 += c.W)
      items.push_back({t, r0, rr, c0, std::min(c.W, c.cr.hi - c0), static_cast<int64_t>(items.size()),
                       c0 + c.W >= c.cr.hi});
  }
  return items;
}

namespace {

// The BF16 path: all chunks to grad_dst, then the target elements.
void bf16_gradient(Ctx& c) {
  Kernel& k = c.k;
  const CommonParams& p = c.p;
  // Loads kPrefetch chunks ahead from the ACT queue (ACT runs the exp next), stores from SP.
  constexpr int kX = 4, kG = 3;
  std::vector<View> xs, gs, qs;
  for (int i = 0; i < kX; ++i) xs.push_back(k.sbuf({kP, c.W}, p.logits_dtype, "bwd_x"));
  for (int i = 0; i < kG; ++i) {
    gs.push_back(k.sbuf({kP, c.W}, DType::BF16, "bwd_g"));
    qs.push_back(k.sbuf({kP, c.W}, DType::F32, "bwd_q"));
  }
  const std::vector<Item> items = chunk_items(c, kP);
  const int64_t n = static_cast<int64_t>(items.size());
  auto load = [&](const Item& a) {
    nki::dma_copy(xs[a.it % kX](S(0, a.rr), S(0, a.w)), c.logits(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w)),
                  {.engine = Engine::ACT});
  };
  for (int64_t i = 0; i < std::min(n, kPrefetch); ++i) load(items[i]);
  for (int64_t i = 0; i < n; ++i) {
    if (i + kPrefetch < n) load(items[i + kPrefetch]);
    const Item& a = items[i];
    const View g = gs[a.it % kG](all, S(0, a.w));
    gradient_chunk(c, g, xs[a.it % kX](all, S(0, a.w)), qs[a.it % kG](all, S(0, a.w)), a.t, alternate(a.it));
    nki::dma_copy(c.grad_dst(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w)), g(S(0, a.rr)));
  }
  // Target elements: g_y = bf16(exp(x_y + b) * gcd + hy), written at r * V + y.
  View in = target_in_range(c);
  View offs = row_offsets(k, c.nt, p.V);
  View idx = k.sbuf({kP, c.nt}, DType::I32, "bwd_y_index");
  add_i32(k, idx, offs, c.tgt);
  nki::select(idx, in, idx, -1.0);
  View raw = k.sbuf({kP, c.nt}, p.logits_dtype, "bwd_xy_raw");
  nki::memset(raw, 0.0);
  const View flat = c.logits.reshape({p.rows * p.V, 1});
  const View gflat = c.grad_dst.reshape({p.rows * p.V, 1});
  for (int64_t t = 0; t < c.nt; ++t) {
    const int64_t rr = std::min(kP, p.rows - t * kP);
    nki::dma_copy(raw(S(0, rr), S(t, t + 1)), flat(S(0, rr)),
                  {.vector_offset = idx(S(0, rr), S(t, t + 1)), .oob_mode = nki::OobMode::Skip});
  }
  View q = k.sbuf({kP, c.nt}, DType::F32, "bwd_qy");
  nki::tensor_tensor(q, raw, c.b, AluOp::Add);
  nki::activation(q, ActFunc::Exp, q);
  nki::tensor_tensor(q, q, c.gcd, AluOp::Multiply);
  View gy = k.sbuf({kP, c.nt}, DType::BF16, "bwd_gy");
  nki::tensor_tensor(gy, q, c.hy, AluOp::Add);
  for (int64_t t = 0; t < c.nt; ++t) {
    const int64_t rr = std::min(kP, p.rows - t * kP);
    nki::dma_copy(
        gflat(S(0, rr)), gy(S(0, rr), S(t, t + 1)),
        {.vector_offset = idx(S(0, rr), S(t, t + 1)), .indirect_dst = true, .oob_mode = nki::OobMode::Skip});
  }
}

void bwd_kernel(Kernel& k, const BwdParams& bp) {
  const CommonParams& p = bp.c;
  // The logits come in from ACT's queues (ACT runs the exp next); the gradient goes out from SP's.
  k.set_store_engine(Engine::SP);
  const bool mx = bp.mxfp8();
  const bool trn3 = bp.quantize_rule == QuantizeRule::Trn3;
  if (mx && (p.rows % 32 != 0 || p.V % 32 != 0))
    throw InputError(
        fmt::format("{}: MXFP8 gradients need rows and V multiples of 32 (TransformerEngine's "
                    "MXFP8 tensors), got rows {} and V {}",
                    kName, p.rows, p.V));
  if (trn3 && !mx)
    throw InputError(
        fmt::format("{}: parameter 'quantize_rule': trn3 applies to an MXFP8 grad_quantizer", kName));
  if (bp.scale_layout == ScaleLayout::Swizzled && !mx)
    throw InputError(fmt::format(
        "{}: parameter 'scale_layout': swizzled applies to an MXFP8 grad_quantizer (grad_quantizer none "
        "writes no scales)",
        kName));
  if (!mx && (!bp.rowwise_usage || !bp.columnwise_usage))
    throw InputError(
        fmt::format("{}: parameters 'rowwise_usage' / 'columnwise_usage' apply to an MXFP8 grad_quantizer "
                    "(grad_quantizer "
                    "none writes one BF16 gradient)",
                    kName));
  if (mx && !bp.rowwise_usage && !bp.columnwise_usage)
    throw InputError(fmt::format(
        "{}: parameters 'rowwise_usage' and 'columnwise_usage' are both false: the MXFP8 gradient would have "
        "no tensor",
        kName));
  if (trn3 && k.generation() != Generation::Trn3)
    throw InputError(fmt::format(
        "{}: parameter 'quantize_rule': trn3 uses quantize_mx, which exists on Trn3 only", kName));
  Ctx c(k, bp);
  c.cs = consts(p);
  c.W = p.chunk.value_or(trn3 || !mx ? 2048 : 1024);
  if (c.W % 128 != 0 || (trn3 && c.W % 512 != 0))
    throw InputError(
        fmt::format("{}: parameter 'chunk': {} is not a multiple of {}", kName, c.W, trn3 ? 512 : 128));
  if (mx && !trn3 && c.W > 1024)
    throw InputError(
        fmt::format("{}: parameter 'chunk': {} columns; the TE-rule MXFP8 path keeps two chunks' "
                    "transposes in PSUM, which holds at most 1024 columns each",
                    kName, c.W));
  c.nt = ceil_div(p.rows, kP);
  c.cr = core_columns(p.V, k.program_id(), k.num_programs());

  c.logits = k.input("logits", p.logits_dtype, {p.rows, p.V});
  c.target = k.input("target", DType::I32, {p.rows});
  c.row_max = k.input("row_max", DType::F32, {p.rows});
  c.row_sumexp = k.input("row_sumexp", DType::F32, {p.rows});
  c.grad_output = k.input("grad_output", DType::F32, {bp.grad_output == GradOutput::Scalar ? 1 : p.rows});
  if (!mx) {
    c.grad_dst = k.output("input_grad", DType::BF16, {p.rows, p.V});
  } else {
    c.geom = {p.rows, p.V, bp.scale_layout == ScaleLayout::Swizzled};
    if (bp.rowwise_usage) {
      c.rdata = k.output("input_grad_rowwise_data", bp.fp8_dtype(), {p.rows, p.V});
      c.rscale =
          k.output("input_grad_rowwise_scale_inv", DType::E8M0, {c.geom.row_rows(), c.geom.row_cols()});
    }
    if (bp.columnwise_usage) {
      c.cdata = k.output("input_grad_columnwise_data", bp.fp8_dtype(), {p.rows, p.V});
      c.cscale =
          k.output("input_grad_columnwise_scale_inv", DType::E8M0, {c.geom.col_rows(), c.geom.col_cols()});
    }
    if (!bp.is_fused()) c.grad_dst = k.scratch("input_grad_bf16", DType::BF16, {p.rows, p.V}, false);
  }
  load_factors(c);
  if (!mx) {
    if (c.cr.size() > 0) bf16_gradient(c);
    return;
  }
  // Scale padding (0x00): core 0 writes it; a swizzled tensor is filled whole first, so both cores wait for
  // that fill at a barrier before writing scales.
  for (int rowwise = 0; rowwise < 2; ++rowwise) {
    const View& s = rowwise ? c.rscale : c.cscale;
    if (!bp.uses(rowwise ? 0 : 1) || !has_scale_padding(c.geom, rowwise)) continue;
    if (k.program_id() == 0) zero_scale_padding(k, s, c.geom, rowwise);
    if (c.geom.swizzled && k.num_programs() == 2) nki::core_barrier(s);
  }
  if (c.cr.size() == 0) return;
  if (!bp.is_fused()) {
    bf16_gradient(c);  // to the scratch, targets patched
    if (!trn3) {
      // Tiles load straight from the scratch: 2 ahead + 4 in the pipeline + 1.
      std::vector<View> gs;
      for (int i = 0; i < 7; ++i) gs.push_back(k.sbuf({kP, c.W}, DType::BF16, "te_g"));
      te_pipeline(c, gs,
                  {[&](const Item& a) {
                     nki::dma_copy(gs[a.it % 7](S(0, a.rr), S(0, a.w)),
                                   c.grad_dst(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w)),
                                   {.engine = Engine::ACT});
                   },
                   [](const Item&, const View&) {}});
    } else {
      std::vector<View> g2s;
      for (int i = 0; i < 5; ++i) g2s.push_back(k.sbuf({kP, c.W, 4}, DType::BF16, "t2_g_in"));
      t2_pipeline(c, g2s,
                  {[&](const Item& a) {
                     const int64_t pp = a.rr / 4;
                     nki::dma_copy(g2s[a.it % 5](S(0, pp), S(0, a.w)),
                                   c.grad_dst(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w))
                                       .reshape({pp, 4, a.w})
                                       .permute({0, 2, 1}),
                                   {.engine = Engine::ACT});
                   },
                   [](const Item&, const View&) {}});
    }
    return;
  }
  // Fused.
  if (!trn3) {
    std::vector<View> xs, gs;
    std::vector<View> qs;
    for (int i = 0; i < 4; ++i) xs.push_back(k.sbuf({kP, c.W}, DType::BF16, "bwd_x"));
    for (int i = 0; i < 2; ++i) qs.push_back(k.sbuf({kP, c.W}, DType::F32, "bwd_q"));
    for (int i = 0; i < 5; ++i) gs.push_back(k.sbuf({kP, c.W}, DType::BF16, "te_g"));
    te_pipeline(c, gs,
                {[&](const Item& a) {
                   nki::dma_copy(xs[a.it % 4](S(0, a.rr), S(0, a.w)),
                                 c.logits(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w)),
                                 {.engine = Engine::ACT});
                 },
                 [&](const Item& a, const View& g) {
                   gradient_chunk(c, g(all, S(0, a.w)), xs[a.it % 4](all, S(0, a.w)),
                                  qs[a.it % 2](all, S(0, a.w)), a.t, Engine::ACT);
                 }});
  } else {
    // T2 factors: [128, nt2, 4] for rows 512 t + 4 p + j.
    const int64_t nt2 = ceil_div(p.rows, 512);
    View m2 = k.sbuf({kP, nt2, 4}, DType::F32, "t2_row_max");
    View d2 = k.sbuf({kP, nt2, 4}, DType::F32, "t2_row_sumexp");
    View t2 = k.sbuf({kP, nt2, 4}, DType::I32, "t2_target");
    nki::memset(m2, 0.0);
    nki::memset(d2, 1.0);
    nki::memset(t2, static_cast<double>(p.ignore_idx));
    load_rows_t2(m2, c.row_max, p.rows);
    load_rows_t2(d2, c.row_sumexp, p.rows);
    load_rows_t2(t2, c.target, p.rows);
    View g2in;
    if (bp.grad_output == GradOutput::Scalar) {
      g2in = c.gvec.reshape({kP, 1, 1}).broadcast(1, nt2).broadcast(2, 4);
    } else {
      g2in = k.sbuf({kP, nt2, 4}, DType::F32, "t2_grad_output");
      nki::memset(g2in, 0.0);
      load_rows_t2(g2in, c.grad_output, p.rows);
    }
    RowFactors f2{k.sbuf({kP, nt2, 4}, DType::F32, "t2_b"), k.sbuf({kP, nt2, 4}, DType::F32, "t2_gcd"),
                  k.sbuf({kP, nt2, 4}, DType::F32, "t2_h"), k.sbuf({kP, nt2, 4}, DType::F32, "t2_hy"),
                  k.sbuf({kP, nt2, 4}, DType::F32, "t2_valid")};
    row_factors(k, f2, m2, d2, t2, g2in, c.cvec, p, c.cs);
    std::vector<View> xs, g2s, qs;
    for (int i = 0; i < 4; ++i) {
      xs.push_back(k.sbuf({kP, c.W, 4}, DType::BF16, "t2_x"));
      qs.push_back(k.sbuf({kP, c.W}, DType::F32, "t2_q"));
    }
    for (int i = 0; i < 4; ++i) g2s.push_back(k.sbuf({kP, c.W, 4}, DType::BF16, "t2_g"));
    t2_pipeline(
        c, g2s,
        {[&](const Item& a) {
           const int64_t pp = a.rr / 4;
           nki::dma_copy(
               xs[a.it % 4](S(0, pp), S(0, a.w)),
               c.logits(S(a.r0, a.r0 + a.rr), S(a.c0, a.c0 + a.w)).reshape({pp, 4, a.w}).permute({0, 2, 1}),
               {.engine = Engine::ACT});
         },
         [&](const Item& a, const View& g2) {
           const View& x2 = xs[a.it % 4];
           for (int64_t j = 0; j < 4; ++j) {
             const View& q = qs[j];
             nki::activation(q(all, S(0, a.w)), ActFunc::Exp, x2(all, S(0, a.w), j),
                             f2.b(all, a.t, S(j, j + 1)));
             nki::tensor_scalar(g2(all, S(0, a.w), j), q(all, S(0, a.w)), AluOp::Multiply,
                                f2.gcd(all, a.t, S(j, j + 1)), false, AluOp::Add, f2.h(all, a.t, S(j, j + 1)),
                                false, Engine::POOL);
           }
         }});
  }
  fixup(c);
}

}  // namespace
}  // namespace trnsim::kernels::ce::bwd

namespace trnsim::kernels {

std::unique_ptr<KernelDef> cross_entropy_bwd_kernel() {
  KernelPackage<ce::BwdParams> k;
  k.name = "cross_entropy_bwd";
  k.doc =
      "cross entropy backward: the logits gradient as BF16 or as TransformerEngine's MXFP8 tensors (TE rule "
      "bit for bit with ALU operations, or Trn3's quantize_mx), fused on chip or BF16 then quantize; LNC2 "
      "splits the vocabulary";
  k.cores = [](const ce::BwdParams& p) { return p.c.run_with_lnc2 ? 2 : 1; };
  k.cores_param = "run_with_lnc2";
  k.kernel = ce::bwd::bwd_kernel;
  k.checks = [](const ce::BwdParams& p) { return ce::bwd_checks(p); };
  k.recipes = ce::bwd_recipes();
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
