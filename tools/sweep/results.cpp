#include "tools/sweep/results.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "sim/base/error.h"
#include "sim/config/json_document.h"
#include "sim/io/output_files.h"

namespace trnsim::sweep {
namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

const std::vector<Metric>& metrics() {
  static const std::vector<Metric> m = {
      {"total_time_ns", "total_time_ns", "ns"},
      {"roofline_lower_bound_ns", "roofline_lower_bound_ns", "ns"},
      {"roofline_ratio", "roofline_ratio", "ratio"},
      {"achieved_tflops", "achieved_tflops", "TFLOP/s"},
      {"mfu_percent", "mfu_percent", "%"},
      {"peak_tflops", "peak_tflops", "TFLOP/s"},
      {"useful_flops", "useful_flops", "FLOP"},
      {"pe_busy_percent", "summary.tensor_engine_active_time_percent", "%"},
      {"dve_busy_percent", "summary.vector_engine_active_time_percent", "%"},
      {"act_busy_percent", "summary.scalar_engine_active_time_percent", "%"},
      {"pool_busy_percent", "summary.gpsimd_engine_active_time_percent", "%"},
      {"sp_busy_percent", "summary.sync_engine_active_time_percent", "%"},
      {"hbm_bytes", "hbm_bytes", "bytes"},
      {"hbm_GBps", "hbm_GBps", "GB/s"},
      {"hbm_bandwidth_GBps", "hbm_bandwidth_GBps", "GB/s"},
      {"compulsory_hbm_bytes", "compulsory_hbm_bytes", "bytes"},
      {"sbuf_peak_bytes_per_partition", "summary.sbuf_peak_usage_bytes_per_partition", "bytes/partition"},
      {"sbuf_peak_percent", "summary.sbuf_peak_usage_percent", "%"},
      {"psum_peak_bytes_per_partition", "summary.psum_peak_usage_bytes_per_partition", "bytes/partition"},
      {"instructions", "instructions", "count"},
      {"dma_transfers", "dma_transfers", "count"},
      {"numerics_pass", "", "bool"},
  };
  return m;
}

bool is_metric(const std::string& column) {
  for (const Metric& m : metrics())
    if (column == m.column) return true;
  return false;
}

json metrics_of(const json& stats) {
  json out = json::object();
  for (const Metric& m : metrics()) {
    if (std::string(m.column) == "numerics_pass") {
      json pass = nullptr;
      if (stats.contains("numerics") && stats["numerics"].is_object()) {
        pass = true;
        for (const auto& [k, v] : stats["numerics"].items())
          if (!v.is_object() || !v.value("pass", false)) pass = false;
      }
      out[m.column] = pass;
      continue;
    }
    const json* node = &stats;
    std::string path = m.stats_path;
    size_t pos = 0;
    while (node && pos <= path.size()) {
      const size_t dot = path.find('.', pos);
      const std::string k = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
      node = node->is_object() && node->contains(k) ? &(*node)[k] : nullptr;
      if (dot == std::string::npos) break;
      pos = dot + 1;
    }
    out[m.column] = node && node->is_number() ? *node : json(nullptr);
  }
  return out;
}

std::string points_dir(const std::string& dir) {
  return (fs::path(dir) / "points").string();
}

std::string row_path(const std::string& dir, const std::string& key) {
  return (fs::path(points_dir(dir)) / (key + ".json")).string();
}

json read_row_file(const std::string& path, const std::string& key, std::string* why) {
  try {
    json row = config::read_json_document(path);
    if (row.is_object() && row.contains("status") && row["status"].is_string() && row.value("key", "") == key)
      return row;
    if (why) *why = fmt::format("not a row of point '{}' (no \"key\": \"{}\" and \"status\")", key, key);
  } catch (const InputError& e) {
    if (why) *why = e.what();
  }
  return nullptr;
}

json read_row(const std::string& dir, const std::string& key) {
  const std::string p = row_path(dir, key);
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return nullptr;
  return read_row_file(p, key);
}

void check_rows(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> names;
  for (const auto& e : fs::directory_iterator(points_dir(dir), ec)) names.push_back(e.path());
  std::sort(names.begin(), names.end());
  for (const fs::path& p : names) {
    const std::string name = p.filename().string();
    if (name.empty() || name[0] == '.' || p.extension() != ".json") continue;  // temporaries, other files
    const auto st = fs::symlink_status(p, ec);
    std::string why;
    if (fs::is_symlink(st))
      why = "is a symlink, not a row trnsim wrote";
    else if (!fs::is_regular_file(st))
      why = "is not a regular file";
    else if (read_row_file(p.string(), p.stem().string(), &why).is_null() && why.empty())
      why = "cannot be read";
    if (const std::string own = p.string() + ": "; why.rfind(own, 0) == 0) why = why.substr(own.size());
    if (!why.empty())
      throw InputError(
          fmt::format("{}: {}: a sweep's row is never overwritten unread; remove or move the file "
                      "(its point is then run again)",
                      p.string(), why));
  }
}

void write_row(const std::string& dir, const json& row) {
  std::error_code ec;
  fs::create_directories(points_dir(dir), ec);
  const std::string text = row.dump(1) + "\n";
  io::write_files_atomic(
      {{row_path(dir, row.at("key").get<std::string>()), {text.begin(), text.end()}, {}, true}});
}

bool row_done(const json& row) {
  if (!row.is_object()) return false;
  const std::string s = row.value("status", "");
  return s == "ok" || s == "numerics_fail";
}

std::vector<ordered_json> result_records(const json& plan, const std::string& dir) {
  std::vector<ordered_json> out;
  for (const json& pt : plan.at("points")) {
    ordered_json r;
    r["index"] = pt.at("index");
    r["label"] = pt.value("label", "");
    for (const json& c : plan.at("columns")) {
      const std::string name = c.get<std::string>();
      r[name] = pt.at("values").contains(name) ? pt["values"][name] : json(nullptr);
    }
    json row = nullptr;
    if (pt.contains("invalid")) {
      r["status"] = "invalid";
    } else if (pt.contains("failed")) {
      r["status"] = "error";  // its check did not end (--timeout)
    } else {
      row = read_row(dir, pt.at("key").get<std::string>());
      r["status"] = row.is_object() ? row["status"] : json("missing");
    }
    for (const Metric& m : metrics())
      r[m.column] = row.is_object() && row.contains("metrics") && row["metrics"].contains(m.column)
                        ? row["metrics"][m.column]
                        : json(nullptr);
    r["host_seconds"] = row.is_object() && row.contains("host_seconds") ? row["host_seconds"] : json(nullptr);
    r["key"] = pt.value("key", "");
    r["error"] = pt.contains("invalid")  ? pt["invalid"]
                 : pt.contains("failed") ? pt["failed"]
                                         : json(row.is_object() ? row.value("error", "") : "");
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

std::string csv_field(const json& v) {
  std::string s;
  if (v.is_null()) return "";
  if (v.is_string())
    s = v.get<std::string>();
  else
    s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace

std::string csv_text(const json& plan, const std::vector<ordered_json>& records) {
  (void)plan;
  std::string text;
  if (records.empty()) return text;
  std::vector<std::string> head;
  for (const auto& [k, v] : records[0].items()) head.push_back(csv_field(json(k)));
  text += fmt::format("{}\n", fmt::join(head, ","));
  for (const ordered_json& r : records) {
    std::vector<std::string> f;
    for (const auto& [k, v] : r.items()) f.push_back(csv_field(json(v)));
    text += fmt::format("{}\n", fmt::join(f, ","));
  }
  return text;
}

void write_results(const std::string& dir, const json& plan, const std::vector<ordered_json>& records) {
  std::string jsonl;
  for (const ordered_json& r : records)
    jsonl += r.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  const std::string csv = csv_text(plan, records);
  io::write_files_atomic({{(fs::path(dir) / "results.csv").string(), {csv.begin(), csv.end()}},
                          {(fs::path(dir) / "results.jsonl").string(), {jsonl.begin(), jsonl.end()}}});
}

}  // namespace trnsim::sweep
