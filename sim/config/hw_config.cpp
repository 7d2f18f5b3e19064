#include "sim/config/hw_config.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/config/hw_names.h"
#include "sim/config/json_document.h"
#include "sim/io/content_hash.h"
#include "sim/io/file_kind.h"

namespace trnsim::config {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The source tree's configs/hw, recorded when trnsim was built.
constexpr const char* kConfigDir = TRNSIM_SOURCE_DIR "/configs/hw";

std::string describe(const json& v) {
  return short_json(v);
}

// True if `s` is well-formed UTF-8, as every JSON string must be (the JSON reader checks documents; this
// checks bare words from the command line, which would otherwise fail only when stats.json is written).
bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

// Reads typed leaves from the document, remembering every path it visited so the rest can be reported as
// unknown keys.
class Reader {
 public:
  Reader(const json& doc, std::string file, const Overrides& overrides)
      : doc_(doc), file_(std::move(file)), overrides_(overrides) {}

  // "<file>: <path>: <msg>", plus "(from the override K=V)" when an override set the value at `path`.
  [[noreturn]] void fail(const std::string& path, const std::string& msg) const {
    std::string note;
    for (const auto& [key, value] : overrides_)
      if (path == key || path.rfind(key + ".", 0) == 0)
        note = " (from the override " + key + "=" + describe(value) + ")";
    throw InputError(file_ + ": " + path + ": " + msg + note);
  }

  // Top-level plain string (name, generation).
  std::string top_string(const std::string& key) {
    seen_.insert(key);
    auto it = doc_.find(key);
    if (it == doc_.end()) fail(key, "missing value (expected a string)");
    if (!it->is_string()) fail(key, "expected a string, found " + describe(*it));
    return it->get<std::string>();
  }

  // The "value" of leaf `path` ("pe.clock_GHz"), checking the leaf's shape and its source note.
  const json& leaf(const std::string& path) {
    const json* node = &doc_;
    std::string at;
    size_t pos = 0;
    while (true) {
      size_t dot = path.find('.', pos);
      std::string key = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
      if (!at.empty()) at += '.';
      at += key;
      seen_.insert(at);
      if (!node->is_object()) fail(at, "expected an object, found " + describe(*node));
      auto it = node->find(key);
      if (it == node->end()) fail(at, "missing value (expected {\"value\": ..., \"source\": \"...\"})");
      node = &*it;
      if (dot == std::string::npos) break;
      pos = dot + 1;
    }
    if (!node->is_object())
      fail(path, "expected {\"value\": ..., \"source\": \"...\"}, found " + describe(*node));
    seen_.insert(path + ".value");
    seen_.insert(path + ".source");
    auto src = node->find("source");
    if (src == node->end() || !src->is_string() || src->get<std::string>().empty())
      fail(path + ".source", "missing source note (a non-empty string citing the reference)");
    auto v = node->find("value");
    if (v == node->end()) fail(path + ".value", "missing value");
    return *v;
  }

  // A number in [lo, hi].
  double number(const std::string& path, double lo, double hi) {
    const json& v = leaf(path);
    const std::string expect = "expected a number in [" + fmt_num(lo) + ", " + fmt_num(hi) + "], found ";
    if (!v.is_number()) fail(path + ".value", expect + describe(v));
    double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) fail(path + ".value", expect + describe(v));
    return d;
  }

  uint32_t integer(const std::string& path, uint64_t lo, uint64_t hi = std::numeric_limits<uint32_t>::max()) {
    const json& v = leaf(path);
    std::string where = path + ".value";
    std::string expect = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    if (!v.is_number()) fail(where, "expected " + expect + ", found " + describe(v));
    double d = v.get<double>();
    if (d != std::floor(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi))
      fail(where, "expected " + expect + ", found " + describe(v));
    return static_cast<uint32_t>(d);
  }

  bool boolean(const std::string& path) {
    const json& v = leaf(path);
    if (!v.is_boolean()) fail(path + ".value", "expected true or false, found " + describe(v));
    return v.get<bool>();
  }

  // Walks the document and reports the first key no reader asked for.
  void check_unknown(const json& node, const std::string& at) const {
    if (!node.is_object()) return;
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string p = at.empty() ? it.key() : at + "." + it.key();
      if (!seen_.count(p)) fail(p, "unknown key");
      if (it.key() == "value") continue;  // leaf payload (may be an array of points)
      check_unknown(it.value(), p);
    }
  }
  void check_unknown() const { check_unknown(doc_, ""); }

  void mark_seen(const std::string& path) { seen_.insert(path); }

 private:
  static std::string fmt_num(double d) {
    std::ostringstream os;
    os << d;
    return os.str();
  }

  const json& doc_;
  std::string file_;
  const Overrides& overrides_;
  std::set<std::string> seen_;
};

void apply_override(json& doc, const std::string& file, const std::string& path, const json& value) {
  auto bad = [&](const std::string& why) { throw InputError(file + ": override " + path + ": " + why); };
  if (path.empty()) bad("empty parameter path");
  json* node = &doc;
  std::string at;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string key = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (key.empty()) bad("malformed parameter path (empty component)");
    if (!at.empty()) at += '.';
    at += key;
    if (!node->is_object() || !node->contains(key)) bad("no such parameter (" + at + " does not exist)");
    node = &(*node)[key];
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  if (node->is_object() && node->contains("value")) {
    (*node)["value"] = value;
    (*node)["source"] = "override " + path + "=" + describe(value);
  } else if (node->is_string() && (path == "name" || path == "generation")) {
    *node = value;
  } else {
    bad("not a parameter (expected a path to a {\"value\", \"source\"} leaf, e.g. "
        "dma.engine_bandwidth_GBps)");
  }
}

}  // namespace

double HwConfig::clock_GHz(isa::Engine e) const {
  switch (e) {
    case isa::Engine::PE:
      return pe.clock_GHz;
    case isa::Engine::DVE:
      return dve.clock_GHz;
    case isa::Engine::ACT:
      return act.clock_GHz;
    case isa::Engine::POOL:
      return pool.clock_GHz;
    case isa::Engine::SP:
      return sp.clock_GHz;
  }
  return sp.clock_GHz;
}

uint32_t HwConfig::completion_latency_cycles(isa::Engine e) const {
  switch (e) {
    case isa::Engine::DVE:
      return dve.completion_latency_cycles;
    case isa::Engine::ACT:
      return act.completion_latency_cycles;
    case isa::Engine::POOL:
      return pool.completion_latency_cycles;
    default:
      return 0;
  }
}

isa::Limits HwConfig::limits() const {
  isa::Limits l;
  l.generation = generation;
  l.partitions = memory.partitions;
  l.sbuf_bytes_per_partition = memory.sbuf_bytes_per_partition;
  l.psum_bytes_per_partition = memory.psum_bytes_per_partition;
  l.psum_bank_bytes = memory.psum_bank_bytes;
  l.num_semaphores = sync.semaphores_per_core - 1;  // the last is the core_barrier semaphore
  l.num_dma_queues = dma.queues_per_core;
  l.hbm_bytes = static_cast<uint64_t>(hbm.capacity_GiB * 1024.0 * 1024.0 * 1024.0);
  return l;
}

double HwConfig::dma_efficiency(double bpp) const {
  if (dma.packet_ns > 0) {
    // A packet of `bpp` bytes takes max(packet_ns, bpp / bandwidth) of its engine. The floor keeps a
    // zero-byte transfer's per-byte cost finite (it finishes the moment it starts anyway).
    const double knee = dma.packet_ns * dma.engine_bandwidth_GBps;
    return std::clamp(bpp / knee, 1e-9, 1.0);
  }
  const auto& c = dma.efficiency_curve;
  if (c.empty()) return 1.0;
  if (bpp <= c.front().first) return c.front().second;
  for (size_t i = 1; i < c.size(); ++i) {
    if (bpp <= c[i].first) {
      double f = (bpp - c[i - 1].first) / (c[i].first - c[i - 1].first);
      return c[i - 1].second + f * (c[i].second - c[i - 1].second);
    }
  }
  return c.back().second;
}

std::pair<std::string, nlohmann::json> parse_override(const std::string& assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError("--set " + text_excerpt(assignment) +
                     ": expected path=value, e.g. dma.engine_bandwidth_GBps=30");
  std::string path = assignment.substr(0, eq);
  std::string text = assignment.substr(eq + 1);
  const std::string where = "--set " + text_excerpt(path);
  // Path components are keys: the JSON reader's limits apply to them too.
  for (size_t pos = 0; pos <= path.size();) {
    size_t dot = path.find('.', pos);
    if (dot == std::string::npos) dot = path.size();
    const std::string_view key(path.data() + pos, dot - pos);
    if (key.size() > kMaxJsonKeyBytes)
      throw InputError(fmt::format("{}: key '{}' has {} bytes (keys have at most {})", where,
                                   text_excerpt(key), key.size(), kMaxJsonKeyBytes));
    if (std::any_of(key.begin(), key.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
      throw InputError(fmt::format("{}: key '{}' holds a control character", where, text_excerpt(key)));
    pos = dot + 1;
  }
  std::optional<json> v = parse_json_value(text, where);
  if (v) return {path, std::move(*v)};
  // A bare word: a string, which like every JSON string must be UTF-8.
  if (!valid_utf8(text))
    throw InputError(fmt::format("{}: the value '{}' is not valid UTF-8", where, text_excerpt(text)));
  return {path, json(text)};
}

namespace {

// The folders a name is looked up in, in order (hw_config.h): $TRNSIM_CONFIG_DIR when set, then the source
// tree's configs/hw.
std::vector<fs::path> config_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("TRNSIM_CONFIG_DIR"); env && *env) dirs.emplace_back(env);
  dirs.emplace_back(kConfigDir);
  return dirs;
}

// "trn1, trn2, trn3" (the first 20 names; ", ..." after them).
std::string known_list() {
  const std::vector<std::string> names = known_hw_configs();
  std::string list;
  for (size_t i = 0; i < names.size() && i < 20; ++i) list += (i ? ", " : "") + text_excerpt(names[i]);
  return names.size() > 20 ? list + ", ..." : list;
}

}  // namespace

std::vector<std::string> known_hw_configs() {
  std::set<std::string> names;
  for (const fs::path& dir : config_dirs()) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path& p = it->path();
      // A stem that resolve_config_path would take for a path ("a.json" of a.json.json) is no name.
      const std::string stem = p.stem().string();
      if (p.extension() == ".json" && !stem.ends_with(".json") && it->is_regular_file(ec)) names.insert(stem);
    }
  }
  return {names.begin(), names.end()};
}

// An unknown name lists known_hw_configs: "unknown hardware config 'trn9' (known: trn1, trn2, trn3, or a .json
// path; ...); looked in: ...".
std::string resolve_config_path(const std::string& spec) {
  if (spec.empty()) throw InputError("hardware config: empty name");
  bool is_path = spec.find('/') != std::string::npos ||
                 (spec.size() > 5 && spec.compare(spec.size() - 5, 5, ".json") == 0);
  std::error_code ec;
  if (is_path) {
    if (spec.size() > 4096 || spec.find('\0') != std::string::npos)
      throw InputError("hardware config file '" + text_excerpt(spec) + "': not a usable path (" +
                       std::to_string(spec.size()) + " bytes)");
    switch (io::file_kind(spec)) {
      case io::FileKind::kMissing:
        // A symlink loop or a folder on the way that cannot be searched is not "missing": say why.
        if (::access(spec.c_str(), F_OK) != 0 && errno != ENOENT)
          throw InputError(spec + ": cannot open: " + std::strerror(errno));
        throw InputError(spec + ": hardware config file not found");
      case io::FileKind::kDirectory:
        throw InputError(spec + ": is a directory, expected a hardware config file");
      case io::FileKind::kSpecial:
        throw InputError(spec + ": " + io::kNotARegularFile + ", expected a hardware config file");
      case io::FileKind::kRegular:
        break;
    }
    return spec;
  }
  // A name is a file name in a configs/hw folder.
  if (spec.size() > 255 ||
      std::any_of(spec.begin(), spec.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
    throw InputError("unknown hardware config '" + text_excerpt(spec) + "' (known: " + known_list() +
                     ", or a .json path)");
  std::vector<fs::path> tried;
  if (const char* env = std::getenv("TRNSIM_CONFIG_DIR"); env && *env) {
    // A folder the user named and that is not there is a mistake to report, not a reason to read another.
    switch (io::file_kind(env)) {
      case io::FileKind::kDirectory:
        break;
      case io::FileKind::kMissing:
        throw InputError(std::string("TRNSIM_CONFIG_DIR=") + env + ": no such directory (looking up '" +
                         spec + "')");
      default:
        throw InputError(std::string("TRNSIM_CONFIG_DIR=") + env + ": not a directory (looking up '" + spec +
                         "')");
    }
    tried.push_back(fs::path(env) / (spec + ".json"));
    // An entry that is there but cannot be read is the user's mistake, not a reason to read the shipped one.
    const fs::path& mine = tried.back();
    if (fs::is_symlink(fs::symlink_status(mine, ec)) || fs::exists(fs::symlink_status(mine, ec))) {
      std::string why;
      switch (io::file_kind(mine.string())) {
        case io::FileKind::kRegular:
          break;
        case io::FileKind::kMissing:
          why = "is a symlink to " + fs::read_symlink(mine, ec).string() + ", which does not exist";
          break;
        case io::FileKind::kDirectory:
          why = "is a directory";
          break;
        case io::FileKind::kSpecial:
          why = io::kNotARegularFile;
          break;
      }
      if (!why.empty())
        throw InputError(std::string("TRNSIM_CONFIG_DIR=") + env + ": " + mine.string() + ": " + why +
                         ", expected the hardware config '" + spec + "'");
    }
  }
  tried.push_back(config_dirs().back() / (spec + ".json"));
  for (const auto& p : tried)
    if (fs::is_regular_file(p, ec)) return p.string();
  std::string msg = "unknown hardware config '" + spec + "' (known: " + known_list() +
                    ", or a .json path; TRNSIM_CONFIG_DIR names a folder of configs); looked in:";
  for (const auto& p : tried) {
    msg += ' ';
    msg += p.string();
  }
  throw InputError(msg);
}

HwConfig load_hw_config(const std::string& spec, const Overrides& overrides) {
  const std::string path = resolve_config_path(spec);
  const std::string text = io::read_regular_file(path, "a hardware config file");
  HwConfig c = parse_hw_config(parse_json_document(text, path), path, overrides);
  c.source_sha256 = io::sha256_hex(text);
  return c;
}

HwConfig parse_hw_config(json doc, const std::string& file, const Overrides& overrides) {
  if (!doc.is_object()) throw InputError(file + ": expected a JSON object at the top level");
  for (const auto& [path, value] : overrides) apply_override(doc, file, path, value);

  Reader r(doc, file, overrides);
  HwConfig c;
  c.source_file = file;
  c.name = r.top_string("name");
  if (c.name.empty() || c.name.size() > 200 || std::any_of(c.name.begin(), c.name.end(), [](char ch) {
        return static_cast<unsigned char>(ch) < 0x20;
      }))
    r.fail("name", "expected 1-200 bytes of printable characters, found " + describe(json(c.name)));
  std::string gen = r.top_string("generation");
  if (gen == "trn2")
    c.generation = isa::Generation::Trn2;
  else if (gen == "trn3")
    c.generation = isa::Generation::Trn3;
  else if (gen == "trn1")
    c.generation = isa::Generation::Trn1;
  else
    r.fail("generation", "expected \"trn1\", \"trn2\" or \"trn3\", found " + describe(json(gen)));
  if (doc.contains("description")) {
    r.mark_seen("description");
    if (!doc["description"].is_string()) r.fail("description", "expected a string");
  }

  // Accepted ranges. Each is wide enough for what-if studies (clocks from 100x below to 40x above the shipped
  // Trn2 / Trn3 values, bandwidths over 1000x either way, efficiencies and the throttle cap down to 1 %,
  // latencies up to 1 ms), and excludes values that make a run meaningless or endless: a zero or near-zero
  // clock, bandwidth, efficiency or throttle cap (one transfer or instruction would take years of simulated
  // time), latencies beyond any kernel's run time, and on-chip memories larger than host memory can hold
  // (numerics keep SBUF and PSUM of both cores in RAM).
  constexpr double kMinGHz = 0.01, kMaxGHz = 100;  // shipped 0.96 - 2.4 GHz
  constexpr double kMinGBps = 0.01;                // shipped 23 - 1200 bytes per ns
  constexpr double kMinEfficiency = 0.01;          // shipped 0.06 - 1
  constexpr double kMaxLatencyNs = 1e6;            // 1 ms; shipped 10 ns - 11 us
  constexpr uint32_t kMaxSbufBytes = 4u << 20;     // per partition; shipped 224 / 256 KiB
  constexpr uint32_t kMaxPsumBytes = 1u << 20;     // per partition; shipped 16 KiB
  auto& pe = c.pe;
  pe.clock_GHz = r.number("pe.clock_GHz", kMinGHz, kMaxGHz);
  pe.moving_columns_per_cycle = r.integer("pe.moving_columns_per_cycle", 1, 64);
  pe.mm_init_latency_cycles = r.integer("pe.mm_init_latency_cycles", 0, 100000);
  pe.k_per_pass = r.integer("pe.k_per_pass", 1, 4096);
  pe.double_row_k_per_pass = r.integer("pe.double_row_k_per_pass", 1, 4096);
  pe.mx_k_per_pass = r.integer("pe.mx_k_per_pass", 1, 4096);
  pe.fp32_factor = r.integer("pe.fp32_factor", 1, 64);
  pe.fp32_transpose_factor = r.integer("pe.fp32_transpose_factor", 1, 64);
  pe.ls_columns_per_cycle = r.integer("pe.ls_columns_per_cycle", 1, 64);
  pe.ls_overlap = r.boolean("pe.ls_overlap");
  pe.throttle_enabled = r.boolean("pe.throttle.enabled");
  pe.throttle_cap = r.number("pe.throttle.cap", kMinEfficiency, 1);
  pe.throttle_ramp_ns = r.number("pe.throttle.ramp_ns", 0, kMaxLatencyNs);
  pe.throttle_window_ns = r.number("pe.throttle.window_ns", 1, kMaxLatencyNs);
  pe.throttle_rearm_utilization = r.number("pe.throttle.rearm_utilization", 0, 1);
  pe.throttle_count_array_utilization = r.boolean("pe.throttle.count_array_utilization");

  c.dve.clock_GHz = r.number("dve.clock_GHz", kMinGHz, kMaxGHz);
  c.dve.fixed_overhead_cycles = r.integer("dve.fixed_overhead_cycles", 0, 100000);
  c.dve.completion_latency_cycles = r.integer("dve.completion_latency_cycles", 0, 100000);
  c.dve.quantize_mx_elements_per_cycle = r.integer("dve.quantize_mx_elements_per_cycle", 1, 64);
  c.dve.perf_mode_copy_contiguous = r.integer("dve.perf_mode_copy_contiguous", 1, 16);
  c.dve.perf_mode_copy_other = r.integer("dve.perf_mode_copy_other", 1, 16);
  c.dve.perf_mode_tensor_tensor = r.integer("dve.perf_mode_tensor_tensor", 1, 16);
  c.dve.perf_mode_fp8 = r.boolean("dve.perf_mode_fp8");

  c.act.clock_GHz = r.number("act.clock_GHz", kMinGHz, kMaxGHz);
  c.act.fixed_overhead_cycles = r.integer("act.fixed_overhead_cycles", 0, 100000);
  c.act.completion_latency_cycles = r.integer("act.completion_latency_cycles", 0, 100000);
  c.act.reduce_extra_cycles = r.integer("act.reduce_extra_cycles", 0, 100000);
  c.act.perf_mode_bf16 = r.integer("act.perf_mode_bf16", 1, 16);

  c.pool.clock_GHz = r.number("pool.clock_GHz", kMinGHz, kMaxGHz);
  c.pool.fixed_overhead_cycles = r.integer("pool.fixed_overhead_cycles", 0, 100000);
  c.pool.completion_latency_cycles = r.integer("pool.completion_latency_cycles", 0, 100000);
  c.sp.clock_GHz = r.number("sp.clock_GHz", kMinGHz, kMaxGHz);
  c.sp.fixed_overhead_cycles = r.integer("sp.fixed_overhead_cycles", 0, 100000);

  c.memory.partitions = r.integer("memory.partitions", 1, 128);
  c.memory.sbuf_bytes_per_partition = r.integer("memory.sbuf_bytes_per_partition", 1, kMaxSbufBytes);
  c.memory.psum_bytes_per_partition = r.integer("memory.psum_bytes_per_partition", 1, kMaxPsumBytes);
  // A bank holds whole FP32 accumulators, at least one (the kernels tile PSUM by bank / 4 columns).
  c.memory.psum_bank_bytes = r.integer("memory.psum_bank_bytes", 4, kMaxPsumBytes);
  if (c.memory.psum_bank_bytes % 4 != 0)
    r.fail("memory.psum_bank_bytes.value", "expected a multiple of 4 (whole FP32 accumulators), found " +
                                               std::to_string(c.memory.psum_bank_bytes));
  c.memory.strided_access_bytes = r.integer("memory.strided_access_bytes", 1, kMaxPsumBytes);
  c.memory.strided_access_slowdown = r.integer("memory.strided_access_slowdown", 1, 64);
  if (c.memory.psum_bytes_per_partition % c.memory.psum_bank_bytes != 0)
    r.fail("memory.psum_bank_bytes.value", "expected a divisor of memory.psum_bytes_per_partition (" +
                                               std::to_string(c.memory.psum_bytes_per_partition) +
                                               "), found " + std::to_string(c.memory.psum_bank_bytes));

  c.sync.semaphores_per_core = r.integer("sync.semaphores_per_core", 2, 65536);
  c.sync.semaphore_latency_ns = r.number("sync.semaphore_latency_ns", 0, kMaxLatencyNs);
  c.sync.cross_core_latency_ns = r.number("sync.cross_core_latency_ns", 0, kMaxLatencyNs);
  c.sync.kernel_launch_ns = r.number("sync.kernel_launch_ns", 0, kMaxLatencyNs);

  c.dma.engines_per_core = r.integer("dma.engines_per_core", 1, 256);
  c.dma.queues_per_core = r.integer("dma.queues_per_core", 1, 256);
  c.dma.partitions_per_engine = r.integer("dma.partitions_per_engine", 1, 128);
  c.dma.engine_bandwidth_GBps = r.number("dma.engine_bandwidth_GBps", kMinGBps, 1e5);
  c.dma.trigger_ns = r.number("dma.trigger_ns", 0, kMaxLatencyNs);
  c.dma.precomputed_issue_ns = r.number("dma.precomputed_issue_ns", 0, kMaxLatencyNs);
  c.dma.hwdge_instruction_ns = r.number("dma.hwdge_instruction_ns", 0, kMaxLatencyNs);
  c.dma.hwdge_blocks = r.integer("dma.hwdge_blocks", 1, 2);
  c.dma.hwdge_act_lookahead = r.boolean("dma.hwdge_act_lookahead");
  c.dma.swdge_instruction_ns = r.number("dma.swdge_instruction_ns", 0, kMaxLatencyNs);
  c.dma.setup_ns = r.number("dma.setup_ns", 0, kMaxLatencyNs);
  c.dma.packet_ns = r.number("dma.packet_ns", 0, kMaxLatencyNs);
  c.dma.queue_sets = r.boolean("dma.queue_sets");
  c.dma.descriptor_ns = r.number("dma.descriptor_ns", 0, kMaxLatencyNs);
  c.dma.transpose_efficiency_hbm = r.number("dma.transpose_efficiency_hbm", kMinEfficiency, 1);
  c.dma.transpose_efficiency_sbuf = r.number("dma.transpose_efficiency_sbuf", kMinEfficiency, 1);
  c.dma.accumulate_efficiency = r.number("dma.accumulate_efficiency", kMinEfficiency, 1);
  {
    const json& v = r.leaf("dma.efficiency_curve");
    const std::string where = "dma.efficiency_curve.value";
    const std::string expect =
        "expected a non-empty array of [bytes_per_partition in (0, 1073741824], efficiency in [0.01, 1]] "
        "points with increasing bytes";
    if (!v.is_array() || v.empty()) r.fail(where, expect + ", found " + describe(v));
    for (size_t i = 0; i < v.size(); ++i) {
      const json& p = v[i];
      std::string at = where + "[" + std::to_string(i) + "]";
      if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
        r.fail(at, expect + ", found " + describe(p));
      double b = p[0].get<double>(), e = p[1].get<double>();
      if (!(b > 0) || b > 1073741824.0 || !(e >= kMinEfficiency) || e > 1)
        r.fail(at, expect + ", found " + describe(p));
      if (!c.dma.efficiency_curve.empty() && b <= c.dma.efficiency_curve.back().first)
        r.fail(at, expect + ", found " + describe(p) + " after " + describe(v[i - 1]));
      c.dma.efficiency_curve.emplace_back(b, e);
    }
  }
  c.hbm.bandwidth_GBps = r.number("hbm.bandwidth_GBps", kMinGBps, 1e6);
  c.hbm.latency_ns = r.number("hbm.latency_ns", 0, kMaxLatencyNs);
  c.hbm.capacity_GiB = r.number("hbm.capacity_GiB", 0.001, 1e6);

  c.features.nc_matmul_mx = r.boolean("features.nc_matmul_mx");
  c.features.quantize_mx = r.boolean("features.quantize_mx");
  c.features.double_row = r.boolean("features.double_row");
  c.features.bf16_psum = r.boolean("features.bf16_psum");

  r.check_unknown();
  return c;
}

}  // namespace trnsim::config
