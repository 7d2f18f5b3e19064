// The ISA contract shared by the builder (kernels/), the functional semantics (sim/isa), the SystemC timing
// model (sim/model), program JSON, the trace and the stats. Names follow NKI's nki.isa
// (docs/facts/trainium-hardware.md §3). Plain C++: no SystemC here.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/small_vector.h"

namespace trnsim::isa {

// Hardware generation: Trn2 = NeuronCore-v3, Trn3 = NeuronCore-v4.
// Trn1 (NeuronCore-v2) is the oldest; the values index per-generation tables (opcodes.h).
enum class Generation : uint8_t { Trn2, Trn3, Trn1 };

// Sequencers of one physical core (docs/facts/trainium-hardware.md §1.2, §4). DMA transfers are triggered by
// a sequencer and run on a DMA queue; they are not an engine of their own here.
enum class Engine : uint8_t { PE, DVE, ACT, POOL, SP };
inline constexpr int kNumEngines = 5;

enum class MemSpace : uint8_t { SBUF, PSUM, HBM };

// Element types. The x4 types pack four FP8 values in one 32-bit element (reference §2.2).
enum class DType : uint8_t {
  F32,
  BF16,
  FP16,
  FP8_E4M3FN,
  FP8_E5M2,
  E8M0,
  FP8_E4M3FN_X4,
  FP8_E5M2_X4,
  I32,
  U32,
  I16,
  U16,
  I8,
  U8,
  // NKI's float8_e4m3: the IEEE-style E4M3 (bias 7, Inf = S.1111.000, NaN = S.1111.mmm with mmm != 0, max
  // finite 240 = S.1110.111), not OCP's E4M3FN; appended so that the earlier values keep their numbers.
  FP8_E4M3,
};

// One free-dimension of an access pattern: `size` elements, `stride` elements apart (NKI order: outermost
// first).
struct Dim {
  int64_t stride = 1;
  uint32_t size = 1;
};

// An operand: a region of SBUF, PSUM (partitions x free pattern) or an HBM tensor (rows x free pattern).
// For SBUF/PSUM, `offset_bytes` is the byte offset inside every partition; for HBM it is the byte offset
// inside tensor `tensor`, and `partition_stride` (elements) steps between the `partitions` rows.
// Free dim d (0 <= d < ndim, outermost first) is `sizes[d]` elements, `strides[d]` elements apart (the Dim
// {strides[d], sizes[d]}). Two arrays rather than an array of Dim: a Dim pads to 16 bytes, the arrays take
// 12 a dim, and every instruction carries five operands (80 bytes each, 96 as Dims).
struct AccessPattern {
  static constexpr int kMaxDims = 4;

  MemSpace space = MemSpace::SBUF;
  DType dtype = DType::F32;
  uint8_t ndim = 0;              // 1..4 free dims used
  uint32_t tensor = 0;           // HBM only: index into Program::tensors
  uint32_t partition_start = 0;  // SBUF/PSUM: first partition
  uint32_t partitions = 0;       // number of partitions (SBUF/PSUM) or rows (HBM); 0 = operand absent
  int64_t partition_stride = 0;  // HBM only, in elements
  int64_t offset_bytes = 0;
  std::array<int64_t, kMaxDims> strides{1, 1, 1,
                                        1};          // free dims' strides, in elements (may be 0 or negative)
  std::array<uint32_t, kMaxDims> sizes{1, 1, 1, 1};  // free dims' sizes, in elements

  bool present() const { return partitions != 0; }
  Dim dim(int d) const { return {strides[d], sizes[d]}; }
  void set_dim(int d, Dim v) {
    strides[d] = v.stride;
    sizes[d] = v.size;
  }
  uint64_t free_elements() const {
    uint64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= sizes[i];
    return n;
  }
};

// What each opcode is (names, operand slots and roles, engines per generation, features) is its row in the
// opcode table (opcodes.h), which follows this order.
enum class Opcode : uint8_t {
  DmaCopy,
  DmaTranspose,
  NcMatmul,
  NcMatmulMx,
  QuantizeMx,
  NcTranspose,
  Activation,
  TensorTensor,
  TensorScalar,
  TensorReduce,
  TensorCopy,
  Memset,
  Iota,
  Select,
  CoreBarrier,
  SendRecv,
  ScalarTensorTensor,
  BnStats,
  BnAggr,
  AffineSelect,
  Max8,
  NcFindIndex8,
  NcMatchReplace8,
  TensorScalarReduce,
  TensorTensorScan,
  TensorPartitionReduce,
  NcNGather,
  NonzeroWithCount,
  NcStreamShuffle,
};
inline constexpr int kNumOpcodes = 29;

enum class AluOp : uint8_t {
  Bypass,
  Add,
  Subtract,
  Multiply,
  Divide,
  Max,
  Min,
  AbsMax,
  Pow,
  IsEqual,
  NotEqual,
  IsGt,
  IsGe,
  IsLt,
  IsLe,
  LogicalAnd,
  LogicalOr,
  BitwiseAnd,
  BitwiseOr,
  BitwiseXor,
  ShiftLeft,
  ShiftRight,
  Abs,  // |a|: a unary operator in a binary slot (NKI's math operator table: nl.abs); b is not read
};

enum class ActFunc : uint8_t {
  Identity,
  Copy,
  Exp,
  Log,
  Silu,
  Gelu,
  GeluApproxTanh,
  Sigmoid,
  Tanh,
  Relu,
  Square,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Abs,
  Sign,
  SiluDx,  // d/dx silu (NKI nl.silu_dx)
  Sin,
  Cos,
  Arctan,
  Erf,
  ErfDx,  // d/dx erf
  Softplus,
  Mish,
  GeluDx,  // d/dx gelu (the erf form)
  Floor,
  Ceil,
  Trunc,
};

// Semaphore condition: wait until S[sem] >= value on this physical core.
struct SemWait {
  uint16_t sem = 0;
  uint32_t value = 0;
};

// Semaphore update applied when the instruction (or, for a DMA, its transfer) completes.
// `peer` targets the other physical core of the LNC2 pair.
// Fields in decreasing size (8 bytes, no padding inside); construct as {sem, delta, peer}.
struct SemUpdate {
  int32_t delta = 1;
  uint16_t sem = 0;
  bool peer = false;

  constexpr SemUpdate() = default;
  constexpr SemUpdate(uint16_t s, int32_t d = 1, bool p = false) : delta(d), sem(s), peer(p) {}
};

// An instruction's waits and updates: a few each (the builder keeps one wait per semaphore, and a core has at
// most 65535 semaphores besides the core_barrier's), stored inline. A 16-bit count: 28 and 20 bytes (32 and
// 24 with 32-bit counts), so 24 bytes less an instruction; at most kMaxSemList each (program_json says so).
inline constexpr size_t kMaxSemList = UINT16_MAX;
using SemWaits = SmallVector<SemWait, 3, uint16_t>;
using SemUpdates = SmallVector<SemUpdate, 2, uint16_t>;

// How a DMA instruction's descriptors are made (NKI's nki.isa.dge_mode, the hardware fact sheet §2.7):
// None: precomputed before the run and stored in HBM (any sequencer triggers the transfer); Hwdge: a hardware
// DGE block of the core, commanded by the SP or ACT sequencer (about 600 ns per instruction); Swdge: GpSimd
// (POOL) generates them, in GpSimd time (the only mode for indirect gather/scatter). NKI's `unknown` (the
// compiler decides) is resolved by the builder (kernels/api/nki.h).
enum class DgeMode : uint8_t { None, Hwdge, Swdge };

// Instruction flags (bit set; 16 bits: Instruction::flags).
enum Flag : uint16_t {
  kAccumulate = 1u << 0,     // nc_matmul(_mx): accumulate into the PSUM bank instead of overwriting
  kDoubleRow = 1u << 1,      // nc_matmul perf_mode=double_row (FP8, K=256)
  kIsTranspose = 1u << 2,    // nc_matmul transpose mode
  kOobSkip = 1u << 3,        // indirect DMA: out-of-bounds rows are skipped (else an error)
  kDmaAccumulate = 1u << 4,  // dma_copy: dst += src (DMA-side add)
  kIndirectDst = 1u << 5,    // vector_offset indexes the destination (scatter) instead of the source (gather)
  kNegate = 1u << 6,         // tensor_reduce negate; tensor_scalar_reduce reduce_res_negate
  kReverse0 = 1u << 7,       // tensor_scalar: operand0 op data instead of data op operand0
  kReverse1 = 1u << 8,       // tensor_scalar: same for op1
  kOperand0Vector =
      1u << 9,  // tensor_scalar/activation scale: per-partition [P,1] operand instead of immediate
  kOperand1Vector = 1u << 10,
  kBiasVector = 1u << 11,  // activation: bias from a [P,1] operand
  kReduce = 1u << 12,      // activation: also add-reduce along the free dims into reduce_res
  // dma_copy: the scalar_offset moves dst (else src)
  kScalarOffsetDst = 1u << 13,
  // dma_transpose with NKI's axes (2, 1, 0) / (3, 1, 2, 0): the outermost and innermost axes swap and the
  // middle ones stay in place (src [A, C, D] -> dst [D, C, A]); without it the 2-D swap (1, 0).
  kTransposeOuterAxes = 1u << 14,
};

// Where an instruction came from in kernel code (index into Program::files, 1-based line; 0 = unknown).
struct SourceLoc {
  uint32_t file = 0;
  uint32_t line = 0;
};

// One instruction of one sequencer's stream. Operand slot meanings depend on the opcode: see opcodes.h.
// The fields the sequencer reads for every instruction come first (the first two cache lines: opcode,
// engine, flags, source, waits, updates), the operand slots last: a large program's streams do not fit in
// the caches, and the sequencer loads only the lines it reads (Sequencer::fetch).
struct Instruction {
  Opcode op = Opcode::TensorCopy;
  Engine engine = Engine::SP;   // the sequencer that issues it (for DMAs: the triggering sequencer)
  uint8_t dma_queue = 0;        // DMA: queue id 0..15 (shared by the 16 DMA engines of the core)
  DgeMode dge = DgeMode::None;  // DMA: descriptor generation
  uint8_t nops = 0;             // operand slots used
  uint8_t scale_offset = 0;     // quantize_mx / nc_matmul_mx: scale row offset 0/4/8/12 inside each quadrant
  uint8_t moving_scale_offset =
      0;                       // nc_matmul_mx: the same for moving_scale (scale_offset: stationary_scale)
  uint8_t reduce_axes = 1;     // tensor_reduce: number of innermost free dims reduced
  AluOp alu0 = AluOp::Bypass;  // tensor_tensor op; tensor_scalar op0; tensor_reduce op
  AluOp alu1 = AluOp::Bypass;  // tensor_scalar op1; tensor_scalar_reduce reduce_op
  ActFunc act = ActFunc::Identity;
  uint16_t phase = 0;  // index into Program::phases (0: none): the kernel phase that emitted it, for stats
  uint16_t flags = 0;  // Flag bits (15 of 16 used)
  SourceLoc loc;
  // The rest of an integer immediate FP32 does not hold (element.h split_fill): iota's offset is imm0 + imm3,
  // affine_select's on_false_value imm2 + imm3 (room made by 16-bit flags: the size does not change).
  float imm3 = 0.f;
  SemWaits waits;  // PE nc_matmul(_mx) / nc_transpose: the LoadStationary's waits
  SemUpdates updates;
  // PE nc_matmul(_mx) / nc_transpose are two hardware instructions, LoadStationary then MultiplyMoving (the
  // hardware fact sheet §2.1): the MultiplyMoving also waits for mm_waits (its moving operand, its PSUM
  // dst), and ls_updates are posted when the LoadStationary ends (the stationary operand is latched then and
  // may be overwritten). Empty elsewhere.
  SemWaits mm_waits;
  SemUpdates ls_updates;
  float imm0 = 0.f;  // tensor_scalar operand0 / activation scale / memset value / iota base and affine_select
                     // offset / nc_match_replace8 imm
  float imm1 = 0.f;  // tensor_scalar operand1 / activation bias / iota channel_multiplier
  float imm2 = 0.f;  // affine_select on_false_value
  // iota: value step per free dim of dst (dst's dims order); nonzero_with_count: index_offset and padding_val
  // in [0] and [1] (exact int32); nc_stream_shuffle: part of its packed shuffle_mask (shuffle_mask.h);
  // dma_copy: [0] the scalar_offset_stride (bytes; 0: one tensor row, semantics.h scalar_offset_slot).
  std::array<int32_t, 4> iota_steps{};
  std::array<AccessPattern, 5> ops{};

  bool has(Flag f) const { return (flags & f) != 0; }
};
// A large program holds millions of instructions (DeepSeek-V3's MoE backward 724k, each written to fresh
// pages, which the host must map and zero: in a VM the larger part of a timing-only build): a field added
// here costs host memory and build time in every run. 152 bytes of per-instruction fields (176 with 32-bit
// semaphore list counts), five 80-byte operands (656 bytes with operands of four 16-byte Dims).
static_assert(sizeof(AccessPattern) == 80, "AccessPattern grew: see its comment");
static_assert(sizeof(SemWaits) == 28 && sizeof(SemUpdates) == 20, "semaphore lists grew: see SemWaits");
static_assert(sizeof(Instruction) == 552, "Instruction grew: see the comment above");

// HBM tensor of a program (shared by both cores unless `private_to_core` >= 0).
struct TensorDecl {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int private_to_core = -1;
  std::string init = {};    // program JSON "init" value, kept as JSON text for the runner ("" = absent)
  std::string output = {};  // program JSON "output" value, kept as JSON text ("" = absent)
};

// Memory sizes and generation features the checks need (filled from the hardware config).
struct Limits {
  Generation generation = Generation::Trn2;
  uint32_t partitions = 128;
  uint32_t sbuf_bytes_per_partition = 224 * 1024;  // Trn2 224 KiB, Trn3 256 KiB (reference §1.4)
  uint32_t psum_bytes_per_partition = 16 * 1024;   // 8 banks x 2 KiB (reference §1.4)
  uint32_t psum_bank_bytes = 2048;
  uint32_t num_semaphores = 64;
  uint32_t num_dma_queues = 16;
  uint64_t hbm_bytes = uint64_t{24} << 30;  // one HBM stack per LNC2 pair: Trn2 24 GiB, Trn3 ~36 GiB (§1.5)

  bool operator==(const Limits&) const = default;
};

// A complete program: per physical core, per engine, an instruction stream in program order.
struct Program {
  Generation generation = Generation::Trn2;
  int num_cores = 2;
  std::vector<TensorDecl> tensors;
  std::vector<std::string> files;   // source files referenced by SourceLoc::file (index 0 unused: "?")
  std::vector<std::string> phases;  // kernel phase names referenced by Instruction::phase (index 0: none)
  std::array<std::array<std::vector<Instruction>, kNumEngines>, 2> streams;
  // Set by the kernel builder, which checks every instruction (isa::check) as it emits it: the limits it
  // checked them under. A run under the same limits does not check them again. Whoever edits a built
  // program's instructions resets it.
  std::optional<Limits> checked_limits;
};

}  // namespace trnsim::isa
