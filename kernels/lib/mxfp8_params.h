// Typed parameters the MXFP8 matmul kernels share (nki-library MatmulMxfp8KernelConfig and the flat
// arguments of matmul_mxfp8 / matmul_mxfp8_backward), declared once.
#pragma once

#include <optional>

#include "kernels/api/params.h"
#include "kernels/lib/mxfp8/plan.h"
#include "kernels/ref/matmul_ref.h"

namespace trnsim::kernels {

// The tiling fields of one matmul call (nki-library MatmulMxfp8KernelConfig); null = auto (mxfp8/plan.h).
struct MxTilingConfig {
  std::optional<int64_t> tile_m, tile_k, tile_n;
  std::optional<int64_t> blocks_m, blocks_n, blocks_k;  // TILES_IN_BLOCK_M/N/K
  std::optional<int64_t> load_m, load_n;                // TILES_IN_LOAD_M/N

  static void describe(Schema<MxTilingConfig>& s) {
    s.add(&MxTilingConfig::tile_m, "tile_m",
          "stationary (LHS) tile free size, multiple of 32, <= 128; null: 128")
        .range(1, 1 << 16);
    s.add(&MxTilingConfig::tile_k, "tile_k",
          "logical contraction per nc_matmul_mx: 128, 256 or 512; null: 512 (K if K is 128 or 256)")
        .range(1, 1 << 16);
    s.add(&MxTilingConfig::tile_n, "tile_n",
          "moving (RHS) tile free size, multiple of 32, <= 4096 (above 512 a tile spans PSUM banks); null: "
          "largest of 512/256/128 dividing the per-core N")
        .range(1, 1 << 16);
    s.add(&MxTilingConfig::blocks_m, "TILES_IN_BLOCK_M",
          "M tiles per block; null: chosen to fit SBUF with the fewest reloads (trnsim_optimized; the "
          "nki_library schedule fills every null field of this config with nki-library's "
          "auto_generate_default fallback instead: see the schedule parameter)")
        .range(1, 1 << 16);
    s.add(&MxTilingConfig::blocks_n, "TILES_IN_BLOCK_N", "N tiles per block; null: auto").range(1, 1 << 16);
    s.add(&MxTilingConfig::blocks_k, "TILES_IN_BLOCK_K", "K tiles per block; null: auto").range(1, 1 << 16);
    s.add(&MxTilingConfig::load_m, "TILES_IN_LOAD_M",
          "M tiles per DMA load, divides TILES_IN_BLOCK_M; null: "
          "widest <= 1024 columns")
        .range(1, 1 << 16);
    s.add(&MxTilingConfig::load_n, "TILES_IN_LOAD_N",
          "N tiles per DMA load, divides TILES_IN_BLOCK_N; null: auto")
        .range(1, 1 << 16);
  }
  mxfp8::Tiling tiling() const {
    return {tile_m.value_or(0),   tile_k.value_or(0),   tile_n.value_or(0), blocks_m.value_or(0),
            blocks_n.value_or(0), blocks_k.value_or(0), load_m.value_or(0), load_n.value_or(0)};
  }
};

// The flat arguments both MXFP8 matmul entries take (lnc_2_shard_rhs is each kernel's own: the defaults
// differ). float8_dtype defaults to float8_e5m2, as nki-library documents matmul_mxfp8 and
// matmul_mxfp8_backward (matmul_mxfp8_generic_kernel.py and matmul_mxfp8_generic_backward_kernel.py at
// 092a49dc, the version this project's kernel documentation describes; later versions default to
// float8_e4m3fn).
struct MxSharedParams {
  bool nmk = false;
  num::Fp8Format fp8 = num::Fp8Format::E5M2;
  DType out_dtype = DType::BF16;
  bool run_with_lnc2 = true;
  bool use_scale_packing = false;
  bool spill_reload = false;
  num::QuantScheme scheme = num::QuantScheme::WrapX;

  static void describe(Schema<MxSharedParams>& s) {
    s.choice(&MxSharedParams::nmk, "tile_loop_order",
             "tile order inside a block: M tiles outer ('mnk') or N tiles outer ('nmk'); K innermost in PSUM",
             {{"mnk", false}, {"nmk", true}}, false);
    s.choice(
        &MxSharedParams::fp8, "float8_dtype",
        "MXFP8 element type (x4-packed on chip); default float8_e5m2 as nki-library documents the kernel "
        "(092a49dc; later versions default to float8_e4m3fn)",
        {{"float8_e4m3fn", num::Fp8Format::E4M3FN}, {"float8_e5m2", num::Fp8Format::E5M2}},
        num::Fp8Format::E5M2);
    s.choice(&MxSharedParams::out_dtype, "output_dtype", "dtype of the outputs",
             {{"bfloat16", DType::BF16}, {"float32", DType::F32}}, DType::BF16);
    s.add(&MxSharedParams::run_with_lnc2, "run_with_lnc2",
          "run on both physical cores (num_programs 2), splitting one free dim; false: one core", true);
    s.add(&MxSharedParams::use_scale_packing, "use_scale_packing",
          "4 consecutive K tiles share one 128-partition scale tile at offsets 0/4/8/12; pre-quantized "
          "scales are "
          "then [ceil(K/2048)*128, F]",
          false);
    s.add(&MxSharedParams::spill_reload, "spill_reload",
          "write each quantized block to an HBM scratch when first produced and reload it later instead of "
          "re-loading and re-quantizing the BF16 data",
          false);
    s.choice(
        &MxSharedParams::scheme, "quant_scheme",
        "x4 interleave of K: wrapX (partition p of a 512-row tile holds rows p+128j) or 1x32 (rows 4p..4p+3: "
        "OCP 32-contiguous groups)",
        {{"wrapX", num::QuantScheme::WrapX}, {"1x32", num::QuantScheme::OneX32}}, num::QuantScheme::WrapX);
  }
  void apply(mxfp8::MatmulSpec& spec) const {
    spec.nmk = nmk;
    spec.fp8 = fp8;
    spec.out_dtype = out_dtype;
    spec.run_with_lnc2 = run_with_lnc2;
    spec.use_scale_packing = use_scale_packing;
    spec.spill_reload = spill_reload;
    spec.scheme = scheme;
  }
  // The host reference's MX quantization for these parameters (the trn3 scale rule of quantize_mx).
  ref::MxQuant quant() const { return {fp8, num::ScaleRule::Trn3, scheme}; }
};

}  // namespace trnsim::kernels
