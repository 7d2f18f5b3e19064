#include "kernels/moe/fwd_kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"
#include "kernels/lib/mxfp8/matmul.h"
#include "kernels/moe/moe_common.h"
#include "sim/base/error.h"

namespace trnsim::kernels::moe {
namespace {

using isa::DType;
using isa::Engine;
using mxfp8::cdiv;
using mxfp8::round_up;
using nki::ActFunc;
using nki::AluOp;

[[noreturn]] void fail(const std::string& msg) {
  throw InputError(fmt::format("{}: {}", kFwdName, msg));
}

// The scaled intermediate stays in SBUF up to this many bytes per partition.
constexpr int64_t kResidentBudget = 48 * 1024;
constexpr int kEpilogueSets = 3;  // epilogue scratch rotates over this many sets, so tiles overlap
// Checkpoint stores go on POOL's queues, after POOL's own work on the tile: SP's queues keep the GEMMs'
// loads, which would otherwise wait in SP's stream behind stores waiting for the epilogue.
const nki::DmaOpts kPool{.engine = Engine::POOL};

mxfp8::Tiling phase_tiling(const std::optional<MxTilingConfig>& c, const char* param) {
  mxfp8::Tiling t = c.value_or(MxTilingConfig{}).tiling();
  if (t.tile_m != 0 && t.tile_m != 128)
    fail(
        fmt::format("parameter '{}.tile_m' = {}: the MoE forward needs tile_m = 128 (one 128-row tile of "
                    "weights or tokens per partition range, as nkilib requires)",
                    param, t.tile_m));
  if (t.tile_k != 0 && t.tile_k != 512)
    fail(
        fmt::format("parameter '{}.tile_k' = {}: the MoE forward needs tile_k = 512 (physical K 128, as "
                    "nkilib requires)",
                    param, t.tile_k));
  t.tile_m = 128, t.tile_k = 512;
  return t;
}

}  // namespace

FwdPlan plan_fwd(const FwdParams& p, const isa::Limits& limits) {
  FwdPlan f;
  if (limits.generation != isa::Generation::Trn3)
    fail("needs Trn3 (nc_matmul_mx and quantize_mx exist on Trn3 only); the hardware is Trn2");
  if (const std::string why = activation_problem(p.activation_type, "blockwise_mm_fwd_mxfp8"); !why.empty())
    fail(why);
  const int64_t B = p.block_size;
  if (B != 128 && B != 256 && B != 512 && B != 1024 && B != 2048 && B != 4096)
    fail(fmt::format("parameter 'block_size': must be 128, 256, 512, 1024, 2048 or 4096, got {}", B));
  for (auto [v, name] : {std::pair{p.H, "H"}, std::pair{p.I_TP, "I_TP"}})
    if (v % 128 != 0)
      fail(
          fmt::format("parameter '{}' = {} must be a multiple of 128 (the x4 interleave puts {}/4 rows on "
                      "partitions in groups of 32; a model whose size is not, e.g. 2880, runs zero-padded to "
                      "the next multiple, 3072)",
                      name, v, name));
  if (const std::string why = p.clamp_limits.problem(); !why.empty()) fail(why);
  if (p.top_k > p.E) fail(fmt::format("parameter 'top_k' = {} is more than E = {} experts", p.top_k, p.E));
  if (p.checkpoint_config.save_down_proj_act && p.affinity_option != AffinityOption::OnH)
    fail(
        "parameter 'checkpoint_config.save_down_proj_act': the down projection's output before the affinity "
        "exists under AFFINITY_ON_H only (AFFINITY_ON_I multiplies the intermediate)");
  if (p.bias && p.checkpoint_config.save_down_proj_act)
    fail(
        "parameters 'bias' and 'checkpoint_config.save_down_proj_act': down_proj_act_checkpoint holds the "
        "down GEMM's output without the bias, so the backward's AFFINITY_ON_H affinity gradient would miss "
        "the bias term (nkilib: (h W_down + b_down) x affinity); the backward rejects bias with "
        "AFFINITY_ON_H");
  if (p.affinity_option == AffinityOption::OnH && p.checkpoint_config.save_scaled_intermediate)
    fail(
        "parameters 'affinity_option' = AFFINITY_ON_H and 'checkpoint_config.save_scaled_intermediate': the "
        "forward never forms intermediate x affinity under AFFINITY_ON_H (the affinity multiplies the down "
        "output); set save_scaled_intermediate false (the backward reads intermediate_checkpoint_T or "
        "recomputes it)");
  f.T = p.T, f.rows = p.rows(), f.H = p.H, f.I = p.I_TP, f.E = p.E, f.B = B, f.N = p.N();
  f.cores = p.cores();
  f.indirect = !p.no_indirect_load;
  if (p.no_indirect_load) {
    if (p.E != 1)
      fail(fmt::format("parameter 'no_indirect_load': needs exactly one expert (E = 1), got E = {}", p.E));
    if (p.T % B != 0)
      fail(fmt::format("parameter 'no_indirect_load': needs T % block_size == 0, got T = {}, block_size = {}",
                       p.T, B));
    if (p.num_blocks && *p.num_blocks != p.T / B)
      fail(fmt::format("parameter 'num_blocks' = {}: no_indirect_load has T / block_size = {} blocks",
                       *p.num_blocks, p.T / B));
  }
  if (f.N < f.cores)
    fail(
        fmt::format("SHARD_ON_BLOCK gives core s the blocks s, s + {}, ...: N = {} block(s) for {} cores "
                    "(T = {}, block_size = {}); use run_with_lnc2 = false or more blocks",
                    f.cores, f.N, f.cores, p.T, B, f.cores));
  if (f.indirect && f.rows * p.E >= (int64_t{1} << 24))
    fail(
        fmt::format("T' * E = {} * {} must be below 2^24: the affinity offsets t * E + e are computed on the "
                    "FP32 ALU",
                    f.rows, p.E));
  f.slabs = f.indirect && f.cores == 2;

  // The down GEMM reads the scaled intermediate [I, B] K-by-F: from SBUF when it fits, else from HBM.
  const int64_t resident_bytes = tile_bytes((f.I / 128) * B, DType::BF16);
  f.resident = resident_bytes <= kResidentBudget;
  if (!f.resident && B % 512 != 0)
    fail(fmt::format(
        "the scaled intermediate [I_TP, block_size] = [{}, {}] does not fit in SBUF ({} bytes per "
        "partition, at most {}), and read from HBM as the down GEMM's K-by-F operand it needs "
        "block_size % 512 == 0",
        f.I, B, resident_bytes, kResidentBudget));
  f.gu_chunk = std::min<int64_t>(B, 512);
  f.down_chunk = std::min<int64_t>(p.H, 1024);
  f.gather_chunk = std::min<int64_t>(p.H, 2048);

  // What the kernel holds in SBUF while the GEMMs run (emit_fwd allocates exactly these).
  const DType cdt = p.compute_dtype;
  const int64_t G = B / 128;
  int64_t r = 0;
  if (f.indirect) {
    r += tile_bytes(f.N, DType::I32) + tile_bytes(f.N, DType::F32);  // block_to_expert, as FP32 per partition
    r += 2 * (tile_bytes(G, DType::I32) + tile_bytes(G, DType::I32));  // token indices, affinity offsets
  }
  // Two of each per-block tile (the next block's are made during this one): affinity columns, broadcast.
  r += 2 * (tile_bytes(G, DType::F32) + tile_bytes(B, DType::F32));
  r += tile_bytes(128, DType::F32) + tile_bytes(512, DType::F32) +
       tile_bytes(128, DType::BF16);  // ones, row, 0
  if (p.bias) r += 2 * (tile_bytes(2 * f.I / 128, DType::F32) + tile_bytes(p.H, DType::F32));
  if (f.resident) r += resident_bytes;
  const int64_t C = f.gu_chunk;
  const int64_t set = tile_bytes(2 * C, cdt) + tile_bytes(C, DType::F32) + tile_bytes(C, cdt) +
                      tile_bytes(C, DType::BF16) + tile_bytes(C, cdt) + tile_bytes(C, cdt);
  r += kEpilogueSets * set;
  r += kEpilogueSets * 2 * tile_bytes(f.down_chunk, DType::BF16);
  if (p.checkpoint_config.save_down_proj_act) r += kEpilogueSets * tile_bytes(f.down_chunk, cdt);
  f.reserved_sbuf = r;

  // gate/up, transposed: M = I (gate and up weights), K = H, N = B (the block's tokens).
  mxfp8::MatmulSpec& gu = f.gu;
  gu.kernel = fmt::format("{} (gate/up GEMMs: M = I_TP, K = H, N = block_size)", kFwdName);
  gu.scope = "gu";
  gu.M = f.I, gu.K = p.H, gu.N = B;
  gu.lhs = weight_operand(kFwdName, {.tensor = "gate_up_proj_weight",
                                     .param = "gate_up_weight",
                                     .swizzled = p.gate_up_weight_is_swizzled,
                                     .scales = &p.gate_up_weight_scales,
                                     .E = p.E,
                                     .K = p.H,
                                     .cols = 2 * f.I,
                                     .F = f.I,
                                     .k_name = "H",
                                     .cols_name = "2*I_TP",
                                     .f_name = "I_TP",
                                     .packing = p.use_scale_packing});
  gu.lhs2 = gu.lhs;
  gu.rhs.source = mxfp8::Source::Hbm;
  gu.rhs.layout = mxfp8::Layout::FByK;
  gu.rhs.name = gu.rhs.param = "hidden_states";
  gu.rhs.f_name = "block_size";
  gu.tiling = phase_tiling(p.gate_up_config, "gate_up_config");
  // down: M = B (tokens), K = I, N = H.
  mxfp8::MatmulSpec& dn = f.down;
  dn.kernel = fmt::format("{} (down GEMM: M = block_size, K = I_TP, N = H)", kFwdName);
  dn.scope = "down";
  dn.M = B, dn.K = f.I, dn.N = p.H;
  dn.lhs.source = f.resident ? mxfp8::Source::Sbuf : mxfp8::Source::Hbm;
  dn.lhs.layout = mxfp8::Layout::KByF;
  dn.lhs.name = dn.lhs.param = "scaled_intermediate";
  dn.lhs.f_name = "block_size";
  dn.rhs = weight_operand(kFwdName, {.tensor = "down_proj_weight",
                                     .param = "down_weight",
                                     .swizzled = p.down_weight_is_swizzled,
                                     .scales = &p.down_weight_scales,
                                     .E = p.E,
                                     .K = f.I,
                                     .cols = p.H,
                                     .F = p.H,
                                     .k_name = "I_TP",
                                     .cols_name = "H",
                                     .f_name = "H",
                                     .packing = p.use_scale_packing});
  dn.tiling = phase_tiling(p.down_config, "down_config");
  for (mxfp8::MatmulSpec* s : {&gu, &dn}) {
    s->out_dtype = DType::F32;  // the epilogues add bias and cast once
    s->fp8 = p.fp8;
    s->scheme = num::QuantScheme::WrapX;
    s->cores = mxfp8::Cores::CallingCore;
    s->use_scale_packing = p.use_scale_packing;
    s->spill_reload = p.spill_reload;
    s->reserved_sbuf_bytes = f.reserved_sbuf;
  }
  f.gu_plan = mxfp8::plan_matmul(gu, limits);
  f.down_plan = mxfp8::plan_matmul(dn, limits);
  return f;
}

namespace {

// The kernel's HBM tensors on this core.
struct Hbm {
  View hidden, ea, w_gu, w_down, s_gu, s_down, tokens, b2e, bias_gu, bias_down;
  View out, ckpt_gu, ckpt_scaled, ckpt_gate, ckpt_inter, ckpt_down;
  View slab;  // this core's scatter target (a slab, or the output itself)
  std::vector<View> slabs;
  View hidden_scratch, scaled_scratch;  // per core: [2, B, H] gathered rows; [2, I, B] when not resident
};

Hbm declare(Kernel& k, const FwdParams& p, const FwdPlan& f) {
  Hbm t;
  const int64_t E = p.E, H = p.H, I = f.I, B = f.B, N = f.N;
  const DType cdt = p.compute_dtype;
  const DType xdt = mxfp8::x4_dtype(p.fp8);
  t.hidden = k.input("hidden_states", DType::BF16, {f.rows, H});
  t.ea = k.input("expert_affinities_masked", DType::F32, {f.rows * E, 1});
  if (p.gate_up_weight_scales) {
    t.w_gu = k.input("gate_up_proj_weight", xdt, {E, H / 4, 2 * I});
  } else if (p.gate_up_weight_is_swizzled) {
    t.w_gu = k.input("gate_up_proj_weight", DType::BF16, {E, H / 4, 8 * I});
  } else {
    t.w_gu = k.input("gate_up_proj_weight", DType::BF16, {E, 2, I, H});
  }
  if (p.down_weight_scales) {
    t.w_down = k.input("down_proj_weight", xdt, {E, I / 4, H});
  } else if (p.down_weight_is_swizzled) {
    t.w_down = k.input("down_proj_weight", DType::BF16, {E, I / 4, 4 * H});
  } else {
    t.w_down = k.input("down_proj_weight", DType::BF16, {E, H, I});
  }
  t.tokens = k.input("token_position_to_id", DType::I32, {f.indirect ? N * B : 1});
  t.b2e = k.input("block_to_expert", DType::I32, {f.indirect ? N : 1, 1});
  if (p.gate_up_weight_scales)
    t.s_gu = k.input("gate_up_weight_scales", DType::E8M0, *p.gate_up_weight_scales);
  if (p.down_weight_scales) t.s_down = k.input("down_weight_scales", DType::E8M0, *p.down_weight_scales);
  if (p.bias) {
    t.bias_gu = k.input("gate_and_up_proj_bias", DType::BF16, {E, 2, I});
    t.bias_down = k.input("down_proj_bias", DType::BF16, {E, H});
  }
  t.out = k.output("output_hidden_states", DType::BF16, {f.rows, H});
  const CheckpointConfig& c = p.checkpoint_config;
  if (c.save_gate_up_proj_act) t.ckpt_gu = k.output("gate_up_proj_act_checkpoint_T", cdt, {N, 2, I, B});
  if (c.save_scaled_intermediate)
    t.ckpt_scaled = k.output("scaled_intermediate_checkpoint_T", cdt, {N, I, B});
  if (c.save_gate_act) t.ckpt_gate = k.output("gate_act_checkpoint_T", cdt, {N, I, B});
  if (c.save_intermediate) t.ckpt_inter = k.output("intermediate_checkpoint_T", cdt, {N, I, B});
  if (c.save_down_proj_act) t.ckpt_down = k.output("down_proj_act_checkpoint", cdt, {N, B, H});
  if (f.slabs) {
    for (int s = 0; s < 2; ++s)
      t.slabs.push_back(k.scratch(fmt::format("output_slab_{}", s), DType::BF16, {f.rows, H}, false));
    t.slab = t.slabs[k.program_id()];
  } else {
    t.slab = t.out;
  }
  if (f.indirect) t.hidden_scratch = k.scratch("hidden_block", DType::BF16, {2, B, H}, true);
  if (!f.resident && !(c.save_scaled_intermediate && cdt == DType::BF16))
    t.scaled_scratch = k.scratch("scaled_intermediate_block", DType::BF16, {2, I, B}, true);
  return t;
}

// An [I, B]-layout checkpoint's [rows, cols] piece of block b as an HBM view [n, w].
View ckpt2(const View& ck, int64_t b, int64_t r0, int64_t n, int64_t c0, int64_t w) {
  return ck(S(b, b + 1), S(r0, r0 + n), S(c0, c0 + w)).reshape({n, w});
}

// SBUF scratch of one epilogue step of the gate/up GEMMs (C columns of tokens).
struct GuSet {
  View gu;      // [128, 2, C] compute dtype: clamped gate (0) and up (1)
  View silu;    // [128, C] FP32
  View inter;   // [128, C] compute dtype
  View scaled;  // [128, C] bfloat16: the down GEMM's operand when not resident
  View wide;    // [128, C] compute dtype: the FP32 scaled intermediate, or the gate activation cast
  View act;     // [128, C] compute dtype: the gate activation cast for its checkpoint
};

// State of the block being built.
struct Block {
  int64_t b = 0;
  int ring = 0;
  View expert;      // SBUF [1, 1] int32: e (scalar_offset of the weights)
  View idx;         // SBUF [128, B/128] int32 token ids (row r at [r % 128, r / 128])
  View ea_col;      // SBUF [128, B/128] FP32 affinities of the slots
  View ea_bcast;    // SBUF [128, B] FP32: the slots' affinities on every partition
  View bias_cols;   // SBUF [128, 2, I/128] FP32: gate/up bias of expert e, row i at [i % 128, h, i / 128]
  View bias_row;    // SBUF [1, H] FP32: down bias of expert e
  View resident;    // SBUF [128, I/128, B] bfloat16 scaled intermediate (row i at [i % 128, i / 128])
  View hidden;      // HBM [B, H]: the block's hidden rows (the gathered scratch, or the rows themselves)
  View scaled_hbm;  // HBM [I, B] bfloat16 scaled intermediate when not resident
};

class GateUpEpilogue : public mxfp8::Epilogue {
 public:
  GateUpEpilogue(const FwdParams& p, const FwdPlan& f, const Hbm& t, const Block& blk,
                 std::vector<GuSet>& sets, size_t& rr)
      : p_(p), f_(f), t_(t), blk_(blk), sets_(sets), rr_(rr) {}

  void emit(mxfp8::EpilogueContext& ctx, const mxfp8::OutTile& o) override {
    PhaseScope ph(ctx.kernel, "activation");
    const int64_t n = o.tile.partitions(), width = o.tile.free_elements(), i0 = o.row, g = i0 / 128;
    const DType cdt = p_.compute_dtype;
    const CheckpointConfig& ck = p_.checkpoint_config;
    const ClampLimits& cl = p_.clamp_limits;
    for (int64_t c0 = 0; c0 < width; c0 += f_.gu_chunk) {
      const int64_t w = std::min(f_.gu_chunk, width - c0), col = o.col + c0;  // token columns [col, col + w)
      const GuSet& s = sets_[rr_++ % sets_.size()];
      View gate = s.gu(S(0, n), 0, S(0, w)), up = s.gu(S(0, n), 1, S(0, w));
      // + bias, clamps, cast to the compute dtype: gate on ACT, up on POOL.
      pre(gate, o.tile(all, S(c0, c0 + w)), 0, g, cl.non_linear_clamp_lower_limit,
          cl.non_linear_clamp_upper_limit, Engine::ACT);
      pre(up, o.tile2(all, S(c0, c0 + w)), 1, g, cl.linear_clamp_lower_limit, cl.linear_clamp_upper_limit,
          Engine::POOL);
      // One store per half: each a compact region of the checkpoint (one DMA over both halves would span
      // the I x B bytes between them).
      if (ck.save_gate_up_proj_act)
        for (int h = 0; h < 2; ++h)
          nki::dma_copy(t_.ckpt_gu(S(blk_.b, blk_.b + 1), h, S(i0, i0 + n), S(col, col + w)).reshape({n, w}),
                        s.gu(S(0, n), h, S(0, w)), kPool);
      View silu = s.silu(S(0, n), S(0, w));
      nki::activation(silu, ActFunc::Silu, gate);
      if (ck.save_gate_act) {
        View a = silu;
        if (cdt != DType::F32) {
          a = s.act(S(0, n), S(0, w));
          nki::tensor_copy(a, silu, Engine::POOL);
        }
        nki::dma_copy(ckpt2(t_.ckpt_gate, blk_.b, i0, n, col, w), a, kPool);
      }
      View inter = s.inter(S(0, n), S(0, w));
      nki::tensor_tensor(inter, silu, up, AluOp::Multiply);
      if (ck.save_intermediate) nki::dma_copy(ckpt2(t_.ckpt_inter, blk_.b, i0, n, col, w), inter, kPool);
      // scaled = inter * affinity (AFFINITY_ON_I), into the down GEMM's operand; AFFINITY_ON_H: inter
      // itself (the affinity multiplies the down output).
      View ea = blk_.ea_bcast(S(0, n), S(col, col + w));
      View lhs = f_.resident ? blk_.resident(S(0, n), g, S(col, col + w)) : s.scaled(S(0, n), S(0, w));
      if (p_.affinity_option == AffinityOption::OnH) {
        nki::tensor_copy(lhs, inter, Engine::POOL);
      } else if (cdt == DType::F32) {
        View sc = s.wide(S(0, n), S(0, w));
        nki::tensor_tensor(sc, inter, ea, AluOp::Multiply, Engine::POOL);
        if (ck.save_scaled_intermediate)
          nki::dma_copy(ckpt2(t_.ckpt_scaled, blk_.b, i0, n, col, w), sc, kPool);
        nki::tensor_copy(lhs, sc, Engine::POOL);
      } else {
        nki::tensor_tensor(lhs, inter, ea, AluOp::Multiply, Engine::POOL);
        if (ck.save_scaled_intermediate)
          nki::dma_copy(ckpt2(t_.ckpt_scaled, blk_.b, i0, n, col, w), lhs, kPool);
      }
      if (!f_.resident && t_.scaled_scratch.valid())
        nki::dma_copy(blk_.scaled_hbm(S(i0, i0 + n), S(col, col + w)), lhs, kPool);
    }
  }

 private:
  // dst (compute dtype) = clamp(src + bias[slot], lo, hi): the operations two at a time per tensor_scalar.
  void pre(const View& dst, const View& src, int slot, int64_t g, std::optional<double> lo,
           std::optional<double> hi, Engine e) const {
    struct Op {
      AluOp op;
      nki::Operand v;
    };
    std::vector<Op> ops;
    if (p_.bias)
      ops.push_back({AluOp::Add, nki::Operand(blk_.bias_cols(S(0, dst.partitions()), slot, S(g, g + 1)))});
    if (lo) ops.push_back({AluOp::Max, nki::Operand(*lo)});
    if (hi) ops.push_back({AluOp::Min, nki::Operand(*hi)});
    if (ops.empty()) {
      nki::tensor_copy(dst, src, e);
      return;
    }
    View from = src;
    for (size_t i = 0; i < ops.size(); i += 2) {
      // Intermediate results stay in FP32 (the source tile) until the last instruction casts.
      const bool last = i + 2 >= ops.size();
      View to = last ? dst : src;
      if (i + 1 < ops.size())
        nki::tensor_scalar(to, from, ops[i].op, ops[i].v, false, ops[i + 1].op, ops[i + 1].v, false, e);
      else
        nki::tensor_scalar(to, from, ops[i].op, ops[i].v, false, AluOp::Bypass, 0.0, false, e);
      from = to;
    }
  }

  const FwdParams& p_;
  const FwdPlan& f_;
  const Hbm& t_;
  const Block& blk_;
  std::vector<GuSet>& sets_;
  size_t& rr_;
};

class DownEpilogue : public mxfp8::Epilogue {
 public:
  DownEpilogue(const FwdParams& p, const FwdPlan& f, const Hbm& t, const Block& blk,
               std::vector<std::pair<View, View>>& sets, std::vector<View>& ck_sets, size_t& rr)
      : p_(p), f_(f), t_(t), blk_(blk), sets_(sets), ck_sets_(ck_sets), rr_(rr) {}

  void emit(mxfp8::EpilogueContext& ctx, const mxfp8::OutTile& o) override {
    PhaseScope ph(ctx.kernel, "scatter");
    const int64_t n = o.tile.partitions(), width = o.tile.free_elements(), m0 = o.row, g = m0 / 128;
    const nki::OobMode oob = p_.skip() ? nki::OobMode::Skip : nki::OobMode::Error;
    for (int64_t c0 = 0; c0 < width; c0 += f_.down_chunk) {
      const int64_t w = std::min(f_.down_chunk, width - c0), col = o.col + c0;  // H columns
      View acc = o.tile(all, S(c0, c0 + w));
      const size_t set = rr_++;
      if (p_.affinity_option == AffinityOption::OnH) {
        // AFFINITY_ON_H: the slots' down output before the affinity, cast to compute_dtype, is
        // down_proj_act_checkpoint [N, B, H] (what the backward's affinity gradient reads); then each row
        // (slot) times its affinity, in FP32.
        if (t_.ckpt_down.valid()) {
          View ck = ck_sets_[set % ck_sets_.size()](S(0, n), S(0, w));
          nki::tensor_copy(ck, acc, Engine::ACT);
          nki::dma_copy(t_.ckpt_down(S(blk_.b, blk_.b + 1), S(m0, m0 + n), S(col, col + w)).reshape({n, w}),
                        ck, kPool);
        }
        nki::tensor_scalar(acc, acc, AluOp::Multiply, nki::Operand(blk_.ea_col(S(0, n), S(g, g + 1))));
      }
      if (p_.bias) {
        // + down_proj_bias[e] x affinity: the outer product of the tile's affinities and the bias row on the
        // PE.
        for (int64_t j = 0; j < w; j += 512) {
          const int64_t pw = std::min<int64_t>(512, w - j);
          View ps = ctx.banks.next()(S(0, n), S(0, pw));
          nki::nc_matmul(ps, blk_.ea_bcast(S(0, 1), S(m0, m0 + n)),
                         blk_.bias_row(S(0, 1), S(col + j, col + j + pw)));
          nki::tensor_tensor(acc(all, S(j, j + pw)), acc(all, S(j, j + pw)), ps, AluOp::Add);
        }
      }
      const auto& [res_t, ex_t] = sets_[set % sets_.size()];
      View res = res_t(S(0, n), S(0, w));
      nki::tensor_copy(res, acc, Engine::ACT);
      if (!f_.indirect) {
        const int64_t r0 = blk_.b * f_.B + m0;
        nki::dma_copy(t_.out(S(r0, r0 + n), S(col, col + w)), res, {.engine = Engine::ACT});
        continue;
      }
      const View idx = blk_.idx(S(0, n), S(g, g + 1));
      const View rows = t_.slab(S(0, 1), S(col, col + w)).index_rows(n);
      if (p_.is_tensor_update_accumulating) {
        // Skipped rows keep stale values in `ex`, but the scatter skips them again.
        View ex = ex_t(S(0, n), S(0, w));
        nki::dma_copy(ex, rows, {.vector_offset = idx, .oob_mode = oob});
        nki::tensor_tensor(res, res, ex, AluOp::Add, Engine::POOL);
      }
      nki::dma_copy(rows, res, {.vector_offset = idx, .indirect_dst = true, .oob_mode = oob});
    }
  }

 private:
  const FwdParams& p_;
  const FwdPlan& f_;
  const Hbm& t_;
  const Block& blk_;
  std::vector<std::pair<View, View>>& sets_;
  std::vector<View>& ck_sets_;
  size_t& rr_;
};

}  // namespace

void emit_fwd(Kernel& k, const FwdParams& p, const FwdPlan& f) {
  const Hbm t = declare(k, p, f);
  const int core = k.program_id(), cores = k.num_programs();
  const int64_t B = f.B, H = f.H, I = f.I, E = f.E, G = B / 128;
  const DType cdt = p.compute_dtype;
  const nki::OobMode oob = p.skip() ? nki::OobMode::Skip : nki::OobMode::Error;

  // Long-lived SBUF (FwdPlan::reserved_sbuf counts exactly these).
  View b2e, b2e_f;
  std::vector<View> idx, offs, ea_col;
  if (f.indirect) {
    b2e = k.sbuf({1, f.N}, DType::I32, "block_to_expert");
    b2e_f = k.sbuf({128, f.N}, DType::F32, "block_to_expert_bcast");
    for (int i = 0; i < 2; ++i) {
      idx.push_back(k.sbuf({128, G}, DType::I32, fmt::format("token_ids{}", i)));
      offs.push_back(k.sbuf({128, G}, DType::I32, fmt::format("affinity_offsets{}", i)));
    }
  }
  std::vector<View> ea_bcast, bias_cols, bias_row;  // two of each: the next block's are made meanwhile
  for (int i = 0; i < 2; ++i) {
    ea_col.push_back(k.sbuf({128, G}, DType::F32, fmt::format("affinities{}", i)));
    ea_bcast.push_back(k.sbuf({128, B}, DType::F32, fmt::format("affinities_bcast{}", i)));
    if (p.bias) {
      bias_cols.push_back(k.sbuf({128, 2, I / 128}, DType::F32, fmt::format("gate_up_bias{}", i)));
      bias_row.push_back(k.sbuf({1, H}, DType::F32, fmt::format("down_bias{}", i)));
    }
  }
  View ones = k.sbuf({1, 128}, DType::F32, "ones");
  View row512 = k.sbuf({1, 512}, DType::F32, "bcast_row");
  View zeros = k.sbuf({128, 128}, DType::BF16, "zeros");
  View resident;
  if (f.resident) resident = k.sbuf({128, I / 128, B}, DType::BF16, "scaled_intermediate");
  std::vector<GuSet> gu_sets;
  const int64_t C = f.gu_chunk;
  for (int i = 0; i < kEpilogueSets; ++i)
    gu_sets.push_back({k.sbuf({128, 2, C}, cdt, "gu_clamped"), k.sbuf({128, C}, DType::F32, "gu_silu"),
                       k.sbuf({128, C}, cdt, "gu_inter"), k.sbuf({128, C}, DType::BF16, "gu_scaled"),
                       k.sbuf({128, C}, cdt, "gu_wide"), k.sbuf({128, C}, cdt, "gu_act")});
  std::vector<std::pair<View, View>> down_sets;
  for (int i = 0; i < kEpilogueSets; ++i)
    down_sets.push_back({k.sbuf({128, f.down_chunk}, DType::BF16, "down_result"),
                         k.sbuf({128, f.down_chunk}, DType::BF16, "down_existing")});
  std::vector<View> down_ck_sets;  // AFFINITY_ON_H: the down output cast for its checkpoint
  if (p.checkpoint_config.save_down_proj_act)
    for (int i = 0; i < kEpilogueSets; ++i)
      down_ck_sets.push_back(k.sbuf({128, f.down_chunk}, cdt, "down_act"));
  size_t gu_rr = 0, down_rr = 0;

  {
    PhaseScope ph(k, "setup");
    nki::memset(ones, 1.0);
    nki::memset(zeros, 0.0, Engine::POOL);
    if (f.indirect) {
      // block_to_expert once: int32 for the weights' scalar_offset, FP32 on every partition for offsets.
      nki::dma_copy(b2e, t.b2e.reshape({1, f.N}));
      for (int64_t j = 0; j < f.N; j += 512) {
        const int64_t w = std::min<int64_t>(512, f.N - j);
        nki::tensor_copy(row512(all, S(0, w)), b2e(all, S(j, j + w)));
        broadcast_rows(k, b2e_f(all, S(j, j + w)), row512(all, S(0, w)), ones);
      }
      // The scatter target starts at zero (nkilib _zero_init_output).
      zero_rows(k, t.slab, f.rows, H, f.gather_chunk);
    }
  }

  // The gather phase of block b (the ring slot alternates), emitted one block ahead of the GEMMs so that its
  // DMAs run while the previous block computes.
  const auto prepare = [&](int64_t b, int ring) {
    PhaseScope ph(k, "gather");
    Block blk;
    blk.b = b;
    blk.ring = ring;
    blk.ea_col = ea_col[ring];
    blk.ea_bcast = ea_bcast[ring];
    if (p.bias) blk.bias_cols = bias_cols[ring], blk.bias_row = bias_row[ring];
    blk.resident = resident;
    if (f.indirect) {
      blk.expert = element(b2e, b);
      blk.idx = idx[ring];
      nki::dma_copy(blk.idx, t.tokens(S(b * B, (b + 1) * B)).reshape({G, 128}).permute({1, 0}));
      // Affinity offsets t * E + e (padding -1 gives a negative offset: skipped).
      nki::tensor_scalar(offs[ring], blk.idx, AluOp::Multiply, static_cast<double>(E), false, AluOp::Add,
                         nki::Operand(b2e_f(all, S(b, b + 1))));
      if (p.skip()) nki::memset(blk.ea_col, 0.0, Engine::POOL);
      for (int64_t g = 0; g < G; ++g)
        nki::dma_copy(blk.ea_col(all, S(g, g + 1)), t.ea(S(0, 1), all).index_rows(128),
                      {.vector_offset = offs[ring](all, S(g, g + 1)), .oob_mode = oob});
      // The block's hidden rows, gathered HBM to HBM into the per-core scratch (nkilib
      // _gather_block_tokens); with -1 padding the scratch is zeroed first, so skipped slots read zeros.
      blk.hidden = t.hidden_scratch(ring).reshape({B, H});
      if (p.skip())
        nki::dma_copy(blk.hidden.reshape({G, 128, H}).permute({1, 0, 2}),
                      zeros.reshape({128, 1, 1, 128}).broadcast(1, G).broadcast(2, H / 128));
      for (int64_t g = 0; g < G; ++g)
        nki::dma_copy(blk.hidden(S(g * 128, g * 128 + 128), all), t.hidden(S(0, 1), all).index_rows(128),
                      {.vector_offset = blk.idx(all, S(g, g + 1)), .oob_mode = oob});
    } else {
      // One expert, tokens in block order: rows [b B, (b + 1) B).
      nki::dma_copy(blk.ea_col, t.ea(S(b * B, (b + 1) * B)).reshape({G, 128}).permute({1, 0}));
      blk.hidden = t.hidden(S(b * B, (b + 1) * B), all);
    }
    // The affinities on every partition ([128, B]) for the [I, tokens] tiles: PE transposes of the columns
    // into a row, then ones^T x row.
    {
      View pt = k.psum({1, 512}, DType::F32, "moe_ea_row");
      for (int64_t c = 0; c < B; c += 512) {
        const int64_t w = std::min<int64_t>(512, B - c);
        for (int64_t j = 0; j < w; j += 128)
          nki::nc_transpose(pt(all, S(j, j + 128)), blk.ea_col(all, S((c + j) / 128, (c + j) / 128 + 1)));
        nki::tensor_copy(row512(all, S(0, w)), pt(all, S(0, w)));
        broadcast_rows(k, blk.ea_bcast(all, S(c, c + w)), row512(all, S(0, w)), ones);
      }
    }
    if (p.bias) {
      View e = f.indirect ? blk.expert : View();
      View bg = k.sbuf({128, 2, I / 128}, DType::BF16, "gate_up_bias_bf16");
      View bd = k.sbuf({1, H}, DType::BF16, "down_bias_bf16");
      nki::dma_copy(bg, t.bias_gu(S(0, 1)).reshape({2, I / 128, 128}).permute({2, 0, 1}),
                    {.scalar_offset = e});
      nki::dma_copy(bd, t.bias_down(S(0, 1), all), {.scalar_offset = e});
      nki::tensor_copy(blk.bias_cols, bg);
      nki::tensor_copy(blk.bias_row, bd);
    }
    if (!f.resident)
      blk.scaled_hbm = t.scaled_scratch.valid() ? t.scaled_scratch(ring).reshape({I, B})
                                                : t.ckpt_scaled(S(b, b + 1)).reshape({I, B});
    return blk;
  };

  std::optional<Block> next;
  if (core < f.N) next = prepare(core, 0);
  for (int64_t b = core, local = 0; b < f.N; b += cores, ++local) {
    const Block blk = *next;
    if (b + cores < f.N) next = prepare(b + cores, static_cast<int>((local + 1) % 2));
    const View& hidden_block = blk.hidden;

    // gate/up: [I, B] tiles of gate and up, the weights of expert e moved by the scalar_offset.
    {
      PhaseScope ph(k, "gate_up");
      mxfp8::MatmulSpec s = f.gu;
      const bool q = s.lhs.quantized(), sw = s.lhs.layout == mxfp8::Layout::Swizzled;
      for (int h = 0; h < 2; ++h) {
        mxfp8::Operand& o = h == 0 ? s.lhs : *s.lhs2;
        if (q) {
          o.data = t.w_gu(S(0, 1), all, S(h * I, (h + 1) * I)).reshape({H / 4, I});
          const int64_t sr = t.s_gu.size(1);
          o.scales = t.s_gu(S(0, 1), all, S(h * I, (h + 1) * I)).reshape({sr, I});
        } else if (sw) {
          o.data = t.w_gu(S(0, 1), all, S(h * 4 * I, (h + 1) * 4 * I)).reshape({H / 4, 4 * I});
        } else {
          o.data = t.w_gu(S(0, 1), h).reshape({I, H});
        }
        if (f.indirect) o.scalar_offset = blk.expert;
      }
      s.rhs.data = hidden_block;
      GateUpEpilogue epi(p, f, t, blk, gu_sets, gu_rr);
      mxfp8::emit_matmul(k, s, f.gu_plan, epi);
    }

    // down: Y [B, H] = S W_down[e]^T, scattered into this core's slab.
    {
      PhaseScope ph(k, "down");
      mxfp8::MatmulSpec s = f.down;
      s.lhs.data = f.resident ? resident : blk.scaled_hbm;
      mxfp8::Operand& o = s.rhs;
      if (o.quantized()) {
        o.data = t.w_down(S(0, 1), all, all).reshape({I / 4, H});
        o.scales = t.s_down(S(0, 1), all, all).reshape({t.s_down.size(1), H});
      } else if (o.layout == mxfp8::Layout::Swizzled) {
        o.data = t.w_down(S(0, 1), all, all).reshape({I / 4, 4 * H});
      } else {
        o.data = t.w_down(S(0, 1), all, all).reshape({H, I});
      }
      if (f.indirect) o.scalar_offset = blk.expert;
      DownEpilogue epi(p, f, t, blk, down_sets, down_ck_sets, down_rr);
      mxfp8::emit_matmul(k, s, f.down_plan, epi);
    }
  }

  // Each core sums the two slabs over its 128-row tiles (nkilib _reduce_output_shards).
  if (f.slabs) {
    PhaseScope ph(k, "reduce");
    for (const View& s : t.slabs) nki::core_barrier(s);
    View a = k.sbuf({128, f.gather_chunk}, DType::BF16, "reduce_a");
    View b = k.sbuf({128, f.gather_chunk}, DType::BF16, "reduce_b");
    for (int64_t r0 = 128 * core; r0 < f.rows; r0 += 128 * cores)
      for (int64_t c = 0; c < H; c += f.gather_chunk) {
        const int64_t n = std::min<int64_t>(128, f.rows - r0), w = std::min(f.gather_chunk, H - c);
        View x = a(S(0, n), S(0, w)), y = b(S(0, n), S(0, w));
        nki::dma_copy(x, t.slabs[0](S(r0, r0 + n), S(c, c + w)));
        nki::dma_copy(y, t.slabs[1](S(r0, r0 + n), S(c, c + w)), {.engine = Engine::ACT});
        nki::tensor_tensor(x, x, y, AluOp::Add);
        nki::dma_copy(t.out(S(r0, r0 + n), S(c, c + w)), x);
      }
  }
}

}  // namespace trnsim::kernels::moe
