#include "kernels/api/nki.h"

#include <fmt/format.h>

#include <initializer_list>

#include "sim/base/error.h"

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

isa::Instruction make(isa::Opcode op, Engine engine, std::initializer_list<const View*> operands) {
  isa::Instruction inst;
  inst.op = op;
  inst.engine = engine;
  int slot = 0;
  for (const View* v : operands) {
    if (v->valid()) {
      inst.ops[slot] = v->ap();
      inst.nops = static_cast<uint8_t>(slot + 1);
    }
    ++slot;
  }
  return inst;
}

Access rd(const View& v) {
  return Access{.view = &v, .write = false};
}
Access wr(const View& v) {
  return Access{.view = &v, .write = true};
}

}  // namespace

InstRef nc_matmul(const View& dst, const View& stationary, const View& moving, MatmulOpts opts, Loc loc) {
  Kernel& k = owner_of("nc_matmul", loc, {&dst, &stationary, &moving});
  isa::Instruction inst = make(isa::Opcode::NcMatmul, Engine::PE, {&dst, &stationary, &moving});
  if (opts.accumulate) inst.flags |= isa::kAccumulate;
  if (opts.perf_mode == PerfMode::DoubleRow) inst.flags |= isa::kDoubleRow;
  if (opts.is_transpose) inst.flags |= isa::kIsTranspose;
  std::vector<Access> acc{rd(stationary), rd(moving), wr(dst)};
  if (opts.accumulate) acc.push_back(rd(dst));
  return k.emit(std::move(inst), acc, loc);
}

InstRef nc_matmul_mx(const View& dst, const View& stationary, const View& moving,
                     const View& stationary_scale, const View& moving_scale, MatmulMxOpts opts, Loc loc) {
  Kernel& k = owner_of("nc_matmul_mx", loc, {&dst, &stationary, &moving, &stationary_scale, &moving_scale});
  isa::Instruction inst = make(isa::Opcode::NcMatmulMx, Engine::PE,
                               {&dst, &stationary, &moving, &stationary_scale, &moving_scale});
  if (opts.accumulate) inst.flags |= isa::kAccumulate;
  inst.scale_offset = opts.stationary_scale_offset;
  inst.moving_scale_offset = opts.moving_scale_offset;
  std::vector<Access> acc{rd(stationary), rd(moving), rd(stationary_scale), rd(moving_scale), wr(dst)};
  if (opts.accumulate) acc.push_back(rd(dst));
  return k.emit(std::move(inst), acc, loc);
}

InstRef quantize_mx(const View& dst, const View& src, const View& dst_scale, uint8_t scale_offset, Loc loc) {
  Kernel& k = owner_of("quantize_mx", loc, {&dst, &src, &dst_scale});
  isa::Instruction inst = make(isa::Opcode::QuantizeMx, Engine::DVE, {&dst, &src, &dst_scale});
  inst.scale_offset = scale_offset;
  return k.emit(std::move(inst), {rd(src), wr(dst), wr(dst_scale)}, loc);
}

InstRef nc_transpose(const View& dst, const View& data, Engine engine, Loc loc) {
  Kernel& k = owner_of("nc_transpose", loc, {&dst, &data});
  return k.emit(make(isa::Opcode::NcTranspose, engine, {&dst, &data}), {rd(data), wr(dst)}, loc);
}

InstRef activation(const View& dst, ActFunc op, const View& data, Operand bias, Operand scale,
                   const View& reduce_res, Engine engine, Loc loc) {
  Kernel& k = owner_of("activation", loc, {&dst, &data, &bias.vector(), &scale.vector(), &reduce_res});
  isa::Instruction inst =
      make(isa::Opcode::Activation, engine, {&dst, &data, &bias.vector(), &reduce_res, &scale.vector()});
  inst.act = op;
  inst.imm0 = scale.value();
  inst.imm1 = bias.value();
  if (scale.is_vector()) inst.flags |= isa::kOperand0Vector;
  if (bias.is_vector()) inst.flags |= isa::kBiasVector;
  if (reduce_res.valid()) inst.flags |= isa::kReduce;
  return k.emit(std::move(inst), {rd(data), rd(bias.vector()), rd(scale.vector()), wr(dst), wr(reduce_res)},
                loc);
}

InstRef tensor_tensor(const View& dst, const View& data1, const View& data2, AluOp op, Engine engine,
                      Loc loc) {
  Kernel& k = owner_of("tensor_tensor", loc, {&dst, &data1, &data2});
  isa::Instruction inst = make(isa::Opcode::TensorTensor, engine, {&dst, &data1, &data2});
  inst.alu0 = op;
  return k.emit(std::move(inst), {rd(data1), rd(data2), wr(dst)}, loc);
}

InstRef tensor_scalar(const View& dst, const View& data, AluOp op0, Operand operand0, bool reverse0,
                      AluOp op1, Operand operand1, bool reverse1, Engine engine, Loc loc) {
  Kernel& k = owner_of("tensor_scalar", loc, {&dst, &data, &operand0.vector(), &operand1.vector()});
  isa::Instruction inst =
      make(isa::Opcode::TensorScalar, engine, {&dst, &data, &operand0.vector(), &operand1.vector()});
  inst.alu0 = op0;
  inst.alu1 = op1;
  inst.imm0 = operand0.value();
  inst.imm1 = operand1.value();
  if (reverse0) inst.flags |= isa::kReverse0;
  if (reverse1) inst.flags |= isa::kReverse1;
  if (operand0.is_vector()) inst.flags |= isa::kOperand0Vector;
  if (operand1.is_vector()) inst.flags |= isa::kOperand1Vector;
  return k.emit(std::move(inst), {rd(data), rd(operand0.vector()), rd(operand1.vector()), wr(dst)}, loc);
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
  isa::Instruction inst = make(isa::Opcode::TensorReduce, engine, {&dst, &data});
  inst.alu0 = op;
  inst.reduce_axes = static_cast<uint8_t>(n);
  if (negate) inst.flags |= isa::kNegate;
  return k.emit(std::move(inst), {rd(data), wr(dst)}, loc);
}

InstRef tensor_copy(const View& dst, const View& src, Engine engine, Loc loc) {
  Kernel& k = owner_of("tensor_copy", loc, {&dst, &src});
  return k.emit(make(isa::Opcode::TensorCopy, engine, {&dst, &src}), {rd(src), wr(dst)}, loc);
}

InstRef memset(const View& dst, double value, Engine engine, Loc loc) {
  Kernel& k = owner_of("memset", loc, {&dst});
  isa::Instruction inst = make(isa::Opcode::Memset, engine, {&dst});
  inst.imm0 = static_cast<float>(value);
  return k.emit(std::move(inst), {wr(dst)}, loc);
}

InstRef iota(const View& dst, const std::vector<int32_t>& pattern, double offset, double channel_multiplier,
             Engine engine, Loc loc) {
  Kernel& k = owner_of("iota", loc, {&dst});
  isa::Instruction inst = make(isa::Opcode::Iota, engine, {&dst});
  if (pattern.size() > inst.ops[0].ndim)
    throw InputError(fmt::format("{}: iota: {} pattern steps for {} free dims of {}", where(loc),
                                 pattern.size(), inst.ops[0].ndim, dst.describe()));
  if (dst.rank() - 1 > 4)
    throw InputError(fmt::format("{}: iota: {} has more than 4 free dims", where(loc), dst.describe()));
  for (size_t i = 0; i < pattern.size(); ++i) inst.iota_steps[i] = pattern[i];
  inst.imm0 = static_cast<float>(offset);
  inst.imm1 = static_cast<float>(channel_multiplier);
  return k.emit(std::move(inst), {wr(dst)}, loc);
}

InstRef select(const View& dst, const View& predicate, const View& on_true, Operand on_false, Engine engine,
               Loc loc) {
  Kernel& k = owner_of("select", loc, {&dst, &predicate, &on_true, &on_false.vector()});
  isa::Instruction inst = make(isa::Opcode::Select, engine, {&dst, &predicate, &on_true, &on_false.vector()});
  inst.imm0 = on_false.value();
  return k.emit(std::move(inst), {rd(predicate), rd(on_true), rd(on_false.vector()), wr(dst)}, loc);
}

InstRef dma_copy(const View& dst, const View& src, const DmaOpts& opts, Loc loc) {
  Kernel& k = owner_of("dma_copy", loc, {&dst, &src, &opts.vector_offset, &opts.scalar_offset});
  const bool indirect = opts.vector_offset.valid();
  const Engine engine = opts.engine.value_or(indirect ? Engine::POOL : Engine::SP);
  if (indirect && engine != Engine::POOL)
    throw RuleError(
        fmt::format("{}: dma_copy: indirect DMA (vector_offset) needs software DGE, triggered from "
                    "POOL, not {}",
                    where(loc), isa::engine_name(engine)));
  if (!indirect && opts.indirect_dst)
    throw InputError(fmt::format("{}: dma_copy: indirect_dst without a vector_offset", where(loc)));
  const bool offset = opts.scalar_offset.valid();
  if (!offset && opts.scalar_offset_dst)
    throw InputError(fmt::format("{}: dma_copy: scalar_offset_dst without a scalar_offset", where(loc)));
  isa::Instruction inst =
      make(isa::Opcode::DmaCopy, engine, {&dst, &src, &opts.vector_offset, &opts.scalar_offset});
  inst.dma_queue = k.pick_queue(engine, opts.queue, loc);
  if (indirect && opts.indirect_dst) inst.flags |= isa::kIndirectDst;
  if (opts.oob_mode == OobMode::Skip) inst.flags |= isa::kOobSkip;
  if (opts.accumulate) inst.flags |= isa::kDmaAccumulate;
  if (offset && opts.scalar_offset_dst) inst.flags |= isa::kScalarOffsetDst;
  const bool gather = indirect && !opts.indirect_dst, scatter = indirect && opts.indirect_dst;
  const bool src_moves = offset && !opts.scalar_offset_dst, dst_moves = offset && opts.scalar_offset_dst;
  std::vector<Access> acc{Access{.view = &src, .write = false, .whole_rows = gather, .any_row = src_moves},
                          rd(opts.vector_offset), rd(opts.scalar_offset),
                          Access{.view = &dst, .write = true, .whole_rows = scatter, .any_row = dst_moves}};
  if (opts.accumulate)
    acc.push_back(Access{.view = &dst, .write = false, .whole_rows = scatter, .any_row = dst_moves});
  return k.emit(std::move(inst), acc, loc);
}

InstRef dma_transpose(const View& dst, const View& src, const DmaQueueOpts& opts, Loc loc) {
  Kernel& k = owner_of("dma_transpose", loc, {&dst, &src, &opts.scalar_offset});
  const Engine engine = opts.engine.value_or(Engine::SP);
  isa::Instruction inst = make(isa::Opcode::DmaTranspose, engine, {&dst, &src, &opts.scalar_offset});
  inst.dma_queue = k.pick_queue(engine, opts.queue, loc);
  const bool offset = opts.scalar_offset.valid();
  return k.emit(std::move(inst),
                {Access{.view = &src, .write = false, .any_row = offset}, rd(opts.scalar_offset), wr(dst)},
                loc);
}

InstRef core_barrier(const View& data, Engine engine, Loc loc) {
  Kernel& k = owner_of("core_barrier", loc, {&data});
  if (k.num_programs() != 2)
    throw InputError(fmt::format("{}: core_barrier needs num_programs 2 (LNC2)", where(loc)));
  k.use_barrier_engine(engine, loc);
  k.next_barrier(engine);
  // The model's core_barrier signals the peer once its waits (this core's earlier accesses to data) are done,
  // and completes when the peer has issued as many barriers; later accesses to data wait for its completion.
  return k.emit(make(isa::Opcode::CoreBarrier, engine, {}), {wr(data)}, loc);
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
  const InstRef ready = k.emit(make(isa::Opcode::CoreBarrier, k.use_barrier_engine(std::nullopt, loc), {}),
                               {Access{.view = &dst, .write = true, .record = false}}, loc);
  // Transfer into the peer's dst; its completion counts on the peer's done semaphore, which is what later
  // accesses to this core's dst (written by the peer's transfer) wait for.
  isa::Instruction inst = make(isa::Opcode::SendRecv, engine, {&dst, &src});
  inst.dma_queue = queue;
  inst.updates.push_back({kSendRecvDoneSem, 1, true});
  return k.emit(
      std::move(inst),
      {rd(src), Access{.view = &dst, .write = true, .collect = false, .as = Event{kSendRecvDoneSem, n}}}, loc,
      {ready.done});
}

}  // namespace trnsim::kernels::nki
