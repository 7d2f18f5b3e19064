// The trnsim_optimized backward's matmul epilogues (bwd_emit_state.h): what each phase does with a finished
// PSUM tile.
#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/moe/bwd_emit_state.h"

namespace trnsim::kernels::moe {
namespace {

using isa::DType;
using isa::Engine;
using nki::ActFunc;
using nki::AluOp;

// gate_up_proj_act_checkpoint-like [N or ring, 2, I, B] piece [n, w] of half h at (rows i0.., cols c0..).
View gu_piece(const View& ck, int64_t b, int h, int64_t i0, int64_t n, int64_t c0, int64_t w) {
  return ck(S(b, b + 1), h, S(i0, i0 + n), S(c0, c0 + w)).reshape({n, w});
}
View ib_piece(const View& ck, int64_t b, int64_t i0, int64_t n, int64_t c0, int64_t w) {
  return ck(S(b, b + 1), S(i0, i0 + n), S(c0, c0 + w)).reshape({n, w});
}

class P1Epilogue : public mxfp8::Epilogue {
 public:
  P1Epilogue(const BwdParams& p, const BwdPlan& f, const Hbm& t, const Block& blk, std::vector<P1Set>& sets,
             size_t& rr, const View& dea_acc, const View& bias_acc, const View& bias_part)
      : p_(p),
        f_(f),
        t_(t),
        blk_(blk),
        sets_(sets),
        rr_(rr),
        dea_acc_(dea_acc),
        bias_acc_(bias_acc),
        bias_part_(bias_part) {}

  void emit(mxfp8::EpilogueContext& ctx, const mxfp8::OutTile& o) override {
    PhaseScope ph(ctx.kernel, "P1");
    const int64_t n = o.tile.partitions(), width = o.tile.free_elements();
    const int64_t i0 = ctx.kernel.program_id() * f_.Ic + o.row;  // row of I
    const ClampLimits& cl = p_.clamp_limits;
    const int64_t gb = f_.recompute ? blk_.ring : blk_.b;  // block index into gate_up
    const nki::DmaOpts load{.engine = Engine::ACT};
    for (int64_t c0 = 0; c0 < width; c0 += f_.chunk) {
      const int64_t w = std::min(f_.chunk, width - c0), col = o.col + c0;
      const P1Set& s = sets_[rr_++ % sets_.size()];
      const auto v = [&](const View& x) { return x(S(0, n), S(0, w)); };
      View gate = v(s.gate), up = v(s.up), sig = v(s.sig), silu = v(s.silu), inter = v(s.inter);
      View prod = v(s.prod), dint = v(s.dint), tmp = v(s.tmp), dg = v(s.dg), du = v(s.du);
      View d = o.tile(all, S(c0, c0 + w));
      View ea = blk_.ea_bcast(S(0, n), S(col, col + w));
      nki::dma_copy(gate, gu_piece(blk_.gate_up, gb, 0, i0, n, col, w), load);
      nki::dma_copy(up, gu_piece(blk_.gate_up, gb, 1, i0, n, col, w), load);
      // num_valid_tokens: the checkpoint columns of the slots from the count on are undefined (NaN, say);
      // they become 0, so that 0 x undefined never reaches the weight gradients. prod holds the mask.
      View ok;
      if (blk_.nvt_col.valid()) {
        ok = prod;
        nki::iota(ok, {1}, static_cast<double>(blk_.b * f_.B + col));
        nki::tensor_scalar(ok, ok, AluOp::IsLt, nki::Operand(blk_.nvt_col(S(0, n), all)));
        nki::select(gate, ok, gate, 0.0);
        nki::select(up, ok, up, 0.0);
      }
      nki::activation(sig, ActFunc::Sigmoid, gate);
      if (t_.ck_gate.valid()) {
        View a = v(s.sc);
        nki::dma_copy(a, ib_piece(t_.ck_gate, blk_.b, i0, n, col, w), load);
        nki::tensor_copy(silu, a, Engine::POOL);
        if (ok.valid()) nki::select(silu, ok, silu, 0.0);
      } else {
        nki::tensor_tensor(silu, gate, sig, AluOp::Multiply, Engine::POOL);
      }
      if (t_.ck_inter.valid()) {
        View a = v(s.dg);
        nki::dma_copy(a, ib_piece(t_.ck_inter, blk_.b, i0, n, col, w), load);
        nki::tensor_copy(inter, a, Engine::POOL);
        if (ok.valid()) nki::select(inter, ok, inter, 0.0);
      } else {
        nki::tensor_tensor(inter, silu, up, AluOp::Multiply, Engine::POOL);
      }
      // AFFINITY_ON_I: the affinity-gradient partial from the unscaled d_int, then d_int x affinity.
      // AFFINITY_ON_H: d_int came from affinity x dY already.
      View da = d;
      if (!p_.on_h()) {
        View acc = dea_acc_(S(0, n), S(col, col + w));
        nki::tensor_tensor(prod, d, inter, AluOp::Multiply);
        nki::tensor_tensor(acc, acc, prod, AluOp::Add);
        nki::tensor_tensor(dint, d, ea, AluOp::Multiply);
        da = dint;
      }
      // silu' = sig (1 + gate (1 - sig)).
      nki::tensor_scalar(tmp, sig, AluOp::Multiply, -1.0, false, AluOp::Add, 1.0, false, Engine::ACT);
      nki::tensor_tensor(tmp, tmp, gate, AluOp::Multiply, Engine::POOL);
      nki::tensor_scalar(tmp, tmp, AluOp::Add, 1.0, false, AluOp::Bypass, 0.0, false, Engine::ACT);
      nki::tensor_tensor(tmp, tmp, sig, AluOp::Multiply, Engine::POOL);
      // d_gate = d_int silu' up, d_up = d_int silu, each masked by its strict clamp limits.
      nki::tensor_tensor(tmp, tmp, da, AluOp::Multiply);
      mask(tmp, gate, cl.non_linear_clamp_lower_limit, cl.non_linear_clamp_upper_limit, prod);
      const bool gm = cl.non_linear_clamp_lower_limit || cl.non_linear_clamp_upper_limit;
      const bool um = cl.linear_clamp_lower_limit || cl.linear_clamp_upper_limit;
      if (gm) {
        nki::tensor_tensor(tmp, tmp, up, AluOp::Multiply);
        nki::tensor_copy(dg, tmp, Engine::ACT);
      } else {
        nki::tensor_tensor(dg, tmp, up, AluOp::Multiply);
      }
      if (um) {
        nki::tensor_tensor(dint, da, silu, AluOp::Multiply);
        mask(dint, up, cl.linear_clamp_lower_limit, cl.linear_clamp_upper_limit, prod);
        nki::tensor_copy(du, dint, Engine::ACT);
      } else {
        nki::tensor_tensor(du, da, silu, AluOp::Multiply);
      }
      if (bias_acc_.valid()) {
        // The gate/up bias gradient: the bfloat16 d_gate and d_up summed over the tile's tokens (FP32).
        const int64_t g = o.row / 128;
        for (int h = 0; h < 2; ++h) {
          View part = bias_part_(S(0, n), S(h, h + 1));
          nki::tensor_reduce(part, AluOp::Add, h == 0 ? dg : du, {1});
          View acc = bias_acc_(S(0, n), h, S(g, g + 1));
          nki::tensor_tensor(acc, acc, part, AluOp::Add);
        }
      }
      const View& dgu = t_.dgu_scratch;
      nki::dma_copy(ib_piece(dgu, blk_.ring, i0, n, col, w), dg, kPool);
      nki::dma_copy(ib_piece(dgu, blk_.ring, f_.I + i0, n, col, w), du, kPool);
      if (t_.sc_scratch.valid()) {
        View sc = v(s.sc);
        if (p_.on_h())
          nki::tensor_copy(sc, inter, Engine::POOL);
        else
          nki::tensor_tensor(sc, inter, ea, AluOp::Multiply, Engine::POOL);
        nki::dma_copy(ib_piece(t_.sc_scratch, blk_.ring, i0, n, col, w), sc, kPool);
      }
    }
  }

 private:
  // x *= (lo < v) (v < hi) for the limits given (`m` FP32 scratch of x's shape).
  static void mask(const View& x, const View& v, std::optional<double> lo, std::optional<double> hi,
                   const View& m) {
    if (lo) {
      nki::tensor_scalar(m, v, AluOp::IsGt, *lo, false, AluOp::Bypass, 0.0, false, Engine::POOL);
      nki::tensor_tensor(x, x, m, AluOp::Multiply);
    }
    if (hi) {
      nki::tensor_scalar(m, v, AluOp::IsLt, *hi, false, AluOp::Bypass, 0.0, false, Engine::POOL);
      nki::tensor_tensor(x, x, m, AluOp::Multiply);
    }
  }

  const BwdParams& p_;
  const BwdPlan& f_;
  const Hbm& t_;
  const Block& blk_;
  std::vector<P1Set>& sets_;
  size_t& rr_;
  View dea_acc_, bias_acc_, bias_part_;
};

// Phase 0: the recomputed gate/up tiles, clamped and cast, into the per-core scratch.
class P0Epilogue : public mxfp8::Epilogue {
 public:
  P0Epilogue(const BwdParams& p, const BwdPlan& f, const Block& blk, std::vector<std::pair<View, View>>& sets,
             size_t& rr)
      : p_(p), f_(f), blk_(blk), sets_(sets), rr_(rr) {}
  void emit(mxfp8::EpilogueContext& ctx, const mxfp8::OutTile& o) override {
    PhaseScope ph(ctx.kernel, "P0");
    const int64_t n = o.tile.partitions(), width = o.tile.free_elements();
    const int64_t i0 = ctx.kernel.program_id() * f_.Ic + o.row;
    const ClampLimits& cl = p_.clamp_limits;
    for (int64_t c0 = 0; c0 < width; c0 += f_.chunk) {
      const int64_t w = std::min(f_.chunk, width - c0), col = o.col + c0;
      const auto& [gs, us] = sets_[rr_++ % sets_.size()];
      View g = gs(S(0, n), S(0, w)), u = us(S(0, n), S(0, w));
      clamp(g, o.tile(all, S(c0, c0 + w)), cl.non_linear_clamp_lower_limit, cl.non_linear_clamp_upper_limit,
            Engine::ACT);
      clamp(u, o.tile2(all, S(c0, c0 + w)), cl.linear_clamp_lower_limit, cl.linear_clamp_upper_limit,
            Engine::POOL);
      nki::dma_copy(gu_piece(blk_.gate_up, blk_.ring, 0, i0, n, col, w), g, kPool);
      nki::dma_copy(gu_piece(blk_.gate_up, blk_.ring, 1, i0, n, col, w), u, kPool);
    }
  }

 private:
  static void clamp(const View& dst, const View& src, std::optional<double> lo, std::optional<double> hi,
                    Engine e) {
    if (lo && hi)
      nki::tensor_scalar(dst, src, AluOp::Max, *lo, false, AluOp::Min, *hi, false, e);
    else if (lo)
      nki::tensor_scalar(dst, src, AluOp::Max, *lo, false, AluOp::Bypass, 0.0, false, e);
    else if (hi)
      nki::tensor_scalar(dst, src, AluOp::Min, *hi, false, AluOp::Bypass, 0.0, false, e);
    else
      nki::tensor_copy(dst, src, e);
  }
  const BwdParams& p_;
  const BwdPlan& f_;
  const Block& blk_;
  std::vector<std::pair<View, View>>& sets_;
  size_t& rr_;
};

// dst (expert 0's [R, C] placement, moved by the expert's scalar_offset) += the tile, in bfloat16: cast,
// read the existing rows, add, write back (nkilib's weight-gradient read-modify-write; hwdge queues).
class ExpertAccumulate : public mxfp8::Epilogue {
 public:
  ExpertAccumulate(const char* phase, View dst, View expert, std::vector<std::pair<View, View>>& sets,
                   size_t& rr)
      : phase_(phase), dst_(std::move(dst)), expert_(std::move(expert)), sets_(sets), rr_(rr) {
    chunk_ = sets_.front().first.free_elements();
  }
  void emit(mxfp8::EpilogueContext& ctx, const mxfp8::OutTile& o) override {
    PhaseScope ph(ctx.kernel, phase_);
    const int64_t n = o.tile.partitions(), width = o.tile.free_elements();
    for (int64_t j = 0; j < width; j += chunk_) {
      const int64_t w = std::min(chunk_, width - j), c = o.col + j;
      const auto& [res_t, ex_t] = sets_[rr_++ % sets_.size()];
      View res = res_t(S(0, n), S(0, w)), ex = ex_t(S(0, n), S(0, w));
      View d = dst_(S(o.row, o.row + n), S(c, c + w));
      nki::dma_copy(ex, d, {.scalar_offset = expert_});
      nki::tensor_copy(res, o.tile(all, S(j, j + w)), Engine::ACT);
      nki::tensor_tensor(res, res, ex, AluOp::Add);
      nki::dma_copy(d, res, {.engine = Engine::ACT, .scalar_offset = expert_, .scalar_offset_dst = true});
    }
  }

 private:
  const char* phase_;
  View dst_, expert_;
  int64_t chunk_ = 0;
  std::vector<std::pair<View, View>>& sets_;
  size_t& rr_;
};

}  // namespace

std::unique_ptr<mxfp8::Epilogue> p1_epilogue(const BwdParams& p, const BwdPlan& f, const Hbm& t,
                                             const Block& blk, std::vector<P1Set>& sets, size_t& rr,
                                             const View& dea_acc, const View& bias_acc,
                                             const View& bias_part) {
  return std::make_unique<P1Epilogue>(p, f, t, blk, sets, rr, dea_acc, bias_acc, bias_part);
}

std::unique_ptr<mxfp8::Epilogue> p0_epilogue(const BwdParams& p, const BwdPlan& f, const Block& blk,
                                             std::vector<std::pair<View, View>>& sets, size_t& rr) {
  return std::make_unique<P0Epilogue>(p, f, blk, sets, rr);
}

std::unique_ptr<mxfp8::Epilogue> expert_accumulate(const char* phase, View dst, View expert,
                                                   std::vector<std::pair<View, View>>& sets, size_t& rr) {
  return std::make_unique<ExpertAccumulate>(phase, std::move(dst), std::move(expert), sets, rr);
}

}  // namespace trnsim::kernels::moe
