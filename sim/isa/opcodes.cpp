#include "sim/isa/opcodes.h"

namespace trnsim::isa {
namespace {

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
  return i;
}

constexpr EngineSet PE = engine_set({Engine::PE});
constexpr EngineSet DVE = engine_set({Engine::DVE});
constexpr EngineSet ACT = engine_set({Engine::ACT});
constexpr EngineSet POOL = engine_set({Engine::POOL});
constexpr EngineSet ANY = kAnySequencer;  // DMA triggers and core_barrier

// One row per Opcode, in enum order.
constexpr std::array<OpcodeInfo, kNumOpcodes> kTable = {
    info({.op = Opcode::DmaCopy,
          .name = "dma_copy",
          .profile = "DMA_COPY",
          .slots = {out("dst", kDmaAccumulate), in("src"), opt_in("vector_offset"), opt_in("scalar_offset")},
          .trn2 = ANY,
          .trn3 = ANY,
          .dma = true,
          .description =
              "copy with dtype cast; indirect row gather/scatter by vector_offset; optional DMA-side "
              "add; scalar_offset moves the HBM side by whole tensor rows at run time"}),
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
              "at run time"}),
    info({.op = Opcode::NcMatmul,
          .name = "nc_matmul",
          .profile = "MATMUL",
          .slots = {out("dst", kAccumulate), in("stationary"), in("moving")},
          .trn2 = PE,
          .trn3 = PE,
          .description = "dst[M, N] (+)= stationary[K, M]^T @ moving[K, N] into PSUM"}),
    info({.op = Opcode::NcMatmulMx,
          .name = "nc_matmul_mx",
          .profile = "MATMUL_MX",
          .slots = {out("dst", kAccumulate), in("stationary"), in("moving"), in("stationary_scale"),
                    in("moving_scale")},
          .trn2 = 0,
          .trn3 = PE,
          .feature = "nc_matmul_mx",
          .description =
              "MX matmul: x4 FP8 operands dequantized by their E8M0 scales, accumulated as nc_matmul"}),
    info({.op = Opcode::QuantizeMx,
          .name = "quantize_mx",
          .profile = "QUANTIZE_MX",
          .slots = {out("dst"), in("src"), out("dst_scale")},
          .trn2 = 0,
          .trn3 = DVE,
          .feature = "quantize_mx",
          .description = "BF16/FP16 src -> x4 FP8 dst and E8M0 dst_scale"}),
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
              "dst = func(data * scale + bias), optionally add-reduced along the free dims into reduce_res"}),
    info({.op = Opcode::TensorTensor,
          .name = "tensor_tensor",
          .profile = "TENSOR_TENSOR",
          .slots = {out("dst"), in("data1"), in("data2")},
          .trn2 = DVE | POOL,
          .trn3 = DVE | POOL,
          .description = "dst = data1 op data2, elementwise"}),
    info(
        {.op = Opcode::TensorScalar,
         .name = "tensor_scalar",
         .profile = "TENSOR_SCALAR",
         .slots = {out("dst"), in("data"), opt_in("operand0"), opt_in("operand1")},
         .trn2 = DVE | ACT | POOL,
         .trn3 = DVE | ACT | POOL,
         .description = "dst = (data op0 operand0) op1 operand1; operands are immediates or [P, 1] vectors"}),
    info({.op = Opcode::TensorReduce,
          .name = "tensor_reduce",
          .profile = "TENSOR_REDUCE",
          .slots = {out("dst"), in("data")},
          .trn2 = DVE,
          .trn3 = DVE,
          .description = "reduces the innermost free dims of data with an ALU op"}),
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
          .description = "fills dst with a constant"}),
    info({.op = Opcode::Iota,
          .name = "iota",
          .profile = "IOTA",
          .slots = {out("dst")},
          .trn2 = POOL,
          .trn3 = POOL,
          .description = "dst = base + channel_multiplier * partition + sum of steps * free indices"}),
    info({.op = Opcode::Select,
          .name = "select",
          .profile = "SELECT",
          .slots = {out("dst"), in("predicate"), in("on_true"), opt_in("on_false")},
          .trn2 = DVE | POOL,
          .trn3 = DVE | POOL,
          .description = "dst = predicate != 0 ? on_true : on_false (a tensor or an immediate)"}),
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
};

constexpr bool in_enum_order() {
  for (int i = 0; i < kNumOpcodes; ++i)
    if (static_cast<int>(kTable[i].op) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kTable rows must follow the Opcode enum");

constexpr bool dma_opcodes_agree() {
  for (int i = 0; i < kNumOpcodes; ++i)
    if (kTable[i].dma != (((kDmaOpcodes >> i) & 1u) != 0)) return false;
  return true;
}
static_assert(dma_opcodes_agree(), "kDmaOpcodes (instruction.h) must name the rows with dma = true");

constexpr OpcodeInfo unknown() {
  OpcodeInfo i;
  i.op = static_cast<Opcode>(kNumOpcodes);
  return i;
}
constexpr OpcodeInfo kUnknown = unknown();

}  // namespace

const OpcodeInfo& opcode_info(Opcode op) {
  const auto i = static_cast<size_t>(op);
  return i < kTable.size() ? kTable[i] : kUnknown;
}

std::span<const OpcodeInfo> opcode_table() {
  return kTable;
}

const char* opcode_name(Opcode op) {
  return opcode_info(op).name;
}

const std::vector<const char*>& operand_names(Opcode op) {
  static const auto kNames = [] {
    std::array<std::vector<const char*>, kNumOpcodes + 1> n;  // the last: opcodes outside the enum
    for (int o = 0; o < kNumOpcodes; ++o)
      for (int s = 0; s < kTable[o].num_slots; ++s) n[o].push_back(kTable[o].slots[s].name);
    return n;
  }();
  const auto i = static_cast<size_t>(op);
  return kNames[i < kTable.size() ? i : kTable.size()];
}

}  // namespace trnsim::isa
