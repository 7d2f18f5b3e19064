// Functional semantics: execute() and make_machine_state(). Rule checks live in check.cpp.
#include "sim/isa/semantics.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sim/base/error.h"
#include "sim/isa/alu.h"
#include "sim/isa/element.h"
#include "sim/isa/int_range.h"
#include "sim/isa/mx_pair_cache.h"
#include "sim/isa/operand_view.h"
#include "sim/isa/shuffle_mask.h"
#include "sim/isa/top8.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/host_threads.h"
#include "sim/numerics/mx.h"
#include "sim/numerics/mx_isa.h"
#include "sim/numerics/pair_range.h"
#include "sim/numerics/pe_matmul.h"
#include "sim/numerics/transpose.h"

namespace trnsim::isa {
namespace {

// Bytes of dequantized nc_matmul_mx operands kept per thread: a block's K tiles of both operands (6 moving
// 128 x 512 and 3 stationary 128 x 128 tiles in nki-library's default blocks, about 5 MiB) fit.
constexpr size_t kMxPairCacheBytes = size_t{16} << 20;

num::Fp8Format fp8_format(DType t) {
  return (t == DType::FP8_E5M2 || t == DType::FP8_E5M2_X4) ? num::Fp8Format::E5M2 : num::Fp8Format::E4M3FN;
}

// Row of the E8M0 scale of MX group g (8 partitions each) inside its scale operand: scales sit in rows 0-3 of
// the group's 32-partition quadrant, shifted by the packing offset (docs/facts/trainium-hardware.md §2.2).
uint32_t mx_scale_row(uint32_t g, uint32_t offset) {
  return (g / 4) * 32 + g % 4 + offset;
}

// Calls f(address, bytes) for the byte runs of `v` in element order (row-major over rows x cols): runs of
// columns whose elements (of `es` bytes) are consecutive in memory, found once from row 0 (every row has the
// same column offsets).
template <class F>
void for_runs(OperandView& v, uint32_t es, F&& f) {
  const uint64_t cols = v.cols();
  if (v.rows() == 0 || cols == 0) return;
  std::vector<std::pair<uint64_t, uint64_t>> runs;  // (first column, columns)
  for (uint64_t c = 0; c < cols; ++c)
    if (!runs.empty() && v.at(0, c) == v.at(0, c - 1) + es)
      ++runs.back().second;
    else
      runs.push_back({c, 1});
  for (uint32_t r = 0; r < v.rows(); ++r)
    for (const auto& [c, n] : runs) f(v.at(r, c), n * es);
}

class Exec {
 public:
  Exec(const Instruction& inst, int core, const Program& program, const Limits& limits, MachineState& state)
      : inst_(inst),
        core_(core),
        program_(program),
        limits_(limits),
        state_(state),
        prefix_(fmt::format("{} on {}", opcode_name(inst.op), engine_name(inst.engine))) {}

  void run();

 private:
  OperandView view(int slot, bool indirect = false, int core = -1) {
    const auto& names = operand_names(inst_.op);
    const char* name = slot < static_cast<int>(names.size()) ? names[slot] : "operand";
    return OperandView(slot == moved_slot_    ? moved_
                       : slot == paired_slot_ ? paired_
                                              : inst_.ops[slot],
                       core < 0 ? core_ : core, program_, limits_, state_, prefix_, name, indirect);
  }
  void apply_scalar_offset();
  const char* name(int slot) const { return operand_names(inst_.op)[slot]; }
  [[noreturn]] void fail(const char* rule, const std::string& details) const {
    throw RuleError(fmt::format("{}: {}: {}", prefix_, rule, details));
  }
  void same_shape(const OperandView& a, int sa, const OperandView& b, int sb) const {
    if (a.rows() != b.rows() || a.cols() != b.cols())
      fail("shape", fmt::format("{} is [{}, {}] but {} is [{}, {}]", name(sa), a.rows(), a.cols(), name(sb),
                                b.rows(), b.cols()));
  }
  // A top-8 operand: [rows, 8].
  void top8_shape(const OperandView& v, int slot, uint32_t rows) const {
    if (v.rows() != rows || v.cols() != top8::kWidth)
      fail("shape", fmt::format("{} must be [{}, {}], got [{}, {}]", name(slot), rows, top8::kWidth, v.rows(),
                                v.cols()));
  }
  void vector_shape(const OperandView& v, int slot, uint32_t rows) const {
    if (v.rows() != rows || v.cols() != 1)
      fail("shape", fmt::format("{} must be [{}, 1], got [{}, {}]", name(slot), rows, v.rows(), v.cols()));
  }
  // Operand0 per partition: the immediate, or the [rows, 1] vector in `slot` when kOperand0Vector is set.
  std::vector<float> per_partition(float imm, int slot, uint32_t rows) {
    std::vector<float> out(rows, imm);
    if (!inst_.has(kOperand0Vector)) return out;
    OperandView v = view(slot);
    vector_shape(v, slot, rows);
    for (uint32_t i = 0; i < rows; ++i) out[i] = v.load(i, 0);
    return out;
  }
  // Element move with the DMA/copy cast rule: bit copy when dtypes match, else src -> FP32 -> dst (RNE).
  void move(const OperandView& d, uint8_t* dp, const OperandView& s, const uint8_t* sp) const {
    if (d.dtype() == s.dtype()) {
      std::memcpy(dp, sp, dtype_size(d.dtype()));
      return;
    }
    if (is_x4(d.dtype()) || is_x4(s.dtype()))
      fail("dtype",
           fmt::format("cannot cast between {} and {}", dtype_name(s.dtype()), dtype_name(d.dtype())));
    d.store_value(dp, s.load_value(sp));
  }

  // The scales of MX group g (one per column of xs's scale row for g) as FP32.
  static void mx_group_scales(OperandView& xs, uint32_t g, uint32_t scale_offset, float* out) {
    const uint32_t row = mx_scale_row(g, scale_offset);
    for (uint64_t c = 0; c < xs.cols(); ++c) out[c] = num::e8m0_to_f32(*xs.at(row, c));
  }

  // The E8M0 scale bytes of MX groups 0 .. groups - 1 (group g's row of xs, one byte per column), group after
  // group.
  static std::vector<uint8_t> mx_scale_bytes(OperandView& xs, uint32_t groups, uint32_t scale_offset) {
    const uint64_t cols = xs.cols();
    std::vector<uint8_t> out(groups * cols);
    if (groups == 0 || cols == 0) return out;
    const uint32_t row0 = mx_scale_row(0, scale_offset);
    bool run = true;  // consecutive columns (the column offsets are the same in every row)
    for (uint64_t c = 1; c < cols && run; ++c) run = xs.at(row0, c) == xs.at(row0, 0) + c;
    for (uint32_t g = 0; g < groups; ++g) {
      const uint32_t row = mx_scale_row(g, scale_offset);
      if (run) {
        std::memcpy(&out[g * cols], xs.at(row, 0), cols);
        continue;
      }
      for (uint64_t c = 0; c < cols; ++c) out[g * cols + c] = *xs.at(row, c);
    }
    return out;
  }

  // Large tiles (an MX matmul is 512 x 128 x 512) are split over two host threads; the bytes do not change.
  static int pe_threads(int k, uint64_t m, uint64_t n) {
    return static_cast<uint64_t>(k) * m * n >= (uint64_t{1} << 22) ? num::host_split_threads() : 1;
  }

  // Whether x's first n columns are consecutive 4-byte elements (the column offsets are the same in every
  // row).
  static bool consecutive_4byte_cols(OperandView& x, uint64_t n) {
    for (uint64_t j = 1; j < n; ++j)
      if (x.at(0, j) != x.at(0, 0) + 4 * j) return false;
    return true;
  }

  // Whether no two elements of x share a byte (contiguous rows in distinct partitions, or HBM rows that do
  // not overlap): host threads may then write x's elements in any order, each byte by one thread.
  static bool distinct_elements(const OperandView& x) {
    const int64_t stride = x.ap().partition_stride;
    return x.contiguous_rows() && (x.ap().space != MemSpace::HBM || x.rows() == 1 ||
                                   static_cast<uint64_t>(stride < 0 ? -stride : stride) >= x.cols());
  }

  // Parts for host_for over `units` independent pieces of an instruction moving `elements` elements: one
  // piece a part when the instruction is large (at least 32 Ki elements) and the host has two threads.
  static int split_parts(uint64_t units, uint64_t elements) {
    return elements >= (1u << 15) && num::host_split_threads() > 1 ? static_cast<int>(units) : 1;
  }

  // An FP32 tile [m, n] (m, n > 0) whose columns are consecutive floats.
  static bool fp32_rows(OperandView& dst, uint64_t m, uint64_t n) {
    return dst.dtype() == DType::F32 && m > 0 && n > 0 && consecutive_4byte_cols(dst, n);
  }

  // An FP32 PSUM tile [m, n] (m, n > 0) whose columns are consecutive floats, in rows at a fixed stride that
  // keeps them apart, FP32-aligned: pe_matmul can work in the tile itself (the same arithmetic on the same
  // values, without copying the tile out and back). Its first element and row stride in floats (*ld), else
  // nullptr.
  static float* psum_in_place(OperandView& dst, uint64_t m, uint64_t n, int64_t* ld) {
    if (!fp32_rows(dst, m, n)) return nullptr;
    uint8_t* c0 = dst.at(0, 0);
    const int64_t stride = m > 1 ? dst.at(1, 0) - c0 : static_cast<int64_t>(4 * n);
    if (stride < static_cast<int64_t>(4 * n) || stride % 4 != 0 ||
        reinterpret_cast<uintptr_t>(c0) % alignof(float) != 0)
      return nullptr;
    *ld = stride / 4;
    return reinterpret_cast<float*>(c0);
  }

  // dst (+)= a^T b with a [k, m], b [k, n] row-major FP32, via the shared PE arithmetic.
  void pe_accumulate(OperandView& dst, const std::vector<float>& a, const std::vector<float>& b, int k,
                     uint64_t m, uint64_t n) {
    const bool acc = inst_.has(kAccumulate);
    // An FP32 PSUM tile whose columns are consecutive floats (the column offsets are the same in every row)
    // is copied row by row; anything else goes element by element.
    const bool rows_contiguous = fp32_rows(dst, m, n);
    const int threads = pe_threads(k, m, n);
    int64_t ldc = 0;
    if (float* c0 = rows_contiguous ? psum_in_place(dst, m, n, &ldc) : nullptr) {
      num::pe_matmul(a.data(), static_cast<int64_t>(m), b.data(), static_cast<int64_t>(n), c0, ldc, k,
                     static_cast<int>(m), static_cast<int>(n), acc, threads);
      return;
    }
    // Scratch reused across instructions: pe_matmul writes every element (from +0 unless accumulating).
    static thread_local std::vector<float> c;
    c.resize(m * n);
    if (acc)
      for (uint64_t i = 0; i < m; ++i) {
        if (rows_contiguous) {
          std::memcpy(&c[i * n], dst.at(static_cast<uint32_t>(i), 0), 4 * n);
          continue;
        }
        for (uint64_t j = 0; j < n; ++j) c[i * n + j] = dst.load(static_cast<uint32_t>(i), j);
      }
    num::pe_matmul(a.data(), static_cast<int64_t>(m), b.data(), static_cast<int64_t>(n), c.data(),
                   static_cast<int64_t>(n), k, static_cast<int>(m), static_cast<int>(n), acc, threads);
    for (uint64_t i = 0; i < m; ++i) {
      if (rows_contiguous) {
        std::memcpy(dst.at(static_cast<uint32_t>(i), 0), &c[i * n], 4 * n);
        continue;
      }
      for (uint64_t j = 0; j < n; ++j) dst.store(static_cast<uint32_t>(i), j, c[i * n + j]);
    }
  }

  void dma_copy();
  void transpose(int src_slot);
  void gather_transpose();
  void outer_transpose();
  void matmul();
  void matmul_mx();
  std::optional<std::vector<std::pair<int, int>>> matmul_mx_pairs(OperandView& dst, OperandView& st,
                                                                  OperandView& mv, OperandView& ss,
                                                                  OperandView& ms);
  void quantize_mx();
  void activation();
  void tensor_tensor();
  void tensor_scalar();
  void tensor_reduce();
  void tensor_copy();
  void memset();
  void iota();
  void select();
  void sendrecv();
  void scalar_tensor_tensor();
  void bn_stats();
  void bn_aggr();
  void affine_select();
  void max8();
  void match8(bool replace);
  void tensor_tensor_scan();
  void tensor_partition_reduce();
  void nc_n_gather();
  void nonzero_with_count();
  void nc_stream_shuffle();

  const Instruction& inst_;
  int core_;
  const Program& program_;
  const Limits& limits_;
  MachineState& state_;
  std::string prefix_;
  int moved_slot_ = -1;  // the operand a scalar_offset moved, and its moved pattern
  AccessPattern moved_{};
  // With oob_mode skip: the other operand's rows that go with the moved pattern's rows inside the tensor
  // (skip_all_: none of them is).
  int paired_slot_ = -1;
  AccessPattern paired_{};
  bool skip_all_ = false;
  bool skip_outside(int target, bool huge, int64_t base, int64_t flo, int64_t fhi, int64_t es, int64_t total);
};

// Moves the scalar_offset's target pattern by v tensor rows (dma_copy with a scalar_offset_stride: by v times
// that many bytes); the moved bytes must stay inside the tensor.
void Exec::apply_scalar_offset() {
  const int slot = scalar_offset_slot(inst_);
  if (slot < 0 || !inst_.ops[slot].present()) return;
  const int target = scalar_offset_target(inst_);
  OperandView sv = view(slot);
  if (sv.rows() != 1 || sv.cols() != 1)
    fail("shape", fmt::format("scalar_offset must be [1, 1], got [{}, {}]", sv.rows(), sv.cols()));
  if (sv.dtype() != DType::I32 && sv.dtype() != DType::U32)
    fail("dtype", fmt::format("scalar_offset must be int32 or uint32, got {}", dtype_name(sv.dtype())));
  const AccessPattern& ap = inst_.ops[target];
  if (ap.space != MemSpace::HBM)
    fail("connectivity",
         fmt::format("scalar_offset moves an HBM access pattern; {} is not in HBM", name(target)));
  const TensorDecl& t = program_.tensors.at(ap.tensor);
  int64_t total = dtype_size(t.dtype);
  for (int64_t d : t.shape) total *= d;
  const int64_t stride = inst_.op == Opcode::DmaCopy ? inst_.iota_steps[0] : 0;
  if (stride < 0) fail("scalar_offset", fmt::format("scalar_offset_stride must be >= 0, got {}", stride));
  const int64_t row_bytes = stride != 0                          ? stride
                            : t.shape.empty() || t.shape[0] == 0 ? total
                                                                 : total / t.shape[0];
  const int64_t v = sv.load_int(0, 0);
  // Byte range of the pattern relative to its offset.
  const int64_t es = dtype_size(ap.dtype);
  // [flo, fhi]: the free dims' span (one row); [lo, hi]: with the rows' span added.
  int64_t flo = 0, fhi = 0;
  for (int d = 0; d < ap.ndim; ++d) {
    const int64_t span = ap.strides[d] * static_cast<int64_t>(ap.sizes[d] - 1) * es;
    (span < 0 ? flo : fhi) += span;
  }
  const int64_t rows_span = ap.partition_stride * (static_cast<int64_t>(ap.partitions) - 1) * es;
  const int64_t lo = flo + std::min<int64_t>(0, rows_span), hi = fhi + std::max<int64_t>(0, rows_span);
  const int64_t base = ap.offset_bytes + v * row_bytes;
  const bool huge = v < -(int64_t{1} << 40) / std::max<int64_t>(1, row_bytes) ||
                    v > (int64_t{1} << 40) / std::max<int64_t>(1, row_bytes);
  if (huge || base + lo < 0 || base + hi + es > total) {
    // oob_mode skip: a dma_copy's rows (partitions of the pattern) outside the tensor are skipped, their
    // destination unchanged, as vector_offset rows are (NKI's oob_mode: skip the out-of-bounds accesses).
    if (inst_.op == Opcode::DmaCopy && inst_.has(kOobSkip) &&
        skip_outside(target, huge, base, flo, fhi, es, total))
      return;
    const std::string by =
        stride != 0
            ? fmt::format("{} steps of {} bytes (scalar_offset_stride), outside tensor '{}' [{} bytes]", v,
                          row_bytes, t.name, total)
            : fmt::format("{} rows of {} bytes, outside tensor '{}' [{} rows]", v, row_bytes, t.name,
                          t.shape.empty() ? 0 : t.shape[0]);
    fail("scalar_offset bounds",
         fmt::format("scalar_offset = {} moves {} by {}{}", v, name(target), by,
                     inst_.has(kOobSkip) ? " (oob_mode skip skips the rows outside only when both sides of a "
                                           "dma_copy have the same rows and elements per row)"
                                         : ""));
  }
  moved_ = ap;
  moved_.offset_bytes = base;
  moved_slot_ = target;
}

// The rows of the moved pattern (target, at `base`; its free dims span [flo, fhi] bytes) inside the tensor's
// `total` bytes are one run (the rows move by a fixed stride): the copy keeps those and the other operand's
// rows with the same numbers, or nothing. False when the two sides' rows do not pair up (other shapes).
bool Exec::skip_outside(int target, bool huge, int64_t base, int64_t flo, int64_t fhi, int64_t es,
                        int64_t total) {
  const AccessPattern& ap = inst_.ops[target];
  const int other = target == 0 ? 1 : 0;
  const AccessPattern& op = inst_.ops[other];
  if (op.partitions != ap.partitions || op.free_elements() != ap.free_elements()) return false;
  if (huge) {  // (moved by more than 1 TiB: every row is outside)
    skip_all_ = true;
    return true;
  }
  const int64_t step = ap.partition_stride * es;
  int64_t first = -1, n = 0;
  for (int64_t p = 0; p < static_cast<int64_t>(ap.partitions); ++p) {
    const int64_t at = base + p * step;
    if (at + flo >= 0 && at + fhi + es <= total) {
      if (first < 0) first = p;
      if (p != first + n) return false;  // (not one run: cannot be, for a fixed stride)
      ++n;
    }
  }
  if (n == 0) {
    skip_all_ = true;
    return true;
  }
  moved_ = ap;
  moved_.offset_bytes = base + first * step;
  moved_.partitions = static_cast<uint32_t>(n);
  moved_slot_ = target;
  paired_ = op;
  if (op.space == MemSpace::HBM)
    paired_.offset_bytes += first * op.partition_stride * static_cast<int64_t>(dtype_size(op.dtype));
  else
    paired_.partition_start += static_cast<uint32_t>(first);
  paired_.partitions = static_cast<uint32_t>(n);
  paired_slot_ = other;
  return true;
}

void Exec::run() {
  if (inst_.op == Opcode::DmaCopy || inst_.op == Opcode::DmaTranspose) apply_scalar_offset();
  if (skip_all_) return;  // oob_mode skip: every row of the moved pattern is outside its tensor
  switch (inst_.op) {
    case Opcode::DmaCopy:
      return dma_copy();
    case Opcode::DmaTranspose:
      if (inst_.ops[3].present()) return gather_transpose();
      if (inst_.has(kTransposeOuterAxes)) return outer_transpose();
      return transpose(1);
    case Opcode::NcMatmul:
      return matmul();
    case Opcode::NcMatmulMx:
      return matmul_mx();
    case Opcode::QuantizeMx:
      return quantize_mx();
    case Opcode::NcTranspose:
      return transpose(1);
    case Opcode::Activation:
      return activation();
    case Opcode::TensorTensor:
      return tensor_tensor();
    case Opcode::TensorScalar:
    case Opcode::TensorScalarReduce:
      return tensor_scalar();
    case Opcode::TensorReduce:
      return tensor_reduce();
    case Opcode::TensorCopy:
      return tensor_copy();
    case Opcode::Memset:
      return memset();
    case Opcode::Iota:
      return iota();
    case Opcode::Select:
      return select();
    case Opcode::CoreBarrier:
      return;  // ordering only: the SystemC model handles the semaphores
    case Opcode::SendRecv:
      return sendrecv();
    case Opcode::ScalarTensorTensor:
      return scalar_tensor_tensor();
    case Opcode::BnStats:
      return bn_stats();
    case Opcode::BnAggr:
      return bn_aggr();
    case Opcode::AffineSelect:
      return affine_select();
    case Opcode::Max8:
      return max8();
    case Opcode::NcFindIndex8:
      return match8(false);
    case Opcode::NcMatchReplace8:
      return match8(true);
    case Opcode::TensorTensorScan:
      return tensor_tensor_scan();
    case Opcode::TensorPartitionReduce:
      return tensor_partition_reduce();
    case Opcode::NcNGather:
      return nc_n_gather();
    case Opcode::NonzeroWithCount:
      return nonzero_with_count();
    case Opcode::NcStreamShuffle:
      return nc_stream_shuffle();
  }
  fail("opcode", fmt::format("unknown opcode {}", static_cast<int>(inst_.op)));
}

void Exec::dma_copy() {
  const bool indirect = inst_.ops[2].present();
  const bool scatter = indirect && inst_.has(kIndirectDst);
  OperandView dst = view(0, scatter);
  OperandView src = view(1, indirect && !scatter);
  const bool acc = inst_.has(kDmaAccumulate);
  if (acc && (is_x4(dst.dtype()) || is_x4(src.dtype())))
    fail("dtype", "DMA accumulate cannot use MX x4 dtypes");
  auto apply = [&](uint8_t* dp, const uint8_t* sp) {
    if (acc)
      dst.store_value(dp, dst.load_value(dp) + src.load_value(sp));
    else
      move(dst, dp, src, sp);
  };
  // Snapshot the source first, so overlapping source and destination behave as a copy of the old values.
  const uint32_t ss = dtype_size(src.dtype());
  // Plain copies of whole byte runs (same dtype, rows of consecutive elements on both sides).
  const bool bulk = !acc && src.dtype() == dst.dtype() && src.cols() == dst.cols() && src.contiguous_rows() &&
                    dst.contiguous_rows();
  if (!indirect) {
    const uint64_t n = static_cast<uint64_t>(src.rows()) * src.cols();
    const uint64_t nd = static_cast<uint64_t>(dst.rows()) * dst.cols();
    if (n != nd) fail("element count", fmt::format("src has {} elements, dst has {}", n, nd));
    // Different memories (another tensor, SBUF vs HBM, ...) cannot overlap: row runs go straight across.
    const bool apart = src.ap().space != dst.ap().space ||
                       (src.ap().space == MemSpace::HBM && src.ap().tensor != dst.ap().tensor);
    if (bulk && apart && src.rows() == dst.rows()) {
      const uint64_t rb = src.cols() * ss;
      for (uint32_t r = 0; r < src.rows(); ++r) std::memcpy(dst.at(r, 0), src.at(r, 0), rb);
      return;
    }
    // A cast: the source rows as FP32 first (the snapshot), then the
    // destination rows from them in row-major element order; element for element the conversions of move().
    if (!acc && src.dtype() != dst.dtype() && !is_x4(src.dtype()) && !is_x4(dst.dtype())) {
      std::vector<float> vals(n);
      for (uint32_t r = 0; r < src.rows(); ++r) src.load_row(r, &vals[uint64_t{r} * src.cols()]);
      for (uint32_t r = 0; r < dst.rows(); ++r) dst.store_row(r, &vals[uint64_t{r} * dst.cols()]);
      return;
    }
    std::vector<uint8_t> tmp(n * ss);
    if (bulk) {
      const uint64_t rb = src.cols() * ss;
      for (uint32_t r = 0; r < src.rows(); ++r) std::memcpy(&tmp[r * rb], src.at(r, 0), rb);
      for (uint32_t r = 0; r < dst.rows(); ++r) std::memcpy(dst.at(r, 0), &tmp[r * rb], rb);
      return;
    }
    // Element order is row-major over each side's (rows, cols); runs of elements that are consecutive in
    // memory (the same in every row) move with one memcpy each.
    uint64_t e = 0;
    for_runs(src, ss, [&](uint8_t* p, uint64_t bytes) {
      std::memcpy(&tmp[e], p, bytes);
      e += bytes;
    });
    if (!acc && src.dtype() == dst.dtype()) {
      e = 0;
      for_runs(dst, ss, [&](uint8_t* p, uint64_t bytes) {
        std::memcpy(p, &tmp[e], bytes);
        e += bytes;
      });
      return;
    }
    e = 0;
    for (uint32_t r = 0; r < dst.rows(); ++r)
      for (uint64_t c = 0; c < dst.cols(); ++c, ++e) apply(dst.at(r, c), &tmp[e * ss]);
    return;
  }
  OperandView idx = view(2);
  if (idx.dtype() != DType::I32 && idx.dtype() != DType::U32)
    fail("dtype", fmt::format("vector_offset must be int32 or uint32, got {}", dtype_name(idx.dtype())));
  if (src.rows() != dst.rows() || src.cols() != dst.cols())
    fail("shape", fmt::format("indirect DMA needs src and dst of one shape: src [{}, {}], dst [{}, {}]",
                              src.rows(), src.cols(), dst.rows(), dst.cols()));
  vector_shape(idx, 2, src.rows());
  OperandView& hbm = scatter ? dst : src;
  if (hbm.ap().space != MemSpace::HBM)
    fail("connectivity",
         fmt::format("indirect DMA indexes rows of an HBM tensor; {} is in {}", scatter ? "dst" : "src",
                     hbm.ap().space == MemSpace::SBUF ? "SBUF" : "PSUM"));
  const std::string& tname = program_.tensors[hbm.ap().tensor].name;
  const uint64_t cols = src.cols();
  std::vector<uint8_t> tmp(cols * ss);
  for (uint32_t i = 0; i < src.rows(); ++i) {
    const int64_t row = idx.load_int(i, 0);
    if (bulk) {
      // A contiguous row is inside the tensor if its first and last elements are.
      uint8_t* h0 = hbm.at_tensor_row(row, 0);
      if (h0 != nullptr && hbm.at_tensor_row(row, cols - 1) != nullptr) {
        uint8_t* s0 = scatter ? src.at(i, 0) : h0;
        std::memcpy(tmp.data(), s0, cols * ss);
        std::memcpy(scatter ? h0 : dst.at(i, 0), tmp.data(), cols * ss);
        continue;
      }
    }
    bool oob = false;
    for (uint64_t j = 0; j < cols && !oob; ++j) {
      const uint8_t* sp = scatter ? src.at(i, j) : src.at_tensor_row(row, j);
      if (sp == nullptr || (scatter && dst.at_tensor_row(row, j) == nullptr))
        oob = true;
      else
        std::memcpy(&tmp[j * ss], sp, ss);
    }
    if (oob) {
      if (inst_.has(kOobSkip)) continue;  // the destination row keeps its old value
      fail("indirect bounds", fmt::format("vector_offset[{}] = {} is outside rows [0, {}) of tensor '{}'", i,
                                          row, hbm.tensor_rows(), tname));
    }
    for (uint64_t j = 0; j < cols; ++j)
      apply(scatter ? dst.at_tensor_row(row, j) : dst.at(i, j), &tmp[j * ss]);
  }
}

// dst[f, p] = src[p, f] over the 2-D view (rows x flattened free elements), bit for bit.
void Exec::transpose(int src_slot) {
  OperandView dst = view(0);
  OperandView src = view(src_slot);
  if (dst.dtype() != src.dtype())
    fail("dtype", fmt::format("transpose keeps the dtype: {} is {}, dst is {}", name(src_slot),
                              dtype_name(src.dtype()), dtype_name(dst.dtype())));
  if (dst.rows() != src.cols() || dst.cols() != src.rows())
    fail("shape", fmt::format("{} [{}, {}] transposes to [{}, {}], dst is [{}, {}]", name(src_slot),
                              src.rows(), src.cols(), src.cols(), src.rows(), dst.rows(), dst.cols()));
  const uint32_t ds = dtype_size(dst.dtype());
  const uint32_t rows = src.rows();
  const uint64_t cols = src.cols();
  std::vector<uint8_t> tmp;  // the snapshot of overlapping operands
  // Fixed-size element copies (the compiler turns them into single moves); operands that cannot overlap
  // (different memories, or disjoint bytes) need no snapshot.
  const bool apart = src.ap().space != dst.ap().space || !src.may_overlap(dst);
  const auto run = [&](auto elem) {
    constexpr size_t n = sizeof(elem);
    if (apart) {
      // Element (r, c) of a view is at row pointer r + column offset c: both tables once, then 32 x 32
      // tiles so both sides stay in cache (SBUF partitions are far apart in memory).
      std::vector<uint8_t*> sp(rows), dp(cols);
      std::vector<int64_t> sc(cols), dc(rows);
      for (uint32_t p = 0; p < rows; ++p) sp[p] = src.at(p, 0), dc[p] = dst.at(0, p) - dst.at(0, 0);
      for (uint64_t f = 0; f < cols; ++f)
        dp[f] = dst.at(static_cast<uint32_t>(f), 0), sc[f] = src.at(0, f) - src.at(0, 0);
      constexpr uint64_t kTile = 32;
      // Large transposes split the source rows' tiles over host threads (a large transpose has many source
      // rows: its dst has at most 128 partitions), one row tile a part, when no two dst elements share a
      // byte: each byte is then written by one thread.
      const uint64_t row_tiles = (rows + kTile - 1) / kTile;
      const int parts =
          distinct_elements(dst) ? split_parts(row_tiles, static_cast<uint64_t>(rows) * cols) : 1;
      // Tiles of 32 x 32: each tile's source rows are read into a local buffer, transposed there and written
      // out row by row (whole rows where a side's elements are consecutive, else element by element through
      // the column offsets). Rows of SBUF and PSUM are a multiple of 4 KiB apart, so a tile walked in place,
      // down the partitions, keeps evicting its own lines from L1. The writes happen in the same order as an
      // element-by-element walk (destination row f, then partition p), so overlapping destination bytes end
      // the same.
      const bool src_rows = src.contiguous_rows(), dst_rows = dst.contiguous_rows();
      const bool vector16 = num::has_transpose32_u16();
      // dst rows made of runs of `run` consecutive elements from a multiple of `run` (a transpose into
      // every other pair of a PSUM row): written a run at a time.
      uint64_t run = 1;
      while (run < kTile && [&] {
        for (uint64_t i = 0; i < rows; ++i)
          if ((i & (2 * run - 1)) != 0 && dc[i] != dc[i - 1] + static_cast<int64_t>(n)) return false;
        return true;
      }())
        run *= 2;
      num::host_for(parts, [&](int t) {
        const uint64_t pa = row_tiles * t / parts * kTile;
        const uint64_t pb = std::min<uint64_t>(rows, row_tiles * (t + 1) / parts * kTile);
        decltype(elem) in[kTile][kTile], out[kTile][kTile];
        for (uint64_t p0 = pa; p0 < pb; p0 += kTile)
          for (uint64_t f0 = 0; f0 < cols; f0 += kTile) {
            const uint64_t ph = std::min<uint64_t>(pb - p0, kTile), fw = std::min<uint64_t>(cols - f0, kTile);
            const bool whole = ph == kTile && fw == kTile;
            if constexpr (n == 2) {  // whole 16-bit tiles in vector registers, straight between the rows
              if (whole && vector16 && src_rows && dst_rows) {
                const uint16_t* s16[kTile];
                uint16_t* d16[kTile];
                for (uint64_t i = 0; i < kTile; ++i) {
                  s16[i] = reinterpret_cast<const uint16_t*>(sp[p0 + i] + sc[f0]);
                  d16[i] = reinterpret_cast<uint16_t*>(dp[f0 + i] + dc[p0]);
                }
                num::transpose32_u16(s16, d16);
                continue;
              }
            }
            // Row pointers and offsets in locals: the element stores below could alias the tables' own
            // storage, and the compiler would reload them for every element.
            const int64_t* scf = sc.data() + f0;
            for (uint64_t i = 0; i < ph; ++i) {
              const uint8_t* srow = sp[p0 + i];
              if (src_rows) {
                std::memcpy(in[i], srow + scf[0], fw * n);
                continue;
              }
              for (uint64_t j = 0; j < fw; ++j) std::memcpy(&in[i][j], srow + scf[j], n);
            }
            bool done = false;
            if constexpr (n == 2) {
              if (whole && vector16) {
                const uint16_t* s16[kTile];
                uint16_t* d16[kTile];
                for (uint64_t i = 0; i < kTile; ++i) s16[i] = in[i], d16[i] = out[i];
                num::transpose32_u16(s16, d16);
                done = true;
              }
            }
            if (!done)
              for (uint64_t j = 0; j < fw; ++j)
                for (uint64_t i = 0; i < ph; ++i) out[j][i] = in[i][j];
            const int64_t* dcp = dc.data() + p0;
            for (uint64_t j = 0; j < fw; ++j) {
              uint8_t* drow = dp[f0 + j];
              if (dst_rows) {
                std::memcpy(drow + dcp[0], out[j], ph * n);
                continue;
              }
              const auto runs = [&](auto unit) {
                constexpr size_t u = sizeof(unit);
                for (uint64_t i = 0; i < ph; i += u / n) std::memcpy(drow + dcp[i], &out[j][i], u);
              };
              if (run * n >= 16 && ph % (16 / n) == 0)
                runs(std::array<uint8_t, 16>{});
              else if (run * n >= 8 && ph % (8 / n) == 0)
                runs(uint64_t{});
              else if (run * n >= 4 && ph % (4 / n) == 0)
                runs(uint32_t{});
              else
                for (uint64_t i = 0; i < ph; ++i) std::memcpy(drow + dcp[i], &out[j][i], n);
            }
          }
      });
      return;
    }
    tmp.resize(static_cast<size_t>(rows) * cols * n);
    for (uint32_t p = 0; p < rows; ++p)
      for (uint64_t f = 0; f < cols; ++f) std::memcpy(&tmp[(p * cols + f) * n], src.at(p, f), n);
    for (uint32_t p = 0; p < rows; ++p)
      for (uint64_t f = 0; f < cols; ++f)
        std::memcpy(dst.at(static_cast<uint32_t>(f), p), &tmp[(p * cols + f) * n], n);
  };
  if (ds == 2) return run(uint16_t{});
  if (ds == 4) return run(uint32_t{});
  if (ds == 1) return run(uint8_t{});
  tmp.resize(static_cast<size_t>(rows) * cols * ds);
  for (uint32_t p = 0; p < rows; ++p)
    for (uint64_t f = 0; f < cols; ++f) std::memcpy(&tmp[(p * cols + f) * ds], src.at(p, f), ds);
  for (uint32_t p = 0; p < rows; ++p)
    for (uint64_t f = 0; f < cols; ++f)
      std::memcpy(dst.at(static_cast<uint32_t>(f), p), &tmp[(p * cols + f) * ds], ds);
}

// dma_transpose with a vector_offset (NKI's indirect transpose): src row r is the row index[r % P, r / P]
// of src's row pattern (the index steps by the pattern's row stride, as an indirect dma_copy's does), and
// dst[p, r] = that row's element p, bit for bit.
void Exec::gather_transpose() {
  OperandView dst = view(0);
  OperandView src = view(1, true);
  OperandView idx = view(3);
  if (dst.dtype() != src.dtype() || dtype_size(dst.dtype()) != 2)
    fail("dtype", fmt::format("dma_transpose moves 2-byte dtypes unchanged: src {}, dst {}",
                              dtype_name(src.dtype()), dtype_name(dst.dtype())));
  if (idx.dtype() != DType::I32 && idx.dtype() != DType::U32)
    fail("dtype", fmt::format("vector_offset must be int32 or uint32, got {}", dtype_name(idx.dtype())));
  if (src.ap().space != MemSpace::HBM)
    fail("connectivity", "an indirect dma_transpose gathers rows of an HBM tensor; src is not in HBM");
  const uint32_t rows = src.rows();
  if (dst.cols() != rows || dst.rows() != src.cols())
    fail("shape", fmt::format("src [{}, {}] gathers and transposes to [{}, {}], dst is [{}, {}]", rows,
                              src.cols(), src.cols(), rows, dst.rows(), dst.cols()));
  const uint64_t entries = static_cast<uint64_t>(idx.rows()) * idx.cols();
  if (entries < rows)
    fail("shape", fmt::format("vector_offset [{}, {}] holds {} indices, the gather needs {}", idx.rows(),
                              idx.cols(), entries, rows));
  const std::string& tname = program_.tensors[src.ap().tensor].name;
  const uint32_t parts = dst.rows();
  // Each gathered row once: its base when it lies whole inside the tensor, else element by element (which
  // fails at the first entry with an element outside, as the copy in entry order would).
  std::vector<const uint8_t*> base(rows);
  std::vector<int64_t> index(rows);
  for (uint32_t r = 0; r < rows; ++r) {
    index[r] = idx.load_int(r % idx.rows(), r / idx.rows());
    base[r] = src.tensor_row(index[r]);
    if (base[r] != nullptr) continue;
    for (uint32_t p = 0; p < parts; ++p)
      if (src.at_tensor_row(index[r], p) == nullptr)
        fail("indirect bounds",
             fmt::format("vector_offset entry {} = {} is outside rows [0, {}) of tensor '{}'", r, index[r],
                         src.tensor_rows(), tname));
  }
  // dst[p, r] = row r's element p, by tiles of 64 entries: the tile's rows are first copied whole (when each
  // is one byte run) into a buffer that stays in cache, so their memory is read by wide loads, then every dst
  // partition gets the tile's 64 consecutive columns (whole cache lines: SBUF partitions lie a power of two
  // apart, so lines written piecemeal would be evicted between the pieces).
  std::vector<uint8_t*> dp(parts);
  std::vector<int64_t> sc(parts), dc(rows);
  bool runs = true;  // each gathered row's elements are consecutive
  for (uint32_t p = 0; p < parts; ++p)
    dp[p] = dst.at(p, 0), sc[p] = src.col_offset(p), runs = runs && sc[p] == sc[0] + 2 * int64_t{p};
  for (uint32_t r = 0; r < rows; ++r) dc[r] = dst.at(0, r) - dst.at(0, 0);
  constexpr uint32_t kRows = 64;
  // Large gathers: one tile of 64 entries (dst columns) a part of a host split, when dst's elements are
  // apart.
  const uint32_t tiles = (rows + kRows - 1) / kRows;
  const int split = distinct_elements(dst) ? split_parts(tiles, static_cast<uint64_t>(rows) * parts) : 1;
  // Whole 32 x 32 blocks in vector registers, straight from the gathered rows to dst's rows, where each
  // gathered row and each dst row is one byte run, no dst byte is written twice and dst is not the gathered
  // tensor (each byte is then written once, from a source no write changes: the order does not matter).
  const bool vector16 = num::has_transpose32_u16() && runs && parts % 32 == 0 && dst.contiguous_rows() &&
                        distinct_elements(dst) &&
                        (dst.ap().space != MemSpace::HBM || dst.ap().tensor != src.ap().tensor);
  num::host_for(split, [&](int part) {
    std::vector<uint16_t> tile;
    const uint32_t ta = split == 1 ? 0 : part, tb = split == 1 ? tiles : part + 1;
    for (uint32_t t0 = ta * kRows; t0 < std::min(rows, tb * kRows); t0 += kRows) {
      uint32_t r0 = t0;
      const uint32_t r1 = std::min(rows, t0 + kRows);
      // Leading 32-row groups whose rows all lie whole inside the tensor go as blocks; the rest of the tile
      // as below.
      for (; vector16 && r0 + 32 <= r1; r0 += 32) {
        const uint8_t* const* b = base.data() + r0;
        if (!std::all_of(b, b + 32, [](const uint8_t* x) { return x != nullptr; })) break;
        for (uint32_t p0 = 0; p0 < parts; p0 += 32) {
          const uint16_t* s16[32];
          uint16_t* d16[32];
          for (uint32_t i = 0; i < 32; ++i) {
            s16[i] = reinterpret_cast<const uint16_t*>(b[i] + sc[p0]);
            d16[i] = reinterpret_cast<uint16_t*>(dp[p0 + i] + dc[r0]);
          }
          num::transpose32_u16(s16, d16);
        }
      }
      if (r0 >= r1) continue;
      tile.resize(static_cast<size_t>(kRows) * parts);
      for (uint32_t r = r0; r < r1; ++r) {
        uint16_t* t = &tile[static_cast<size_t>(r - r0) * parts];
        if (runs && base[r] != nullptr) {
          std::memcpy(t, base[r] + sc[0], 2 * size_t{parts});
          continue;
        }
        for (uint32_t p = 0; p < parts; ++p)
          std::memcpy(&t[p], base[r] != nullptr ? base[r] + sc[p] : src.at_tensor_row(index[r], p), 2);
      }
      // Pointers in locals: a store through dst's bytes could alias the tables, which would be reloaded.
      const int64_t* dcr = dc.data();
      for (uint32_t p = 0; p < parts; ++p) {
        uint8_t* drow = dp[p];
        const uint16_t* tp = tile.data() + p;
        for (uint32_t r = r0; r < r1; ++r)
          std::memcpy(drow + dcr[r], tp + static_cast<size_t>(r - r0) * parts, 2);
      }
    }
  });
}

// dma_transpose with axes (2, 1, 0) / (3, 1, 2, 0): src [A, C, D] (A its rows, C x D its free elements) to
// dst [D, C, A]: dst[d, c A + a] = src[a, c D + d], bit for bit (a snapshot first when the operands may
// overlap).
void Exec::outer_transpose() {
  OperandView dst = view(0);
  OperandView src = view(1);
  if (dst.dtype() != src.dtype())
    fail("dtype", fmt::format("transpose keeps the dtype: src is {}, dst is {}", dtype_name(src.dtype()),
                              dtype_name(dst.dtype())));
  const uint64_t A = src.rows(), D = dst.rows();
  if (D == 0 || src.cols() % D != 0 || dst.cols() != (src.cols() / D) * A)
    fail("shape",
         fmt::format("src [{}, {}] has no outer-axes transpose with {} dst partitions: dst is [{}, {}]", A,
                     src.cols(), D, dst.rows(), dst.cols()));
  const uint64_t C = src.cols() / D;
  const uint32_t es = dtype_size(dst.dtype());
  std::vector<uint8_t> tmp;
  const bool apart = src.ap().space != dst.ap().space || !src.may_overlap(dst);
  if (!apart) {
    tmp.resize(A * src.cols() * es);
    for (uint64_t a = 0; a < A; ++a)
      for (uint64_t j = 0; j < src.cols(); ++j)
        std::memcpy(&tmp[(a * src.cols() + j) * es], src.at(static_cast<uint32_t>(a), j), es);
  }
  for (uint64_t a = 0; a < A; ++a)
    for (uint64_t c = 0; c < C; ++c)
      for (uint64_t d = 0; d < D; ++d) {
        const uint64_t j = c * D + d;
        const uint8_t* sp = apart ? src.at(static_cast<uint32_t>(a), j) : &tmp[(a * src.cols() + j) * es];
        std::memcpy(dst.at(static_cast<uint32_t>(d), c * A + a), sp, es);
      }
}

// dst[m, n] (+)= sum_k stationary[k, m] * moving[k, n] through num::pe_matmul (the shared PE arithmetic: FP32
// fused multiply-add per product in ascending logical k, starting from the old PSUM value when accumulating).
// A BF16 PSUM tile (Trn3) is read up to FP32 and rounded back (RNE) on write.
void Exec::matmul() {
  OperandView dst = view(0);
  OperandView st = view(1);
  OperandView mv = view(2);
  const uint32_t kp = st.rows();
  if (mv.rows() != kp) fail("shape", fmt::format("stationary has {} partitions, moving {}", kp, mv.rows()));
  if (inst_.has(kIsTranspose)) {
    // Transpose mode: moving is the identity routing, dst[m, k] = stationary[k, m] bit for bit.
    if (mv.cols() != kp) fail("shape", fmt::format("transpose mode needs moving [{}, {}]", kp, kp));
    return transpose(1);
  }
  const uint32_t r = inst_.has(kDoubleRow) ? 2 : 1;
  if (r == 2 && (st.ap().ndim < 2 || st.ap().sizes[0] != 2 || mv.ap().ndim < 2 || mv.ap().sizes[0] != 2))
    fail("shape", "double_row needs stationary [K, 2, M] and moving [K, 2, N] (size-2 outermost free dim)");
  const uint64_t m_size = st.cols() / r, n_size = mv.cols() / r;
  if (dst.rows() != m_size || dst.cols() != n_size)
    fail("shape", fmt::format("dst must be [{}, {}], got [{}, {}]", m_size, n_size, dst.rows(), dst.cols()));
  // a[(h * kp + k) * M + m]: logical contraction index h * kp + k for double_row's two rows.
  std::vector<float> a(r * kp * m_size), b(r * kp * n_size);
  for (uint32_t h = 0; h < r; ++h)
    for (uint32_t k = 0; k < kp; ++k) {
      for (uint64_t m = 0; m < m_size; ++m) a[(h * kp + k) * m_size + m] = st.load(k, h * m_size + m);
      for (uint64_t n = 0; n < n_size; ++n) b[(h * kp + k) * n_size + n] = mv.load(k, h * n_size + n);
    }
  pe_accumulate(dst, a, b, static_cast<int>(r * kp), m_size, n_size);
}

// nc_matmul_mx on the PE's BF16 pair path (num::pe_matmul_pairs) with the operands dequantized straight into
// its layout: one pass over the FP8 bytes, no FP32 copy of them. Taken where the host has the pair path, both
// operands' x4 elements are consecutive and the PSUM tile is FP32 in place; columns whose values do not allow
// pairs are computed by the FP32 path (matmul_mx's own; pe_matmul gives both the same bits). False: not
// taken, nothing written.
std::optional<std::vector<std::pair<int, int>>> Exec::matmul_mx_pairs(OperandView& dst, OperandView& st,
                                                                      OperandView& mv, OperandView& ss,
                                                                      OperandView& ms) {
  const uint32_t kp = st.rows();
  const uint64_t m_size = st.cols(), n_size = mv.cols();
  int64_t ldc = 0;
  if (!num::pe_matmul_bf16_pairs() || n_size % 32 != 0 || m_size == 0 ||
      !consecutive_4byte_cols(st, m_size) || !consecutive_4byte_cols(mv, n_size))
    return std::nullopt;
  float* c0 = psum_in_place(dst, m_size, n_size, &ldc);
  if (c0 == nullptr) return std::nullopt;
  const uint32_t groups = kp / 8;
  const int64_t K = 4 * int64_t{kp}, K2 = K / 2;
  const num::Fp8Format fs = fp8_format(st.dtype()), fm = fp8_format(mv.dtype());
  // Images kept across instructions, served only while their bytes and scales are unchanged
  // (mx_pair_cache.h); per calling thread, as the scratch they replace.
  static thread_local MxPairCache cache(kMxPairCacheBytes);
  cache.begin();
  const std::vector<uint8_t> ssb = mx_scale_bytes(ss, groups, inst_.scale_offset),
                             msb = mx_scale_bytes(ms, groups, inst_.moving_scale_offset);
  std::vector<const uint8_t*> sr(kp), mr(kp);
  for (uint32_t k = 0; k < kp; ++k) sr[k] = st.at(k, 0), mr[k] = mv.at(k, 0);
  const auto a = cache.get({kp, m_size, 32, static_cast<int>(fs), static_cast<size_t>(K2 * m_size)}, sr, ssb);
  const auto b =
      cache.get({kp, n_size, K2 * 32, static_cast<int>(fm), static_cast<size_t>(K2 * n_size)}, mr, msb);
  if (!a.hit || !b.hit) {
    // Rows [k0, k1) (whole MX groups) per part of a host split, two at a time: logical rows j kp + k and
    // j kp + k + 1 are pair (j kp + k) / 2. Large tiles: one MX group a part, claimed by the host threads.
    const int parts =
        static_cast<uint64_t>(kp) * (m_size + n_size) >= (1u << 15) && num::host_split_threads() > 1
            ? static_cast<int>(groups)
            : 1;
    std::vector<num::PairRange> ra(static_cast<size_t>(parts)), rb(static_cast<size_t>(parts));
    num::host_for(parts, [&](int t) {
      const uint32_t k0 = groups * t / parts * 8, k1 = groups * (t + 1) / parts * 8;
      std::vector<float> sa(m_size), sb(n_size);
      for (uint32_t k = k0; k < k1; k += 2) {
        const uint32_t g = k / 8;
        if (k % 8 == 0) {
          for (uint64_t c = 0; c < m_size; ++c) sa[c] = num::e8m0_to_f32(ssb[g * m_size + c]);
          for (uint64_t c = 0; c < n_size; ++c) sb[c] = num::e8m0_to_f32(msb[g * n_size + c]);
        }
        uint32_t *oa[4], *ob[4];
        for (uint32_t j = 0; j < 4; ++j) {
          const int64_t kk = (int64_t{j} * kp + k) / 2;
          oa[j] = a.pairs + kk * static_cast<int64_t>(m_size);
          ob[j] = b.pairs + kk * 32;
        }
        if (!a.hit)
          ra[t].add(num::dequantize_x4_pairs(sr[k], sr[k + 1], sa.data(), static_cast<int64_t>(m_size), fs,
                                             oa, 32));
        if (!b.hit)
          rb[t].add(num::dequantize_x4_pairs(mr[k], mr[k + 1], sb.data(), static_cast<int64_t>(n_size), fm,
                                             ob, K2 * 32));
      }
    });
    for (int t = 1; t < parts; ++t) ra[0].add(ra[t]), rb[0].add(rb[t]);
    if (!a.hit) *a.range = ra[0], cache.commit(a);
    if (!b.hit) *b.range = rb[0], cache.commit(b);
  }
  const bool acc = inst_.has(kAccumulate);
  const int M = static_cast<int>(m_size), N = static_cast<int>(n_size);
  // The stationary image widened once for the FP32 steps (most instructions reuse it: 78 % of the README main
  // job's), rather than on every instruction.
  const float* af =
      num::pe_matmul_pairs_by_fma()
          ? cache.widened(a, static_cast<size_t>(K * M),
                          [&](float* w) { num::pe_matmul_pairs_widen(a.pairs, static_cast<int>(K), M, w); })
          : nullptr;
  const auto left = num::pe_matmul_pairs(a.pairs, *a.range, b.pairs, *b.range, c0, ldc, static_cast<int>(K),
                                         M, N, acc, pe_threads(static_cast<int>(K), m_size, n_size), af);
  return left;
}

// MX matmul: each x4 element packs the FP8 values of contraction positions k + 128 * j in byte j (j = 0..3,
// byte j at the element's address + j). Values are dequantized to FP32 (a * 2^sa, exact unless below the FP32
// normal range) and go through num::pe_matmul in ascending logical k = j * K + partition.
void Exec::matmul_mx() {
  OperandView dst = view(0);
  OperandView st = view(1);
  OperandView mv = view(2);
  OperandView ss = view(3);
  OperandView ms = view(4);
  const uint32_t kp = st.rows();
  if (mv.rows() != kp) fail("shape", fmt::format("stationary has {} partitions, moving {}", kp, mv.rows()));
  if (kp % 8 != 0)
    fail("shape", fmt::format("{} partitions is not a whole number of 8-partition MX groups", kp));
  const uint64_t m_size = st.cols(), n_size = mv.cols();
  if (dst.rows() != m_size || dst.cols() != n_size)
    fail("shape", fmt::format("dst must be [{}, {}], got [{}, {}]", m_size, n_size, dst.rows(), dst.cols()));
  const uint32_t groups = kp / 8;
  const uint32_t last_s = mx_scale_row(groups - 1, inst_.scale_offset);
  const uint32_t last_m = mx_scale_row(groups - 1, inst_.moving_scale_offset);
  if (ss.rows() <= last_s || ss.cols() != m_size)
    fail("shape", fmt::format("stationary_scale must have more than {} rows and {} columns, got [{}, {}]",
                              last_s, m_size, ss.rows(), ss.cols()));
  if (ms.rows() <= last_m || ms.cols() != n_size)
    fail("shape", fmt::format("moving_scale must have more than {} rows and {} columns, got [{}, {}]", last_m,
                              n_size, ms.rows(), ms.cols()));
  const auto left = matmul_mx_pairs(dst, st, mv, ss, ms);
  if (left && left->empty()) return;
  // Scratch reused across instructions; every element is written below.
  static thread_local std::vector<float> a, b;
  a.resize(4 * kp * m_size);
  b.resize(4 * kp * n_size);
  // out[(j * kp + k) * cols + c] = value j of x4 element (k, c) times its group's scale: the scales of a
  // group once, the FP8 codes through the format's table, the column offsets of row 0 (the same in every
  // row).
  // Rows [k0, k1) of each operand (whole MX groups) per part of a host split: each part writes its own rows.
  const auto dequantize = [&](OperandView& x, OperandView& xs, uint32_t scale_offset, uint64_t cols,
                              std::vector<float>& out, uint32_t k0, uint32_t k1) {
    const float* table = fp8_format(x.dtype()) == num::Fp8Format::E4M3FN ? num::detail::kE4M3ToF32.data()
                                                                         : num::detail::kE5M2ToF32.data();
    // Per call, not thread_local: the host helper threads live on, and LeakSanitizer reports what their
    // thread_locals hold at exit.
    std::vector<float> scale(cols);
    const uint8_t* row0 = x.at(0, 0);
    // Consecutive x4 elements (the usual tile) go through the vector row decoder: the same bits.
    bool contiguous = true;
    for (uint64_t c = 1; c < cols && contiguous; ++c) contiguous = x.at(0, c) == row0 + 4 * c;
    for (uint32_t k = k0; k < k1; ++k) {
      if (k % 8 == 0) mx_group_scales(xs, k / 8, scale_offset, scale.data());
      const int64_t row = x.at(k, 0) - row0;
      float* o[4];
      for (uint32_t j = 0; j < 4; ++j) o[j] = &out[(j * kp + k) * cols];
      if (contiguous) {
        num::dequantize_x4_row(row0 + row, scale.data(), static_cast<int64_t>(cols), fp8_format(x.dtype()),
                               o);
        continue;
      }
      for (uint64_t c = 0; c < cols; ++c) {
        const uint8_t* p = x.at(0, c) + row;
        const float sc = scale[c];
        for (uint32_t j = 0; j < 4; ++j) o[j][c] = table[p[j]] * sc;
      }
    }
  };
  const int parts =
      static_cast<uint64_t>(kp) * (m_size + n_size) >= (1u << 15) && num::host_split_threads() > 1
          ? static_cast<int>(groups)
          : 1;
  std::vector<float>&a_out = a, &b_out = b;  // the calling thread's scratch (each part has its own `scale`)
  num::host_for(parts, [&](int t) {
    const uint32_t k0 = groups * t / parts * 8, k1 = groups * (t + 1) / parts * 8;
    dequantize(st, ss, inst_.scale_offset, m_size, a_out, k0, k1);
    dequantize(mv, ms, inst_.moving_scale_offset, n_size, b_out, k0, k1);
  });
  if (!left) return pe_accumulate(dst, a, b, static_cast<int>(4 * kp), m_size, n_size);
  // The columns the pair path left, in the PSUM tile in place (as it is when that path is taken).
  int64_t ldc = 0;
  float* c0 = psum_in_place(dst, m_size, n_size, &ldc);
  const int K = static_cast<int>(4 * kp), M = static_cast<int>(m_size);
  for (const auto& [n0, n1] : *left)
    num::pe_matmul(a.data(), M, b.data() + n0, static_cast<int64_t>(n_size), c0 + n0, ldc, K, M, n1 - n0,
                   inst_.has(kAccumulate), pe_threads(K, m_size, static_cast<uint64_t>(n1 - n0)));
}

// One MX group = 8 partitions x the 4 interleaved values of one x4 column; group element r * 4 + j is
// src[8g + r, 4f + j] and lands in byte j of dst[8g + r, f]. Scale by the Trn3 rule (num::ScaleRule::Trn3).
void Exec::quantize_mx() {
  OperandView dst = view(0);
  OperandView src = view(1);
  OperandView sc = view(2);
  if (src.rows() != dst.rows() || src.cols() != 4 * dst.cols())
    fail("shape", fmt::format("src must be [{}, {}] for dst [{}, {}], got [{}, {}]", dst.rows(),
                              4 * dst.cols(), dst.rows(), dst.cols(), src.rows(), src.cols()));
  if (dst.rows() % 8 != 0)
    fail("shape", fmt::format("{} partitions is not a whole number of 8-partition MX groups", dst.rows()));
  const uint32_t groups = dst.rows() / 8;
  const uint32_t last = mx_scale_row(groups - 1, inst_.scale_offset);
  if (sc.rows() <= last || sc.cols() != dst.cols())
    fail("shape", fmt::format("dst_scale must have more than {} rows and {} columns, got [{}, {}]", last,
                              dst.cols(), sc.rows(), sc.cols()));
  const auto f8 = fp8_format(dst.dtype());
  const bool bf16 = src.dtype() == DType::BF16;
  float v[32];
  uint8_t q[32];
  // A source no output overlaps: the group's 8 source rows at once (load_row converts as load does).
  // Groups are independent (own rows, own scales): large instructions split them over host threads.
  if (!src.may_overlap(dst) && !src.may_overlap(sc) && !is_x4(src.dtype())) {
    const uint64_t n = src.cols();
    // (dst and dst_scale sharing bytes would make the groups' writes order-dependent: one part then)
    const bool big = static_cast<uint64_t>(src.rows()) * n >= (1u << 15);
    // (one group a part, claimed by the host threads in turn)
    const int parts =
        big && !dst.may_overlap(sc) && num::host_split_threads() > 1 ? static_cast<int>(groups) : 1;
    // BF16 or FP32 rows of consecutive elements are read in place and the FP8 bytes written straight into
    // dst's rows (when no two of its elements share a byte and it does not overlap dst_scale, the order of
    // the writes does not matter): rows a fixed stride apart, as quantize_x4_groups takes them. The values
    // are the same (BF16 widens exactly to the FP32 load_row gives).
    const int64_t es = n == 0 ? 0 : src.dtype() == DType::BF16 ? 2 : src.dtype() == DType::F32 ? 4 : 0;
    const int64_t src_ld = es != 0 ? src.at(1, 0) - src.at(0, 0) : 0;
    const int64_t dst_ld = es != 0 ? dst.at(1, 0) - dst.at(0, 0) : 0;
    const bool direct = es != 0 && src.contiguous_rows() && dst.contiguous_rows() && distinct_elements(dst) &&
                        !dst.may_overlap(sc) && src_ld % es == 0 &&
                        reinterpret_cast<uintptr_t>(src.at(0, 0)) % es == 0;
    num::host_for(parts, [&](int t) {
      const uint64_t F = dst.cols();
      std::vector<uint8_t> s(F);
      if (direct) {
        for (uint32_t g = groups * t / parts; g < groups * (t + 1) / parts; ++g) {
          const uint8_t* x = src.at(8 * g, 0);
          uint8_t* q = dst.at(8 * g, 0);
          if (es == 2)
            num::quantize_x4_groups(reinterpret_cast<const uint16_t*>(x), src_ld / 2, static_cast<int64_t>(F),
                                    f8, num::ScaleRule::Trn3, q, dst_ld, s.data());
          else
            num::quantize_x4_groups(reinterpret_cast<const float*>(x), src_ld / 4, static_cast<int64_t>(F),
                                    f8, num::ScaleRule::Trn3, q, dst_ld, s.data());
          for (uint64_t f = 0; f < F; ++f) *sc.at(mx_scale_row(g, inst_.scale_offset), f) = s[f];
        }
        return;
      }
      std::vector<float> rows(8 * n);
      std::vector<uint8_t> q(8 * n);
      for (uint32_t g = groups * t / parts; g < groups * (t + 1) / parts; ++g) {
        for (uint32_t r = 0; r < 8; ++r) src.load_row(8 * g + r, &rows[r * n]);
        num::quantize_x4_groups(rows.data(), static_cast<int64_t>(n), static_cast<int64_t>(F), f8,
                                num::ScaleRule::Trn3, q.data(), static_cast<int64_t>(n), s.data());
        for (uint64_t f = 0; f < F; ++f) *sc.at(mx_scale_row(g, inst_.scale_offset), f) = s[f];
        for (uint32_t r = 0; r < 8; ++r) {
          if (dst.contiguous_rows()) {
            std::memcpy(dst.at(8 * g + r, 0), &q[r * n], n);
            continue;
          }
          for (uint64_t f = 0; f < F; ++f) std::memcpy(dst.at(8 * g + r, f), &q[r * n + 4 * f], 4);
        }
      }
    });
    return;
  }
  for (uint32_t g = 0; g < groups; ++g)
    for (uint64_t f = 0; f < dst.cols(); ++f) {
      for (uint32_t r = 0; r < 8; ++r)
        for (uint32_t j = 0; j < 4; ++j) {
          if (bf16) {  // the common source: BF16 bits are the top half of the FP32 value
            uint16_t b;
            std::memcpy(&b, src.at(8 * g + r, 4 * f + j), 2);
            v[r * 4 + j] = num::bf16_to_f32(b);
          } else {
            v[r * 4 + j] = src.load(8 * g + r, 4 * f + j);
          }
        }
      *sc.at(mx_scale_row(g, inst_.scale_offset), f) = num::quantize_block(v, q, f8, num::ScaleRule::Trn3);
      for (uint32_t r = 0; r < 8; ++r) std::memcpy(dst.at(8 * g + r, f), &q[r * 4], 4);
    }
}

void Exec::activation() {
  OperandView dst = view(0);
  OperandView data = view(1);
  same_shape(dst, 0, data, 1);
  const uint32_t rows = dst.rows();
  std::vector<float> scale(rows, inst_.imm0), bias(rows, inst_.imm1);
  if (inst_.has(kOperand0Vector)) {
    OperandView v = view(4);
    vector_shape(v, 4, rows);
    for (uint32_t i = 0; i < rows; ++i) scale[i] = v.load(i, 0);
  }
  if (inst_.has(kBiasVector)) {
    OperandView v = view(2);
    vector_shape(v, 2, rows);
    for (uint32_t i = 0; i < rows; ++i) bias[i] = v.load(i, 0);
  }
  std::vector<float> sums(rows, 0.f);
  std::vector<float> x(dst.cols());
  const uint64_t n = dst.cols();
  for (uint32_t i = 0; i < rows; ++i) {
    data.load_row(i, x.data());
    const float sc = scale[i], bi = bias[i];
    if (inst_.act == ActFunc::Exp) {  // the hot case, as act_f32
      for (uint64_t j = 0; j < n; ++j) x[j] = std::exp(x[j] * sc + bi);
    } else {
      for (uint64_t j = 0; j < n; ++j) x[j] = act_f32(inst_.act, x[j] * sc + bi);
    }
    if (inst_.has(kReduce))
      for (uint64_t j = 0; j < n; ++j) sums[i] += x[j];
    dst.store_row(i, x.data());
  }
  if (inst_.has(kReduce)) {
    OperandView red = view(3);
    vector_shape(red, 3, rows);
    for (uint32_t i = 0; i < rows; ++i) red.store(i, 0, sums[i]);
  }
}

void Exec::tensor_tensor() {
  OperandView dst = view(0);
  OperandView a = view(1);
  OperandView b = view(2);
  same_shape(dst, 0, a, 1);
  same_shape(dst, 0, b, 2);
  // GpSimd computes int32/uint32 tiles in native integer arithmetic, exact for every 32-bit value
  // (nki.isa.tensor_tensor, NKI 2.33); Vector casts arithmetic operands to FP32.
  const auto int32 = [](DType t) { return t == DType::I32 || t == DType::U32; };
  const bool native =
      inst_.engine == Engine::POOL && int32(dst.dtype()) && int32(a.dtype()) && int32(b.dtype());
  const bool ints = alu_is_bitwise(inst_.alu0) || native;
  const uint64_t n = dst.cols();
  if (ints) {
    std::vector<int64_t> x(n), y(n);
    for (uint32_t i = 0; i < dst.rows(); ++i) {
      a.load_row_int(i, x.data());
      b.load_row_int(i, y.data());
      for (uint64_t j = 0; j < n; ++j)
        x[j] = native ? alu_int_exact(inst_.alu0, x[j], y[j]) : alu_i32(inst_.alu0, x[j], y[j]);
      dst.store_row_int(i, x.data());
    }
    return;
  }
  // in1 broadcast along its innermost free dim (stride 0: a [.., 1] tile broadcast, e.g. the MX multipliers):
  // its distinct elements are read once per row (the same elements and conversions) and each applies to a
  // run of `inner` elements of in0.
  const AccessPattern& bp = inst_.ops[2];
  const uint64_t inner = bp.ndim > 0 && bp.strides[bp.ndim - 1] == 0 ? bp.sizes[bp.ndim - 1] : 1;
  if (inner > 1) {
    AccessPattern distinct = bp;
    if (bp.ndim > 1)
      --distinct.ndim;
    else
      distinct.sizes[0] = 1;
    OperandView bd(distinct, core_, program_, limits_, state_, prefix_, name(2));
    std::vector<float> x(n), y(bd.cols());
    for (uint32_t i = 0; i < dst.rows(); ++i) {
      a.load_row(i, x.data());
      bd.load_row(i, y.data());
      for (uint64_t g = 0; g < y.size(); ++g) alu_f32_row(inst_.alu0, &x[g * inner], y[g], false, inner);
      dst.store_row(i, x.data());
    }
    return;
  }
  std::vector<float> x(n), y(n);
  for (uint32_t i = 0; i < dst.rows(); ++i) {
    a.load_row(i, x.data());
    b.load_row(i, y.data());
    alu_f32_rows(inst_.alu0, x.data(), y.data(), n);
    dst.store_row(i, x.data());
  }
}

// dst = (data op0 operand0) op1 operand1. tensor_scalar_reduce is its one-operator form (alu1 is its
// reduce_op, slot 3 its reduce_res): reduce_res[p] = reduce_op over the partition's results as dst holds them
// (NKI's formula reduces dst: the FP32 results rounded to dst's dtype), left to right in FP32 (negated with
// reduce_res_negate).
void Exec::tensor_scalar() {
  OperandView dst = view(0);
  OperandView data = view(1);
  same_shape(dst, 0, data, 1);
  const uint32_t rows = dst.rows();
  const bool reduce = inst_.op == Opcode::TensorScalarReduce;
  const AluOp op1 = reduce ? AluOp::Bypass : inst_.alu1;
  std::optional<OperandView> res;
  if (reduce) {
    res.emplace(view(3));
    vector_shape(*res, 3, rows);
  }
  std::vector<float> s0(rows, inst_.imm0), s1(rows, inst_.imm1);
  std::vector<int64_t> i0(rows, static_cast<int64_t>(std::isfinite(inst_.imm0) ? inst_.imm0 : 0.f));
  std::vector<int64_t> i1(rows, static_cast<int64_t>(std::isfinite(inst_.imm1) ? inst_.imm1 : 0.f));
  for (int k = 0; k < 2; ++k) {
    if (!inst_.has(k == 0 ? kOperand0Vector : kOperand1Vector)) continue;
    OperandView v = view(2 + k);
    vector_shape(v, 2 + k, rows);
    for (uint32_t i = 0; i < rows; ++i) {
      (k == 0 ? s0 : s1)[i] = v.load(i, 0);
      (k == 0 ? i0 : i1)[i] = v.load_int(i, 0);
    }
  }
  const bool r0 = inst_.has(kReverse0), r1 = inst_.has(kReverse1);
  const bool ints = alu_is_bitwise(inst_.alu0) || alu_is_bitwise(op1);
  const uint64_t n = dst.cols();
  if (ints) {  // tensor_scalar only: tensor_scalar_reduce's operators are arithmetic (check.cpp)
    std::vector<int64_t> x(n);
    for (uint32_t i = 0; i < rows; ++i) {
      data.load_row_int(i, x.data());
      alu_i32_row(inst_.alu0, x.data(), i0[i], r0, n);
      alu_i32_row(op1, x.data(), i1[i], r1, n);
      dst.store_row_int(i, x.data());
    }
    return;
  }
  std::vector<float> x(n);
  for (uint32_t i = 0; i < rows; ++i) {
    data.load_row(i, x.data());
    alu_f32_row(inst_.alu0, x.data(), s0[i], r0, n);
    alu_f32_row(op1, x.data(), s1[i], r1, n);
    dst.store_row(i, x.data());
    if (res) {
      dst.load_row(i, x.data());  // (dst's values: rounded to its dtype)
      const float r = n > 0 ? alu_f32_fold(inst_.alu1, x.data(), n) : 0.f;
      res->store(i, 0, inst_.has(kNegate) ? -r : r);
    }
  }
}

// Reduces the innermost `reduce_axes` free dims, left to right in FP32 (int32 for bitwise ops).
void Exec::tensor_reduce() {
  OperandView dst = view(0);
  OperandView data = view(1);
  const int nd = data.ap().ndim;
  if (inst_.reduce_axes < 1 || inst_.reduce_axes > nd)
    fail("shape", fmt::format("reduce_axes {} must be 1..{} (the free dims of data)", inst_.reduce_axes, nd));
  uint64_t inner = 1;
  for (int d = nd - inst_.reduce_axes; d < nd; ++d) inner *= data.ap().sizes[d];
  const uint64_t outer = data.cols() / inner;
  if (dst.rows() != data.rows() || dst.cols() != outer)
    fail("shape",
         fmt::format("dst must be [{}, {}], got [{}, {}]", data.rows(), outer, dst.rows(), dst.cols()));
  const bool ints = alu_is_bitwise(inst_.alu0);
  const bool neg = inst_.has(kNegate);
  if (ints) {
    for (uint32_t i = 0; i < data.rows(); ++i)
      for (uint64_t o = 0; o < outer; ++o) {
        int64_t acc = data.load_int(i, o * inner);
        for (uint64_t t = 1; t < inner; ++t) acc = alu_i32(inst_.alu0, acc, data.load_int(i, o * inner + t));
        dst.store_int(i, o, neg ? -acc : acc);
      }
    return;
  }
  std::vector<float> x(data.cols()), out(outer);
  for (uint32_t i = 0; i < data.rows(); ++i) {
    data.load_row(i, x.data());
    for (uint64_t o = 0; o < outer; ++o) {
      const float acc = alu_f32_fold(inst_.alu0, &x[o * inner], inner);
      out[o] = neg ? -acc : acc;
    }
    dst.store_row(i, out.data());
  }
}

// Whether elements of n bytes at byte offsets off[j] (j < off.size()) are, block by block of 16 bytes, one
// fixed permutation of each block's elements: off[j] = 16 (j / P) + off[j % P] for P = 16 / n, the first
// block's offsets a permutation of 0, n, .., 16 - n. Then index gives shuffle16_blocks' byte indices.
bool block_permutation(const std::vector<int64_t>& off, size_t n, uint8_t index[16]) {
  const size_t per = 16 / n;
  if (!num::has_shuffle16() || off.empty() || off.size() % per != 0) return false;
  uint32_t seen = 0;
  for (size_t i = 0; i < per; ++i) {
    const int64_t o = off[i];
    if (o < 0 || o >= 16 || o % static_cast<int64_t>(n) != 0 || (seen >> o & 1u) != 0) return false;
    seen |= 1u << o;
    for (size_t b = 0; b < n; ++b) index[i * n + b] = static_cast<uint8_t>(o + static_cast<int64_t>(b));
  }
  for (size_t j = per; j < off.size(); ++j)
    if (off[j] != off[j - per] + 16) return false;
  return true;
}

void Exec::tensor_copy() {
  OperandView dst = view(0);
  OperandView src = view(1);
  same_shape(dst, 0, src, 1);
  // Operands that cannot overlap: whole rows (a byte run per row for one dtype, else the row conversions,
  // element for element those of move()).
  if (!dst.may_overlap(src) && !is_x4(dst.dtype()) && !is_x4(src.dtype())) {
    if (dst.dtype() == src.dtype() && dst.contiguous_rows() && src.contiguous_rows()) {
      const uint64_t rb = src.cols() * dtype_size(src.dtype());
      for (uint32_t i = 0; i < dst.rows(); ++i) std::memcpy(dst.at(i, 0), src.at(i, 0), rb);
      return;
    }
    if (dst.dtype() != src.dtype()) {
      // Large copies (a PSUM tile to SBUF as BF16): groups of 8 rows a part of a host split, when dst's rows
      // are apart.
      const uint32_t groups = (dst.rows() + 7) / 8;
      const int parts =
          distinct_elements(dst) ? split_parts(groups, static_cast<uint64_t>(dst.rows()) * dst.cols()) : 1;
      num::host_for(parts, [&](int t) {
        std::vector<float> row(src.cols());
        const uint32_t r0 = parts == 1 ? 0 : 8 * t,
                       r1 = parts == 1 ? dst.rows() : std::min(dst.rows(), r0 + 8);
        for (uint32_t i = r0; i < r1; ++i) {
          src.load_row(i, row.data());
          dst.store_row(i, row.data());
        }
      });
      return;
    }
    // One dtype, strided rows (a permuted PSUM tile): element copies of a fixed size through the column
    // offsets, in the order move() takes.
    const auto copy = [&](auto elem) {
      constexpr size_t n = sizeof(elem);
      const uint64_t cols = dst.cols();
      std::vector<int64_t> doff(cols), soff(cols);
      for (uint64_t j = 0; j < cols; ++j)
        doff[j] = dst.col_offset(j) - dst.col_offset(0), soff[j] = src.col_offset(j) - src.col_offset(0);
      // Consecutive dst elements whose source is the same permutation of each 16-byte block's elements (a
      // PSUM tile copied out with its inner dims swapped): one byte shuffle per block, the same bytes.
      uint8_t index[16];
      if (dst.contiguous_rows() && block_permutation(soff, n, index)) {
        for (uint32_t i = 0; i < dst.rows(); ++i)
          num::shuffle16_blocks(src.at(i, 0), dst.at(i, 0), cols * n / 16, index);
        return;
      }
      for (uint32_t i = 0; i < dst.rows() && cols > 0; ++i) {
        uint8_t* d = dst.at(i, 0);
        const uint8_t* s = src.at(i, 0);
        for (uint64_t j = 0; j < cols; ++j) std::memcpy(d + doff[j], s + soff[j], n);
      }
    };
    switch (dtype_size(dst.dtype())) {
      case 1:
        return copy(uint8_t{});
      case 2:
        return copy(uint16_t{});
      case 4:
        return copy(uint32_t{});
    }
  }
  for (uint32_t i = 0; i < dst.rows(); ++i)
    for (uint64_t j = 0; j < dst.cols(); ++j) move(dst, dst.at(i, j), src, src.at(i, j));
}

void Exec::memset() {
  OperandView dst = view(0);
  // Every element gets the same bytes: converted once, then copied (a contiguous row as one byte run).
  const uint32_t es = dtype_size(dst.dtype());
  uint8_t elem[8] = {};
  // An integer fill FP32 does not hold (split_fill): the integer itself.
  const double v = fill_value(inst_.imm0, inst_.imm1);
  if (inst_.imm1 != 0.f && is_int(dst.dtype()) && std::isfinite(v))
    store_element_int(dst.dtype(), elem, static_cast<int64_t>(std::clamp(v, -9e18, 9e18)));
  else if (is_x4(dst.dtype()))
    std::memset(elem, num::f32_to_fp8(inst_.imm0, fp8_format(dst.dtype())), 4);
  else
    dst.store_value(elem, inst_.imm0);
  const bool one_byte = std::all_of(elem + 1, elem + es, [&](uint8_t b) { return b == elem[0]; });
  const uint64_t cols = dst.cols();
  std::vector<uint8_t> row;
  if (dst.contiguous_rows() && !one_byte)
    for (uint64_t j = 0; j < cols; ++j) row.insert(row.end(), elem, elem + es);
  for (uint32_t i = 0; i < dst.rows(); ++i) {
    if (cols == 0) break;
    uint8_t* r = dst.at(i, 0);
    if (dst.contiguous_rows()) {
      if (one_byte)
        std::memset(r, elem[0], cols * es);
      else
        std::memcpy(r, row.data(), cols * es);
      continue;
    }
    for (uint64_t j = 0; j < cols; ++j) std::memcpy(r + (dst.col_offset(j) - dst.col_offset(0)), elem, es);
  }
}

// value(p, i0..i3) = imm0 + imm1 * p + sum_d iota_steps[d] * i_d, with p the partition index inside dst
// (0-based) and i_d the index along dst's free dim d; exact in FP64, then written as an integer (int dtypes)
// or rounded to the float dtype. Calls f(partition, column, value) for each element of dst with iota's affine
// value: base (imm0) + channel_multiplier (imm1) * partition + sum of steps * free indices (dst's dims,
// outermost first).
template <class F>
void for_affine(const Instruction& inst, OperandView& dst, F&& f) {
  const AccessPattern& ap = dst.ap();
  // iota's offset may carry an integer rest FP32 does not hold (split_fill); affine_select's imm3 is its
  // on_false_value's.
  const double base = inst.op == Opcode::Iota ? fill_value(inst.imm0, inst.imm3) : inst.imm0;
  for (uint32_t p = 0; p < dst.rows(); ++p) {
    std::array<uint32_t, 4> idx{};
    for (uint64_t j = 0; j < dst.cols(); ++j) {
      double v = base + static_cast<double>(inst.imm1) * p;
      for (int d = 0; d < ap.ndim; ++d) v += static_cast<double>(inst.iota_steps[d]) * idx[d];
      f(p, j, v);
      for (int d = ap.ndim - 1; d >= 0; --d) {
        if (++idx[d] < ap.sizes[d]) break;
        idx[d] = 0;
      }
    }
  }
}

// An integer dst: the value in 32-bit integer math (NKI's iota page; it wraps past INT32_MAX as that
// arithmetic does, so an int32 / uint32 dst holds it modulo 2^32), then cast to a narrower dtype saturating,
// as every engine's integer output conversion does (store_element), not wrapped modulo 2^bits.
void Exec::iota() {
  OperandView dst = view(0);
  const bool narrow = is_int(dst.dtype()) && dst.dtype() != DType::I32 && dst.dtype() != DType::U32;
  const auto [lo, hi] = int_range(dst.dtype());
  for_affine(inst_, dst, [&](uint32_t p, uint64_t j, double v) {
    if (is_int(dst.dtype())) {
      const auto i32 = static_cast<int32_t>(
          static_cast<uint32_t>(static_cast<int64_t>(std::nearbyint(std::clamp(v, -9e18, 9e18)))));
      dst.store_int(p, j, narrow ? std::clamp<int64_t>(i32, lo, hi) : i32);
    } else {
      dst.store(p, j, static_cast<float>(v));
    }
  });
}

void Exec::select() {
  OperandView dst = view(0);
  OperandView pred = view(1);
  OperandView on_true = view(2);
  same_shape(dst, 0, pred, 1);
  same_shape(dst, 0, on_true, 2);
  const bool imm_false = !inst_.ops[3].present();
  std::optional<OperandView> on_false;
  if (!imm_false) {
    on_false.emplace(view(3));
    same_shape(dst, 0, *on_false, 3);
  }
  for (uint32_t i = 0; i < dst.rows(); ++i)
    for (uint64_t j = 0; j < dst.cols(); ++j) {
      if (pred.load(i, j) != 0.f)
        move(dst, dst.at(i, j), on_true, on_true.at(i, j));
      else if (imm_false)
        dst.store(i, j, inst_.imm0);
      else
        move(dst, dst.at(i, j), *on_false, on_false->at(i, j));
    }
}

// (data op0 operand0) op1 operand1 in FP32, as tensor_scalar's first op then tensor_tensor's (NKI
// scalar_tensor_tensor: arithmetic operators only).
void Exec::scalar_tensor_tensor() {
  OperandView dst = view(0);
  OperandView data = view(1);
  OperandView in1 = view(3);
  same_shape(dst, 0, data, 1);
  same_shape(dst, 0, in1, 3);
  const uint32_t rows = dst.rows();
  const std::vector<float> s0 = per_partition(inst_.imm0, 2, rows);
  const bool r1 = inst_.has(kReverse1);
  const uint64_t n = dst.cols();
  std::vector<float> x(n), y(n);
  for (uint32_t i = 0; i < rows; ++i) {
    data.load_row(i, x.data());
    in1.load_row(i, y.data());
    alu_f32_row(inst_.alu0, x.data(), s0[i], inst_.has(kReverse0), n);
    if (r1) {
      alu_f32_rows(inst_.alu1, y.data(), x.data(), n);
      dst.store_row(i, y.data());
    } else {
      alu_f32_rows(inst_.alu1, x.data(), y.data(), n);
      dst.store_row(i, x.data());
    }
  }
}

// Per partition, of the even-indexed and then the odd-indexed elements of data (its free elements in
// order): count, mean and the sum of squared deviations from that mean (variance * count), in FP32. The
// order of the hardware's FP32 operations is not documented: trnsim sums left to right, mean = sum / count,
// then sums (x - mean)^2 left to right; an empty half gives (0, 0, 0).
void Exec::bn_stats() {
  OperandView dst = view(0);
  OperandView data = view(1);
  const uint64_t n = data.cols();
  std::vector<float> x(n);
  float out[6];
  for (uint32_t i = 0; i < data.rows(); ++i) {
    data.load_row(i, x.data());
    for (uint64_t half = 0; half < 2; ++half) {
      const uint64_t count = n > half ? (n - half + 1) / 2 : 0;
      float sum = 0.f, m2 = 0.f;
      for (uint64_t j = half; j < n; j += 2) sum += x[j];
      const float mean = count > 0 ? sum / static_cast<float>(count) : 0.f;
      for (uint64_t j = half; j < n; j += 2) {
        const float d = x[j] - mean;
        m2 += d * d;
      }
      out[3 * half] = static_cast<float>(count);
      out[3 * half + 1] = mean;
      out[3 * half + 2] = m2;
    }
    dst.store_row(i, out);
  }
}

// Per partition, from (count, mean, variance * count) triples: n = sum of counts, mean = sum of count * mean
// / n, variance = (sum of (variance * count) + sum of count * (mean_k - mean)^2) / n (the population
// variance), in FP32, sums left to right; n = 0 gives (0, 0).
void Exec::bn_aggr() {
  OperandView dst = view(0);
  OperandView data = view(1);
  const uint64_t k = data.cols() / 3;
  std::vector<float> x(data.cols());
  for (uint32_t i = 0; i < data.rows(); ++i) {
    data.load_row(i, x.data());
    float count = 0.f, weighted = 0.f;
    for (uint64_t t = 0; t < k; ++t) {
      count += x[3 * t];
      weighted += x[3 * t] * x[3 * t + 1];
    }
    const float mean = count > 0.f ? weighted / count : 0.f;
    float m2 = 0.f;
    for (uint64_t t = 0; t < k; ++t) {
      const float d = x[3 * t + 1] - mean;
      m2 += x[3 * t + 2] + x[3 * t] * (d * d);
    }
    const float out[2] = {mean, count > 0.f ? m2 / count : 0.f};
    dst.store_row(i, out);
  }
}

// dst = cmp_op(offset + channel_multiplier * partition + sum of steps * free indices, 0) ? on_true_tile :
// on_false_value, the affine value as iota computes it (NKI affine_select's pseudo code).
void Exec::affine_select() {
  OperandView dst = view(0);
  OperandView on_true = view(1);
  same_shape(dst, 0, on_true, 1);
  // An integer on_false_value FP32 does not hold is written exactly (split_fill: imm2 + imm3).
  const bool wide = inst_.imm3 != 0.f && is_int(dst.dtype());
  const auto exact = static_cast<int64_t>(fill_value(inst_.imm2, inst_.imm3));
  for_affine(inst_, dst, [&](uint32_t p, uint64_t j, double v) {
    if (alu_f32(inst_.alu0, static_cast<float>(v), 0.f) != 0.f)
      move(dst, dst.at(p, j), on_true, on_true.at(p, j));
    else if (wide)
      dst.store_int(p, j, exact);
    else
      dst.store(p, j, inst_.imm2);
  });
}

// dst [P, 8]: the 8 largest of each partition's src values as FP32, descending (top8::largest), stored in
// dst's dtype.
void Exec::max8() {
  OperandView dst = view(0);
  OperandView src = view(1);
  top8_shape(dst, 0, src.rows());
  std::vector<float> x(src.cols());
  for (uint32_t i = 0; i < src.rows(); ++i) {
    src.load_row(i, x.data());
    const auto top = top8::largest(x.data(), x.size());
    dst.store_row(i, top.data());
  }
}

// Per partition, the 8 vals paired with positions of data (FP32 equality, top8::pair_positions):
// nc_find_index8 writes the positions to dst (vals in order); nc_match_replace8 (vals from the last) writes
// data with the paired positions set to imm to dst, and the positions to dst_idx when given. Data is read
// whole before dst is written, so dst may be data itself (the top-k kernels replace in place).
void Exec::match8(bool replace) {
  OperandView dst = view(0);
  OperandView data = view(1);
  OperandView vals = view(2);
  top8_shape(vals, 2, data.rows());
  std::optional<OperandView> idx;
  if (!replace)
    idx.emplace(dst);
  else if (inst_.ops[3].present())
    idx.emplace(view(3));
  if (idx) top8_shape(*idx, replace ? 3 : 0, data.rows());
  if (replace) same_shape(dst, 0, data, 1);
  std::vector<float> x(data.cols());
  float v[top8::kWidth];
  int64_t pos[top8::kWidth];
  for (uint32_t i = 0; i < data.rows(); ++i) {
    data.load_row(i, x.data());
    vals.load_row(i, v);
    const auto paired = top8::pair_positions(x.data(), x.size(), v, replace);
    if (replace) {
      for (uint32_t p : paired)
        if (p != top8::kNotFound) x[p] = inst_.imm0;
      dst.store_row(i, x.data());
    }
    if (!idx) continue;
    for (int k = 0; k < top8::kWidth; ++k) pos[k] = paired[k];
    idx->store_row_int(i, pos);
  }
}

// Per partition, along the free elements in row-major order: r = initial, then r = (data0[i] op0 r) op1
// data1[i] (reverse0: r op0 data0[i]; reverse1: data1[i] op1 ...) and dst[i] = r. r stays FP32 from step to
// step (the engine computes in FP32; each dst[i] is r stored in dst's dtype). Inputs are read whole before
// dst is written, so dst may be an input.
void Exec::tensor_tensor_scan() {
  OperandView dst = view(0);
  OperandView a = view(1);
  OperandView b = view(2);
  same_shape(dst, 0, a, 1);
  same_shape(dst, 0, b, 2);
  const uint32_t rows = dst.rows();
  const std::vector<float> init = per_partition(inst_.imm0, 3, rows);
  const bool r0 = inst_.has(kReverse0), r1 = inst_.has(kReverse1);
  const uint64_t n = dst.cols();
  std::vector<float> x(n), y(n);
  for (uint32_t i = 0; i < rows; ++i) {
    a.load_row(i, x.data());
    b.load_row(i, y.data());
    float r = init[i];
    for (uint64_t j = 0; j < n; ++j) {
      r = r0 ? alu_f32(inst_.alu0, r, x[j]) : alu_f32(inst_.alu0, x[j], r);
      r = r1 ? alu_f32(inst_.alu1, y[j], r) : alu_f32(inst_.alu1, r, y[j]);
      x[j] = r;
    }
    dst.store_row(i, x.data());
  }
}

// dst [1, F] = op folded over data's partitions 0, 1, ..., P-1 for each free element: FP32 for add and
// maximum, 32-bit patterns for the bitvec operators.
void Exec::tensor_partition_reduce() {
  OperandView dst = view(0);
  OperandView data = view(1);
  const uint64_t n = data.cols();
  if (dst.rows() != 1 || dst.cols() != n)
    fail("shape", fmt::format("dst must be [1, {}], got [{}, {}]", n, dst.rows(), dst.cols()));
  if (alu_is_bitwise(inst_.alu0)) {
    std::vector<int64_t> acc(n), x(n);
    data.load_row_int(0, acc.data());
    for (uint32_t i = 1; i < data.rows(); ++i) {
      data.load_row_int(i, x.data());
      for (uint64_t j = 0; j < n; ++j) acc[j] = alu_i32(inst_.alu0, acc[j], x[j]);
    }
    dst.store_row_int(0, acc.data());
    return;
  }
  std::vector<float> acc(n), x(n);
  data.load_row(0, acc.data());
  for (uint32_t i = 1; i < data.rows(); ++i) {
    data.load_row(i, x.data());
    alu_f32_rows(inst_.alu0, acc.data(), x.data(), n);
  }
  dst.store_row(0, acc.data());
}

// dst[p, j] = data[p, indices[p, j]], data's free elements in row-major order, bytes copied (dst has data's
// dtype). An index outside data's elements per partition is an error (NKI: "must be within the range").
void Exec::nc_n_gather() {
  OperandView dst = view(0);
  OperandView data = view(1);
  OperandView idx = view(2);
  same_shape(dst, 0, idx, 2);
  const uint64_t n = data.cols();
  const uint32_t size = dtype_size(dst.dtype());
  std::vector<int64_t> ix(idx.cols());
  std::vector<uint8_t> row(n * size);
  for (uint32_t p = 0; p < dst.rows(); ++p) {
    idx.load_row_int(p, ix.data());
    for (uint64_t c = 0; c < n; ++c) std::memcpy(&row[c * size], data.at(p, c), size);
    for (uint64_t j = 0; j < ix.size(); ++j) {
      const auto i = static_cast<uint64_t>(static_cast<uint32_t>(ix[j]));
      if (i >= n)
        fail("index",
             fmt::format("indices[{}, {}] = {} is outside data's {} elements per partition", p, j, i, n));
      std::memcpy(dst.at(p, j), &row[i * size], size);
    }
  }
}

// On partitions 0, 16, ..., 112 of the tiles (the first partition of each GpSimd core's 16) only: dst's row =
// index_offset + i for each nonzero src[i] in order (FP32: != 0, so -0 is zero and NaN is not; int32: != 0),
// then padding_val up to src's length, then the count; int32 wrapping. The other rows are not touched.
void Exec::nonzero_with_count() {
  OperandView dst = view(0);
  OperandView src = view(1);
  const uint64_t n = src.cols();
  if (dst.rows() != src.rows() || dst.cols() != n + 1)
    fail("shape", fmt::format("dst must be [{}, {}] (src's elements and the count), got [{}, {}]", src.rows(),
                              n + 1, dst.rows(), dst.cols()));
  const int64_t offset = inst_.iota_steps[0], padding = inst_.iota_steps[1];
  std::vector<int64_t> out(n + 1), xi(n);
  std::vector<float> xf(n);
  const bool floats = !is_int(src.dtype());
  for (uint32_t p = 0; p < src.rows(); p += 16) {
    if (floats)
      src.load_row(p, xf.data());
    else
      src.load_row_int(p, xi.data());
    uint64_t count = 0;
    for (uint64_t i = 0; i < n; ++i)
      if (floats ? xf[i] != 0.f : xi[i] != 0) out[count++] = offset + static_cast<int64_t>(i);
    std::fill(out.begin() + static_cast<int64_t>(count), out.end() - 1, padding);
    out[n] = static_cast<int64_t>(count);
    dst.store_row_int(p, out.data());
  }
}

// Within each 32-partition quadrant of dst: dst partition 32q + i = src partition 32q + shuffle_mask[i],
// bytes copied (one dtype), or unmodified where shuffle_mask[i] is 255. src is read whole first, so dst may
// be src (in place).
void Exec::nc_stream_shuffle() {
  OperandView dst = view(0);
  OperandView src = view(1);
  if (dst.cols() != src.cols())
    fail("shape", fmt::format("dst has {} elements per partition, src {}", dst.cols(), src.cols()));
  const ShuffleMask mask = shuffle_mask(inst_);
  const uint64_t n = src.cols();
  const uint32_t size = dtype_size(src.dtype());
  std::vector<uint8_t> rows(static_cast<size_t>(src.rows()) * n * size);
  for (uint32_t p = 0; p < src.rows(); ++p)
    for (uint64_t c = 0; c < n; ++c) std::memcpy(&rows[(p * n + c) * size], src.at(p, c), size);
  for (uint32_t p = 0; p < dst.rows(); ++p) {
    const uint8_t m = mask[p % 32];
    if (m == kShuffleKeep) continue;
    const uint32_t from = p / 32 * 32 + m;
    if (from >= src.rows())
      fail("shuffle_mask",
           fmt::format("shuffle_mask[{}] = {} reads src partition {} (quadrant {}), src has {}", p % 32, m,
                       from, p / 32, src.rows()));
    for (uint64_t c = 0; c < n; ++c) std::memcpy(dst.at(p, c), &rows[(from * n + c) * size], size);
  }
}

// src on this core's SBUF -> dst on the peer core's SBUF, elements in row-major order.
void Exec::sendrecv() {
  OperandView src = view(1);
  OperandView dst = view(0, false, 1 - core_);
  const uint64_t n = static_cast<uint64_t>(src.rows()) * src.cols();
  const uint64_t nd = static_cast<uint64_t>(dst.rows()) * dst.cols();
  if (n != nd) fail("element count", fmt::format("src has {} elements, dst has {}", n, nd));
  for (uint64_t e = 0; e < n; ++e)
    move(dst, dst.at(static_cast<uint32_t>(e / dst.cols()), e % dst.cols()), src,
         src.at(static_cast<uint32_t>(e / src.cols()), e % src.cols()));
}

}  // namespace

int scalar_offset_slot(const Instruction& inst) {
  if (inst.op == Opcode::DmaCopy) return 3;
  if (inst.op == Opcode::DmaTranspose) return 2;
  return -1;
}

int scalar_offset_target(const Instruction& inst) {
  return inst.op == Opcode::DmaCopy && inst.has(kScalarOffsetDst) ? 0 : 1;
}

namespace {

// n bytes of 0xFF, an HBM tensor's start (NaN in every float dtype: a byte no one writes shows). A scratch
// mapping (a large tensor under `trnsim run`) is filled by the host threads in 4 MiB parts, each taking its
// own pages' faults, instead of one thread for the whole tensor.
HostBytes poisoned(size_t n) {
  if (!makes_scratch(n)) return HostBytes(n, 0xFF);
  HostBytes b(n);  // zeros (a scratch file reads as zeros until written)
  constexpr size_t kPart = size_t{4} << 20;
  num::host_for(static_cast<int>((n + kPart - 1) / kPart), [&](int i) {
    const size_t at = static_cast<size_t>(i) * kPart;
    std::memset(b.data() + at, 0xFF, std::min(kPart, n - at));
  });
  return b;
}

}  // namespace

MachineState make_machine_state(const Program& program, const Limits& limits,
                                std::map<uint32_t, HostBytes> initial) {
  if (program.num_cores < 1 || program.num_cores > 2)
    throw InputError(fmt::format("num_cores must be 1 or 2, got {}", program.num_cores));
  MachineState s;
  for (int c = 0; c < program.num_cores; ++c) {
    s.cores[c].sbuf.assign(static_cast<size_t>(limits.partitions) * limits.sbuf_bytes_per_partition, 0xFF);
    s.cores[c].psum.assign(static_cast<size_t>(limits.partitions) * limits.psum_bytes_per_partition, 0xFF);
  }
  constexpr int64_t kMaxTensorBytes = int64_t{1} << 36;
  s.hbm.reserve(program.tensors.size());
  for (const TensorDecl& t : program.tensors) {
    int64_t n = dtype_size(t.dtype);
    for (int64_t d : t.shape) {
      if (d < 0 || (d > 0 && n > kMaxTensorBytes / d))
        throw InputError(fmt::format("tensor '{}': bad or too large shape dimension {}", t.name, d));
      n *= d;
    }
    const auto given = initial.find(static_cast<uint32_t>(s.hbm.size()));
    if (given == initial.end()) {
      s.hbm.push_back(poisoned(static_cast<size_t>(n)));
      continue;
    }
    if (given->second.size() != static_cast<size_t>(n))
      throw Error(fmt::format("tensor '{}': {} bytes for a {}-byte tensor", t.name, given->second.size(), n));
    s.hbm.push_back(std::move(given->second));
  }
  return s;
}

void execute(const Instruction& inst, int core, const Program& program, const Limits& limits,
             MachineState& state) {
  if (core < 0 || core >= program.num_cores || core > 1)
    throw RuleError(fmt::format("{} on {}: core: core {} does not exist (num_cores {})", opcode_name(inst.op),
                                engine_name(inst.engine), core, program.num_cores));
  Exec(inst, core, program, limits, state).run();
}

}  // namespace trnsim::isa
