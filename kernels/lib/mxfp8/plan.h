// Planner of the MXFP8 matmul pipeline (nkilib matmul_mxfp8_config.py, MatmulMxfp8KernelConfig): checks a
// matmul's spec against the algorithm's rules and resolves tiles, blocks, loads, LNC2 sharding and the SBUF
// budget. Y[M, N] = L^T R with L logically [K, M] and R [K, N] (operand.h).
//
// Errors: InputError "<spec.kernel>: ..." naming the parameter for every combination the algorithm cannot
// serve (nkilib validate_shapes), for Trn2 hardware, and for blocks that do not fit in SBUF.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/api/kernel.h"
#include "kernels/lib/mxfp8/operand.h"
#include "sim/numerics/float_formats.h"
#include "sim/numerics/scale_layout.h"

namespace trnsim::kernels::mxfp8 {

// Tiling of one matmul call (nkilib MatmulMxfp8KernelConfig tiling fields). 0 = auto.
struct Tiling {
  int64_t tile_m = 0, tile_k = 0, tile_n = 0;
  int64_t blocks_m = 0, blocks_n = 0, blocks_k = 0;  // TILES_IN_BLOCK_M/N/K
  int64_t load_m = 0, load_n = 0;                    // TILES_IN_LOAD_M/N
};

// Which cores run the call.
enum class Cores {
  Lnc,          // run_with_lnc2 / lnc_2_shard_rhs decide: both cores split M or N, or core 0 alone
  CallingCore,  // the whole matmul on whichever core calls (the caller shards work itself, e.g. by block)
};

struct MatmulSpec {
  std::string kernel;  // for messages: "kernel 'matmul_mxfp8'" or "... (input_grad phase)"
  std::string scope;   // prefix of SBUF tile and scratch tensor names (unique per call in one program)
  int64_t M = 0, K = 0, N = 0;
  Operand lhs, rhs;
  // Optional second stationary operand of lhs's form: Y2 = L2^T R is computed in the same pass, each K tile
  // of R quantized once for both (nkilib's gate and up GEMMs sharing the quantized hidden block); every
  // finished row tile reaches the epilogue with its Y2 twin (OutTile::tile2). Costs a second set of LHS
  // blocks and accumulators in SBUF.
  std::optional<Operand> lhs2;
  // The dtype of the finished tiles when K fits one K block (PSUM is drained straight into it); with more K
  // blocks the accumulator is FP32 and the epilogue casts.
  isa::DType out_dtype = isa::DType::BF16;
  num::Fp8Format fp8 = num::Fp8Format::E4M3FN;
  num::QuantScheme scheme = num::QuantScheme::WrapX;
  Tiling tiling;
  bool nmk = false;  // tile_loop_order 'nmk' (else 'mnk')
  Cores cores = Cores::Lnc;
  bool run_with_lnc2 = true;
  std::optional<bool> shard_rhs;  // lnc_2_shard_rhs; nullopt = auto (N if N >= M)
  bool use_scale_packing = false;
  bool spill_reload = false;
  // SBUF bytes per partition kept free for the caller and the epilogue (e.g. AccumulateRows::kSbufBytes).
  int64_t reserved_sbuf_bytes = 0;
};

// The resolved plan of one call.
struct Plan {
  bool lnc2 = false;    // two programs, one half of the sharded dim each
  bool shard_n = true;  // which dim is split under LNC2
  int64_t tile_m = 0, tile_k = 0, tile_n = 0;
  int64_t block_m = 0, block_n = 0, block_k = 0;  // tiles per block
  int64_t load_m = 0, load_n = 0;                 // tiles per load
  int nbuf_lhs = 2, nbuf_rhs = 2;  // SBUF slots per operand (2: the next block loads during the matmuls)
  int64_t sbuf_bytes = 0;          // SBUF bytes per partition the blocks use
};

// Validates `spec` for `limits` and resolves every auto field (InputError on any violation).
Plan plan_matmul(const MatmulSpec& spec, const isa::Limits& limits);

// The rows [m_lo, m_lo + M) and columns [n_lo, n_lo + N) of Y that core `core` computes under `plan` (its
// LNC2 half of the sharded dim, or all of Y).
struct CoreShare {
  int64_t M = 0, N = 0, m_lo = 0, n_lo = 0;
};
CoreShare core_share(const MatmulSpec& spec, const Plan& plan, int core);

// Checks the views bound to operand `op` (free size F; `which` is "lhs" or "rhs") at emit time: space, dtype
// and shape for its source and layout, and for a gather the row index and whole-row view (InputError
// "<spec.kernel>: ..." naming the tensor).
void check_operand_views(const MatmulSpec& spec, const Operand& op, int64_t F, const char* which);

// SBUF bytes per partition of the PE loader's row tiles of one operand (two buffers of 128 rows by the
// load's K columns): 0 unless operand.pe_rows_by_dma().
int64_t pe_rows_bytes(const Operand& o, int64_t tile_k, int64_t load_f);

}  // namespace trnsim::kernels::mxfp8
