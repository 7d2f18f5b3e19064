#include "kernels/cross_entropy/ce_recipes.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/cross_entropy/ce_reference.h"
#include "sim/base/error.h"
#include "sim/io/generators.h"
#include "sim/numerics/float_formats.h"

namespace trnsim::kernels::ce {
namespace {

using tensor::HostTensor;

struct LogitsArgs {
  int64_t seed = 1;
  double mean = 0.0, std = 2.0;
  int64_t masked_columns = 0, masked_prefix = 0, masked_prefix_every = 0;
  int64_t all_masked_rows = 0, neg_inf_target_rows = 0, bf16_max_rows = 0, tie_rows = 0, nan_rows = 0;
  double ignore_fraction = 0.0;

  static void describe(Schema<LogitsArgs>& s) {
    s.add(&LogitsArgs::seed, "seed", "random seed", 1).at_least(0);
    s.add(&LogitsArgs::mean, "mean", "mean of the logits", 0.0);
    s.add(&LogitsArgs::std, "std", "standard deviation of the logits (> 0)", 2.0).range(1e-6, 1e6);
    s.add(&LogitsArgs::masked_columns, "masked_columns",
          "the last N vocabulary columns are -inf in every row (a padded vocabulary)", 0)
        .at_least(0);
    s.add(&LogitsArgs::masked_prefix, "masked_prefix",
          "first N columns -inf in the rows picked by masked_prefix_every", 0)
        .at_least(0);
    s.add(&LogitsArgs::masked_prefix_every, "masked_prefix_every",
          "rows r with r % k == k / 2 get the masked prefix (0: none)", 0)
        .at_least(0);
    s.add(&LogitsArgs::all_masked_rows, "all_masked_rows", "evenly spaced rows whose logits are all -inf", 0)
        .at_least(0);
    s.add(&LogitsArgs::neg_inf_target_rows, "neg_inf_target_rows", "rows whose target logit is -inf", 0)
        .at_least(0);
    s.add(&LogitsArgs::bf16_max_rows, "bf16_max_rows",
          "rows whose target logit is the BF16 maximum and a few other logits +-that value", 0)
        .at_least(0);
    s.add(&LogitsArgs::tie_rows, "tie_rows", "rows whose maximum 8.0 appears in 3 columns", 0).at_least(0);
    s.add(&LogitsArgs::nan_rows, "nan_rows", "rows with one NaN logit (not the target)", 0).at_least(0);
    s.add(&LogitsArgs::ignore_fraction, "ignore_fraction",
          "fraction of the other rows whose target is ignore_idx (1: every row)", 0.0)
        .range(0, 1);
  }
};

struct NoArgs {
  static void describe(Schema<NoArgs>&) {}
};

enum Special : uint8_t { kNone, kAllMasked, kNegInfTarget, kBf16Max, kTie, kNan };

// Marks n evenly spaced rows (starting near `offset`) not yet taken with `kind`.
void pick(std::vector<uint8_t>& kind, int64_t n, int64_t offset, uint8_t what) {
  const int64_t R = static_cast<int64_t>(kind.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = (offset + i * R / n) % R;
    while (kind[r] != kNone) r = (r + 1) % R;
    kind[r] = what;
  }
}

double unit(uint64_t seed, uint64_t stream, int64_t i) {
  return static_cast<double>(io::mix64(seed * 0x9E3779B97F4A7C15ull + stream * 0xD1B54A32D192ED03ull +
                                       static_cast<uint64_t>(i)) >>
                             11) *
         0x1.0p-53;
}

// The Irwin-Hall sums of a row's V samples (hash key + j), then their values from the table: integer
// operations and a lookup, so the widest vectors the host has give the same bytes as the baseline ISA.
[[gnu::always_inline]] inline void samples_body(uint64_t key, int64_t V, uint32_t* sums, const float* value,
                                                float* row) {
  for (int64_t j = 0; j < V; ++j) {
    const uint64_t h = io::mix64(key + static_cast<uint64_t>(j));
    sums[j] = static_cast<uint32_t>(h & 0xFFFF) + static_cast<uint32_t>((h >> 16) & 0xFFFF) +
              static_cast<uint32_t>((h >> 32) & 0xFFFF) + static_cast<uint32_t>(h >> 48);
  }
  for (int64_t j = 0; j < V; ++j) row[j] = value[sums[j]];
}
void samples_baseline(uint64_t key, int64_t V, uint32_t* sums, const float* value, float* row) {
  samples_body(key, V, sums, value, row);
}
[[gnu::target("avx512f,avx512dq,avx512vl")]] void samples_avx512(uint64_t key, int64_t V, uint32_t* sums,
                                                                 const float* value, float* row) {
  samples_body(key, V, sums, value, row);
}
bool host_has_avx512dq() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return yes;
}

// The arguments against each other and the shape (validate checks them too, not only run).
void check_logits(const CommonParams& p, const LogitsArgs& a) {
  const int64_t R = p.rows, V = p.V;
  const int64_t hi_t = V - a.masked_columns;
  const bool prefix = a.masked_prefix > 0 && a.masked_prefix_every > 0;
  if (hi_t <= 0)
    throw InputError(
        fmt::format("masked_columns {} leaves no column of V = {} for targets", a.masked_columns, V));
  if (prefix && a.masked_prefix >= hi_t)
    throw InputError(
        fmt::format("masked_prefix {} leaves no unmasked column for targets (V {}, masked_columns {})",
                    a.masked_prefix, V, a.masked_columns));
  // Each count is at least 0 (its spec): their sum, in double, cannot wrap.
  const double specials = static_cast<double>(a.all_masked_rows) +
                          static_cast<double>(a.neg_inf_target_rows) + static_cast<double>(a.bf16_max_rows) +
                          static_cast<double>(a.tie_rows) + static_cast<double>(a.nan_rows);
  if (specials > static_cast<double>(R))
    throw InputError(fmt::format("{} special rows for {} rows", specials, R));
  if ((a.bf16_max_rows > 0 || a.tie_rows > 0 || a.nan_rows > 0) && hi_t < 8)
    throw InputError("bf16_max_rows, tie_rows and nan_rows need at least 8 unmasked columns");
}

void make_logits(const CommonParams& p, const LogitsArgs& a, RecipeIO& io) {
  check_logits(p, a);
  const int64_t R = p.rows, V = p.V;
  const int64_t hi_t = V - a.masked_columns;
  const bool prefix = a.masked_prefix > 0 && a.masked_prefix_every > 0;
  std::vector<uint8_t> kind(static_cast<size_t>(R), kNone);
  pick(kind, a.all_masked_rows, R / 7, kAllMasked);
  pick(kind, a.neg_inf_target_rows, R / 5, kNegInfTarget);
  pick(kind, a.bf16_max_rows, R / 3, kBf16Max);
  pick(kind, a.tie_rows, R / 2, kTie);
  pick(kind, a.nan_rows, R / 9, kNan);

  HostTensor& x = io.output("logits");
  HostTensor& t = io.output("target");
  const bool bf16 = x.dtype == isa::DType::BF16;
  const float ninf = -std::numeric_limits<float>::infinity();
  const float bmax = num::bf16_to_f32(0x7F7F);
  auto* t32 = reinterpret_cast<int32_t*>(t.bytes.data());
  // Irwin-Hall sum of four 16-bit uniforms from one 64-bit hash per element, scaled to unit variance: an
  // approximately normal sample from integer arithmetic only (fast, and the same on every platform). The
  // logit is a function of the sum alone: one table entry per sum value.
  std::vector<float> value(4 * 0xFFFF + 1);
  for (size_t sum = 0; sum < value.size(); ++sum) {
    const double z = (static_cast<double>(sum) + 2.0) * 0x1.0p-16 - 2.0;  // mean 0, variance 1/3
    value[sum] = static_cast<float>(a.mean + a.std * 1.7320508075688772 * z);
  }
  const auto samples = host_has_avx512dq() ? samples_avx512 : samples_baseline;
  parallel_rows(R, io.threads(), [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(V));
    std::vector<uint32_t> sums(static_cast<size_t>(V));
    for (int64_t r = r0; r < r1; ++r) {
      const uint64_t key = io::mix64(static_cast<uint64_t>(a.seed) * 1000003ull + static_cast<uint64_t>(r));
      samples(key, V, sums.data(), value.data(), row.data());
      for (int64_t j = hi_t; j < V; ++j) row[j] = ninf;
      const bool pre = prefix && r % a.masked_prefix_every == a.masked_prefix_every / 2;
      const int64_t lo_t = pre ? a.masked_prefix : 0;
      if (pre)
        for (int64_t j = 0; j < a.masked_prefix; ++j) row[j] = ninf;
      int64_t y = lo_t + static_cast<int64_t>(unit(a.seed, 1, r) * static_cast<double>(hi_t - lo_t));
      y = std::min(y, hi_t - 1);
      switch (kind[r]) {
        case kAllMasked:
          for (float& f : row) f = ninf;
          break;
        case kNegInfTarget:
          row[y] = ninf;
          break;
        case kBf16Max:
          row[y] = bmax;
          row[(y + 1) % hi_t] = bmax;
          row[(y + 3) % hi_t] = -bmax;
          break;
        case kTie: {
          const int64_t a0 = lo_t + (y - lo_t + 2) % (hi_t - lo_t),
                        a1 = lo_t + (y - lo_t + 5) % (hi_t - lo_t);
          row[y] = row[a0] = row[a1] = 8.0f;
          for (float& f : row) f = std::min(f, 8.0f);
          break;
        }
        case kNan:
          row[(y + 6) % hi_t] = std::numeric_limits<float>::quiet_NaN();
          break;
        default:
          break;
      }
      const bool ignored =
          a.ignore_fraction >= 1.0 || (kind[r] == kNone && unit(a.seed, 2, r) < a.ignore_fraction);
      t32[r] = ignored ? static_cast<int32_t>(p.ignore_idx) : static_cast<int32_t>(y);
      if (bf16) {
        auto* o = reinterpret_cast<uint16_t*>(x.bytes.data()) + r * V;
        for (int64_t j = 0; j < V; ++j) o[j] = num::f32_to_bf16(row[j]);
      } else {
        std::memcpy(x.bytes.data() + r * V * 4, row.data(), static_cast<size_t>(V) * 4);
      }
    }
  });
}

// The maximum of the non-NaN values of x[0, n) as std::max<double> folds it from -inf, and whether any value
// is NaN. Eight running maxima give the fold's value unless it is a zero (+0 and -0 compare equal and the
// fold keeps the first), which is folded in order again.
std::pair<double, bool> max_not_nan(const float* x, int64_t n) {
  constexpr int64_t kLanes = 8;
  const float ninf = -std::numeric_limits<float>::infinity();
  float acc[kLanes];
  uint32_t nan[kLanes];
  for (int64_t k = 0; k < kLanes; ++k) {
    acc[k] = ninf;
    nan[k] = 0;
  }
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t k = 0; k < kLanes; ++k) {
      const float v = x[j + k];
      nan[k] |= v != v;
      acc[k] = acc[k] < v ? v : acc[k];
    }
  for (; j < n; ++j) {
    nan[0] |= x[j] != x[j];
    acc[0] = acc[0] < x[j] ? x[j] : acc[0];
  }
  float m = acc[0];
  uint32_t any_nan = nan[0];
  for (int64_t k = 1; k < kLanes; ++k) {
    m = m < acc[k] ? acc[k] : m;
    any_nan |= nan[k];
  }
  if (m != 0.f) return {m, any_nan != 0};
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = std::max<double>(mx, x[i]);
  return {mx, any_nan != 0};
}

void make_stats(const CommonParams& p, RecipeIO& io) {
  const int64_t R = p.rows, V = p.V;
  const HostTensor& x = io.input("logits");
  HostTensor& mt = io.output("row_max");
  HostTensor& dt = io.output("row_sumexp");
  auto* m = reinterpret_cast<float*>(mt.bytes.data());
  auto* d = reinterpret_cast<float*>(dt.bytes.data());
  const double inf = std::numeric_limits<double>::infinity();
  const bool bf16 = x.dtype == isa::DType::BF16;
  parallel_rows(R, io.threads(), [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(V));
    Bf16Memo<double> memo;
    for (int64_t r = r0; r < r1; ++r) {
      logits_row(x, r, row.data());
      const float* xr = row.data();
      auto [mx, nan] = max_not_nan(xr, V);
      if (nan) mx = std::numeric_limits<double>::quiet_NaN();
      const double s = mx == -inf ? 0.0 : mx;
      // FP64 exp of every logit (each distinct BF16 value's once): the reference statistic, rounded once to
      // FP32 below.
      double sum = 0;
      if (bf16) {
        const auto* xb = reinterpret_cast<const uint16_t*>(x.bytes.data()) + r * V;
        memo.next_row();
        const auto f = [s](uint16_t b) { return std::exp(static_cast<double>(num::bf16_to_f32(b)) - s); };
        for (int64_t j = 0; j < V; ++j) sum += memo.get(xb[j], f);
      } else {
        for (int64_t j = 0; j < V; ++j) sum += std::exp(static_cast<double>(xr[j]) - s);
      }
      m[r] = static_cast<float>(mx);
      d[r] = static_cast<float>(sum);
    }
  });
}

template <class P>
Recipe<P> logits_recipe() {
  return make_recipe<P, LogitsArgs>(
      "lm_logits",
      "logits N(mean, std^2) and targets together, with masked (-inf) vocabulary columns or prefixes, all "
      "-inf rows, -inf target logits, BF16-maximum logits, argmax ties, NaN logits and ignored targets",
      [](const P&) {
        return std::vector<std::string>{"logits", "target"};
      },
      nullptr, [](const P& p, const LogitsArgs& a, RecipeIO& io) { make_logits(p.c, a, io); },
      [](const P& p, const LogitsArgs& a) { check_logits(p.c, a); });
}

}  // namespace

std::vector<Recipe<FwdParams>> fwd_recipes() {
  return {logits_recipe<FwdParams>()};
}

std::vector<Recipe<BwdParams>> bwd_recipes() {
  return {logits_recipe<BwdParams>(),
          make_recipe<BwdParams, NoArgs>(
              "forward_stats",
              "row_max and row_sumexp of the logits as the forward defines them (FP64, rounded to FP32)",
              [](const BwdParams&) {
                return std::vector<std::string>{"row_max", "row_sumexp"};
              },
              [](const BwdParams&) { return std::vector<std::string>{"logits"}; },
              [](const BwdParams& p, const NoArgs&, RecipeIO& io) { make_stats(p.c, io); })};
}

}  // namespace trnsim::kernels::ce
