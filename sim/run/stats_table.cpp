// The printed forms of a stats.json: the run's table and the comparison of two runs. Rows and labels come
// from the declarations (sim/run/stat_defs.cpp), values from the JSON, so `trnsim stats` shows what the run
// showed.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "sim/base/error.h"
#include "sim/base/log.h"
#include "sim/config/json_document.h"
#include "sim/io/enclosing_set.h"
#include "sim/io/output_files.h"
#include "sim/run/report.h"
#include "sim/run/stat_defs.h"

namespace trnsim::run {
namespace {

using nlohmann::json;

constexpr const char* kStatsFormat = "trnsim stats";
constexpr const char* kEngines[] = {"PE", "DVE", "ACT", "POOL", "SP"};
// The summary figures the printed table shows after the headline rows.
constexpr const char* kSummaryRows[] = {"summary.mfu_estimated_percent",
                                        "summary.dma_transfer_count",
                                        "summary.dma_transfer_average_bytes",
                                        "summary.pe_throttled_time_ns",
                                        "summary.sbuf_peak_usage_bytes_per_partition",
                                        "summary.psum_peak_usage_bytes_per_partition"};

const json& member(const json& o, std::string_view key) {
  static const json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}
// The value at a dotted path (no wildcards).
const json& at_path(const json& j, std::string_view path) {
  const json* cur = &j;
  while (true) {
    const size_t dot = path.find('.');
    cur = &member(*cur, path.substr(0, dot));
    if (dot == std::string_view::npos) return *cur;
    path = path.substr(dot + 1);
  }
}
double num(const json& v) {
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
}
double num(const json& o, std::string_view key) {
  return num(member(o, key));
}
std::string str(const json& o, std::string_view key, const std::string& dflt = "?") {
  const json& v = member(o, key);
  return v.is_string() ? v.get<std::string>() : dflt;
}

std::string bytes_str(double b) {
  if (!std::isfinite(b)) return "-";
  if (b >= 1e9) return fmt::format("{:.3f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.3f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.3f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}
std::string time_str(double ns) {
  if (!std::isfinite(ns)) return "-";
  if (ns >= 1e6) return fmt::format("{:.3f} ms", ns / 1e6);
  if (ns >= 1e3) return fmt::format("{:.3f} us", ns / 1e3);
  return fmt::format("{:.1f} ns", ns);
}
// A value in its declared unit.
std::string value_str(const json& v, const std::string& unit) {
  if (v.is_string()) return v.get<std::string>();
  const double x = num(v);
  if (!std::isfinite(x)) return "-";
  if (unit == "ns") return time_str(x);
  if (unit == "bytes") return bytes_str(x);
  if (unit == "bytes/partition") return bytes_str(x) + " per partition";
  if (unit == "%") return fmt::format("{:.1f} %", x);
  if (unit == "GB/s") return fmt::format("{:.1f} GB/s", x);
  if (unit == "TFLOP/s") return fmt::format("{:.2f} TFLOP/s", x);
  if (unit == "ratio") return fmt::format("{:.3f}", x);
  if (unit == "FLOP") return fmt::format("{:.4g}", x);
  if (unit == "count") return fmt::format("{:.0f}", x);
  return fmt::format("{:.6g} {}", x, unit);
}
std::string count_str(double v) {
  return std::isfinite(v) ? fmt::format("{:.0f}", v) : "-";
}
// A table cell: `v` right-aligned in `width` with `prec` decimals, or "-" when the file lacks it (a damaged
// stats.json), never "nan".
std::string cell_str(double v, int width, int prec) {
  return std::isfinite(v) ? fmt::format("{:>{}.{}f}", v, width, prec) : fmt::format("{:>{}}", "-", width);
}
// The last two components of a source path ("lib/matmul.cpp:42").
std::string short_source(const std::string& src) {
  size_t cut = src.rfind('/');
  if (cut != std::string::npos && cut > 0) cut = src.rfind('/', cut - 1);
  return cut == std::string::npos ? src : src.substr(cut + 1);
}

std::string numerics_section(const json& numerics) {
  std::string o;
  const auto pass_of = [](const json& n) {
    return member(n, "pass").is_boolean() && member(n, "pass").get<bool>() ? "PASS" : "FAIL";
  };
  bool header[3] = {false, false, false};
  // The name column of each kind: its default width, wider when a name needs it (one space at least).
  size_t width[3] = {14, 34, 24};
  const auto kind_of = [](const json& n) {
    const std::string k = str(n, "check", kCheckTolerance);
    return k == kCheckTolerance ? 0 : k == kCheckBitExact ? 1 : 2;
  };
  for (const auto& [name, n] : numerics.items())
    width[kind_of(n)] = std::max(width[kind_of(n)], name.size() + 1);
  for (const auto& [name, n] : numerics.items()) {
    // A metric right-aligned in `width`, or "-" when the file lacks it (a damaged stats.json), never "nan".
    const auto cell = [&n](const char* key, int width, const char* spec) {
      const double v = num(n, key);
      return std::isfinite(v) ? fmt::format(fmt::runtime(fmt::format("{{:>{}{}}}", width, spec)), v)
                              : fmt::format("{:>{}}", "-", width);
    };
    const int kind = kind_of(n);
    if (kind == 0) {
      if (!header[0])
        o += fmt::format("numerics {:<{}}{:>12}{:>14}{:>14}{:>12}{:>12}{:>9}{:>6}\n", "output", width[0],
                         "max_abs_err", "rel_l2_exact", "rel_l2_quant", "cos_exact", "norm_eucl", "allclose",
                         "");
      header[0] = true;
      const json& ac = member(n, "allclose_vs_exact");
      o +=
          fmt::format("         {:<{}}{}{}{}{}{}{:>9}{:>6}\n", name, width[0], cell("max_abs_err", 12, ".4g"),
                      cell("rel_l2_vs_exact", 14, ".4g"), cell("rel_l2_vs_quantized", 14, ".4g"),
                      cell("cosine_vs_exact", 12, ".6f"), cell("normalized_euclidean_vs_exact", 12, ".4g"),
                      ac.is_boolean() ? (ac.get<bool>() ? "yes" : "no") : "-", pass_of(n));
    } else if (kind == 1) {
      if (!header[1])
        o += fmt::format("bit-exact {:<{}}{:>14}{:>18}{:>14}{:>6}\n", "output", width[1], "bytes",
                         "bytes differing", "nonfinite", "");
      header[1] = true;
      o += fmt::format("          {:<{}}{:>14}{:>18}{:>14}{:>6}\n", name, width[1],
                       count_str(num(n, "bytes_total")), count_str(num(n, "bytes_differing")),
                       count_str(num(n, "nonfinite")), pass_of(n));
    } else {
      if (!header[2])
        o += fmt::format("scalar   {:<{}}{:>16}{:>16}{:>12}{:>6}\n", "output", width[2], "value", "expected",
                         "abs_err", "");
      header[2] = true;
      o += fmt::format("         {:<{}}{}{}{}{:>6}\n", name, width[2], cell("value", 16, ".8g"),
                       cell("expected", 16, ".8g"), cell("abs_err", 12, ".3g"), pass_of(n));
    }
  }
  for (const auto& [name, n] : numerics.items())
    if (member(n, "notes").is_array())
      for (const json& f : member(n, "notes"))
        if (f.is_string()) o += fmt::format("         {}: {}\n", name, f.get<std::string>());
  for (const auto& [name, n] : numerics.items())
    if (member(n, "failures").is_array())
      for (const json& f : member(n, "failures"))
        if (f.is_string()) o += fmt::format("FAIL {}: {}\n", name, f.get<std::string>());
  return o;
}

// "wait_dma_queue_3" -> "DMA q3", "wait_ACT" -> "ACT", "wait_peer_core" -> "peer core".
std::string wait_label(const std::string& key) {
  std::string k = key.substr(5);
  if (k.rfind("dma_queue_", 0) == 0) return "DMA q" + k.substr(10);
  for (char& c : k)
    if (c == '_') c = ' ';
  return k;
}

// Per core and engine, where its time went: busy, throttled, launch, finished and its waits, largest first.
std::string time_split_section(const json& j, int cores) {
  const json& engines = member(j, "engines");
  const double total = num(j, "total_time_ns");
  if (!(total > 0)) return "";
  bool any = false;
  std::string o;
  for (int c = 0; c < cores; ++c) {
    const json& core = member(engines, fmt::format("core{}", c));
    for (const char* en : kEngines) {
      const json& t = member(member(core, en), "time_ns");
      if (!t.is_object()) continue;
      if (!any)
        o += fmt::format("  {:<10}{:>8}{:>10}{:>9}{:>10}  {}\n", "time %", "busy", "throttled", "launch",
                         "finished", "waiting on (largest first)");
      any = true;
      const auto p = [&](const char* k) {
        return 100.0 * (std::isfinite(num(t, k)) ? num(t, k) : 0.0) / total;
      };
      std::vector<std::pair<double, std::string>> waits;
      for (const auto& [k, v] : t.items())
        if ((k.rfind("wait_", 0) == 0 || k == "other") && v.is_number() && v.get<double>() > 0)
          waits.emplace_back(v.get<double>(), k == "other" ? "other" : wait_label(k));
      std::stable_sort(waits.begin(), waits.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      std::string w;
      for (size_t i = 0; i < waits.size() && i < 4; ++i)
        w += fmt::format("{}{} {:.1f}%", i ? ", " : "", waits[i].second, 100.0 * waits[i].first / total);
      o += fmt::format("  {:<10}{:>7.1f}%{:>9.1f}%{:>8.1f}%{:>9.1f}%  {}\n",
                       cores > 1 ? fmt::format("{}{}", en, c) : std::string(en), p("busy"), p("throttled"),
                       p("launch"), p("finished"), w.empty() ? "-" : w);
    }
  }
  return o;
}

// The largest parts of the critical path in one line.
std::string critical_path_line(const json& j) {
  const json& t = member(member(j, "critical_path"), "time_ns");
  const double total = num(member(j, "critical_path"), "length_ns");
  if (!t.is_object() || !(total > 0)) return "";
  std::vector<std::pair<double, std::string>> parts;
  for (const auto& [k, v] : t.items())
    if (v.is_number()) parts.emplace_back(v.get<double>(), k);
  std::stable_sort(parts.begin(), parts.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string o = fmt::format("  {:<28}", "critical path");
  for (size_t i = 0; i < parts.size() && i < 4; ++i)
    o += fmt::format("{}{} {:.1f}%", i ? ", " : "", parts[i].second, 100.0 * parts[i].first / total);
  return o + " (trnsim stats --critical-path)\n";
}

}  // namespace

std::string format_critical_path(const json& j, size_t max_segments) {
  const json& cp = member(j, "critical_path");
  if (!cp.is_object())
    throw InputError("this stats.json has no critical_path (written by an older trnsim; run it again)");
  const double total = num(cp, "length_ns");
  std::string o = fmt::format("critical path: {} in {} steps ({} segments)\n", time_str(total),
                              count_str(num(cp, "steps")), count_str(num(cp, "segments_total")));
  const json& t = member(cp, "time_ns");
  if (t.is_object()) {
    std::vector<std::pair<double, std::string>> parts;
    for (const auto& [k, v] : t.items())
      if (v.is_number()) parts.emplace_back(v.get<double>(), k);
    std::stable_sort(parts.begin(), parts.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& [v, k] : parts)
      o += fmt::format("  {:<32}{:>14}{:>8.1f}%\n", k, time_str(v), total > 0 ? 100.0 * v / total : 0.0);
  }
  const json& segs = member(cp, "segments");
  if (segs.is_array() && !segs.empty() && max_segments > 0) {
    o += fmt::format("  {:>12}{:>12}  {:<26}{:<16}{:>7}{:>12}{:>11}  {:<40} {}\n", "start us", "end us",
                     "resource", "opcode", "steps", "active us", "link us", "source", "reached via");
    for (size_t i = 0; i < segs.size() && i < max_segments; ++i) {
      const json& g = segs[i];
      o += fmt::format("  {:>12.3f}{:>12.3f}  {:<26}{:<16}{:>7}{:>12.3f}{:>11.3f}  {:<40} {}\n",
                       num(g, "start_ns") / 1e3, num(g, "end_ns") / 1e3, str(g, "resource"), str(g, "opcode"),
                       count_str(num(g, "steps")), num(g, "active_ns") / 1e3, num(g, "link_ns") / 1e3,
                       short_source(str(g, "source")), str(g, "via"));
    }
    if (segs.size() > max_segments)
      o += fmt::format("  ... {} more segments (--segments N)\n", segs.size() - max_segments);
    const double total_segs = num(cp, "segments_total");
    if (std::isfinite(total_segs) && total_segs > static_cast<double>(segs.size()))
      o += fmt::format("  (stats.json holds the first {} of {} segments)\n", segs.size(),
                       count_str(total_segs));
  }
  return o;
}

std::string format_stats(const json& j, size_t top_lines) {
  const int cores = std::isfinite(num(j, "cores")) ? static_cast<int>(num(j, "cores")) : 2;
  std::string o;
  if (member(j, "program").is_string())
    o += fmt::format("program {} on {} ({} core{})\n", str(j, "program"), str(j, "hardware"), cores,
                     cores == 1 ? "" : "s");
  else
    o += fmt::format("workload {}: kernel {} on {} ({} core{})\n", str(j, "workload"), str(j, "kernel"),
                     str(j, "hardware"), cores, cores == 1 ? "" : "s");
  for (const StatDef& d : stat_defs()) {
    if (!d.in_table) continue;
    const json& v = at_path(j, d.key);
    if (v.is_null()) continue;
    std::string text = value_str(v, d.unit);
    if (d.key == "peak_tflops")
      text += fmt::format(" ({}, x{})", str(j, "peak_dtype"), count_str(num(j, "peak_dtype_factor")));
    if (d.key == "useful_flops")
      text += str(j, "useful_flops_source", "") == "reference" ? " (declared by the kernel)"
                                                               : " (PE FLOPs counted)";
    o += fmt::format("  {:<28}{}\n", d.label, text);
  }
  for (const char* key : kSummaryRows) {
    const StatDef* d = find_stat_def(key);
    const json& v = at_path(j, key);
    if (d != nullptr && !v.is_null()) o += fmt::format("  {:<28}{}\n", d->label, value_str(v, d->unit));
  }

  // Per core and engine: busy % and semaphore wait.
  const json& engines = member(j, "engines");
  o += fmt::format("  {:<10}", "busy %");
  for (int c = 0; c < cores; ++c) o += fmt::format("{:>10}", fmt::format("core{}", c));
  for (int c = 0; c < cores; ++c) o += fmt::format("{:>16}", fmt::format("core{} wait us", c));
  o += "\n";
  for (const char* en : kEngines) {
    o += fmt::format("  {:<10}", en);
    for (int c = 0; c < cores; ++c) {
      const double busy = num(member(member(engines, fmt::format("core{}", c)), en), "busy_percent");
      o += std::isfinite(busy) ? fmt::format("{:>9.1f}%", busy) : fmt::format("{:>10}", "-");
    }
    for (int c = 0; c < cores; ++c)
      o += cell_str(num(member(member(engines, fmt::format("core{}", c)), en), "semaphore_wait_ns") / 1e3, 16,
                    2);
    o += "\n";
  }

  o += time_split_section(j, cores);
  o += critical_path_line(j);

  const json& ops = member(j, "opcodes");
  if (ops.is_array() && !ops.empty()) {
    o += fmt::format("  {:<8}{:<18}{:>10}{:>14}{:>12}\n", "engine", "opcode", "count", "total us", "mean ns");
    for (const json& r : ops)
      o += fmt::format("  {:<8}{:<18}{:>10}{}{}\n", str(r, "engine"), str(r, "opcode"),
                       count_str(num(r, "count")), cell_str(num(r, "total_ns") / 1e3, 14, 3),
                       cell_str(num(r, "mean_ns"), 12, 1));
  }
  const json& lines = member(j, "source_lines");
  if (lines.is_array() && !lines.empty() && top_lines > 0) {
    o += fmt::format("  busiest source lines ({} of {})\n", std::min(top_lines, lines.size()),
                     count_str(num(j, "source_lines_total")));
    o += fmt::format("  {:<40}{:<6}{:>8}{:>14}{:>9}{:>14}\n", "source", "engine", "count", "busy us",
                     "engine%", "sem wait us");
    for (size_t i = 0; i < lines.size() && i < top_lines; ++i) {
      const json& r = lines[i];
      o += fmt::format("  {:<40}{:<6}{:>8}{}{}%{}\n", short_source(str(r, "source")), str(r, "engine"),
                       count_str(num(r, "instructions")), cell_str(num(r, "busy_ns") / 1e3, 14, 3),
                       cell_str(num(r, "engine_busy_percent"), 8, 1),
                       cell_str(num(r, "semaphore_wait_ns") / 1e3, 14, 3));
    }
  }
  const json& phases = member(j, "phases");
  if (phases.is_object() && !phases.empty()) {
    o += fmt::format("  {:<24}{:>14}{:>14}{:>14}", "phase", "start us", "end us", "span us");
    for (const char* en : kEngines) o += fmt::format("{:>12}", fmt::format("{} us", en));
    o += "\n";
    std::vector<std::pair<std::string, const json*>> rows;
    for (const auto& [name, ph] : phases.items()) rows.emplace_back(name, &ph);
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
      return num(*a.second, "start_ns") < num(*b.second, "start_ns");
    });
    for (const auto& [name, php] : rows) {
      const json& ph = *php;
      o += fmt::format("  {:<24}{}{}{}", name, cell_str(num(ph, "start_ns") / 1e3, 14, 3),
                       cell_str(num(ph, "end_ns") / 1e3, 14, 3), cell_str(num(ph, "span_ns") / 1e3, 14, 3));
      for (const char* en : kEngines) o += cell_str(num(member(ph, "busy_ns"), en) / 1e3, 12, 3);
      o += "\n";
    }
  }
  const json& ks = member(j, "kernel_stats");
  if (ks.is_object() && !ks.empty()) {
    o += "  kernel stats\n";
    for (const auto& [name, s] : ks.items())
      o += fmt::format("    {:<36}{}\n", name, value_str(member(s, "value"), str(s, "unit", "")));
  }
  const json& tr = member(j, "trace");
  if (tr.is_object())
    o += fmt::format("  {:<28}{} ({} slices, {} flows, {} counter samples, {})\n", "trace", str(tr, "path"),
                     count_str(num(tr, "slices")), count_str(num(tr, "flows")),
                     count_str(num(tr, "counter_samples")), bytes_str(num(tr, "bytes")));

  const json& notes = member(j, "notes");
  if (notes.is_array())
    for (const json& n : notes)
      if (n.is_string()) o += fmt::format("note: {}\n", n.get<std::string>());
  const json& numerics = member(j, "numerics");
  if (!numerics.is_object()) {
    o += fmt::format("numerics: {}\n", str(j, "numerics_note", "none"));
    return o;
  }
  return o + numerics_section(numerics);
}

std::string format_compare(const json& a, const json& b, const std::string& name_a,
                           const std::string& name_b) {
  std::string o = fmt::format("A: {}\nB: {}\n", name_a, name_b);
  o += fmt::format("  {:<36}{:>18}{:>18}{:>10}\n", "", "A", "B", "B/A");
  for (const StatDef& d : stat_defs()) {
    if (!d.in_compare) continue;
    const double va = num(at_path(a, d.key)), vb = num(at_path(b, d.key));
    const int decimals = d.unit == "bytes" || d.unit == "count" || d.unit == "bytes/partition" ? 0
                         : d.unit == "ratio"                                                   ? 3
                         : d.unit == "%"                                                       ? 2
                                                                                               : 1;
    const auto cell = [&](double v) { return std::isfinite(v) ? fmt::format("{:.{}f}", v, decimals) : "-"; };
    std::string ratio = "-";
    if (std::isfinite(va) && std::isfinite(vb)) {
      if (va != 0)
        ratio = fmt::format("{:.3f}", vb / va);
      else if (vb == 0)
        ratio = "1.000";
    }
    const bool plain = d.unit == "count" || d.unit == "bytes" || d.unit == "ratio";
    const std::string label = plain ? d.label : fmt::format("{} ({})", d.label, d.unit);
    o += fmt::format("  {:<36}{:>18}{:>18}{:>10}\n", label, cell(va), cell(vb), ratio);
  }
  return o;
}

json load_stats(const std::string& path) {
  json j = config::read_json_document(path);
  // A run killed while it replaced its folder's files may have left this stats.json beside another run's
  // outputs: the folder's record says so (sim/io/output_files.h).
  const std::filesystem::path p(path);
  std::string detail;
  if (p.filename() == "stats.json" && io::inspect_set_of(path, &detail) == io::FolderSetState::kMixed)
    throw InputError(fmt::format(
        "{}: the run that wrote this folder was killed while it replaced the folder's files: stats.json and "
        "the "
        "files beside it may come from two runs ({}); run it again (the next run into the folder first puts "
        "the earlier files back)",
        path, detail));
  // A run killed before it removed the earlier run's files it did not write again, or whose folder was moved
  // before then (sim/io/output_files.h): this stats.json is whole, the files beside it named are not its
  // run's.
  if (p.filename() == "stats.json") {
    // A chain's stage folder: its leftovers are in the chain's record, and the chain's next run removes them.
    const std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
    std::string set_dir;
    if (const std::vector<std::string> left = io::earlier_files_left_of(path, &set_dir); !left.empty())
      log::note(fmt::format(
          "{}: {} {} an earlier run's, not this stats.json's: the run that wrote it did not remove {} (it "
          "was "
          "killed first, or the folder was moved during it); the next run into {} removes {}",
          dir, fmt::join(left, ", "), left.size() == 1 ? "is" : "are", left.size() == 1 ? "it" : "them",
          set_dir.empty() ? "the folder" : fmt::format("{} (the chain's folder)", set_dir),
          left.size() == 1 ? "it" : "them"));
  }
  // A chain's summary (tools/trnsim/run_chain.cpp) beside its stages' folders: point at them.
  if (j.is_object() && member(j, "chain").is_string() && member(j, "stages").is_array()) {
    std::vector<std::string> stage_files;
    for (const json& st : j["stages"])
      if (st.is_object() && member(st, "stats").is_string())
        stage_files.push_back((p.parent_path() / st["stats"].get<std::string>()).string());
    // A stage replaced since by a single run (trnsim run --replace-stage): the summary is of another set.
    const std::vector<std::string> replaced =
        io::replaced_files_of_set(p.parent_path().empty() ? "." : p.parent_path().string());
    throw InputError(fmt::format(
        "{}: a chain's summary (chain_stats.json: the stages' totals and the chain reference's checks), not "
        "one run's stats.json: run `trnsim stats` on a stage's stats.json ({}){}",
        path,
        stage_files.empty() ? std::string("OUT/<stage>/stats.json")
                            : fmt::format("{}", fmt::join(stage_files, ", ")),
        replaced.empty()
            ? std::string()
            : fmt::format(". The chain's set is mixed: {} {} replaced since the chain ran (a single run "
                          "into a stage's folder), so this summary no longer describes the files beside it; "
                          "run the chain again",
                          fmt::join(replaced, ", "), replaced.size() == 1 ? "was" : "were")));
  }
  const json& fmt_key = member(j, "stats_format");
  const bool ok = j.is_object() && member(j, "total_time_ns").is_number() &&
                  member(j, "engines").is_object() && (fmt_key.is_null() || fmt_key == kStatsFormat);
  if (!ok)
    throw InputError(
        path +
        ": not a trnsim stats.json (expected an object with \"total_time_ns\" and \"engines\", as "
        "`trnsim run ... --out DIR` writes)");
  // What the printed table needs must be there and be numbers, else it would print NaN.
  const auto need_number = [&](const std::string& key) {
    if (!at_path(j, key).is_number() || !std::isfinite(at_path(j, key).get<double>()))
      throw InputError(
          fmt::format("{}: {}: missing or not a finite number (a damaged stats.json?)", path, key));
  };
  const auto need_non_negative = [&](const std::string& key) {
    need_number(key);
    if (at_path(j, key).get<double>() < 0)
      throw InputError(fmt::format("{}: {}: negative (a damaged stats.json?)", path, key));
  };
  need_non_negative("total_time_ns");
  need_number("cores");
  const double cores = at_path(j, "cores").get<double>();
  if (cores != 1 && cores != 2) throw InputError(fmt::format("{}: cores: expected 1 or 2", path));
  for (int c = 0; c < static_cast<int>(cores); ++c)
    for (const char* e : kEngines)
      for (const char* k : {"busy_percent", "semaphore_wait_ns"})
        need_non_negative(fmt::format("engines.core{}.{}.{}", c, e, k));
  // Every headline figure that is there: a number (a string would be printed as it is), and not negative
  // where the unit has no sign.
  if (!member(j, "summary").is_null() && !member(j, "summary").is_object())
    throw InputError(fmt::format("{}: summary: expected an object (a damaged stats.json?)", path));
  for (const StatDef& d : stat_defs()) {
    const bool summary_row = std::any_of(std::begin(kSummaryRows), std::end(kSummaryRows),
                                         [&](const char* k) { return d.key == k; });
    if (!(d.in_table || d.in_compare || summary_row) || d.unit == "text" ||
        d.key.find_first_of("*[") != std::string::npos || at_path(j, d.key).is_null())
      continue;
    if (d.unit == "bool") {
      if (!at_path(j, d.key).is_boolean())
        throw InputError(fmt::format("{}: {}: expected true or false (a damaged stats.json?)", path, d.key));
      continue;
    }
    if (d.unit == "ratio")
      need_number(d.key);
    else
      need_non_negative(d.key);
  }
  return j;
}

}  // namespace trnsim::run
