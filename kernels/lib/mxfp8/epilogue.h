// Epilogues of the MXFP8 pipeline: what happens to each finished output tile. The pipeline calls the
// epilogue once per row tile of a finished output block (after the tile's last K block): rows
// [row, row + tile.partitions()) and columns [col, col + tile.free_elements()) of Y [M, N], in global
// coordinates (LNC2 shards included). The tile is the pipeline's SBUF accumulator, FP32 when K spans several
// K blocks, else MatmulSpec::out_dtype; it is reused two blocks later (the builder orders that reuse after
// every instruction the epilogue emits on it).
//
//   StoreRows            Y rows -> an HBM region [M, N] with a DMA cast (ACT queues). nkilib's default.
//   ScatterRows          Y row r -> HBM row index[r] of a [rows, C] tensor at column col0 + c, DMA cast
//                        (indirect DMA, POOL queues); -1 padding dropped (oob_mode skip). MoE Phase 2 / fwd.
//   AccumulateRows       HBM += Y, by read-modify-write (cast to the destination dtype on DVE, gather the
//                        existing rows, tensor_tensor add on DVE, write back: nkilib's order, so a BF16 sum
//                        is rounded as nkilib rounds it) or by the DMA's own accumulate (dma_copy accumulate,
//                        one DMA). Rows plain or by index. MoE top-k > 1 hidden-state gradient.
//   TransposeAccumulate  Y^T += into an [N, M] HBM region: each up to 128 x 128 piece is cast (DVE),
//                        transposed on the PE into PSUM, copied to SBUF (ACT), then accumulated as above.
//                        MoE weight gradients in [E, H, 2, I] and [E, I, H] (nkilib
//                        _transpose_accumulate_weight_grad_tile).
//   ToSbuf               hands the tile to a callback (e.g. SiLU, clamps and checkpoints of the next phase,
//                        or a copy into a resident operand of the next matmul).
//
// Indexed epilogues follow the index's Padding: -1 rows are skipped; with ZeroRow padding the padded rows are
// written (or accumulated) into that extra row like any other, so it must absorb them (a gathered padding row
// gives a zero Y row).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/api/view.h"
#include "kernels/lib/mxfp8/loaders.h"
#include "kernels/lib/mxfp8/operand.h"

namespace trnsim::kernels::mxfp8 {

struct OutTile {
  View tile;  // SBUF [rows, cols]
  int64_t row = 0, col = 0;
  View tile2;  // with a paired stationary (MatmulSpec::lhs2): the same rows and columns of Y2
};

// What an epilogue may use besides the tile: the call's PSUM banks (for transposes).
struct EpilogueContext {
  Kernel& kernel;
  PsumBanks& banks;
};

class Epilogue {
 public:
  virtual ~Epilogue() = default;
  virtual void emit(EpilogueContext& ctx, const OutTile& t) = 0;
};

// `dst` is the [M, N] region Y lands in (any HBM view of that shape, e.g. a column slice).
class StoreRows : public Epilogue {
 public:
  explicit StoreRows(View dst) : dst_(std::move(dst)) {}
  void emit(EpilogueContext& ctx, const OutTile& t) override;

 private:
  View dst_;
};

// `dst` [rows, C] is whole rows of its HBM tensor (an indirect DMA indexes tensor rows); Y column c goes to
// column col0 + c. rows.index holds one entry per Y row (M rows).
class ScatterRows : public Epilogue {
 public:
  ScatterRows(View dst, RowIndex rows, int64_t col0 = 0)
      : dst_(std::move(dst)), rows_(std::move(rows)), col0_(col0) {}
  void emit(EpilogueContext& ctx, const OutTile& t) override;

 private:
  View dst_;
  RowIndex rows_;
  int64_t col0_;
};

enum class AccumulateMode { ReadModifyWrite, DmaAccumulate };

// dst [M, N] region (rows plain), or whole rows [rows, C] with `rows` (Y row r -> tensor row index[r], column
// col0 + c). Works in chunks of at most 512 columns; read-modify-write keeps two [128, 512] tiles of the
// destination dtype in SBUF (reserve kSbufBytes in MatmulSpec::reserved_sbuf_bytes).
class AccumulateRows : public Epilogue {
 public:
  static constexpr int64_t kSbufBytes = 2 * 512 * 4;
  AccumulateRows(View dst, std::optional<RowIndex> rows = std::nullopt, int64_t col0 = 0,
                 AccumulateMode mode = AccumulateMode::ReadModifyWrite)
      : dst_(std::move(dst)), rows_(std::move(rows)), col0_(col0), mode_(mode) {}
  void emit(EpilogueContext& ctx, const OutTile& t) override;

  // Accumulates the SBUF tile `v` [n, c] into destination rows [r, r + n), columns [c0, c0 + c) (in the
  // destination's coordinates; with an index, rows r.. are index rows). Shared with TransposeAccumulate.
  void accumulate(const View& v, int64_t r, int64_t c0);

 private:
  View dst_;
  std::optional<RowIndex> rows_;
  int64_t col0_;
  AccumulateMode mode_;
  View cast_, existing_;  // SBUF scratch, allocated at first use
};

// dst [N, M] region (or whole rows [rows, C] with `rows` indexing the N coordinate, columns col0 + m). Keeps
// two [128, 128] tiles besides AccumulateRows' (reserve kSbufBytes).
class TransposeAccumulate : public Epilogue {
 public:
  static constexpr int64_t kSbufBytes = AccumulateRows::kSbufBytes + 2 * 128 * 4;
  TransposeAccumulate(View dst, std::optional<RowIndex> rows = std::nullopt, int64_t col0 = 0,
                      AccumulateMode mode = AccumulateMode::ReadModifyWrite)
      : acc_(dst, std::move(rows), col0, mode), dtype_(dst.dtype()) {}
  void emit(EpilogueContext& ctx, const OutTile& t) override;

 private:
  AccumulateRows acc_;
  isa::DType dtype_;
  View cast_, piece_;
};

class ToSbuf : public Epilogue {
 public:
  explicit ToSbuf(std::function<void(const OutTile&)> fn) : fn_(std::move(fn)) {}
  void emit(EpilogueContext&, const OutTile& t) override { fn_(t); }

 private:
  std::function<void(const OutTile&)> fn_;
};

}  // namespace trnsim::kernels::mxfp8
