// cross_entropy_fwd: per-row loss, softmax statistics and argmax of logits [rows, V] (ce_params.h).
//
// Per core (its vocabulary columns, ce_lib.h core_columns), per row tile of 128 rows, per chunk of `chunk`
// columns: DMA the chunk in; chunk max (DVE reduce); running max m, shift s(m) (0 while m is -inf), the
// rescale alpha = exp(s_old - s_new), exactly 0 when m_old was -inf; sum of exp(x - s_new) by an ACT
// activation with accumulate; d = d * alpha + sum. The first index of the chunk max: e = (x == max) (BF16
// 0/1), e * (128 - j) within 128-column sub-blocks, max-reduce, the lowest sub-block that matched; a strictly
// greater chunk max replaces the row's best, so ties keep the lowest index. With label smoothing the row sum
// of (-ls/V) x is accumulated too (each term scaled first, so BF16-maximum logits cannot overflow FP32). The
// target logit is gathered once per row tile by an element-indexed indirect DMA (row * V + target). LNC2: the
// cores exchange their per-row (m, d, x_y, sum, best value, best index) by sendrecv and merge them as -inf
// safe as one core; core 0 writes the outputs.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/api/package.h"
#include "kernels/cross_entropy/ce_check.h"
#include "kernels/cross_entropy/ce_lib.h"
#include "kernels/cross_entropy/ce_params.h"
#include "kernels/cross_entropy/ce_recipes.h"
#include "sim/base/error.h"

namespace trnsim::kernels {
namespace {

using namespace ce;
using isa::AluOp;
using nki::ActFunc;

constexpr const char* kName = "kernel 'cross_entropy_fwd'";
constexpr int64_t kSub = 128;  // argmax sub-block: 128 - j is exact in BF16

// Per-row statistics of one core, [128, nt] each (one column per row tile).
enum Stat { kM, kD, kXy, kSx, kBestV, kBestI, kStats };

struct Merged {
  View m, d, xy, sx, best;
};

// dst = shift(m) = m, or 0 when m is -inf. `nn` is a temporary of m's shape.
void shift_of(const View& dst, const View& m, const View& nn, Engine e = Engine::POOL) {
  nki::tensor_scalar(nn, m, AluOp::NotEqual, kNegInf, false, AluOp::Bypass, 0.0, false, e);
  nki::select(dst, nn, m, 0.0, e);
}

// alpha = exp(s_i - s), exactly 0 when m_i is -inf (then d_i is 0 and exp(s_i - s) could be +Inf). `t1`, `t2`
// are temporaries of m_i's shape.
void rescale_of(const View& alpha, const View& m_i, const View& s_i, const View& s, const View& t1,
                const View& t2) {
  nki::tensor_tensor(t1, s_i, s, AluOp::Subtract, Engine::POOL);
  nki::activation(t1, ActFunc::Exp, t1);
  nki::tensor_scalar(t2, m_i, AluOp::NotEqual, kNegInf, false, AluOp::Bypass, 0.0, false, Engine::POOL);
  nki::select(alpha, t2, t1, 0.0, Engine::POOL);
}

// Per-chunk [P, 1] and [P, sub-block] temporaries, allocated once per pipeline slot (tiles allocated in the
// loop would share addresses across engines and serialize them).
struct Tiny {
  View mc, m_new, s_new, neg_s, alpha, sum, sxc, t1, t2, first, better;
  View pm, cand, hit;
};

void fwd_kernel(Kernel& k, const FwdParams& fp) {
  const CommonParams& p = fp.c;
  const int64_t W = p.chunk.value_or(4096);
  if (W % kSub != 0)
    throw InputError(fmt::format("{}: parameter 'chunk': {} is not a multiple of 128", kName, W));
  const DType dt = p.logits_dtype;
  const Consts cs = consts(p);
  const bool smoothing = p.label_smoothing > 0;
  const bool trn3 = k.generation() == Generation::Trn3;

  View logits = k.input("logits", dt, {p.rows, p.V});
  View target = k.input("target", DType::I32, {p.rows});
  View loss = k.output("loss", DType::F32, {p.reduce_loss ? 1 : p.rows});
  View row_max = k.output("row_max", DType::F32, {p.rows});
  View row_sumexp = k.output("row_sumexp", DType::F32, {p.rows});
  View argmax = k.output("argmax", DType::I32, {p.rows});

  const int cores = k.num_programs(), core = k.program_id();
  const ColRange cr = core_columns(p.V, core, cores);
  const int64_t nt = ceil_div(p.rows, kP);

  // Per-row state, all row tiles at once. Allocated first, in the same order on both cores, so the sendrecv
  // tiles sit at the same addresses.
  View st = k.sbuf({kP, kStats, nt}, DType::F32, "fwd_stats");
  View peer = k.sbuf({kP, kStats, nt}, DType::F32, "fwd_peer_stats");
  View srun = k.sbuf({kP, nt}, DType::F32, "fwd_shift");
  View tgt = k.sbuf({kP, nt}, DType::I32, "fwd_target");
  View valid = k.sbuf({kP, nt}, DType::F32, "fwd_valid");
  nki::memset(st(all, kM), kNegInf);
  nki::memset(st(all, kD), 0.0);
  nki::memset(st(all, kSx), 0.0);
  nki::memset(st(all, kBestV), kNegInf);
  nki::memset(st(all, kBestI), 0.0);
  nki::memset(srun, 0.0);
  nki::memset(tgt, static_cast<double>(p.ignore_idx));
  load_rows(tgt, target, p.rows);
  nki::tensor_scalar(valid, tgt, AluOp::NotEqual, static_cast<double>(p.ignore_idx));

  // x_y: element (r, y_r) of the logits gathered by flat index r * V + y_r when y_r is in this core's columns
  // (else the index is -1: skipped, x_y stays -inf).
  {
    View offs = row_offsets(k, nt, p.V);
    View idx = k.sbuf({kP, nt}, DType::I32, "fwd_xy_index");
    add_i32(k, idx, offs, tgt);
    View in = k.sbuf({kP, nt}, DType::F32, "fwd_in_range");
    View tmp = k.sbuf({kP, nt}, DType::F32, "fwd_tmp");
    nki::tensor_scalar(in, tgt, AluOp::IsGe, static_cast<double>(cr.lo));
    nki::tensor_scalar(tmp, tgt, AluOp::IsLt, static_cast<double>(cr.hi));
    nki::tensor_tensor(in, in, tmp, AluOp::Multiply);
    nki::tensor_tensor(in, in, valid, AluOp::Multiply);
    View idx2 = k.sbuf({kP, nt}, DType::I32, "fwd_xy_index2");
    nki::select(idx2, in, idx, -1.0);
    View raw = k.sbuf({kP, nt}, dt, "fwd_xy_raw");
    nki::memset(raw, kNegInf);
    View flat = logits.reshape({p.rows * p.V, 1});
    for (int64_t t = 0; t < nt; ++t) {
      const int64_t rr = std::min(kP, p.rows - t * kP);
      nki::dma_copy(raw(S(0, rr), S(t, t + 1)), flat(S(0, rr)),
                    {.vector_offset = idx2(S(0, rr), S(t, t + 1)), .oob_mode = nki::OobMode::Skip});
    }
    nki::tensor_copy(st(all, kXy), raw);
  }

  // Chunk loop.
  if (cr.size() > 0) {
    const int64_t Wc = std::min(W, round_up(cr.size(), kSub));
    const int64_t nsb_max = Wc / kSub;
    View revidx = k.sbuf({kP, nsb_max, kSub}, DType::BF16, "fwd_revidx");
    nki::iota(revidx, {0, -1}, static_cast<double>(kSub));
    View sbbase = k.sbuf({kP, nsb_max}, DType::F32, "fwd_subblock_end");
    nki::iota(sbbase, {static_cast<int32_t>(kSub)}, static_cast<double>(kSub));
    constexpr int kBufs = 4;
    std::vector<View> xs, junk, eqs, prods;
    for (int i = 0; i < kBufs; ++i) {
      xs.push_back(k.sbuf({kP, Wc}, dt, "fwd_x"));
      eqs.push_back(k.sbuf({kP, nsb_max, kSub}, DType::BF16, "fwd_eq"));
      prods.push_back(k.sbuf({kP, nsb_max, kSub}, DType::BF16, "fwd_prod"));
    }
    for (int i = 0; i < 2; ++i) junk.push_back(k.sbuf({kP, Wc}, DType::BF16, "fwd_exp_out"));
    View sx_junk = smoothing ? k.sbuf({kP, Wc}, DType::BF16, "fwd_sum_out") : View();
    std::vector<Tiny> tiny;
    for (int i = 0; i < kBufs; ++i) {
      auto v1 = [&](DType d = DType::F32) { return k.sbuf({kP, 1}, d, "fwd_tiny"); };
      tiny.push_back({v1(dt), v1(), v1(), v1(), v1(), v1(), v1(), v1(), v1(), v1(), v1(),
                      k.sbuf({kP, nsb_max}, DType::BF16, "fwd_sub_max"),
                      k.sbuf({kP, nsb_max}, DType::F32, "fwd_cand"),
                      k.sbuf({kP, nsb_max}, DType::F32, "fwd_hit")});
    }
    // The argmax part of a chunk, emitted two chunks later (after their online-softmax steps), so its DVE and
    // POOL work never waits on a chunk that was just started.
    struct Pending {
      int64_t t, c0, w, it;
    };
    std::vector<Pending> pending;  // at most two: the argmax part runs two chunks behind
    auto argmax_part = [&](const Pending& a) {
      const int64_t t = a.t, c0 = a.c0, w = a.w, it = a.it, nsb = ceil_div(w, kSub);
      const View xw = xs[it % kBufs](all, S(0, w));
      const Tiny& v = tiny[it % kBufs];
      // First index of the chunk max.
      const View& eq = eqs[it % kBufs];
      const View& prod = prods[it % kBufs];
      View eqf = eq.reshape({kP, nsb_max * kSub});
      if (w < nsb * kSub) nki::memset(eqf(all, S(w, nsb * kSub)), 0.0);
      nki::tensor_scalar(eqf(all, S(0, w)), xw, AluOp::IsEqual, v.mc);
      nki::tensor_tensor(prod(all, S(0, nsb)), eq(all, S(0, nsb)), revidx(all, S(0, nsb)), AluOp::Multiply,
                         Engine::DVE);
      const View pm = v.pm(all, S(0, nsb)), cand = v.cand(all, S(0, nsb)), hit = v.hit(all, S(0, nsb));
      nki::tensor_reduce(pm, AluOp::Max, prod(all, S(0, nsb)), {2});
      // Candidate index 128 (k + 1) - pm in sub-block k, if it matched; the lowest one wins.
      nki::tensor_tensor(cand, sbbase(all, S(0, nsb)), pm, AluOp::Subtract, Engine::POOL);
      nki::tensor_scalar(hit, pm, AluOp::IsGt, 0.0, false, AluOp::Bypass, 0.0, false, Engine::POOL);
      nki::select(cand, hit, cand, 1e9, Engine::POOL);
      nki::tensor_reduce(v.first, AluOp::Min, cand, {1});
      View bv = st(all, kBestV, S(t, t + 1)), bi = st(all, kBestI, S(t, t + 1));
      nki::tensor_tensor(v.better, v.mc, bv, AluOp::IsGt, Engine::POOL);
      nki::tensor_scalar(v.first, v.first, AluOp::Add, static_cast<double>(c0), false, AluOp::Bypass, 0.0,
                         false, Engine::POOL);
      nki::select(bi, v.better, v.first, bi, Engine::POOL);
      nki::tensor_tensor(bv, bv, v.mc, AluOp::Max, Engine::POOL);
    };
    int64_t it = 0;
    for (int64_t t = 0; t < nt; ++t) {
      const int64_t r0 = t * kP, rr = std::min(kP, p.rows - r0);
      const View m = st(all, kM, S(t, t + 1)), d = st(all, kD, S(t, t + 1));
      const View s = srun(all, S(t, t + 1));
      for (int64_t c0 = cr.lo; c0 < cr.hi; c0 += Wc, ++it) {
        const int64_t w = std::min(Wc, cr.hi - c0);
        const View& x = xs[it % kBufs];
        const Tiny& v = tiny[it % kBufs];
        nki::dma_copy(x(S(0, rr), S(0, w)), logits(S(r0, r0 + rr), S(c0, c0 + w)));
        const View xw = x(all, S(0, w));
        // Chunk max and the online-softmax update (tiny ops on POOL, the exp on ACT).
        nki::tensor_reduce(v.mc, AluOp::Max, xw, {1});
        nki::tensor_tensor(v.m_new, m, v.mc, AluOp::Max, Engine::POOL);
        shift_of(v.s_new, v.m_new, v.t1);
        nki::tensor_scalar(v.neg_s, v.s_new, AluOp::Multiply, -1.0, false, AluOp::Bypass, 0.0, false,
                           Engine::POOL);
        rescale_of(v.alpha, m, s, v.s_new, v.t1, v.t2);
        nki::activation(junk[it % 2](all, S(0, w)), ActFunc::Exp, xw, v.neg_s, 1.0, v.sum);
        nki::tensor_scalar(d, d, AluOp::Multiply, v.alpha, false, AluOp::Add, v.sum, false, Engine::POOL);
        nki::tensor_copy(m, v.m_new, Engine::POOL);
        nki::tensor_copy(s, v.s_new, Engine::POOL);
        if (smoothing) {
          // sum of (-ls/V) x: scaling each term first keeps logits at the BF16 maximum from overflowing FP32.
          nki::activation(sx_junk(all, S(0, w)), ActFunc::Copy, xw, 0.0, static_cast<double>(cs.neg_eps),
                          v.sxc, trn3 ? Engine::POOL : Engine::ACT);
          nki::tensor_tensor(st(all, kSx, S(t, t + 1)), st(all, kSx, S(t, t + 1)), v.sxc, AluOp::Add,
                             Engine::POOL);
        }
        pending.push_back({t, c0, w, it});
        if (pending.size() > 2) {
          argmax_part(pending.front());
          pending.erase(pending.begin());
        }
      }
    }
    for (const Pending& a : pending) argmax_part(a);
  }

  // LNC2 merge: both cores exchange their statistics; "lo" holds the lower columns.
  View lo = st, hi;
  if (cores == 2) {
    nki::sendrecv(st, peer);
    lo = core == 0 ? st : peer;
    hi = core == 0 ? peer : st;
  }
  if (core != 0) return;

  View m = k.sbuf({kP, nt}, DType::F32, "fwd_m");
  View d = k.sbuf({kP, nt}, DType::F32, "fwd_d");
  View xy = k.sbuf({kP, nt}, DType::F32, "fwd_xy");
  View sx = k.sbuf({kP, nt}, DType::F32, "fwd_sx");
  View best = k.sbuf({kP, nt}, DType::F32, "fwd_best");
  View s = k.sbuf({kP, nt}, DType::F32, "fwd_s");
  if (cores == 2) {
    View t1 = k.sbuf({kP, nt}, DType::F32, "fwd_t1"), t2 = k.sbuf({kP, nt}, DType::F32, "fwd_t2");
    nki::tensor_tensor(m, lo(all, kM), hi(all, kM), AluOp::Max);
    shift_of(s, m, t1);
    View s_i = k.sbuf({kP, nt}, DType::F32, "fwd_s_i");
    View a_lo = k.sbuf({kP, nt}, DType::F32, "fwd_alpha_lo");
    View a_hi = k.sbuf({kP, nt}, DType::F32, "fwd_alpha_hi");
    shift_of(s_i, lo(all, kM), t1);
    rescale_of(a_lo, lo(all, kM), s_i, s, t1, t2);
    shift_of(s_i, hi(all, kM), t1);
    rescale_of(a_hi, hi(all, kM), s_i, s, t1, t2);
    nki::tensor_tensor(a_lo, lo(all, kD), a_lo, AluOp::Multiply);
    nki::tensor_tensor(a_hi, hi(all, kD), a_hi, AluOp::Multiply);
    nki::tensor_tensor(d, a_lo, a_hi, AluOp::Add);
    nki::tensor_tensor(xy, lo(all, kXy), hi(all, kXy), AluOp::Max);
    nki::tensor_tensor(sx, lo(all, kSx), hi(all, kSx), AluOp::Add);
    View better = k.sbuf({kP, nt}, DType::F32, "fwd_better_hi");
    nki::tensor_tensor(better, hi(all, kBestV), lo(all, kBestV), AluOp::IsGt);
    nki::select(best, better, hi(all, kBestI), lo(all, kBestI));
  } else {
    nki::tensor_copy(m, st(all, kM));
    nki::tensor_copy(s, srun);
    nki::tensor_copy(d, st(all, kD));
    nki::tensor_copy(xy, st(all, kXy));
    nki::tensor_copy(sx, st(all, kSx));
    nki::tensor_copy(best, st(all, kBestI));
  }

  // loss = s + log d - (1 - ls) x_y + sum (-ls / V) x; 0 for ignored rows.
  View l = k.sbuf({kP, nt}, DType::F32, "fwd_loss");
  View tmp = k.sbuf({kP, nt}, DType::F32, "fwd_tmp2");
  nki::activation(l, ActFunc::Log, d);
  nki::tensor_tensor(l, s, l, AluOp::Add);
  nki::tensor_scalar(tmp, xy, AluOp::Multiply, -static_cast<double>(cs.one_minus_ls));
  nki::tensor_tensor(l, l, tmp, AluOp::Add);
  if (smoothing) nki::tensor_tensor(l, l, sx, AluOp::Add);
  nki::select(l, valid, l, 0.0);

  store_rows(row_max, m, p.rows);
  store_rows(row_sumexp, d, p.rows);
  View besti = k.sbuf({kP, nt}, DType::I32, "fwd_argmax");
  nki::tensor_copy(besti, best);
  store_rows(argmax, besti, p.rows);
  if (!p.reduce_loss) {
    store_rows(loss, l, p.rows);
    return;
  }
  // Mean over non-ignored rows: per-partition sums, a ones matmul across partitions, / max(count, 1).
  View per = k.sbuf({kP, 1}, DType::F32, "fwd_loss_part");
  nki::tensor_reduce(per, AluOp::Add, l, {1});
  View ones = k.sbuf({kP, 1}, DType::F32, "fwd_ones");
  nki::memset(ones, 1.0);
  View acc = k.psum({1, 1}, DType::F32, "fwd_loss_sum");
  nki::nc_matmul(acc, per, ones);
  View cnt = count_valid(k, valid);
  View mean = k.sbuf({1, 1}, DType::F32, "fwd_loss_mean");
  nki::tensor_scalar(cnt, cnt, AluOp::Max, 1.0);
  nki::tensor_scalar(mean, acc, AluOp::Divide, cnt(S(0, 1)));
  nki::dma_copy(loss.reshape({1, 1}), mean);
}

}  // namespace

std::unique_ptr<KernelDef> cross_entropy_fwd_kernel() {
  KernelPackage<FwdParams> k;
  k.name = "cross_entropy_fwd";
  k.doc =
      "cross entropy forward: per-row (or mean) loss with label smoothing and ignore_idx, row max, row sum "
      "of "
      "exp, argmax; online softmax over vocab chunks, -inf safe; LNC2 splits the vocabulary";
  k.cores = [](const FwdParams& p) { return p.c.run_with_lnc2 ? 2 : 1; };
  k.cores_param = "run_with_lnc2";
  k.kernel = fwd_kernel;
  k.checks = [](const FwdParams& p) { return ce::fwd_checks(p); };
  k.recipes = ce::fwd_recipes();
  return make_kernel(std::move(k));
}

}  // namespace trnsim::kernels
