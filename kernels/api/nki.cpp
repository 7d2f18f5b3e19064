#include "kernels/api/nki.h"

#include <fmt/format.h>

#include <array>
#include <initializer_list>

#include "sim/base/error.h"
#include "sim/isa/element.h"
#include "sim/isa/opcodes.h"
#include "sim/isa/shuffle_mask.h"

namespace trnsim::kernels::nki {
namespace {

// The kernel context being built; every operand must come from it (not from the other core's run).
Kernel& owner_of(const char* op, const Loc& loc, std::initializer_list<const View*> views) {
  Kernel* k = Kernel::current();
  if (k == nullptr) throw InputError(fmt::format("{}: {} called outside build_program", where(loc), op));
  for (const View* v : views)
    if (v->valid() && v->kernel_serial() != k->serial())
      throw InputError(
          fmt::format("{}: {}: {} belongs to another core's kernel context", where(loc), op, v->describe()));
  return *k;
}

// One instruction being built: its operands in slot order (isa/opcodes.h), as access patterns in the
// instruction and as views for the dependency tracker. emit() derives what the instruction reads and writes
// from the opcode table's slot roles; an op sets only what the table cannot say (access()).
class Op {
 public:
  Op(isa::Opcode op, Engine engine, std::initializer_list<const View*> operands) {
    inst.op = op;
    inst.engine = engine;
    int slot = 0;
    for (const View* v : operands) {
      if (v->valid()) {
        inst.ops[slot] = v->ap();
        inst.nops = static_cast<uint8_t>(slot + 1);
      }
      access_[slot++].view = v;
    }
  }

  isa::Instruction inst;

  // How slot `slot` is tracked beyond its role (whole_rows, collect, as). The view is the operand given to
  // the constructor; read or write comes from the table.
  Access& access(int slot) { return access_[slot]; }

  InstRef emit(Kernel& k, const Loc& loc, const std::vector<Event>& extra_waits = {}) {
    // Reads in slot order, then writes, then the reads of written slots a flag makes accumulate (dst +=
    // ...): the tracker records them in this order. Each slot is read, written, or both.
    std::array<Access, 2 * isa::kMaxOperands> acc;
    size_t n = 0;
    const isa::OpcodeInfo& info = isa::opcode_info(inst.op);
    for (int s = 0; s < info.num_slots; ++s)
      if (!info.writes(s)) acc[n++] = with(s, false);
    for (int s = 0; s < info.num_slots; ++s)
      if (info.writes(s)) acc[n++] = with(s, true);
    for (int s = 0; s < info.num_slots; ++s)
      if (info.writes(s) && info.reads(inst, s)) acc[n++] = with(s, false);
    return k.emit(std::move(inst), acc.data(), n, loc, extra_waits);
  }

 private:
  Access with(int slot, bool write) const {
    Access a = access_[slot];
    a.write = write;
    return a;
  }

  std::array<Access, isa::kMaxOperands> access_{};
};

}  // namespace

InstRef nc_matmul(const View& dst, const View& stationary, const View& moving, MatmulOpts opts, Loc loc) {
  Kernel& k = owner_of("nc_matmul", loc, {&dst, &stationary, &moving});
  Op o(isa::Opcode::NcMatmul, Engine::PE, {&dst, &stationary, &moving});
  o.access(1).load_stationary = true;
  if (opts.accumulate) o.inst.flags |= isa::kAccumulate;
  if (opts.perf_mode == PerfMode::DoubleRow) o.inst.flags |= isa::kDoubleRow;
  if (opts.is_transpose) o.inst.flags |= isa::kIsTranspose;
  return o.emit(k, loc);
}

InstRef nc_matmul_mx(const View& dst, const View& stationary, const View& moving,
                     const View& stationary_scale, const View& moving_scale, MatmulMxOpts opts, Loc loc) {
  Kernel& k = owner_of("nc_matmul_mx", loc, {&dst, &stationary, &moving, &stationary_scale, &moving_scale});
  Op o(isa::Opcode::NcMatmulMx, Engine::PE, {&dst, &stationary, &moving, &stationary_scale, &moving_scale});
  o.access(1).load_stationary = true;  // stationary
  o.access(3).load_stationary = true;  // stationary_scale
  if (opts.accumulate) o.inst.flags |= isa::kAccumulate;
  o.inst.scale_offset = opts.stationary_scale_offset;
  o.inst.moving_scale_offset = opts.moving_scale_offset;
  return o.emit(k, loc);
}

InstRef quantize_mx(const View& dst, const View& src, const View& dst_scale, uint8_t scale_offset, Loc loc) {
  Kernel& k = owner_of("quantize_mx", loc, {&dst, &src, &dst_scale});
  Op o(isa::Opcode::QuantizeMx, Engine::DVE, {&dst, &src, &dst_scale});
  o.inst.scale_offset = scale_offset;
  return o.emit(k, loc);
}

InstRef nc_transpose(const View& dst, const View& data, Engine engine, Loc loc) {
  Kernel& k = owner_of("nc_transpose", loc, {&dst, &data});
  Op o(isa::Opcode::NcTranspose, engine, {&dst, &data});
  // On the PE the data is loaded as the stationary operand (an identity streams through it).
  o.access(1).load_stationary = engine == Engine::PE;
  return o.emit(k, loc);
}

InstRef activation(const View& dst, ActFunc op, const View& data, Operand bias, Operand scale,
                   const View& reduce_res, Engine engine, Loc loc) {
  Kernel& k = owner_of("activation", loc, {&dst, &data, &bias.vector(), &scale.vector(), &reduce_res});
  Op o(isa::Opcode::Activation, engine, {&dst, &data, &bias.vector(), &reduce_res, &scale.vector()});
  o.inst.act = op;
  o.inst.imm0 = scale.value();
  o.inst.imm1 = bias.value();
  if (scale.is_vector()) o.inst.flags |= isa::kOperand0Vector;
  if (bias.is_vector()) o.inst.flags |= isa::kBiasVector;
  if (reduce_res.valid()) o.inst.flags |= isa::kReduce;
  return o.emit(k, loc);
}

InstRef tensor_tensor(const View& dst, const View& data1, const View& data2, AluOp op, Engine engine,
                      Loc loc) {
  Kernel& k = owner_of("tensor_tensor", loc, {&dst, &data1, &data2});
  Op o(isa::Opcode::TensorTensor, engine, {&dst, &data1, &data2});
  o.inst.alu0 = op;
  return o.emit(k, loc);
}

namespace {

// op0 with operand0 (an immediate or a [P, 1] vector; reverse0 swaps the two) and the second operator op1:
// the fields tensor_scalar, scalar_tensor_tensor and tensor_scalar_reduce (op1: its reduce_op) share.
void set_op0(Op& o, AluOp op0, const Operand& operand0, bool reverse0, AluOp op1) {
  o.inst.alu0 = op0;
  o.inst.alu1 = op1;
  o.inst.imm0 = operand0.value();
  if (reverse0) o.inst.flags |= isa::kReverse0;
  if (operand0.is_vector()) o.inst.flags |= isa::kOperand0Vector;
}

}  // namespace

InstRef tensor_scalar(const View& dst, const View& data, AluOp op0, Operand operand0, bool reverse0,
                      AluOp op1, Operand operand1, bool reverse1, Engine engine, Loc loc) {
  Kernel& k = owner_of("tensor_scalar", loc, {&dst, &data, &operand0.vector(), &operand1.vector()});
  Op o(isa::Opcode::TensorScalar, engine, {&dst, &data, &operand0.vector(), &operand1.vector()});
  set_op0(o, op0, operand0, reverse0, op1);
  o.inst.imm1 = operand1.value();
  if (reverse1) o.inst.flags |= isa::kReverse1;
  if (operand1.is_vector()) o.inst.flags |= isa::kOperand1Vector;
  return o.emit(k, loc);
}

InstRef tensor_scalar_reduce(const View& dst, const View& data, AluOp op0, Operand operand0, AluOp reduce_op,
                             const View& reduce_res, bool reverse0, bool negate, Loc loc) {
  Kernel& k = owner_of("tensor_scalar_reduce", loc, {&dst, &data, &operand0.vector(), &reduce_res});
  Op o(isa::Opcode::TensorScalarReduce, Engine::DVE, {&dst, &data, &operand0.vector(), &reduce_res});
  set_op0(o, op0, operand0, reverse0, reduce_op);
  if (negate) o.inst.flags |= isa::kNegate;
  return o.emit(k, loc);
}

InstRef tensor_reduce(const View& dst, AluOp op, const View& data, const std::vector<int>& axis, bool negate,
                      Engine engine, Loc loc) {
  Kernel& k = owner_of("tensor_reduce", loc, {&dst, &data});
  const int rank = data.rank();
  // The reduced axes must be the innermost free dims, each once; the AP keeps the view's dims unmerged.
  std::vector<bool> seen(rank, false);
  for (int a : axis) {
    if (a < 1 || a >= rank || seen[a])
      throw InputError(fmt::format("{}: tensor_reduce: axis {} is not a free dim of {} (or repeated)",
                                   where(loc), a, data.describe()));
    seen[a] = true;
  }
  const int n = static_cast<int>(axis.size());
  for (int d = rank - n; d < rank; ++d)
    if (n == 0 || !seen[d])
      throw InputError(fmt::format("{}: tensor_reduce: axis must name the innermost free dims of {}",
                                   where(loc), data.describe()));
  if (rank - 1 > 4)
    throw InputError(
        fmt::format("{}: tensor_reduce: {} has more than 4 free dims", where(loc), data.describe()));
  Op o(isa::Opcode::TensorReduce, engine, {&dst, &data});
  o.inst.alu0 = op;
  o.inst.reduce_axes = static_cast<uint8_t>(n);
  if (negate) o.inst.flags |= isa::kNegate;
  return o.emit(k, loc);
}

InstRef tensor_copy(const View& dst, const View& src, Engine engine, Loc loc) {
  Kernel& k = owner_of("tensor_copy", loc, {&dst, &src});
  return Op(isa::Opcode::TensorCopy, engine, {&dst, &src}).emit(k, loc);
}

InstRef memset(const View& dst, double value, Engine engine, Loc loc) {
  Kernel& k = owner_of("memset", loc, {&dst});
  Op o(isa::Opcode::Memset, engine, {&dst});
  isa::split_fill(dst.dtype(), value, o.inst.imm0, o.inst.imm1);
  return o.emit(k, loc);
}

namespace {

// iota's and affine_select's affine value: one step per free dim of dst (missing steps are 0).
void set_affine(Op& o, const char* call, const View& dst, const std::vector<int32_t>& pattern, double offset,
                double channel_multiplier, Loc loc) {
  if (pattern.size() > o.inst.ops[0].ndim)
    throw InputError(fmt::format("{}: {}: {} pattern steps for {} free dims of {}", where(loc), call,
                                 pattern.size(), o.inst.ops[0].ndim, dst.describe()));
  if (dst.rank() - 1 > 4)
    throw InputError(fmt::format("{}: {}: {} has more than 4 free dims", where(loc), call, dst.describe()));
  for (size_t i = 0; i < pattern.size(); ++i) o.inst.iota_steps[i] = pattern[i];
  o.inst.imm0 = static_cast<float>(offset);
  o.inst.imm1 = static_cast<float>(channel_multiplier);
  // iota: an integer dst's offset FP32 does not hold is exact (imm0 + imm3); affine_select compares in FP32.
  if (o.inst.op == isa::Opcode::Iota) isa::split_fill(dst.dtype(), offset, o.inst.imm0, o.inst.imm3);
}

}  // namespace

InstRef iota(const View& dst, const std::vector<int32_t>& pattern, double offset, double channel_multiplier,
             Engine engine, Loc loc) {
  Kernel& k = owner_of("iota", loc, {&dst});
  Op o(isa::Opcode::Iota, engine, {&dst});
  set_affine(o, "iota", dst, pattern, offset, channel_multiplier, loc);
  return o.emit(k, loc);
}

InstRef affine_select(const View& dst, const std::vector<int32_t>& pattern, double offset,
                      double channel_multiplier, const View& on_true_tile, double on_false_value,
                      AluOp cmp_op, Engine engine, Loc loc) {
  Kernel& k = owner_of("affine_select", loc, {&dst, &on_true_tile});
  Op o(isa::Opcode::AffineSelect, engine, {&dst, &on_true_tile});
  set_affine(o, "affine_select", dst, pattern, offset, channel_multiplier, loc);
  o.inst.alu0 = cmp_op;
  isa::split_fill(dst.dtype(), on_false_value, o.inst.imm2, o.inst.imm3);  // exact for an integer dst
  return o.emit(k, loc);
}

InstRef scalar_tensor_tensor(const View& dst, const View& data, AluOp op0, Operand operand0, AluOp op1,
                             const View& operand1, bool reverse0, bool reverse1, Engine engine, Loc loc) {
  Kernel& k = owner_of("scalar_tensor_tensor", loc, {&dst, &data, &operand0.vector(), &operand1});
  Op o(isa::Opcode::ScalarTensorTensor, engine, {&dst, &data, &operand0.vector(), &operand1});
  set_op0(o, op0, operand0, reverse0, op1);
  if (reverse1) o.inst.flags |= isa::kReverse1;
  return o.emit(k, loc);
}

InstRef bn_stats(const View& dst, const View& data, Loc loc) {
  Kernel& k = owner_of("bn_stats", loc, {&dst, &data});
  return Op(isa::Opcode::BnStats, Engine::DVE, {&dst, &data}).emit(k, loc);
}

InstRef bn_aggr(const View& dst, const View& data, Loc loc) {
  Kernel& k = owner_of("bn_aggr", loc, {&dst, &data});
  return Op(isa::Opcode::BnAggr, Engine::DVE, {&dst, &data}).emit(k, loc);
}

InstRef max8(const View& dst, const View& src, Loc loc) {
  Kernel& k = owner_of("max8", loc, {&dst, &src});
  return Op(isa::Opcode::Max8, Engine::DVE, {&dst, &src}).emit(k, loc);
}

InstRef nc_find_index8(const View& dst, const View& data, const View& vals, Loc loc) {
  Kernel& k = owner_of("nc_find_index8", loc, {&dst, &data, &vals});
  return Op(isa::Opcode::NcFindIndex8, Engine::DVE, {&dst, &data, &vals}).emit(k, loc);
}

InstRef nc_match_replace8(const View& dst, const View& data, const View& vals, double imm,
                          const View& dst_idx, Loc loc) {
  Kernel& k = owner_of("nc_match_replace8", loc, {&dst, &data, &vals, &dst_idx});
  Op o(isa::Opcode::NcMatchReplace8, Engine::DVE, {&dst, &data, &vals, &dst_idx});
  o.inst.imm0 = static_cast<float>(imm);
  return o.emit(k, loc);
}

InstRef tensor_tensor_scan(const View& dst, const View& data0, const View& data1, Operand initial, AluOp op0,
                           AluOp op1, bool reverse0, bool reverse1, Loc loc) {
  Kernel& k = owner_of("tensor_tensor_scan", loc, {&dst, &data0, &data1, &initial.vector()});
  Op o(isa::Opcode::TensorTensorScan, Engine::DVE, {&dst, &data0, &data1, &initial.vector()});
  o.inst.alu0 = op0;
  o.inst.alu1 = op1;
  o.inst.imm0 = initial.value();
  if (initial.is_vector()) o.inst.flags |= isa::kOperand0Vector;
  if (reverse0) o.inst.flags |= isa::kReverse0;
  if (reverse1) o.inst.flags |= isa::kReverse1;
  return o.emit(k, loc);
}

InstRef tensor_partition_reduce(const View& dst, AluOp op, const View& data, Loc loc) {
  Kernel& k = owner_of("tensor_partition_reduce", loc, {&dst, &data});
  Op o(isa::Opcode::TensorPartitionReduce, Engine::POOL, {&dst, &data});
  o.inst.alu0 = op;
  return o.emit(k, loc);
}

InstRef nc_n_gather(const View& dst, const View& data, const View& indices, Loc loc) {
  Kernel& k = owner_of("nc_n_gather", loc, {&dst, &data, &indices});
  return Op(isa::Opcode::NcNGather, Engine::POOL, {&dst, &data, &indices}).emit(k, loc);
}

InstRef nonzero_with_count(const View& dst, const View& src, int32_t index_offset, int32_t padding_val,
                           Loc loc) {
  Kernel& k = owner_of("nonzero_with_count", loc, {&dst, &src});
  Op o(isa::Opcode::NonzeroWithCount, Engine::POOL, {&dst, &src});
  o.inst.iota_steps[0] = index_offset;
  o.inst.iota_steps[1] = padding_val;
  return o.emit(k, loc);
}

InstRef nc_stream_shuffle(const View& dst, const View& src, const std::vector<int>& shuffle_mask, Loc loc) {
  Kernel& k = owner_of("nc_stream_shuffle", loc, {&dst, &src});
  if (shuffle_mask.size() != 32)
    throw InputError(
        fmt::format("{}: nc_stream_shuffle: shuffle_mask has {} entries, expected 32 (one per "
                    "partition of a quadrant)",
                    where(loc), shuffle_mask.size()));
  isa::ShuffleMask mask{};
  for (size_t i = 0; i < 32; ++i) {
    const int m = shuffle_mask[i];
    if (!isa::shuffle_entry_ok(m))
      throw InputError(
          fmt::format("{}: nc_stream_shuffle: shuffle_mask[{}] = {}: expected a source partition "
                      "0-31 of the quadrant, or 255 (unmodified)",
                      where(loc), i, m));
    mask[i] = static_cast<uint8_t>(m);
  }
  Op o(isa::Opcode::NcStreamShuffle, Engine::DVE, {&dst, &src});
  isa::set_shuffle_mask(o.inst, mask);
  return o.emit(k, loc);
}

InstRef select(const View& dst, const View& predicate, const View& on_true, Operand on_false, Engine engine,
               Loc loc) {
  Kernel& k = owner_of("select", loc, {&dst, &predicate, &on_true, &on_false.vector()});
  Op o(isa::Opcode::Select, engine, {&dst, &predicate, &on_true, &on_false.vector()});
  o.inst.imm0 = on_false.value();
  return o.emit(k, loc);
}

InstRef dma_copy(const View& dst, const View& src, const DmaOpts& opts, Loc loc) {
  Kernel& k = owner_of("dma_copy", loc, {&dst, &src, &opts.vector_offset, &opts.scalar_offset});
  const bool indirect = opts.vector_offset.valid();
  if (indirect && opts.engine && *opts.engine != Engine::POOL)
    throw RuleError(
        fmt::format("{}: dma_copy: indirect DMA (vector_offset) needs software DGE, triggered from "
                    "POOL, not {}",
                    where(loc), isa::engine_name(*opts.engine)));
  if (indirect && (opts.dge_mode == DgeMode::None || opts.dge_mode == DgeMode::Hwdge))
    throw RuleError(
        fmt::format("{}: dma_copy: indirect DMA (vector_offset) needs dge_mode swdge", where(loc)));
  if (!indirect && opts.indirect_dst)
    throw InputError(fmt::format("{}: dma_copy: indirect_dst without a vector_offset", where(loc)));
  const bool offset = opts.scalar_offset.valid();
  if (!offset && opts.scalar_offset_dst)
    throw InputError(fmt::format("{}: dma_copy: scalar_offset_dst without a scalar_offset", where(loc)));
  if (opts.scalar_offset_stride < 0 || (!offset && opts.scalar_offset_stride != 0))
    throw InputError(
        fmt::format("{}: dma_copy: scalar_offset_stride {} needs a scalar_offset and must be >= 0",
                    where(loc), opts.scalar_offset_stride));
  std::optional<Engine> engine = opts.engine;
  const bool store = dst.space() == isa::MemSpace::HBM && src.space() != isa::MemSpace::HBM;
  if (!engine && !indirect && store && opts.dge_mode == DgeMode::Unknown) engine = k.store_engine();
  const DmaIssue issue =
      resolve_dma_issue(isa::Opcode::DmaCopy, dst, src, indirect, opts.dge_mode, engine, loc);
  Op o(isa::Opcode::DmaCopy, issue.engine, {&dst, &src, &opts.vector_offset, &opts.scalar_offset});
  o.inst.dma_queue = k.pick_queue(issue.engine, opts.queue, loc);
  o.inst.dge = issue.dge;
  if (indirect && opts.indirect_dst) o.inst.flags |= isa::kIndirectDst;
  if (opts.oob_mode == OobMode::Skip) o.inst.flags |= isa::kOobSkip;
  if (opts.accumulate) o.inst.flags |= isa::kDmaAccumulate;  // the table adds the read of dst
  if (offset && opts.scalar_offset_dst) o.inst.flags |= isa::kScalarOffsetDst;
  o.inst.iota_steps[0] = opts.scalar_offset_stride;
  // The indexed HBM side of an indirect DMA may touch any row of the tensor (the indices are data): it is
  // tracked as whole rows (deps.h). Gather indexes src, scatter (indirect_dst) indexes dst. The side a
  // scalar_offset moves may be any rows of its tensor (tracked as the whole tensor).
  o.access(1).whole_rows = indirect && !opts.indirect_dst;
  o.access(0).whole_rows = indirect && opts.indirect_dst;
  o.access(1).any_row = offset && !opts.scalar_offset_dst;
  o.access(0).any_row = offset && opts.scalar_offset_dst;
  o.access(opts.scalar_offset_dst ? 0 : 1).any_place = opts.scalar_offset_stride != 0;
  return o.emit(k, loc);
}

InstRef dma_transpose(const View& dst, const View& src, const DmaQueueOpts& opts, Loc loc) {
  Kernel& k = owner_of("dma_transpose", loc, {&dst, &src, &opts.scalar_offset, &opts.vector_offset});
  const auto fail = [&](const std::string& why) {
    throw InputError(fmt::format("{}: dma_transpose: {}", where(loc), why));
  };
  const std::vector<int>& ax = opts.axes;
  const bool outer = ax == std::vector<int>{2, 1, 0} || ax == std::vector<int>{3, 1, 2, 0};
  if (!ax.empty() && !outer && ax != std::vector<int>{1, 0})
    fail("axes must be (1, 0), (2, 1, 0) or (3, 1, 2, 0), as NKI's dma_transpose supports");
  if (outer) {
    // dst's shape is src's permuted: the first and last dims swap.
    std::vector<int64_t> want(ax.size());
    if (src.rank() != static_cast<int>(ax.size()) || dst.rank() != static_cast<int>(ax.size()))
      fail(fmt::format("axes of {} dims need src and dst of {} dims, got {} and {}", ax.size(), ax.size(),
                       src.rank(), dst.rank()));
    for (size_t i = 0; i < ax.size(); ++i) want[i] = src.shape()[ax[i]];
    if (want != dst.shape())
      fail(fmt::format("dst {} is not src {} permuted by the axes", dst.describe(), src.describe()));
    if (opts.vector_offset.valid()) fail("an indirect transpose (vector_offset) has axes (1, 0) only");
  }
  const bool indirect = opts.vector_offset.valid();
  if (indirect && opts.scalar_offset.valid()) fail("vector_offset and scalar_offset together");
  const DmaIssue issue =
      resolve_dma_issue(isa::Opcode::DmaTranspose, dst, src, indirect, opts.dge_mode, opts.engine, loc);
  Op o(isa::Opcode::DmaTranspose, issue.engine, {&dst, &src, &opts.scalar_offset, &opts.vector_offset});
  if (outer) o.inst.flags |= isa::kTransposeOuterAxes;
  o.inst.dma_queue = k.pick_queue(issue.engine, opts.queue, loc);
  o.inst.dge = issue.dge;
  // The moved src, or the gathered one, may be any rows of its tensor.
  o.access(1).any_row = opts.scalar_offset.valid() || indirect;
  return o.emit(k, loc);
}

InstRef core_barrier(const View& data, Engine engine, Loc loc) {
  Kernel& k = owner_of("core_barrier", loc, {&data});
  if (k.num_programs() != 2)
    throw InputError(fmt::format("{}: core_barrier needs num_programs 2 (LNC2)", where(loc)));
  k.use_barrier_engine(engine, loc);
  k.next_barrier(engine);
  // The model's core_barrier signals the peer once its waits (this core's earlier accesses to data) are done,
  // and completes when the peer has issued as many barriers; later accesses to data wait for its completion.
  // The instruction has no operands (opcode table): `data` is tracked as if written, explicitly.
  return k.emit(Op(isa::Opcode::CoreBarrier, engine, {}).inst, {Access{.view = &data, .write = true}}, loc);
}

InstRef sendrecv(const View& src, const View& dst, const DmaQueueOpts& opts, Loc loc) {
  Kernel& k = owner_of("sendrecv", loc, {&src, &dst});
  if (k.num_programs() != 2)
    throw InputError(fmt::format("{}: sendrecv needs num_programs 2 (LNC2)", where(loc)));
  const Engine engine = opts.engine.value_or(Engine::SP);
  const uint8_t queue = k.sendrecv_queue(engine, opts.queue, loc);
  const uint32_t n = k.next_sendrecv();
  // Ready: a core_barrier after this core's earlier readers and writers of dst; when it completes, the peer
  // has passed the same point, so the peer's dst may be overwritten.
  const InstRef ready = k.emit(Op(isa::Opcode::CoreBarrier, k.use_barrier_engine(std::nullopt, loc), {}).inst,
                               {Access{.view = &dst, .write = true, .record = false}}, loc);
  // Transfer into the peer's dst; its completion counts on the peer's done semaphore, which is what later
  // accesses to this core's dst (written by the peer's transfer) wait for. The write of dst (slot 0) is
  // therefore recorded with that event, and does not wait (the ready barrier ordered it).
  Op o(isa::Opcode::SendRecv, engine, {&dst, &src});
  o.inst.dma_queue = queue;
  o.inst.updates.push_back({kSendRecvDoneSem, 1, true});
  o.access(0).collect = false;
  o.access(0).as = Event{kSendRecvDoneSem, n};
  const InstRef transfer = o.emit(k, loc, {ready.done});
  k.record_sendrecv(src, dst, transfer, loc);
  return transfer;
}

}  // namespace trnsim::kernels::nki
