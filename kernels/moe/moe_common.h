// Pieces the blockwise MoE forward and backward packages share: the routing input recipe and its checks and
// stats, the comparator of nkilib's MoE tests, the host helpers of both references, and device helpers of
// both instruction streams.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/api/kernel.h"
#include "kernels/api/package.h"
#include "kernels/lib/mxfp8/operand.h"
#include "kernels/ref/matmul_ref.h"
#include "sim/isa/instruction.h"
#include "sim/numerics/float_formats.h"
#include "sim/tensor/host_tensor.h"

namespace trnsim::kernels::moe {

// --- Routing (an input recipe shared by both kernels).

// Arguments of the routing recipe.
struct RoutingArgs {
  int64_t seed = 0;
  double zipf = 0.0;
  bool renormalize = true;
  static void describe(Schema<RoutingArgs>& s);
};

// What the recipe needs of a kernel's parameters. `indirect` false: one expert, tokens in block order (the
// routing tensors are unused dummies; only the affinities are made).
struct RoutingShape {
  int64_t T = 0, E = 0, top_k = 1, B = 0, N = 0;
  int32_t pad = -1;
  bool indirect = true;
};

// Fills token_position_to_id, block_to_expert and expert_affinities_masked of `io`.
void routing_recipe(const RoutingShape& r, const RoutingArgs& a, RecipeIO& io);
inline const char* kRoutingDoc =
    "top-k routing of T tokens over E experts (router logits with a Zipf expert skew, softmax, top-k with "
    "ties to the lower id) into token_position_to_id, block_to_expert and expert_affinities_masked, blocks "
    "formed as nkilib's MoE tests form them; padding -1 or T as skip_dma says";
inline std::vector<std::string> routing_outputs() {
  return {"token_position_to_id", "block_to_expert", "expert_affinities_masked"};
}

// The integer values of an int tensor.
std::vector<int32_t> int_values(const tensor::HostTensor& t);
// validate_routing on the kernel inputs (nothing when !indirect, or while either routing tensor is not made
// yet).
void check_routing_inputs(const RoutingShape& r, const Tensors& in);
// Tokens per expert, padding fraction, padding-only blocks (none when !indirect).
std::vector<KernelStat> routing_kernel_stats(const RoutingShape& r, const Tensors& in);

// The indirect-DMA stats of both kernels (over both cores): gathers (`what`: which rows), scatters (`what`:
// which rows, where to), and the rows they skip (-1 padding slots times the passes over them).
KernelStat gather_dma_stat(int64_t count, const std::string& what);
KernelStat scatter_dma_stat(int64_t count, const std::string& what);
KernelStat rows_skipped_stat(double rows);

// --- Checks.

// nkilib's MXFP8 MoE comparator (test/integration/.../moe_mxfp8/mxfp8_moe_validated_common.py, used by the
// forward and backward suites): allclose with atol = 0.5 max|golden| and rtol 1e-3, cosine >= 0.99,
// normalized Euclidean distance <= 0.70 against the exact reference. The rel L2 bound against the kernel's
// emulated numerics stays the tight one (the output dtype's default bound).
inline const Tolerance kMoeTolerance{.atol_factor = 0.5,
                                     .rtol = 1e-3,
                                     .min_cosine = 0.99,
                                     .max_norm_euclidean = 0.70,
                                     .max_rel_l2_vs_quantized = std::nullopt};

// The nki_library schedules' DGT loads of a stacked BF16 weight viewed as [E * F, K] address rows of its
// flattened view [E F K / vs, vs], vs = tile_k / 4 of the smallest DGT tile (the config's tile_k, or 256 /
// 128 for a K remainder). The row index is uint32 vector offsets plus the expert's offset, an FP32 tile
// (expert * F K / 128, nki-library moe_mxfp8/bwd/bwmm_bwd_dropless_mxfp8.py _set_expert_offset_on_td, at
// e9ef98fc), added by tensor_scalar (mxfp_utils/mxfp8_utils/common_dataclasses.py
// TileLocation.set_vector_offset, at 092a49dc): an arithmetic
// op, computed in FP32 (NKI ISA docs, "Supported Math Operators": arithmetic operators convert their inputs
// to float32), so an index past 2^24 rounds to even and the DMA reads another row. The message naming the
// weight, the shape keys `keys` (e.g. "E * (2 * I_TP) * H") with their values and the limit, or nullopt when
// every index is exact.
std::optional<std::string> dgt_expert_offset_error(const std::string& weight, const std::string& keys,
                                                   int64_t E, int64_t F, int64_t K, int64_t tile_k);

// Evenly spaced groups of `group` items out of `total`, so that their cost stays within `budget` (all of them
// with `full` or when they fit).
std::vector<int64_t> sample_groups(int64_t total, int64_t group, double cost_all, double budget, bool full);

// --- Host numerics of the references.

float bf16_at(const tensor::HostTensor& t, int64_t i);
// out[j] = bf16_at(t, first + j) for j < n.
void bf16_span(const tensor::HostTensor& t, int64_t first, int64_t n, float* out);
double round_to(double x, isa::DType dt);  // to FP32 or BF16 (round to nearest even)
double silu(double x);
// out[n, c] = a[n, K] b[c, K]^T, all row-major FP64 (ref::gemm_nt_f64: the same bytes on every thread count).
void gemm_nt(const std::vector<double>& a, const std::vector<double>& b, int64_t n, int64_t c, int64_t K,
             std::vector<double>& out);
// Rows [rows, K] of floats as FP64, exact or MX-quantized along K (trn3 scale rule, the x4 interleave
// `scheme` deciding which 32 K-indices share a scale).
std::vector<double> as_f64(const std::vector<float>& v, int64_t rows, int64_t K, bool quantize,
                           num::Fp8Format fmt, num::QuantScheme scheme = num::QuantScheme::WrapX);
using ref::dequantize_x4;
using ref::unswizzle_bf16;

// One expert's weight [rows, cols] (row-major) as the references read it: BF16 values read in place from the
// input tensor (its file mapping or the machine's copy), a block of rows at a time, or FP32 values decoded
// whole where the layout needs it (pre-quantized x4 data, pre-swizzled BF16).
struct ExpertWeight {
  const tensor::HostTensor* bf16 = nullptr;  // null: `decoded` holds the values
  int64_t first = 0;                         // element of bf16 at [0, 0]
  std::vector<float> decoded;
  int64_t rows = 0, cols = 0;
  // Rows [r0, r0 + n) of the weight, or of its transpose [cols, rows] with `transposed`, as FP32 into out.
  void read_rows(int64_t r0, int64_t n, bool transposed, std::vector<float>& out) const;
};

// Rows of the weight blocks gemm_weight reads for a contraction of length K (about 2 M elements a block).
int64_t weight_block_rows(int64_t K);

// out [n, c] = a [n, K] W^T, W [c, K] the weight (transposed: its transpose), taken weight_block_rows(K)
// rows at a time as FP64 (MX-quantized along K with `quantize`): the bytes of one gemm_nt on W's whole FP64
// copy, since ref::gemm_nt_f64 sums each element in the same order whichever rows of b share a call.
void gemm_weight(const std::vector<double>& a, int64_t n, const ExpertWeight& w, bool transposed,
                 bool quantize, num::Fp8Format fmt, num::QuantScheme scheme, std::vector<double>& out);
// Bytes gemm_weight holds besides a and out, for out [n, c] and contraction K: one block of the weight in
// FP32 and FP64 (12 bytes an element) and its product with a (8 n bytes a row).
double gemm_weight_bytes(int64_t n, int64_t c, int64_t K);

// --- Pre-quantized weights (both kernels).

// The pipeline operand of one GEMM's weight, stacked over E experts: BF16 (F-by-K, or pre-swizzled with
// `swizzled`), or, when `scales` (the shape of the E8M0 scales input) is given, x4 data [E, K/4, cols] with
// scales [E, K/4, cols] (unpacked) or [E, ceil(K/2048)*128, cols] (packed, as `packing` says). The operand
// reads F of the cols (a slice bound at emit time: a gate or up half, a core's share). `kernel` prefixes the
// InputError messages; `param` is the parameter prefix ("gate_up_weight": gate_up_weight_scales and
// gate_up_weight_is_swizzled); k_name / cols_name / f_name name K, cols and F in messages.
struct WeightSpec {
  std::string tensor, param;
  bool swizzled = false;
  const std::optional<std::vector<int64_t>>* scales = nullptr;
  int64_t E = 0, K = 0, cols = 0, F = 0;
  const char *k_name = "", *cols_name = "", *f_name = "";
  bool packing = true;
  std::string packing_key = "use_scale_packing";  // the parameter that set `packing`, for messages
};
mxfp8::Operand weight_operand(const char* kernel, const WeightSpec& w);

// --- Device helpers.

// Bytes per partition of an SBUF tile with `free` elements of `dtype` (the allocator's 64-byte granule).
int64_t tile_bytes(int64_t free, isa::DType dtype);
// The [1, 1] element b of an SBUF row [1, n].
View element(const View& row, int64_t b);
// dst [128, n] FP32 = row [1, n] broadcast to every partition (the PE: ones^T x row), in 512-column pieces
// through one PSUM tile, copied out by ACT (kernels/lib/partition_fill.h).
void broadcast_rows(Kernel& k, const View& dst, const View& row, const View& ones);
// Zeroes rows [0, rows) of an HBM [rows, H] tensor from a zeroed SBUF tile [128, chunk] BF16, 128 rows per
// DMA step (zero_region, kernels/lib/partition_fill.h).
void zero_rows(Kernel& k, const View& dst, int64_t rows, int64_t H, int64_t chunk);

}  // namespace trnsim::kernels::moe
