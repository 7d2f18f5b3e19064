#include "kernels/moe/bwd_kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"
#include "kernels/lib/mxfp8/matmul.h"
#include "kernels/lib/partition_fill.h"
#include "kernels/moe/bwd_checks.h"
#include "kernels/moe/bwd_weights.h"
#include "kernels/moe/moe_common.h"
#include "sim/base/error.h"

namespace trnsim::kernels::moe {
namespace {

using isa::DType;
using isa::Engine;
using mxfp8::cdiv;
using nki::ActFunc;
using nki::AluOp;

[[noreturn]] void fail(const std::string& msg) {
  throw InputError(fmt::format("{}: {}", kBwdName, msg));
}

// d_gate_up^T stays in SBUF for Phase 2 up to this many bytes per partition.
constexpr int64_t kResidentBudget = 48 * 1024;
constexpr int kEpilogueSets = 2;  // Phase 1 epilogue scratch rotates over this many sets
// Columns per weight-gradient read-modify-write step (the widest output tile of Phases 3 and 4, up to this).
constexpr int64_t kWeightChunk = 4096;
// Stores of the epilogues go on POOL's queues: SP's queues keep the GEMMs' loads.
const nki::DmaOpts kPool{.engine = Engine::POOL};

mxfp8::Tiling phase_tiling(const std::optional<BwdPhaseConfig>& c) {
  return c ? c->tiling.tiling() : MxTilingConfig{}.tiling();
}

// An HBM operand (BF16, the layout given), bound per block.
mxfp8::Operand hbm_operand(mxfp8::Layout layout, const char* name, const char* f_name) {
  mxfp8::Operand o;
  o.source = mxfp8::Source::Hbm;
  o.layout = layout;
  o.name = o.param = name;
  o.f_name = f_name;
  return o;
}

// Rows of an HBM tensor gathered by the block's token indices, K-by-F (the contraction on the rows).
mxfp8::Operand gathered_rows(const char* name, const char* f_name) {
  mxfp8::Operand o;
  o.source = mxfp8::Source::Gather;
  o.layout = mxfp8::Layout::KByF;
  o.name = o.param = name;
  o.f_name = f_name;
  return o;
}

// The parameter that decides phase n's scale packing: its own enable_scale_packing, else the top-level one.
std::string packing_key(const BwdParams& p, int phase) {
  const auto& c = p.phase_config(phase);
  return c && c->enable_scale_packing ? fmt::format("phase{}_config.enable_scale_packing", phase)
                                      : std::string("use_scale_packing");
}

}  // namespace

BwdPlan plan_bwd(const BwdParams& p, const isa::Limits& limits, std::optional<int64_t> num_valid_tokens) {
  BwdPlan f;
  check_bwd(p, limits);
  const int64_t B = p.block_size;
  const int cores = p.cores();
  f.T = p.T, f.rows = p.rows(), f.H = p.H, f.I = p.I_TP, f.E = p.E, f.B = B, f.N = p.N();
  f.run_blocks = f.N;
  if (p.num_valid_tokens && num_valid_tokens)
    f.run_blocks = std::min(f.N, cdiv(std::clamp<int64_t>(*num_valid_tokens, 0, p.T), B));
  f.cores = cores;
  f.Hc = p.H / cores, f.Ic = p.I_TP / cores;
  f.recompute = !p.gate_up_given();
  f.dense = p.single_expert_dense;
  f.scheme = p.quant_scheme();
  const bool x32 = f.scheme == num::QuantScheme::OneX32;
  // The resident d_gate_up^T: [128, groups, B], 1x32 in its interleave order (4 groups per 512 rows).
  f.dgu_groups = x32 ? 4 * cdiv(2 * f.I, 512) : 2 * f.I / 128;
  const int64_t dgu_bytes = tile_bytes(f.dgu_groups * B, DType::BF16);
  f.dgu_resident = dgu_bytes <= kResidentBudget;
  if (!f.dgu_resident && B % 512 != 0)
    fail(fmt::format(
        "d_gate_up [2*I_TP, block_size] = [{}, {}] does not fit in SBUF ({} bytes per partition, at most "
        "{}), and read from HBM as Phase 2's K-by-F operand it needs block_size % 512 == 0",
        2 * f.I, B, dgu_bytes, kResidentBudget));
  f.chunk = std::min<int64_t>(B, 512);

  // SBUF the kernel holds besides the pipeline's blocks (emit_bwd allocates exactly these).
  const int64_t G = B / 128, C = f.chunk;
  int64_t r = 0;
  r += tile_bytes(f.N, DType::I32) + tile_bytes(f.N, DType::F32);  // block_to_expert, broadcast
  r += 2 * tile_bytes(G, DType::I32);                              // token indices
  if (x32) r += 2 * tile_bytes(4 * cdiv(B, 512), DType::I32);      // in 1x32 order
  if (x32 && p.num_valid_tokens) r += tile_bytes(4 * cdiv(B, 512), DType::F32);
  r += 2 * tile_bytes(f.N * G, DType::I32);                          // affinity offsets (+ spare)
  r += 2 * tile_bytes(f.N * G, DType::F32);                          // dEA of every tile, the peer's
  r += 2 * (tile_bytes(G, DType::F32) + tile_bytes(B, DType::F32));  // affinities, broadcast
  r += tile_bytes(B, DType::F32);                                    // dEA partial
  r += tile_bytes(128, DType::F32) + tile_bytes(512, DType::F32) + tile_bytes(1, DType::F32);
  r += tile_bytes(128, DType::BF16) + tile_bytes(2048, DType::BF16);  // zeros
  if (f.dgu_resident) r += dgu_bytes;
  const int64_t set =
      2 * tile_bytes(C, DType::BF16) + 6 * tile_bytes(C, DType::F32) + 3 * tile_bytes(C, DType::BF16);
  r += kEpilogueSets * set;
  f.wchunk = std::min(kWeightChunk, std::max(2 * f.I, f.Hc));
  r += 2 * (tile_bytes(f.wchunk, DType::BF16) * 2);  // weight read-modify-write (P3, P4)
  r += mxfp8::AccumulateRows::kSbufBytes;            // P2 read-modify-write
  if (f.recompute) r += 2 * tile_bytes(C, DType::BF16);
  if (p.bias)
    r += 2 * tile_bytes(2 * (f.Ic / 128), DType::F32) + tile_bytes(2 * (f.Ic / 128), DType::BF16) +
         tile_bytes(1, DType::F32) + tile_bytes(f.Hc, DType::F32) + tile_bytes(f.Hc, DType::BF16) +
         tile_bytes(512, DType::BF16) + tile_bytes(512, DType::F32);
  f.dy_chunk = std::min<int64_t>(p.H, 512);
  if (p.on_h())
    r += kEpilogueSets * (2 * tile_bytes(f.dy_chunk, DType::BF16) + tile_bytes(f.dy_chunk, DType::F32)) +
         tile_bytes(1, DType::F32) + 2 * tile_bytes(x32 ? 4 * cdiv(B, 512) : G, DType::I32);
  f.reserved_sbuf = r;

  const auto common = [&](mxfp8::MatmulSpec& s, const char* what, const char* scope, int phase) {
    s.kernel = fmt::format("{} ({})", kBwdName, what);
    s.scope = scope;
    s.out_dtype = DType::F32;
    s.fp8 = p.fp8;
    s.scheme = f.scheme;
    s.cores = mxfp8::Cores::CallingCore;
    s.use_scale_packing = p.phase_scale_packing(phase);
    s.spill_reload = p.phase_spill_reload(phase);
    s.reserved_sbuf_bytes = f.reserved_sbuf;
    s.tiling = phase_tiling(p.phase_config(phase));
  };
  const auto hbm = [](mxfp8::Layout layout, const char* name, const char* f_name, mxfp8::Swizzle sw) {
    mxfp8::Operand o = hbm_operand(layout, name, f_name);
    o.swizzle = sw;
    return o;
  };
  // P0 (recompute): M = I per core (gate rows; up paired), K = H, N = B.
  if (f.recompute) {
    mxfp8::MatmulSpec& s = f.p0;
    s.M = f.Ic, s.K = p.H, s.N = B;
    if (f.Ic % 512 != 0)
      fail(fmt::format(
          "checkpoint_config.save_gate_up_proj_act = false: recomputing gate/up reads the [H, I_TP] weight "
          "slices K-by-F, which needs I_TP per core % 512 == 0, got I_TP / {} = {} (give the checkpoint)",
          cores, f.Ic));
    s.lhs = hbm_operand(mxfp8::Layout::KByF, "gate_up_proj_weight", "I_TP");
    s.lhs2 = s.lhs;
    s.rhs = hbm(mxfp8::Layout::FByK, "hidden_states", "block_size", p.hidden_states_t_swizzle);
    common(s, "Phase 0, gate/up recompute: M = I_TP per core, K = H, N = block_size", "p0", 1);
    f.p0_plan = mxfp8::plan_matmul(s, limits);
  }
  {
    mxfp8::MatmulSpec& s = f.p1;
    s.M = f.Ic, s.K = p.H, s.N = B;
    s.lhs = p.down_weight_scales
                ? weight_operand(kBwdName, {.tensor = "down_proj_weight",
                                            .param = "down_weight",
                                            .scales = &p.down_weight_scales,
                                            .E = p.E,
                                            .K = p.H,
                                            .cols = f.I,
                                            .F = f.Ic,
                                            .k_name = "H",
                                            .cols_name = "I_TP",
                                            .f_name = "I_TP",
                                            .packing = p.phase_scale_packing(1),
                                            .packing_key = packing_key(p, 1)})
                : hbm(mxfp8::Layout::FByK, "down_proj_weight", "I_TP", p.down_weight_swizzle);
    s.rhs = hbm(mxfp8::Layout::FByK, "output_hidden_states_grad", "block_size", p.output_grad_swizzle);
    common(s, "Phase 1: M = I_TP per core, K = H, N = block_size", "p1", 1);
    f.p1_plan = mxfp8::plan_matmul(s, limits);
  }
  {
    mxfp8::MatmulSpec& s = f.p2;
    s.M = B, s.K = 2 * f.I, s.N = f.Hc;
    s.lhs = hbm_operand(mxfp8::Layout::KByF, "d_gate_up", "block_size");
    if (f.dgu_resident) s.lhs.source = mxfp8::Source::Sbuf, s.lhs.interleaved_rows = x32;
    s.rhs = p.gate_up_weight_scales
                ? weight_operand(kBwdName, {.tensor = "gate_up_proj_weight",
                                            .param = "gate_up_weight",
                                            .scales = &p.gate_up_weight_scales,
                                            .E = p.E,
                                            .K = 2 * f.I,
                                            .cols = p.H,
                                            .F = f.Hc,
                                            .k_name = "2*I_TP",
                                            .cols_name = "H",
                                            .f_name = "H",
                                            .packing = p.phase_scale_packing(2),
                                            .packing_key = packing_key(p, 2)})
                : hbm(mxfp8::Layout::FByK, "gate_up_proj_weight", "H", p.gate_up_weight_swizzle);
    common(s, "Phase 2: M = block_size, K = 2*I_TP, N = H per core", "p2", 2);
    f.p2_plan = mxfp8::plan_matmul(s, limits);
  }
  {
    mxfp8::MatmulSpec& s = f.p3;
    s.M = f.Hc, s.K = B, s.N = 2 * f.I;
    s.lhs = gathered_rows("hidden_states", "H");
    s.lhs.interleaved_rows = x32;
    s.rhs = hbm(mxfp8::Layout::FByK, "d_gate_up", "2*I_TP", p.d_gate_up_t_swizzle);
    common(s, "Phase 3: M = H per core, K = block_size, N = 2*I_TP", "p3", 3);
    f.p3_plan = mxfp8::plan_matmul(s, limits);
  }
  {
    mxfp8::MatmulSpec& s = f.p4;
    s.M = f.I, s.K = B, s.N = f.Hc;
    // AFFINITY_ON_H: the unscaled intermediate, and the block's affinity-scaled dY rows gathered from its
    // scratch (rows [ring B, (ring + 1) B), no padding left: the padding rows hold zeros).
    s.lhs = hbm(mxfp8::Layout::FByK, p.on_h() ? "intermediate" : "scaled_intermediate", "I_TP",
                p.scaled_intermediate_t_swizzle);
    s.rhs = gathered_rows("output_hidden_states_grad", "H");
    s.rhs.interleaved_rows = x32;
    common(s, "Phase 4: M = I_TP, K = block_size, N = H per core", "p4", 4);
    f.p4_plan = mxfp8::plan_matmul(s, limits);
  }
  const mxfp8::Padding pad = p.skip() || p.num_valid_tokens ? mxfp8::Padding::Skip : mxfp8::Padding::ZeroRow;
  f.p3.lhs.rows.padding = pad;
  f.p4.rhs.rows.padding = p.on_h() ? mxfp8::Padding::ZeroRow : pad;
  return f;
}

namespace {

struct Hbm {
  View hidden, ea, dy, w_gu, w_down, s_gu, s_down, tokens, b2e, nvt;
  View ck_gu, ck_scaled, ck_gate, ck_inter, ck_down;
  View dx, dea, dw_gu, dw_down, db_gu, db_down;
  View dy_scratch, x_scratch;    // per core [2, B, H]: gathered rows (P1's dY, P0's X); ON_H dY: [2 B, H]
  View dgu_scratch, sc_scratch;  // shared [2, 2I, B], [2, I, B]
  View gu_scratch;               // per core [2, 2, I, B]: recomputed gate/up (P0)
};

Hbm declare(Kernel& k, const BwdParams& p, const BwdPlan& f) {
  Hbm t;
  const int64_t E = p.E, H = p.H, I = f.I, B = f.B, N = f.N;
  const DType cdt = p.compute_dtype;
  t.hidden = k.input("hidden_states", DType::BF16, {f.rows, H});
  t.ea = k.input("expert_affinities_masked", DType::F32, {f.rows * E, 1});
  const BwdWeights w = declare_bwd_weights(k, p, I);
  t.w_gu = w.w_gu;
  t.s_gu = w.s_gu;
  t.w_down = w.w_down;
  t.s_down = w.s_down;
  t.tokens = k.input("token_position_to_id", DType::I32, {f.dense ? 1 : N * B});
  t.b2e = k.input("block_to_expert", DType::I32, {f.dense ? 1 : N, 1});
  if (p.num_valid_tokens) t.nvt = k.input("num_valid_tokens", DType::I32, {1});
  t.dy = k.input("output_hidden_states_grad", DType::BF16, {f.rows, H});
  const CheckpointConfig& c = p.checkpoint_config;
  if (c.save_gate_up_proj_act) t.ck_gu = k.input("gate_up_proj_act_checkpoint_T", cdt, {N, 2, I, B});
  if (c.save_gate_act) t.ck_gate = k.input("gate_act_checkpoint_T", cdt, {N, I, B});
  if (c.save_intermediate) t.ck_inter = k.input("intermediate_checkpoint_T", cdt, {N, I, B});
  if (c.save_scaled_intermediate) t.ck_scaled = k.input("scaled_intermediate_checkpoint_T", cdt, {N, I, B});
  if (c.save_down_proj_act) t.ck_down = k.input("down_proj_act_checkpoint", cdt, {N, B, H});
  t.dx = k.output("hidden_states_grad", DType::BF16, {f.rows, H});
  t.dea = k.output("expert_affinities_masked_grad", DType::F32, {f.rows * E, 1});
  t.dw_gu = k.output("gate_up_proj_weight_grad", DType::BF16, {E, H, 2, I});
  t.dw_down = k.output("down_proj_weight_grad", DType::BF16, {E, I, H});
  if (p.bias) {
    t.db_gu = k.output("gate_and_up_proj_bias_grad", cdt, {E, 2, I});
    t.db_down = k.output("down_proj_bias_grad", cdt, {E, H});
  }
  // AFFINITY_ON_H: Phase 4 gathers the scaled dY rows back by row index, so the ring's rows are dim 0.
  t.dy_scratch = k.scratch("dy_block", DType::BF16,
                           p.on_h() ? std::vector<int64_t>{2 * B, H} : std::vector<int64_t>{2, B, H}, true);
  if (f.recompute) {
    t.x_scratch = k.scratch("hidden_block", DType::BF16, {2, B, H}, true);
    t.gu_scratch = k.scratch("gate_up_block", DType::BF16, {2, 2, I, B}, true);
  }
  t.dgu_scratch = k.scratch("d_gate_up_block", DType::BF16, {2, 2 * I, B}, false);
  // Phase 4's operand when no checkpoint holds it: inter x affinity (AFFINITY_ON_I) or inter (ON_H).
  if (p.on_h() ? !c.save_intermediate : !c.save_scaled_intermediate)
    t.sc_scratch = k.scratch(p.on_h() ? "intermediate_block" : "scaled_intermediate_block", DType::BF16,
                             {2, I, B}, false);
  return t;
}

// State of the block being processed.
struct Block {
  int64_t b = 0;
  int ring = 0;
  View expert;    // SBUF [1, 1] int32: e
  View idx;       // SBUF [128, B/128] int32 token ids
  View idx32;     // quant_scheme 1x32: the same in the 1x32 interleave order (Phases 3 and 4)
  View ea_col;    // SBUF [128, B/128] FP32 affinities
  View ea_bcast;  // SBUF [128, B] FP32: the slots' affinities on every partition
  View dy;        // HBM [B, H]: gathered dY rows
  View x;         // HBM [B, H]: gathered hidden rows (recompute only)
  View gate_up;   // HBM [2, I, B]: the block's gate/up (checkpoint, or recomputed)
  View nvt_col;   // the last block under num_valid_tokens: SBUF [128, 1] FP32, the count on every partition
};

// One Phase 1 epilogue step's scratch: [128, C] each.
struct P1Set {
  View gate, up;                           // bf16 loads
  View sig, silu, inter, prod, dint, tmp;  // FP32
  View dg, du, sc;                         // bf16 results
};

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

void emit_bwd(Kernel& k, const BwdParams& p, const BwdPlan& f) {
  const Hbm t = declare(k, p, f);
  // The weight gradients are read-modify-written at the block's expert (scalar_offset: any of E rows).
  k.track_rows_together(t.dw_gu);
  k.track_rows_together(t.dw_down);
  if (p.bias) k.track_rows_together(t.db_gu), k.track_rows_together(t.db_down);
  const int core = k.program_id(), cores = k.num_programs();
  const int64_t B = f.B, H = f.H, I = f.I, E = f.E, N = f.N, G = B / 128, C = f.chunk;
  const int64_t Hc = f.Hc, h0 = core * Hc;
  const bool skip = p.skip() || p.num_valid_tokens;  // -1 slots: padding, or past num_valid_tokens
  const nki::OobMode oob = skip ? nki::OobMode::Skip : nki::OobMode::Error;
  const mxfp8::Padding padding = skip ? mxfp8::Padding::Skip : mxfp8::Padding::ZeroRow;

  // Long-lived SBUF (BwdPlan::reserved_sbuf counts these).
  View b2e = k.sbuf({1, N}, DType::I32, "block_to_expert");
  View b2e_f = k.sbuf({128, N}, DType::F32, "block_to_expert_bcast");
  std::vector<View> idx, ea_col, ea_bcast;
  for (int i = 0; i < 2; ++i) {
    idx.push_back(k.sbuf({128, G}, DType::I32, fmt::format("token_ids{}", i)));
    ea_col.push_back(k.sbuf({128, G}, DType::F32, fmt::format("affinities{}", i)));
    ea_bcast.push_back(k.sbuf({128, B}, DType::F32, fmt::format("affinities_bcast{}", i)));
  }
  View offs = k.sbuf({128, N * G}, DType::I32, "affinity_offsets");
  View dea_all = k.sbuf({128, N * G}, DType::F32, "dea");
  View dea_peer = k.sbuf({128, N * G}, DType::F32, "dea_peer");
  View dea_acc = k.sbuf({128, B}, DType::F32, "dea_partial");
  View ones = k.sbuf({1, 128}, DType::F32, "ones");
  View ones_col = k.sbuf({128, 1}, DType::F32, "ones_col");
  View row512 = k.sbuf({1, 512}, DType::F32, "bcast_row");
  View zeros = k.sbuf({128, 128}, DType::BF16, "zeros");
  View zeros_wide = k.sbuf({128, 2048}, DType::BF16, "zeros_wide");
  View nvt_col, valid;
  if (p.num_valid_tokens) {
    nvt_col = k.sbuf({128, 1}, DType::F32, "num_valid_tokens_bcast");
    valid = k.sbuf({128, G}, DType::F32, "valid_slots");
  }
  View dgu_res;
  if (f.dgu_resident) dgu_res = k.sbuf({128, f.dgu_groups, B}, DType::BF16, "d_gate_up_resident");
  // quant_scheme 1x32: Phases 3 and 4 gather their K-by-F rows (the block's slots) by an index in the 1x32
  // interleave order, slot 4 R + j at [R % 128, 4 (R / 128) + j] (mxfp8::Operand::interleaved_rows).
  const bool x32 = f.scheme == num::QuantScheme::OneX32;
  const int64_t G32 = 4 * cdiv(B, 512), R32 = std::min<int64_t>(128, B / 4);
  std::vector<View> idx32;
  View valid32;
  if (x32) {
    for (int i = 0; i < 2; ++i)
      idx32.push_back(k.sbuf({128, G32}, DType::I32, fmt::format("token_ids_1x32_{}", i)));
    if (p.num_valid_tokens) valid32 = k.sbuf({128, G32}, DType::F32, "valid_slots_1x32");
  }
  // The used part of a 1x32-order index, and an iota of slot numbers base + 4 R + j in it.
  const auto used32 = [&](const View& v) { return v(S(0, R32), all); };
  const auto iota32 = [&](const View& v, int64_t base) {
    nki::iota(used32(v).reshape({R32, G32 / 4, 4}), {512, 1}, static_cast<double>(base), 4.0);
  };
  std::vector<P1Set> p1_sets;
  for (int i = 0; i < kEpilogueSets; ++i) {
    const auto f32 = [&](const char* n) { return k.sbuf({128, C}, DType::F32, n); };
    const auto b16 = [&](const char* n) { return k.sbuf({128, C}, DType::BF16, n); };
    p1_sets.push_back({b16("p1_gate"), b16("p1_up"), f32("p1_sig"), f32("p1_silu"), f32("p1_inter"),
                       f32("p1_prod"), f32("p1_dint"), f32("p1_tmp"), b16("p1_dg"), b16("p1_du"),
                       b16("p1_sc")});
  }
  // AFFINITY_ON_H dY pass: dY and down_proj_act pieces (bfloat16), their product (FP32), a partial sum.
  std::vector<std::array<View, 3>> h_sets;
  std::vector<View> h_rows;  // rows [ring B, (ring + 1) B) of the dY scratch, as a row index
  View h_part;
  if (p.on_h()) {
    for (int i = 0; i < kEpilogueSets; ++i)
      h_sets.push_back({k.sbuf({128, f.dy_chunk}, DType::BF16, "onh_dy"),
                        k.sbuf({128, f.dy_chunk}, DType::BF16, "onh_down_act"),
                        k.sbuf({128, f.dy_chunk}, DType::F32, "onh_prod")});
    h_part = k.sbuf({128, 1}, DType::F32, "onh_dea_part");
    for (int i = 0; i < 2; ++i)
      h_rows.push_back(k.sbuf({128, x32 ? G32 : G}, DType::I32, fmt::format("onh_dy_rows{}", i)));
  }
  size_t h_rr = 0;
  std::vector<std::pair<View, View>> w_sets, p0_sets;
  for (int i = 0; i < 2; ++i)
    w_sets.push_back({k.sbuf({128, f.wchunk}, DType::BF16, "wgrad_result"),
                      k.sbuf({128, f.wchunk}, DType::BF16, "wgrad_existing")});
  if (f.recompute)
    p0_sets.push_back({k.sbuf({128, C}, DType::BF16, "p0_gate"), k.sbuf({128, C}, DType::BF16, "p0_up")});
  size_t p1_rr = 0, w_rr = 0, p0_rr = 0;
  // Bias gradients of the block: gate/up [128, 2, I/128 per core] (row i at [i % 128, h, i / 128]) and down
  // [1, H per core].
  View bgu_acc, bgu_part, bgu_old, bd_acc, bd_old, dy_tile, dy_f32;
  if (p.bias) {
    bgu_acc = k.sbuf({128, 2, f.Ic / 128}, DType::F32, "gate_up_bias_grad");
    bgu_part = k.sbuf({128, 2}, DType::F32, "gate_up_bias_part");
    bgu_old = k.sbuf({128, 2, f.Ic / 128}, DType::BF16, "gate_up_bias_grad_old");
    bd_acc = k.sbuf({1, f.Hc}, DType::F32, "down_bias_grad");
    bd_old = k.sbuf({1, f.Hc}, DType::BF16, "down_bias_grad_old");
    dy_tile = k.sbuf({128, 512}, DType::BF16, "down_bias_dy");
    dy_f32 = k.sbuf({128, 512}, DType::F32, "down_bias_dy_f32");
  }

  {
    PhaseScope ph(k, "setup");
    nki::memset(ones, 1.0);
    nki::memset(ones_col, 1.0);
    nki::memset(zeros, 0.0, Engine::POOL);
    nki::memset(zeros_wide, 0.0, Engine::POOL);
    for (int i = 0; i < static_cast<int>(h_rows.size()); ++i)
      if (x32)
        iota32(h_rows[i], i * B);
      else
        nki::iota(h_rows[i], {128}, static_cast<double>(i * B), 1.0);
    if (f.dense) {
      nki::memset(b2e, 0.0);  // one expert: every block's is 0
    } else {
      nki::dma_copy(b2e, t.b2e.reshape({1, N}));
    }
    if (p.num_valid_tokens) {
      // The token count on every partition (FP32), for the valid-slot mask of every block.
      View c = k.sbuf({1, 1}, DType::I32, "num_valid_tokens");
      nki::dma_copy(c, t.nvt.reshape({1, 1}));
      nki::tensor_copy(row512(all, S(0, 1)), c);
      broadcast_rows(k, nvt_col, row512(all, S(0, 1)), ones);
    }
    for (int64_t j = 0; j < N; j += 512) {
      const int64_t w = std::min<int64_t>(512, N - j);
      nki::tensor_copy(row512(all, S(0, w)), b2e(all, S(j, j + w)));
      broadcast_rows(k, b2e_f(all, S(j, j + w)), row512(all, S(0, w)), ones);
    }
    if (!p.skip_grad_initialization) {
      // Each core zeroes its columns of H; core 0 the affinity gradient (both scatter into it later).
      zero_region(t.dx(all, S(h0, h0 + Hc)), zeros_wide);
      for (int64_t e = 0; e < E; ++e) {
        zero_region(t.dw_gu(e, S(h0, h0 + Hc)).reshape({Hc, 2 * I}), zeros_wide);
        zero_region(t.dw_down(e, all, S(h0, h0 + Hc)).reshape({I, Hc}), zeros_wide);
      }
      if (core == 0) zero_region(t.dea.reshape({f.rows, E}), zeros_wide);
      if (p.bias) {
        zero_region(t.db_down(all, S(h0, h0 + Hc)), zeros_wide);
        for (int h = 0; h < 2; ++h)
          zero_region(t.db_gu(all, h, S(core * f.Ic, (core + 1) * f.Ic)).reshape({E, f.Ic}), zeros_wide);
      }
    }
    if (cores == 2) nki::core_barrier(t.dea);
  }

  // The gather phase of block b, emitted one block ahead so that its DMAs run while the previous block
  // computes.
  const auto prepare = [&](int64_t b, int ring) {
    PhaseScope ph(k, "gather");
    Block blk;
    blk.b = b, blk.ring = ring;
    blk.expert = element(b2e, b);
    blk.idx = idx[ring];
    blk.ea_col = ea_col[ring];
    blk.ea_bcast = ea_bcast[ring];
    // Only the last block that runs holds slots from the count on: the loop runs the full blocks unmasked
    // and masks its final iteration (a branch on the same register, not charged, as the loop's own).
    if (p.num_valid_tokens && b == f.run_blocks - 1) blk.nvt_col = nvt_col;
    if (f.dense) {
      // Contiguous blocks: slot r of block b is token b B + r; past num_valid_tokens it is -1 (skipped).
      nki::iota(blk.idx, {128}, static_cast<double>(b * B), 1.0);
      if (p.num_valid_tokens) {
        nki::tensor_scalar(valid, blk.idx, AluOp::IsLt, nki::Operand(nvt_col));
        nki::select(blk.idx, valid, blk.idx, -1.0);
      }
    } else {
      nki::dma_copy(blk.idx, t.tokens(S(b * B, (b + 1) * B)).reshape({G, 128}).permute({1, 0}));
    }
    if (x32) {
      blk.idx32 = idx32[ring];
      View u = used32(blk.idx32);
      if (f.dense) {
        iota32(blk.idx32, b * B);
        if (p.num_valid_tokens) {
          View v = used32(valid32);
          nki::tensor_scalar(v, u, AluOp::IsLt, nki::Operand(nvt_col(S(0, R32), all)));
          nki::select(u, v, u, -1.0);
        }
      } else {
        // Slot 4 R + j of the block: R = 128 s + p.
        nki::dma_copy(u.reshape({R32, G32 / 4, 4}),
                      t.tokens(S(b * B, (b + 1) * B)).reshape({G32 / 4, R32, 4}).permute({1, 0, 2}));
      }
    }
    View off = offs(all, S(b * G, (b + 1) * G));
    nki::tensor_scalar(off, blk.idx, AluOp::Multiply, static_cast<double>(E), false, AluOp::Add,
                       nki::Operand(b2e_f(all, S(b, b + 1))));
    if (skip) nki::memset(blk.ea_col, 0.0, Engine::POOL);
    for (int64_t g = 0; g < G; ++g)
      nki::dma_copy(blk.ea_col(all, S(g, g + 1)), t.ea(S(0, 1), all).index_rows(128),
                    {.vector_offset = off(all, S(g, g + 1)), .oob_mode = oob});
    // dY rows (and X rows for the recompute) into the per-core scratch; -1 slots read zeros.
    const auto gather_rows = [&](const View& scratch, const View& src) {
      View dst =
          scratch.rank() == 2 ? scratch(S(ring * B, (ring + 1) * B), all) : scratch(ring).reshape({B, H});
      if (skip)
        nki::dma_copy(dst.reshape({G, 128, H}).permute({1, 0, 2}),
                      zeros.reshape({128, 1, 1, 128}).broadcast(1, G).broadcast(2, H / 128));
      for (int64_t g = 0; g < G; ++g)
        nki::dma_copy(dst(S(g * 128, g * 128 + 128), all), src(S(0, 1), all).index_rows(128),
                      {.vector_offset = blk.idx(all, S(g, g + 1)), .oob_mode = oob});
      return dst;
    };
    blk.dy = gather_rows(t.dy_scratch, t.dy);
    if (f.recompute) blk.x = gather_rows(t.x_scratch, t.hidden);
    if (p.on_h()) {
      // AFFINITY_ON_H: the affinity gradient of each slot is the sum over H of down_proj_act x dY (each core
      // its columns of H; the cores' partials are added after the loop), and Phases 1 and 4 read affinity x
      // dY: the block's dY rows are scaled in place in the scratch, 128 slots (one per partition) at a time.
      for (int64_t g = 0; g < G; ++g) {
        View dea_col = dea_all(all, S(b * G + g, b * G + g + 1));
        bool first = true;
        // Chunks within each core's columns (the affinity gradient over this core's only).
        for (int64_t c0 = 0; c0 < H; c0 += std::min(f.dy_chunk, (c0 / Hc + 1) * Hc - c0)) {
          const int64_t w = std::min(f.dy_chunk, (c0 / Hc + 1) * Hc - c0);
          const auto& hs = h_sets[h_rr++ % h_sets.size()];
          View dy = hs[0](all, S(0, w));
          View rows = blk.dy(S(g * 128, (g + 1) * 128), S(c0, c0 + w));
          nki::dma_copy(dy, rows);
          if (c0 >= h0 && c0 < h0 + Hc) {
            View ck = hs[1](all, S(0, w)), prod = hs[2](all, S(0, w));
            nki::dma_copy(ck,
                          t.ck_down(S(b, b + 1), S(g * 128, (g + 1) * 128), S(c0, c0 + w)).reshape({128, w}),
                          {.engine = Engine::ACT});
            nki::tensor_tensor(prod, dy, ck, AluOp::Multiply);
            if (first) {
              nki::tensor_reduce(dea_col, AluOp::Add, prod, {1});
            } else {
              nki::tensor_reduce(h_part, AluOp::Add, prod, {1});
              nki::tensor_tensor(dea_col, dea_col, h_part, AluOp::Add);
            }
            first = false;
          }
          nki::tensor_scalar(dy, dy, AluOp::Multiply, nki::Operand(blk.ea_col(all, S(g, g + 1))), false,
                             AluOp::Bypass, 0.0, false, Engine::ACT);
          nki::dma_copy(rows, dy, kPool);
        }
      }
    }
    blk.gate_up = f.recompute ? t.gu_scratch : t.ck_gu;
    // The affinities on every partition ([128, B]): PE transposes of the columns into a row, then ones^T x
    // row.
    View pt = k.psum({1, 512}, DType::F32, "moe_ea_row");
    for (int64_t c = 0; c < B; c += 512) {
      const int64_t w = std::min<int64_t>(512, B - c);
      for (int64_t j = 0; j < w; j += 128)
        nki::nc_transpose(pt(all, S(j, j + 128)), blk.ea_col(all, S((c + j) / 128, (c + j) / 128 + 1)));
      nki::tensor_copy(row512(all, S(0, w)), pt(all, S(0, w)));
      broadcast_rows(k, blk.ea_bcast(all, S(c, c + w)), row512(all, S(0, w)), ones);
    }
    return blk;
  };

  // The block loop: N blocks, or with num_valid_tokens the dynamic loop's ceil(count / B) (bwd_kernel.h).
  const int64_t NB = f.run_blocks;
  std::optional<Block> next;
  if (NB > 0) next = prepare(0, 0);
  for (int64_t b = 0; b < NB; ++b) {
    const Block blk = *next;
    if (b + 1 < NB) next = prepare(b + 1, static_cast<int>((b + 1) % 2));
    const int ring = blk.ring;

    if (f.recompute) {
      PhaseScope ph(k, "P0");
      mxfp8::MatmulSpec s = f.p0;
      const int64_t i0 = core * f.Ic;
      for (int h = 0; h < 2; ++h) {
        mxfp8::Operand& o = h == 0 ? s.lhs : *s.lhs2;
        o.data = t.w_gu(S(0, 1), all, h, S(i0, i0 + f.Ic)).reshape({H, f.Ic});
        o.scalar_offset = blk.expert;
      }
      s.rhs.data = blk.x;
      P0Epilogue epi(p, f, blk, p0_sets, p0_rr);
      mxfp8::emit_matmul(k, s, f.p0_plan, epi);
    }

    // Phase 1: d_int^T [I/2, B] and the SwiGLU backward.
    {
      PhaseScope ph(k, "P1");
      if (!p.on_h()) nki::memset(dea_acc, 0.0, Engine::POOL);
      mxfp8::MatmulSpec s = f.p1;
      const int64_t i0 = core * f.Ic;
      if (s.lhs.quantized()) {
        s.lhs.data = t.w_down(S(0, 1), all, S(i0, i0 + f.Ic)).reshape({H / 4, f.Ic});
        s.lhs.scales = t.s_down(S(0, 1), all, S(i0, i0 + f.Ic)).reshape({t.s_down.size(1), f.Ic});
      } else {
        s.lhs.data = t.w_down(S(0, 1), S(i0, i0 + f.Ic), all).reshape({f.Ic, H});
      }
      s.lhs.scalar_offset = blk.expert;
      s.rhs.data = blk.dy;
      if (p.bias) nki::memset(bgu_acc, 0.0, Engine::POOL);
      P1Epilogue epi(p, f, t, blk, p1_sets, p1_rr, dea_acc, bgu_acc, bgu_part);
      mxfp8::emit_matmul(k, s, f.p1_plan, epi);
      if (!p.on_h()) {
        // Sum the partial over its partitions (the I rows): ones^T x partial, one column per 128 tokens.
        View ps = k.psum({128, G}, DType::F32, "dea_sum");
        for (int64_t g = 0; g < G; ++g)
          nki::nc_matmul(ps(all, S(g, g + 1)), dea_acc(all, S(g * 128, (g + 1) * 128)), ones_col);
        nki::tensor_copy(dea_all(all, S(b * G, (b + 1) * G)), ps, Engine::ACT);
      }
      if (p.bias) {
        // gate_and_up_proj_bias_grad[e, h, this core's I] += the block's sums (bfloat16 read-modify-write).
        const int64_t i0 = core * f.Ic, gi = f.Ic / 128;
        for (int h = 0; h < 2; ++h) {
          View d = t.db_gu(S(0, 1), h, S(i0, i0 + f.Ic)).reshape({gi, 128}).permute({1, 0});
          View old = bgu_old(all, h, all);
          nki::dma_copy(old, d, {.scalar_offset = blk.expert});
          nki::tensor_tensor(old, old, bgu_acc(all, h, all), AluOp::Add);
          nki::dma_copy(d, old,
                        {.engine = Engine::ACT, .scalar_offset = blk.expert, .scalar_offset_dst = true});
        }
        // down_proj_bias_grad[e, this core's H] += sum over the block's slots of affinity x dY (the PE:
        // affinity column^T x dY rows, accumulated over the 128-slot tiles). Bias with AFFINITY_ON_H is
        // rejected by the parameter check, so the affinity is always a column here.
        View pb = k.psum({1, 512}, DType::F32, "down_bias_sum");
        for (int64_t c0 = 0; c0 < Hc; c0 += 512) {
          const int64_t w = std::min<int64_t>(512, Hc - c0);
          for (int64_t g = 0; g < G; ++g) {
            nki::dma_copy(dy_tile(all, S(0, w)), blk.dy(S(g * 128, (g + 1) * 128), S(h0 + c0, h0 + c0 + w)));
            nki::tensor_copy(dy_f32(all, S(0, w)), dy_tile(all, S(0, w)), Engine::ACT);
            nki::nc_matmul(pb(all, S(0, w)), blk.ea_col(all, S(g, g + 1)), dy_f32(all, S(0, w)),
                           {.accumulate = g > 0});
          }
          nki::tensor_copy(bd_acc(all, S(c0, c0 + w)), pb(all, S(0, w)));
        }
        View d = t.db_down(S(0, 1), S(h0, h0 + Hc));
        nki::dma_copy(bd_old, d, {.scalar_offset = blk.expert});
        nki::tensor_tensor(bd_old, bd_old, bd_acc, AluOp::Add);
        nki::dma_copy(d, bd_old,
                      {.engine = Engine::ACT, .scalar_offset = blk.expert, .scalar_offset_dst = true});
      }
      if (cores == 2) {
        nki::core_barrier(t.dgu_scratch);
        if (t.sc_scratch.valid()) nki::core_barrier(t.sc_scratch);
      }
    }

    // Phase 2: dX [B, H/2] = d_gate_up W_gu[e]^T, added into hidden_states_grad rows.
    {
      PhaseScope ph(k, "P2");
      mxfp8::MatmulSpec s = f.p2;
      const View dgu = t.dgu_scratch(ring).reshape({2 * I, B});
      if (f.dgu_resident && x32) {
        // Row 4 R + j at [R % 128, 4 (R / 128) + j]: the full 512-row groups, then a 256-row remainder.
        const int64_t full = 2 * I / 512, rem = (2 * I / 4) % 128;
        if (full)
          nki::dma_copy(dgu_res(all, S(0, 4 * full), all).reshape({128, full, 4, B}),
                        dgu(S(0, 512 * full), all).reshape({full, 128, 4, B}).permute({1, 0, 2, 3}));
        if (rem)
          nki::dma_copy(dgu_res(S(0, rem), S(4 * full, 4 * full + 4), all),
                        dgu(S(512 * full, 2 * I), all).reshape({rem, 4, B}));
        s.lhs.data = dgu_res;
      } else if (f.dgu_resident) {
        nki::dma_copy(dgu_res, dgu.reshape({2 * I / 128, 128, B}).permute({1, 0, 2}));
        s.lhs.data = dgu_res;
      } else {
        s.lhs.data = dgu;
      }
      if (s.rhs.quantized()) {
        s.rhs.data = t.w_gu(S(0, 1), all, S(h0, h0 + Hc)).reshape({2 * I / 4, Hc});
        s.rhs.scales = t.s_gu(S(0, 1), all, S(h0, h0 + Hc)).reshape({t.s_gu.size(1), Hc});
      } else {
        s.rhs.data = t.w_gu(S(0, 1), S(h0, h0 + Hc)).reshape({Hc, 2 * I});
      }
      s.rhs.scalar_offset = blk.expert;
      const mxfp8::RowIndex ri{blk.idx, padding};
      if (p.accumulate_hidden_states_grad) {
        mxfp8::AccumulateRows epi(t.dx, ri, h0);
        mxfp8::emit_matmul(k, s, f.p2_plan, epi);
      } else {
        mxfp8::ScatterRows epi(t.dx, ri, h0);
        mxfp8::emit_matmul(k, s, f.p2_plan, epi);
      }
    }

    // Phase 3: dW_gu[e] [H/2, 2I] += X^T d_gate_up.
    {
      PhaseScope ph(k, "P3");
      mxfp8::MatmulSpec s = f.p3;
      s.lhs.data = t.hidden(all, S(h0, h0 + Hc));
      s.lhs.rows.index = x32 ? blk.idx32 : blk.idx;
      s.rhs.data = t.dgu_scratch(ring).reshape({2 * I, B});
      ExpertAccumulate epi("P3", t.dw_gu(S(0, 1), S(h0, h0 + Hc)).reshape({Hc, 2 * I}), blk.expert, w_sets,
                           w_rr);
      mxfp8::emit_matmul(k, s, f.p3_plan, epi);
    }

    // Phase 4: dW_down[e] [I, H/2] += S^T dY.
    {
      PhaseScope ph(k, "P4");
      mxfp8::MatmulSpec s = f.p4;
      const View& ck = p.on_h() ? t.ck_inter : t.ck_scaled;
      s.lhs.data =
          t.sc_scratch.valid() ? t.sc_scratch(ring).reshape({I, B}) : ck(S(b, b + 1)).reshape({I, B});
      if (p.on_h()) {
        s.rhs.data = t.dy_scratch(all, S(h0, h0 + Hc));
        s.rhs.rows.index = h_rows[ring];
      } else {
        s.rhs.data = t.dy(all, S(h0, h0 + Hc));
        s.rhs.rows.index = x32 ? blk.idx32 : blk.idx;
      }
      ExpertAccumulate epi("P4", t.dw_down(S(0, 1), all, S(h0, h0 + Hc)).reshape({I, Hc}), blk.expert, w_sets,
                           w_rr);
      mxfp8::emit_matmul(k, s, f.p4_plan, epi);
    }
  }

  // The affinity gradient: swap the partials (each core summed its half of I), add, and each core scatters
  // its half of the 128-token tiles to t*E + e (the executed blocks' tiles).
  if (NB > 0) {
    PhaseScope ph(k, "dEA");
    const int64_t tiles = NB * G;
    if (cores == 2) {
      nki::sendrecv(dea_all(all, S(0, tiles)), dea_peer(all, S(0, tiles)));
      nki::tensor_tensor(dea_all(all, S(0, tiles)), dea_all(all, S(0, tiles)), dea_peer(all, S(0, tiles)),
                         AluOp::Add);
    }
    const View dst = t.dea(S(0, 1), all).index_rows(128);
    for (int64_t c = core; c < tiles; c += cores)
      nki::dma_copy(dst, dea_all(all, S(c, c + 1)),
                    {.vector_offset = offs(all, S(c, c + 1)), .indirect_dst = true, .oob_mode = oob});
  }
}

}  // namespace trnsim::kernels::moe
