// The opcode table's rows (opcodes.h describes the columns), visible at compile time so that what derives
// from a column is computed from it: the DMA opcodes' bit set that is_dma reads for every instruction the
// sequencer takes. opcodes.cpp reads the rows; most code asks opcode_info() (opcodes.h).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "sim/isa/instruction.h"
#include "sim/isa/opcodes.h"

namespace trnsim::isa {
namespace rows {

constexpr OperandSlot in(const char* name) {
  return {name, Role::Read, false, 0};
}
constexpr OperandSlot opt_in(const char* name) {
  return {name, Role::Read, true, 0};
}
constexpr OperandSlot out(const char* name, uint32_t also_read_if = 0) {
  return {name, Role::Write, false, also_read_if};
}
constexpr OperandSlot opt_out(const char* name) {
  return {name, Role::Write, true, 0};
}

constexpr Attr flag(const char* key, uint32_t f) {
  return {.key = key, .kind = AttrKind::Flag, .flag = f};
}
// The string `off` or `on` (sets f); written when set, or always while operand `slot` is given.
constexpr Attr choice(const char* key, const char* off, const char* on, uint32_t f, int8_t slot = -1) {
  return {.key = key, .kind = AttrKind::Choice, .flag = f, .slot = slot, .off = off, .on = on};
}
constexpr Attr byte(const char* key, AttrField field, uint8_t lo = 0, uint8_t hi = 255) {
  return {.key = key, .kind = AttrKind::Byte, .field = field, .lo = lo, .hi = hi};
}
constexpr Attr alu(const char* key, AttrField field, bool required) {
  return {.key = key, .kind = AttrKind::Alu, .field = field, .required = required};
}
constexpr Attr number(const char* key, AttrField field, bool required = false) {
  return {.key = key, .kind = AttrKind::Number, .field = field, .required = required};
}
constexpr Attr int32(const char* key, AttrField field, float absent, bool omit_absent = false) {
  return {.key = key, .kind = AttrKind::Int32, .field = field, .absent = absent, .omit_absent = omit_absent};
}
constexpr Attr number_or_vector(const char* key, AttrField field, int8_t slot, uint32_t f,
                                float absent = 0.f) {
  return {.key = key,
          .kind = AttrKind::NumberOrVector,
          .field = field,
          .flag = f,
          .slot = slot,
          .absent = absent};
}

struct Row {
  Opcode op;
  const char* name;
  const char* profile;
  std::initializer_list<OperandSlot> slots;
  EngineSet trn2 = 0, trn3 = 0;
  int trn1 = -1;  // NeuronCore-v2's sequencers; -1: as trn2
  const char* feature = nullptr;
  bool dma = false;
  const char* description = "";
  std::initializer_list<Attr> attrs = {};
  uint8_t pe_rate = 0;
  uint32_t pe_rate_doubled_by = 0;
};

constexpr OpcodeInfo info(const Row& r) {
  OpcodeInfo i;
  i.op = r.op;
  i.name = r.name;
  i.profile_name = r.profile;
  for (const OperandSlot& s : r.slots) i.slots[i.num_slots++] = s;
  i.engines = {r.trn2, r.trn3, r.trn1 < 0 ? r.trn2 : static_cast<EngineSet>(r.trn1)};
  i.feature = r.feature;
  i.dma = r.dma;
  i.description = r.description;
  for (const Attr& a : r.attrs) i.attrs[i.num_attrs++] = a;
  i.pe_rate = r.pe_rate;
  i.pe_rate_doubled_by = r.pe_rate_doubled_by;
  return i;
}

constexpr EngineSet PE = engine_set({Engine::PE});
constexpr EngineSet DVE = engine_set({Engine::DVE});
constexpr EngineSet ACT = engine_set({Engine::ACT});
constexpr EngineSet POOL = engine_set({Engine::POOL});
constexpr EngineSet ANY = kAnySequencer;  // DMA triggers and core_barrier

// One row per Opcode, in enum order.
inline constexpr std::array<OpcodeInfo, kNumOpcodes> kOpcodeTable = {
    info({.op = Opcode::DmaCopy,
          .name = "dma_copy",
          .profile = "DMA_COPY",
          .slots = {out("dst", kDmaAccumulate), in("src"), opt_in("vector_offset"), opt_in("scalar_offset")},
          .trn2 = ANY,
          .trn3 = ANY,
          .dma = true,
          .description =
              "copy with dtype cast; indirect row gather/scatter by vector_offset; optional DMA-side "
              "add; scalar_offset moves the HBM side by whole tensor rows (or scalar_offset_stride bytes) at "
              "run time",
          .attrs = {flag("accumulate", kDmaAccumulate), flag("indirect_dst", kIndirectDst),
                    flag("scalar_offset_dst", kScalarOffsetDst),
                    choice("oob_mode", "error", "skip", kOobSkip, 2),
                    int32("scalar_offset_stride", AttrField::Int0, 0.f, true)}}),
    info({.op = Opcode::DmaTranspose,
          .name = "dma_transpose",
          .profile = "DMA_TRANSPOSE",
          .slots = {out("dst"), in("src"), opt_in("scalar_offset"), opt_in("vector_offset")},
          .trn2 = ANY,
          .trn3 = ANY,
          .dma = true,
          .description =
              "2-byte dtypes: swaps the partition and free axes into SBUF (axes (1, 0)), or the outer axes "
              "of src [A, C, D] into dst [D, C, A] (axes (2, 1, 0) / (3, 1, 2, 0)); vector_offset gathers "
              "src's rows by index first (indirect transpose); scalar_offset moves src by whole tensor rows "
              "at run time",
          .attrs = {{.key = "axes", .kind = AttrKind::TransposeAxes, .flag = kTransposeOuterAxes}}}),
    info({.op = Opcode::NcMatmul,
          .name = "nc_matmul",
          .profile = "MATMUL",
          .slots = {out("dst", kAccumulate), in("stationary"), in("moving")},
          .trn2 = PE,
          .trn3 = PE,
          .description = "dst[M, N] (+)= stationary[K, M]^T @ moving[K, N] into PSUM",
          .attrs = {flag("accumulate", kAccumulate), flag("is_transpose", kIsTranspose),
                    choice("perf_mode", "none", "double_row", kDoubleRow)},
          .pe_rate = 1,
          .pe_rate_doubled_by = kDoubleRow}),
    info({.op = Opcode::NcMatmulMx,
          .name = "nc_matmul_mx",
          .profile = "MATMUL_MX",
          .slots = {out("dst", kAccumulate), in("stationary"), in("moving"), in("stationary_scale"),
                    in("moving_scale")},
          .trn2 = 0,
          .trn3 = PE,
          .feature = "nc_matmul_mx",
          .description =
              "MX matmul: x4 FP8 operands dequantized by their E8M0 scales, accumulated as nc_matmul",
          .attrs = {flag("accumulate", kAccumulate), byte("scale_offset", AttrField::ScaleOffset),
                    byte("moving_scale_offset", AttrField::MovingScaleOffset)},
          .pe_rate = 4}),
    info({.op = Opcode::QuantizeMx,
          .name = "quantize_mx",
          .profile = "QUANTIZE_MX",
          .slots = {out("dst"), in("src"), out("dst_scale")},
          .trn2 = 0,
          .trn3 = DVE,
          .feature = "quantize_mx",
          .description = "BF16/FP16 src -> x4 FP8 dst and E8M0 dst_scale",
          .attrs = {byte("scale_offset", AttrField::ScaleOffset)}}),
    info({.op = Opcode::NcTranspose,
          .name = "nc_transpose",
          .profile = "TRANSPOSE",
          .slots = {out("dst"), in("data")},
          .trn2 = PE | DVE,
          .trn3 = PE | DVE,
          .description = "dst[F, P] = data[P, F]: PE (SBUF -> PSUM, up to 128x128) or DVE (up to 32x32)"}),
    info({.op = Opcode::Activation,
          .name = "activation",
          .profile = "ACTIVATE",
          .slots = {out("dst"), in("data"), opt_in("bias"), opt_out("reduce_res"), opt_in("scale")},
          .trn2 = ACT,
          .trn3 = ACT | POOL,
          .description =
              "dst = func(data * scale + bias), optionally add-reduced along the free dims into reduce_res",
          .attrs = {{.key = "func", .kind = AttrKind::Func},
                    number_or_vector("scale", AttrField::Imm0, 4, kOperand0Vector, 1.f),
                    number_or_vector("bias", AttrField::Imm1, 2, kBiasVector),
                    {.key = "reduce_res", .kind = AttrKind::SlotFlag, .flag = kReduce, .slot = 3}}}),
    info({.op = Opcode::TensorTensor,
          .name = "tensor_tensor",
          .profile = "TENSOR_TENSOR",
          .slots = {out("dst"), in("data1"), in("data2")},
          .trn2 = DVE | POOL,
          .trn3 = DVE | POOL,
          .description = "dst = data1 op data2, elementwise",
          .attrs = {alu("alu", AttrField::Alu0, true)}}),
    info({.op = Opcode::TensorScalar,
          .name = "tensor_scalar",
          .profile = "TENSOR_SCALAR",
          .slots = {out("dst"), in("data"), opt_in("operand0"), opt_in("operand1")},
          .trn2 = DVE | ACT | POOL,
          .trn3 = DVE | ACT | POOL,
          .description = "dst = (data op0 operand0) op1 operand1; operands are immediates or [P, 1] vectors",
          .attrs = {alu("op0", AttrField::Alu0, true), alu("op1", AttrField::Alu1, false),
                    number_or_vector("operand0", AttrField::Imm0, 2, kOperand0Vector),
                    number_or_vector("operand1", AttrField::Imm1, 3, kOperand1Vector),
                    flag("reverse0", kReverse0), flag("reverse1", kReverse1)}}),
    info({.op = Opcode::TensorReduce,
          .name = "tensor_reduce",
          .profile = "TENSOR_REDUCE",
          .slots = {out("dst"), in("data")},
          .trn2 = DVE,
          .trn3 = DVE,
          .description = "reduces the innermost free dims of data with an ALU op",
          .attrs = {alu("alu", AttrField::Alu0, true), byte("axes", AttrField::ReduceAxes, 1, 4),
                    flag("negate", kNegate)}}),
    info({.op = Opcode::TensorCopy,
          .name = "tensor_copy",
          .profile = "TENSOR_COPY",
          .slots = {out("dst"), in("src")},
          .trn2 = DVE | ACT | POOL,
          .trn3 = DVE | ACT | POOL,
          .trn1 = DVE | POOL,  // "tensor_copy is not supported on ScalarE" on NeuronCore-v2 (S14)
          .description = "dst = src with dtype cast"}),
    info({.op = Opcode::Memset,
          .name = "memset",
          .profile = "MEMSET",
          .slots = {out("dst")},
          .trn2 = DVE | ACT | POOL,
          .trn3 = DVE | ACT | POOL,
          .description = "fills dst with a constant",
          .attrs = {number("value", AttrField::Imm0, true)}}),
    info({.op = Opcode::Iota,
          .name = "iota",
          .profile = "IOTA",
          .slots = {out("dst")},
          .trn2 = POOL,
          .trn3 = POOL,
          .description = "dst = base + channel_multiplier * partition + sum of steps * free indices",
          .attrs = {number("base", AttrField::Imm0),
                    number("channel_multiplier", AttrField::Imm1),
                    {.key = "steps", .kind = AttrKind::IotaSteps}}}),
    info({.op = Opcode::Select,
          .name = "select",
          .profile = "SELECT",
          .slots = {out("dst"), in("predicate"), in("on_true"), opt_in("on_false")},
          .trn2 = DVE | POOL,
          .trn3 = DVE | POOL,
          .description = "dst = predicate != 0 ? on_true : on_false (a tensor or an immediate)",
          .attrs = {number_or_vector("on_false", AttrField::Imm0, 3, 0)}}),
    info({.op = Opcode::CoreBarrier,
          .name = "core_barrier",
          .profile = "PSEUDO_CORE_BARRIER",
          .slots = {},
          .trn2 = ANY,
          .trn3 = ANY,
          .description = "LNC2 barrier between the two physical cores on the issuing engine (no operands)"}),
    info({.op = Opcode::SendRecv,
          .name = "sendrecv",
          .profile = "SENDRECV",
          .slots = {out("dst"), in("src")},
          .trn2 = ANY,
          .trn3 = ANY,
          .dma = true,
          .description = "LNC2 SBUF exchange: src on this core -> dst on the peer core"}),
    info({.op = Opcode::ScalarTensorTensor,
          .name = "scalar_tensor_tensor",
          .profile = "SCALAR_TENSOR_TENSOR",
          .slots = {out("dst"), in("data"), opt_in("operand0"), in("operand1")},
          .trn2 = DVE | POOL,
          .trn3 = DVE | POOL,
          .description = "dst = (data op0 operand0) op1 operand1; operand0 an immediate or a [P, 1] vector, "
                         "operand1 a tile of data's shape",
          .attrs = {alu("op0", AttrField::Alu0, true), alu("op1", AttrField::Alu1, true),
                    number_or_vector("operand0", AttrField::Imm0, 2, kOperand0Vector),
                    flag("reverse0", kReverse0), flag("reverse1", kReverse1)}}),
    info({.op = Opcode::BnStats,
          .name = "bn_stats",
          .profile = "BN_STATS",
          .slots = {out("dst"), in("data")},
          .trn2 = DVE,
          .trn3 = DVE,
          .description =
              "per partition, of data's even and odd elements: (count, mean, variance * count) each, "
              "6 values; at most 512 elements per partition"}),
    info({.op = Opcode::BnAggr,
          .name = "bn_aggr",
          .profile = "BN_AGGR",
          .slots = {out("dst"), in("data")},
          .trn2 = DVE,
          .trn3 = DVE,
          .description = "per partition, the mean and variance of (count, mean, variance * count) triples"}),
    info({.op = Opcode::AffineSelect,
          .name = "affine_select",
          .profile = "AFFINE_SELECT",
          .slots = {out("dst"), in("on_true_tile")},
          .trn2 = POOL,
          .trn3 = POOL,
          .description =
              "dst = cmp_op(offset + channel_multiplier * partition + sum of steps * free indices, 0) "
              "? on_true_tile : on_false_value",
          .attrs = {alu("cmp_op", AttrField::Alu0, true),
                    number("offset", AttrField::Imm0),
                    number("channel_multiplier", AttrField::Imm1),
                    number("on_false_value", AttrField::Imm2),
                    {.key = "steps", .kind = AttrKind::IotaSteps}}}),
    // The Vector engine's top-8 instructions (NKI's router / top-k kernels): values compared as FP32.
    info({.op = Opcode::Max8,
          .name = "max8",
          .profile = "MAX8",
          .slots = {out("dst"), in("src")},
          .trn2 = DVE,
          .trn3 = DVE,
          .description = "dst [P, 8] = the 8 largest values of each partition of src, in descending order"}),
    info({.op = Opcode::NcFindIndex8,
          .name = "nc_find_index8",
          .profile = "FIND_INDEX8",
          .slots = {out("dst"), in("data"), in("vals")},
          .trn2 = DVE,
          .trn3 = DVE,
          .description = "dst [P, 8] = the index in data of the first occurrence of each of the 8 vals per "
                         "partition (uint16 / uint32; all ones where absent)"}),
    info({.op = Opcode::NcMatchReplace8,
          .name = "nc_match_replace8",
          .profile = "MATCH_REPLACE8",
          .slots = {out("dst"), in("data"), in("vals"), opt_out("dst_idx")},
          .trn2 = DVE,
          .trn3 = DVE,
          .description = "dst = data with the first occurrence of each of the 8 vals per partition replaced "
                         "by imm; their indices into dst_idx",
          .attrs = {number("imm", AttrField::Imm0, true)}}),
    info({.op = Opcode::TensorScalarReduce,
          .name = "tensor_scalar_reduce",
          .profile = "TENSOR_SCALAR_REDUCE",
          .slots = {out("dst"), in("data"), opt_in("operand0"), out("reduce_res")},
          .trn2 = DVE,
          .trn3 = DVE,
          .description = "dst = data op0 operand0 (tensor_scalar with one operator), and reduce_res [P, 1] = "
                         "those results reduced along the free dims with reduce_op",
          .attrs = {alu("op0", AttrField::Alu0, true), alu("reduce_op", AttrField::Alu1, true),
                    number_or_vector("operand0", AttrField::Imm0, 2, kOperand0Vector),
                    flag("reverse0", kReverse0), flag("reduce_res_negate", kNegate)}}),
    // nki.isa.tensor_tensor_scan: a recurrence along each partition's free elements (cumulative sums, the
    // linear recurrences of state-space models).
    info({.op = Opcode::TensorTensorScan,
          .name = "tensor_tensor_scan",
          .profile = "TENSOR_TENSOR_SCAN",
          .slots = {out("dst"), in("data0"), in("data1"), opt_in("initial")},
          .trn2 = DVE,
          .trn3 = DVE,
          .description = "per partition, r = (data0[i] op0 r) op1 data1[i] from r = initial, dst[i] = r",
          .attrs = {alu("op0", AttrField::Alu0, true), alu("op1", AttrField::Alu1, true),
                    number_or_vector("initial", AttrField::Imm0, 3, kOperand0Vector),
                    flag("reverse0", kReverse0), flag("reverse1", kReverse1)}}),
    // nki.isa.tensor_partition_reduce: a reduction across partitions, on GpSimd.
    info({.op = Opcode::TensorPartitionReduce,
          .name = "tensor_partition_reduce",
          .profile = "TENSOR_PARTITION_REDUCE",
          .slots = {out("dst"), in("data")},
          .trn2 = POOL,
          .trn3 = POOL,
          .description = "dst [1, F] = data [P, F] reduced across its partitions with an ALU op",
          .attrs = {alu("alu", AttrField::Alu0, true)}}),
    // nki.isa.nc_n_gather: a gather within each partition, on GpSimd (the NKI library's top-k sort).
    info({.op = Opcode::NcNGather,
          .name = "nc_n_gather",
          .profile = "N_GATHER",
          .slots = {out("dst"), in("data"), in("indices")},
          .trn2 = POOL,
          .trn3 = POOL,
          .description =
              "dst[p, j] = data[p, indices[p, j]] (data's free elements flattened; uint32 indices)"}),
    // nki.isa.nonzero_with_count: the positions of a partition's nonzero elements, then padding, then their
    // count; GpSimd, NeuronCore-v3 and newer (find_nonzero_indices of the NKI library).
    info({.op = Opcode::NonzeroWithCount,
          .name = "nonzero_with_count",
          .profile = "NONZERO_WITH_COUNT",
          .slots = {out("dst"), in("src")},
          .trn2 = POOL,
          .trn3 = POOL,
          .trn1 = 0,
          .description = "partitions 0, 16, ..., 112: dst = [index_offset + i for src[i] != 0], padding_val "
                         "up to src's length, then the count",
          .attrs = {int32("index_offset", AttrField::Int0, 0.f),
                    int32("padding_val", AttrField::Int1, -1.f)}}),
    // nki.isa.nc_stream_shuffle: partitions moved within each 32-partition quadrant, on Vector.
    info({.op = Opcode::NcStreamShuffle,
          .name = "nc_stream_shuffle",
          .profile = "STREAM_SHUFFLE",
          .slots = {out("dst"), in("src")},
          .trn2 = DVE,
          .trn3 = DVE,
          .description = "in each quadrant, dst partition i = src partition shuffle_mask[i] (255: dst "
                         "partition i unmodified)",
          .attrs = {{.key = "shuffle_mask", .kind = AttrKind::ShuffleMask}}}),
};

constexpr bool in_enum_order() {
  for (int i = 0; i < kNumOpcodes; ++i)
    if (static_cast<int>(kOpcodeTable[i].op) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kOpcodeTable rows must follow the Opcode enum");

}  // namespace rows

using rows::kOpcodeTable;

// The opcodes whose row says `dma`, as a bit set by Opcode.
inline constexpr uint32_t kDmaOpcodes = [] {
  static_assert(kNumOpcodes <= 32);
  uint32_t s = 0;
  for (int i = 0; i < kNumOpcodes; ++i)
    if (kOpcodeTable[i].dma) s |= 1u << i;
  return s;
}();

// Whether `op`'s row says `dma` (false outside the enum). The sequencer asks it several times per
// instruction.
constexpr bool is_dma(Opcode op) {
  const auto i = static_cast<unsigned>(op);
  return i < static_cast<unsigned>(kNumOpcodes) && ((kDmaOpcodes >> i) & 1u) != 0;
}

// The physical core whose memory holds operand `slot` of an `op` instruction of core `core`: the peer core
// for sendrecv's dst (its row: "src on this core -> dst on the peer core"), else `core`.
constexpr int operand_core(Opcode op, int slot, int core) {
  return op == Opcode::SendRecv && slot == 0 ? 1 - core : core;
}

}  // namespace trnsim::isa
