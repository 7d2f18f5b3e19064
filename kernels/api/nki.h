// The ISA as kernel calls, named and ordered as NKI's nki.isa names them (docs/facts/trainium-hardware.md
// §3). Each call appends one instruction (two for core_barrier and sendrecv) to the calling core's streams,
// with the semaphore waits its operands need (kernel.h, deps.h), and returns it for explicit ordering edges.
// The last parameter is always the caller's source location, recorded in the instruction.
//
// Shapes: dim 0 of a view is the partition (SBUF/PSUM) or row (HBM) axis. Elementwise ops need dst and inputs
// of the same [partitions, free elements]; [P, 1] vector operands are FP32 per-partition scalars.
// Errors: InputError for API misuse (operands of another core, bad engine for a DMA, cross-core calls
// without LNC2); RuleError for hardware rules (isa::check: engine connectivity, partition start and count,
// shapes, dtypes, generation). Both name the kernel line ("kernel.cpp:42: ...").
#pragma once

#include <optional>
#include <vector>

#include "kernels/api/dma_mode.h"
#include "kernels/api/kernel.h"
#include "kernels/api/view.h"

namespace trnsim::kernels::nki {

using isa::ActFunc;
using isa::AluOp;
using isa::Engine;

// An FP32 immediate or a [P, 1] per-partition vector.
class Operand {
 public:
  Operand(double value) : value_(static_cast<float>(value)) {}  // NOLINT: implicit, as in NKI
  Operand(const View& vector) : vector_(vector) {}              // NOLINT
  bool is_vector() const { return vector_.valid(); }
  float value() const { return value_; }
  const View& vector() const { return vector_; }

 private:
  float value_ = 0.f;
  View vector_;
};

enum class PerfMode { None, DoubleRow };

struct MatmulOpts {
  bool accumulate = false;  // add into dst (an accumulation group) instead of overwriting it
  PerfMode perf_mode = PerfMode::None;
  bool is_transpose = false;
};

// dst[M, N] (+)= stationary[K, M]^T @ moving[K, N]. PE; stationary and moving in SBUF, dst in PSUM.
// double_row: stationary [K, 2, M], moving [K, 2, N] in FP8 (K = 256 effective).
InstRef nc_matmul(const View& dst, const View& stationary, const View& moving, MatmulOpts opts = {},
                  Loc loc = Loc::current());

struct MatmulMxOpts {
  bool accumulate = false;
  uint8_t stationary_scale_offset = 0;  // scale rows 0/4/8/12 inside each 32-partition quadrant
  uint8_t moving_scale_offset = 0;
};

// MX matmul with dequantisation (Trn3): x4-packed FP8 stationary [K, M] and moving [K, N] with their E8M0
// scales (one per 8 partitions x 4 elements, in quadrant rows 0-3 + offset).
InstRef nc_matmul_mx(const View& dst, const View& stationary, const View& moving,
                     const View& stationary_scale, const View& moving_scale, MatmulMxOpts opts = {},
                     Loc loc = Loc::current());

// BF16/FP16 src [P, 4F] -> x4 FP8 dst [P, F] plus E8M0 dst_scale (Trn3, DVE).
InstRef quantize_mx(const View& dst, const View& src, const View& dst_scale, uint8_t scale_offset = 0,
                    Loc loc = Loc::current());

// dst[F, P] = data[P, F]: PE (SBUF -> PSUM, up to 128x128) or DVE (up to 32x32).
InstRef nc_transpose(const View& dst, const View& data, Engine engine = Engine::PE, Loc loc = Loc::current());

// dst = op(data * scale + bias), optionally also add-reducing each partition's results into reduce_res [P,
// 1].
InstRef activation(const View& dst, ActFunc op, const View& data, Operand bias = 0.0, Operand scale = 1.0,
                   const View& reduce_res = {}, Engine engine = Engine::ACT, Loc loc = Loc::current());

InstRef tensor_tensor(const View& dst, const View& data1, const View& data2, AluOp op,
                      Engine engine = Engine::DVE, Loc loc = Loc::current());

// dst = (data op0 operand0) op1 operand1; reverseN swaps the operands of opN.
InstRef tensor_scalar(const View& dst, const View& data, AluOp op0, Operand operand0, bool reverse0 = false,
                      AluOp op1 = AluOp::Bypass, Operand operand1 = 0.0, bool reverse1 = false,
                      Engine engine = Engine::DVE, Loc loc = Loc::current());

// dst = data op0 operand0 (arithmetic op0) and reduce_res [P, 1] = reduce_op (add, subtract, multiply, max,
// min) over each partition's FP32 results, negated with negate (NKI tensor_scalar_reduce; Vector engine).
InstRef tensor_scalar_reduce(const View& dst, const View& data, AluOp op0, Operand operand0, AluOp reduce_op,
                             const View& reduce_res, bool reverse0 = false, bool negate = false,
                             Loc loc = Loc::current());

// Reduces data over `axis` (dims of data, which must be its innermost free dims) with op; negate flips the
// sign.
InstRef tensor_reduce(const View& dst, AluOp op, const View& data, const std::vector<int>& axis,
                      bool negate = false, Engine engine = Engine::DVE, Loc loc = Loc::current());

InstRef tensor_copy(const View& dst, const View& src, Engine engine = Engine::DVE, Loc loc = Loc::current());

InstRef memset(const View& dst, double value, Engine engine = Engine::DVE, Loc loc = Loc::current());

// dst[p, i0..i3] = offset + channel_multiplier * p + sum_d pattern[d] * i_d, one pattern step per free dim of
// dst (missing steps are 0).
InstRef iota(const View& dst, const std::vector<int32_t>& pattern, double offset = 0.0,
             double channel_multiplier = 0.0, Engine engine = Engine::POOL, Loc loc = Loc::current());

// dst = predicate != 0 ? on_true : on_false (a tensor or an immediate).
InstRef select(const View& dst, const View& predicate, const View& on_true, Operand on_false,
               Engine engine = Engine::DVE, Loc loc = Loc::current());

// dst = (data op0 operand0) op1 operand1 (reverseN swaps opN's operands): operand0 an immediate or a [P, 1]
// vector, operand1 a tile of data's shape; arithmetic operators only (NKI scalar_tensor_tensor).
InstRef scalar_tensor_tensor(const View& dst, const View& data, AluOp op0, Operand operand0, AluOp op1,
                             const View& operand1, bool reverse0 = false, bool reverse1 = false,
                             Engine engine = Engine::DVE, Loc loc = Loc::current());

// dst [P, 6]: count, mean and variance * count of data's even and then odd elements per partition (data at
// most 512 elements per partition, nl.tile_size.bn_stats_fmax).
InstRef bn_stats(const View& dst, const View& data, Loc loc = Loc::current());

// dst [P, 2]: mean and variance per partition from data's (count, mean, variance * count) triples.
InstRef bn_aggr(const View& dst, const View& data, Loc loc = Loc::current());

// dst = cmp_op(offset + channel_multiplier * p + sum_d pattern[d] * i_d, 0) ? on_true_tile : on_false_value
// (the affine value as iota's; GpSimd).
InstRef affine_select(const View& dst, const std::vector<int32_t>& pattern, double offset,
                      double channel_multiplier, const View& on_true_tile, double on_false_value,
                      AluOp cmp_op = AluOp::IsEqual, Engine engine = Engine::POOL, Loc loc = Loc::current());

// The Vector engine's top-8 instructions, values compared as FP32 (sim/isa/top8.h), 8 to 16,384 of them per
// partition. max8: dst [P, 8] = the 8 largest of each partition of src, descending.
InstRef max8(const View& dst, const View& src, Loc loc = Loc::current());

// dst [P, 8] (uint16 / uint32) = per partition, the position in data of the first occurrence of each of the
// 8 vals (a repeated val takes the next occurrence; all ones where none is left).
InstRef nc_find_index8(const View& dst, const View& data, const View& vals, Loc loc = Loc::current());

// dst = data with the first occurrence of each of the 8 vals per partition replaced by imm (vals taken from
// the last, a repeated val taking the next occurrence); their positions into dst_idx when given.
InstRef nc_match_replace8(const View& dst, const View& data, const View& vals, double imm,
                          const View& dst_idx = {}, Loc loc = Loc::current());

// Per partition along the free elements: r = initial, r = (data0[i] op0 r) op1 data1[i], dst[i] = r, in
// FP32 (reverseN swaps opN's operands); initial a number or a [P, 1] vector (NKI tensor_tensor_scan; Vector
// engine).
InstRef tensor_tensor_scan(const View& dst, const View& data0, const View& data1, Operand initial, AluOp op0,
                           AluOp op1, bool reverse0 = false, bool reverse1 = false, Loc loc = Loc::current());

// dst [1, F] = data [P, F] reduced across its partitions with op (add, maximum, bitwise_or / and / xor; NKI
// tensor_partition_reduce; GpSimd).
InstRef tensor_partition_reduce(const View& dst, AluOp op, const View& data, Loc loc = Loc::current());

// dst[p, j] = data[p, indices[p, j]] over data's free elements flattened, uint32 indices (NKI nc_n_gather;
// GpSimd).
InstRef nc_n_gather(const View& dst, const View& data, const View& indices, Loc loc = Loc::current());

// On partitions 0, 16, ..., 112 (one per GpSimd core): dst [P, N + 1] int32 = the positions plus index_offset
// of src [P, N]'s nonzero elements (float32 or int32), padding_val up to N, then their count (NKI
// nonzero_with_count; GpSimd, Trn2 and newer). The other partitions of dst are not written.
InstRef nonzero_with_count(const View& dst, const View& src, int32_t index_offset = 0,
                           int32_t padding_val = -1, Loc loc = Loc::current());

// In each 32-partition quadrant, dst partition i = src partition shuffle_mask[i] of the quadrant, or left
// unmodified where it is 255; 32 entries (NKI nc_stream_shuffle; Vector engine; in place allowed).
InstRef nc_stream_shuffle(const View& dst, const View& src, const std::vector<int>& shuffle_mask,
                          Loc loc = Loc::current());

enum class OobMode { Error, Skip };

// How a DMA's descriptors are made (NKI's nki.isa.dge_mode; dma_mode.h resolves Unknown and the engine).
using kernels::DgeMode;

struct DmaOpts {
  View vector_offset{};       // indirect: int32/uint32 [P, 1] row indices in SBUF (gather by default)
  bool indirect_dst = false;  // the indices pick dst rows (scatter) instead of src rows
  OobMode oob_mode = OobMode::Error;
  bool accumulate = false;              // dst += src on the DMA
  DgeMode dge_mode = DgeMode::Unknown;  // NKI's default: the compiler decides (dma_mode.h)
  std::optional<Engine> engine{};       // triggering sequencer; unset: as dma_mode.h resolves it
  int queue = -1;                       // -1: round-robin over the engine's default queues (kernel.h)
  // SBUF int32 [1, 1]: its value v, read when the DMA runs, moves the HBM side (src, or dst with
  // scalar_offset_dst) by v rows of its tensor's dim 0 (NKI `scalar_offset`; e.g. the expert of a stacked
  // [E, ...] weight). Hardware DGE only (SP or ACT), never with vector_offset; the view is the row-0
  // placement. The builder orders the DMA against every row of that tensor.
  View scalar_offset{};
  bool scalar_offset_dst = false;
  // > 0: the bytes one unit of the scalar_offset moves the HBM side (NKI's `indirect_dim` k > 0: dim k's
  // stride) instead of one tensor row; the builder then orders the DMA against the whole tensor.
  int32_t scalar_offset_stride = 0;
};

// Copies (with dtype cast) between HBM, SBUF and PSUM.
InstRef dma_copy(const View& dst, const View& src, const DmaOpts& opts = {}, Loc loc = Loc::current());

struct DmaQueueOpts {
  std::optional<Engine> engine{};  // unset: as dma_mode.h resolves it (sendrecv: SP)
  int queue = -1;
  DgeMode dge_mode = DgeMode::Unknown;  // dma_transpose only
  View scalar_offset{};  // dma_transpose: moves src by whole tensor rows at run time (DmaOpts::scalar_offset)
  // dma_transpose only. NKI's `axes`: empty or {1, 0} (2-D), {2, 1, 0} (src [A, C, D] -> dst [D, C, A]) or
  // {3, 1, 2, 0} (src [A, B, C, D] -> dst [D, B, C, A]); the views must have that many dims.
  std::vector<int> axes{};
  // dma_transpose only: an indirect transpose (NKI's vector offsets, dma_gather_transpose): src is an HBM
  // view [n, P] of n rows (its row pattern's stride steps the index) and src row r is the row
  // vector_offset[r % Q, r / Q] of that pattern (int32/uint32 [Q, ...] in SBUF); dst [P, n]. Software DGE
  // (POOL) unless stated; never with scalar_offset; axes 2-D only.
  View vector_offset{};
};

// dst[F, P] = src[P, F] on the DMA (2-byte dtypes; 4-byte too without hardware DGE; dst in SBUF), or the
// permutation `opts.axes` names, of src's rows or (opts.vector_offset) of the rows an index picks.
// InputError for views whose ranks and shapes do not match the axes.
InstRef dma_transpose(const View& dst, const View& src, const DmaQueueOpts& opts = {},
                      Loc loc = Loc::current());

// LNC2 barrier on `engine` (default POOL): waits for this core's earlier accesses to `data`, signals the
// peer, then blocks `engine` until the peer has reached its matching barrier. Later accesses to `data` on
// this core wait for the barrier. Needs num_programs 2; both cores must call it equally often.
InstRef core_barrier(const View& data, Engine engine = Engine::POOL, Loc loc = Loc::current());

// LNC2 SBUF exchange: this core's src goes to the peer's dst and the peer's src to this core's dst, pairing
// the n-th call of each core (the tiles may sit at different addresses on the two cores). Emits a "ready to
// receive" CoreBarrier signal and the SendRecv transfer; later reads of dst on this core wait for the peer's
// transfer. RuleError (from build_program, naming both calls' lines) if this core's src and the peer's dst
// hold different element counts.
InstRef sendrecv(const View& src, const View& dst, const DmaQueueOpts& opts = {}, Loc loc = Loc::current());

}  // namespace trnsim::kernels::nki
