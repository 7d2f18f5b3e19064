#include "kernels/moe/moe_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/api/nki.h"
#include "kernels/lib/mxfp8/layout.h"
#include "kernels/lib/partition_fill.h"
#include "kernels/moe/routing.h"
#include "kernels/ref/gemm_f64.h"
#include "sim/base/error.h"
#include "sim/numerics/scale_layout.h"

namespace trnsim::kernels::moe {

void RoutingArgs::describe(Schema<RoutingArgs>& s) {
  s.add(&RoutingArgs::seed, "seed", "seed of the router logits").at_least(0);
  s.add(&RoutingArgs::zipf, "zipf",
        "expert popularity skew: expert e is a token's first choice with probability proportional to "
        "1/(e+1)^zipf (0: uniform)",
        0.0)
      .range(0, 64);
  s.add(&RoutingArgs::renormalize, "renormalize",
        "affinities are the top-k softmax probabilities renormalised to sum to 1 per token (false: the "
        "softmax probabilities over all experts)",
        true);
}

void routing_recipe(const RoutingShape& rs, const RoutingArgs& a, RecipeIO& io) {
  tensor::HostTensor& tp = io.output("token_position_to_id");
  tensor::HostTensor& be = io.output("block_to_expert");
  tensor::HostTensor& ea = io.output("expert_affinities_masked");
  const int64_t T = rs.T, E = rs.E, K = rs.top_k;
  const TopK r =
      route_topk(router_logits(static_cast<uint64_t>(a.seed), T, E, a.zipf), T, E, K, a.renormalize);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      ea.set(t * E + r.experts[t * K + k], static_cast<float>(r.affinities[t * K + k]));
  if (!rs.indirect) return;  // the routing tensors are unused dummies
  const Blocks b = form_blocks(r.experts, T, E, K, rs.B, rs.N, rs.pad);
  for (size_t i = 0; i < b.token_position_to_id.size(); ++i)
    tp.set_int(static_cast<int64_t>(i), b.token_position_to_id[i]);
  for (size_t i = 0; i < b.block_to_expert.size(); ++i)
    be.set_int(static_cast<int64_t>(i), b.block_to_expert[i]);
}

std::vector<int32_t> int_values(const tensor::HostTensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(t.int_value(static_cast<int64_t>(i)));
  return v;
}

void check_routing_inputs(const RoutingShape& r, const Tensors& in) {
  if (!r.indirect || !in.count("token_position_to_id") || !in.count("block_to_expert")) return;
  const auto tp = int_values(in.at("token_position_to_id")), be = int_values(in.at("block_to_expert"));
  validate_routing({&tp, &be, r.T, r.E, r.B, r.N, r.pad});
}

std::vector<KernelStat> routing_kernel_stats(const RoutingShape& rs, const Tensors& in) {
  std::vector<KernelStat> s;
  if (!rs.indirect) return s;
  const auto tp = int_values(in.at("token_position_to_id")), be = int_values(in.at("block_to_expert"));
  const RoutingStats r = routing_stats({&tp, &be, rs.T, rs.E, rs.B, rs.N, rs.pad});
  const double slots = static_cast<double>(rs.N * rs.B);
  s.push_back({"tokens_per_expert_min", static_cast<double>(r.tokens_min), "count",
               "fewest (token, expert) pairs routed to one expert"});
  s.push_back({"tokens_per_expert_mean", r.tokens_mean, "count", "(token, expert) pairs per expert"});
  s.push_back({"tokens_per_expert_max", static_cast<double>(r.tokens_max), "count",
               "most (token, expert) pairs routed to one expert"});
  s.push_back({"experts_without_tokens", static_cast<double>(r.experts_without_tokens), "count",
               "experts no token is routed to (their weights are never read)"});
  s.push_back({"padding_fraction", 100.0 * static_cast<double>(r.padding_slots) / slots, "%",
               "slots of the N blocks that hold the padding value (computed, contribute nothing)"});
  s.push_back({"padding_only_blocks", static_cast<double>(r.padding_only_blocks), "count",
               "blocks without any token (still processed, as nkilib does)"});
  return s;
}

KernelStat gather_dma_stat(int64_t count, const std::string& what) {
  return {"gather_dma_count", static_cast<double>(count), "count",
          fmt::format("indirect DMAs that gather rows ({})", what)};
}

KernelStat scatter_dma_stat(int64_t count, const std::string& what) {
  return {"scatter_dma_count", static_cast<double>(count), "count",
          fmt::format("indirect DMAs that scatter {}", what)};
}

KernelStat rows_skipped_stat(double rows) {
  return {"rows_skipped", rows, "count",
          "rows the indirect DMAs skip (-1 padding slots times the gather and scatter passes)"};
}

std::optional<std::string> dgt_expert_offset_error(const std::string& weight, const std::string& keys,
                                                   int64_t E, int64_t F, int64_t K, int64_t tile_k) {
  const int64_t rem = K % tile_k;
  const int64_t smallest = rem % 256 >= 128 ? 128 : rem >= 256 ? 256 : tile_k;
  const int64_t vs = smallest / 4, rows = E * F * K / vs;
  constexpr int64_t kExact = int64_t{1} << 24;
  if (rows <= kExact) return std::nullopt;
  return fmt::format(
      "the DGT loads of {} index the rows of its flattened view, {} / {} = {} * {} * {} / {} = {}, past 2^24 "
      "= {}: nki-library makes the expert's offset a float32 [128, 1] tile (moe_mxfp8 "
      "bwmm_bwd_dropless_mxfp8.py _set_expert_offset_on_td, e9ef98fc; the forward calls the same) and adds "
      "it "
      "to the uint32 vector offsets with tensor_scalar (mxfp8_utils/common_dataclasses.py "
      "TileLocation.set_vector_offset, 092a49dc), which computes in FP32, so row indices past 2^24 round and "
      "the DMAs would read other rows (the hardware as well: the library has this limit); use fewer experts "
      "or smaller experts ({} / {} at most 2^24), or set \"schedule\": \"trnsim_optimized\" (its weights "
      "move by int32 scalar offsets)",
      weight, keys, vs, E, F, K, vs, rows, kExact, keys, vs);
}

std::vector<int64_t> sample_groups(int64_t total, int64_t group, double cost_all, double budget, bool full) {
  int64_t stride = 1;
  const int64_t groups = (total + group - 1) / group;
  if (!full && cost_all > budget)
    stride = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(cost_all / budget)), 1,
                                 std::max<int64_t>(1, groups));
  std::vector<int64_t> v;
  for (int64_t g = 0; g < groups; g += stride)
    for (int64_t i = g * group; i < std::min(total, (g + 1) * group); ++i) v.push_back(i);
  return v;
}

float bf16_at(const tensor::HostTensor& t, int64_t i) {
  uint16_t v;
  std::memcpy(&v, t.bytes.data() + 2 * i, 2);
  return num::bf16_to_f32(v);
}

void bf16_span(const tensor::HostTensor& t, int64_t first, int64_t n, float* out) {
  const uint8_t* src = t.bytes.data() + 2 * first;
  for (int64_t j = 0; j < n; ++j) {
    uint16_t v;
    std::memcpy(&v, src + 2 * j, 2);
    out[j] = num::bf16_to_f32(v);
  }
}

double round_to(double x, isa::DType dt) {
  if (dt == isa::DType::F32) return static_cast<double>(static_cast<float>(x));
  return static_cast<double>(num::bf16_to_f32(num::f32_to_bf16(static_cast<float>(x))));
}

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

void gemm_nt(const std::vector<double>& a, const std::vector<double>& b, int64_t n, int64_t c, int64_t K,
             std::vector<double>& out) {
  out.assign(static_cast<size_t>(n * c), 0.0);
  if (n == 0 || c == 0) return;
  ref::gemm_nt_f64(a.data(), b.data(), n, c, K, out.data());
}

std::vector<double> as_f64(const std::vector<float>& v, int64_t rows, int64_t K, bool quantize,
                           num::Fp8Format fmt, num::QuantScheme scheme) {
  if (rows == 0) return {};
  const ref::Operand o{v.data(), rows, K, ref::Contract::Cols};
  if (quantize) return ref::mx_fake_quantize(o, {fmt, num::ScaleRule::Trn3, scheme});
  return ref::to_f64(o);
}

void ExpertWeight::read_rows(int64_t r0, int64_t n, bool transposed, std::vector<float>& out) const {
  const int64_t width = transposed ? rows : cols;
  out.resize(static_cast<size_t>(n * width));
  if (!transposed) {
    if (bf16)
      bf16_span(*bf16, first + r0 * cols, n * cols, out.data());
    else
      std::copy_n(decoded.data() + r0 * cols, n * cols, out.data());
    return;
  }
  // Columns [r0, r0 + n): kTile source rows at a time, each row's run of n values read once, then written
  // down the output's columns kTile values at a time, so that reads and writes stay in the cache.
  constexpr int64_t kTile = 64;
  std::vector<float> tile(static_cast<size_t>(kTile * n));
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t ni = std::min(kTile, rows - i0);
    for (int64_t i = 0; i < ni; ++i) {
      if (bf16)
        bf16_span(*bf16, first + (i0 + i) * cols + r0, n, &tile[i * n]);
      else
        std::copy_n(decoded.data() + (i0 + i) * cols + r0, n, &tile[i * n]);
    }
    for (int64_t j = 0; j < n; ++j) {
      float* o = out.data() + j * rows + i0;
      for (int64_t i = 0; i < ni; ++i) o[i] = tile[i * n + j];
    }
  }
}

int64_t weight_block_rows(int64_t K) {
  return std::max<int64_t>(24, (int64_t{1} << 21) / std::max<int64_t>(K, 1));
}

double gemm_weight_bytes(int64_t n, int64_t c, int64_t K) {
  const double rows = static_cast<double>(std::min(c, weight_block_rows(K)));
  return rows * (12.0 * static_cast<double>(K) + 8.0 * static_cast<double>(n));
}

void gemm_weight(const std::vector<double>& a, int64_t n, const ExpertWeight& w, bool transposed,
                 bool quantize, num::Fp8Format fmt, num::QuantScheme scheme, std::vector<double>& out) {
  const int64_t c = transposed ? w.cols : w.rows, K = transposed ? w.rows : w.cols;
  out.assign(static_cast<size_t>(n * c), 0.0);
  if (n == 0 || c == 0) return;
  const int64_t step = weight_block_rows(K);
  std::vector<float> block;
  std::vector<double> part;
  for (int64_t r0 = 0; r0 < c; r0 += step) {
    const int64_t rc = std::min(step, c - r0);
    w.read_rows(r0, rc, transposed, block);
    gemm_nt(a, as_f64(block, rc, K, quantize, fmt, scheme), n, rc, K, part);
    for (int64_t r = 0; r < n; ++r) std::copy_n(&part[r * rc], rc, &out[r * c + r0]);
  }
}

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

// Checks a pre-quantized weight's scales shape (stacked over experts) and returns its rows per expert.
int64_t check_scales(const char* kernel, const std::string& param, const std::vector<int64_t>& got,
                     const WeightSpec& w) {
  const std::vector<int64_t> un{w.E, w.K / 4, w.cols}, pk{w.E, mxfp8::cdiv(w.K, 2048) * 128, w.cols};
  const auto fail = [&](const std::string& m) { throw InputError(fmt::format("{}: {}", kernel, m)); };
  if (got != un && got != pk)
    fail(fmt::format(
        "parameter '{}': shape {} is neither [E, {}/4, {}] = {} (unpacked) nor [E, ceil({}/2048)*128, {}] = "
        "{} "
        "(packed)",
        param, shape_str(got), w.k_name, w.cols_name, shape_str(un), w.k_name, w.cols_name, shape_str(pk)));
  if (un != pk && (got == pk) != w.packing)
    fail(fmt::format("parameter '{}': {} = {} but the shape {} is the {} layout", param, w.packing_key,
                     w.packing, shape_str(got), got == pk ? "packed" : "unpacked"));
  return got[1];
}

}  // namespace

mxfp8::Operand weight_operand(const char* kernel, const WeightSpec& w) {
  mxfp8::Operand o;
  o.source = mxfp8::Source::Hbm;
  o.name = w.tensor, o.param = w.param, o.f_name = w.f_name;
  o.scales_name = w.param + "_scales";
  if (w.scales && *w.scales) {
    if (w.swizzled)
      throw InputError(fmt::format(
          "{}: parameters '{}_is_swizzled' and '{}_scales': pre-quantized weights are x4 data, already "
          "interleaved; leave {}_is_swizzled false",
          kernel, w.param, w.param, w.param));
    o.layout = mxfp8::Layout::Quantized;
    o.scales_shape = {check_scales(kernel, o.scales_name, **w.scales, w), w.F};
  } else {
    o.layout = w.swizzled ? mxfp8::Layout::Swizzled : mxfp8::Layout::FByK;
  }
  return o;
}

int64_t tile_bytes(int64_t free, isa::DType dtype) {
  return mxfp8::round_up(free * isa::dtype_size(dtype), 64);
}

View element(const View& row, int64_t b) {
  return row(S(0, 1), S(b, b + 1));
}

void broadcast_rows(Kernel& k, const View& dst, const View& row, const View& ones) {
  broadcast_partitions(dst, row, ones, k.psum({128, 512}, isa::DType::F32, "moe_bcast"), isa::Engine::ACT);
}

void zero_rows(Kernel& k, const View& dst, int64_t rows, int64_t H, int64_t chunk) {
  View z = k.sbuf({128, chunk}, isa::DType::BF16, "moe_zeros");
  nki::memset(z, 0.0, isa::Engine::POOL);
  zero_region(dst(S(0, rows), S(0, H)), z);
}

}  // namespace trnsim::kernels::moe
