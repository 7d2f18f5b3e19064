#include "tools/sweep/point_check.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "kernels/workload/workload.h"
#include "sim/base/error.h"
#include "sim/config/hw_config.h"
#include "sim/config/json_document.h"
#include "sim/io/content_hash.h"

namespace trnsim::sweep {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json input_source_json(const workload::PreparedWorkload& p, const workload::InputEntry& e) {
  if (e.is_recipe) {
    const auto it = p.recipe_args.find(e.key);
    return {{"label", e.key},
            {"recipe", e.recipe},
            {"args", it != p.recipe_args.end() ? it->second : e.recipe_args}};
  }
  if (e.source.is_npy) {
    std::error_code ec;
    const fs::path path = fs::absolute(e.source.npy, ec);
    const auto size = fs::file_size(path, ec);
    const auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
    return {{"input", e.key}, {"npy", path.string()}, {"bytes", ec ? 0 : size}, {"mtime", ec ? 0 : mtime}};
  }
  return {{"input", e.key},
          {"generator", e.source.generator.name},
          {"seed", e.source.generator.seed},
          {"args", e.source.generator.args}};
}

json input_json(const workload::PreparedWorkload& p, const workload::InputEntry& e) {
  json j = input_source_json(p, e);
  // The declared dtype and shape (a Python kernel's inputs have them; they decide its program).
  if (e.dtype) j["dtype"] = kernels::dtype_str(*e.dtype);
  if (e.shape) j["shape"] = *e.shape;
  return j;
}

// A source file as the runner keys it (trnsim/_runner.py sources()): absolute, symlinks not resolved, so a
// link retargeted to a file of the same bytes keeps its key.
std::string canonical(const std::string& file) {
  std::error_code ec;
  return fs::absolute(file, ec).lexically_normal().string();
}

// A kernel or reference from a source file: its function and the SHA-256 of the bytes the loader ran
// (`ran`: the kernel's record of the Python files it executed, absolute path -> hex), so a point's key
// changes when the file does.
json source_json(const workload::KernelSource& s, const json& ran) {
  const auto it = ran.find(canonical(s.file));
  if (it == ran.end())
    throw InputError(fmt::format("'{}' was not recorded as run: cannot key the point", s.file));
  return {{"language", s.language}, {"function", s.function}, {"sha256", *it}};
}

// The modules the kernel and reference imported from their folders (what `ran` holds besides those two
// files): path relative to the kernel's folder -> SHA-256, so editing one reruns its points.
json imports_json(const workload::Workload& w, const json& ran) {
  std::set<std::string> own = {canonical(w.kernel_source->file)};
  if (w.reference) own.insert(canonical(w.reference->file));
  std::error_code ec;  // the kernel's neighbours are imported from the folder of the file it is
  const fs::path dir = fs::weakly_canonical(fs::absolute(w.kernel_source->file), ec).parent_path();
  json out = json::object();
  for (const auto& [path, sha] : ran.items())
    if (!own.count(path)) out[fs::path(path).lexically_relative(dir).string()] = sha;
  return out;
}

}  // namespace

std::string short_sha256(const std::string& text) {
  return io::sha256_hex(text).substr(0, 20);
}

std::string changed_sources(const json& planned, const json& stats) {
  if (!planned.is_object()) return "";
  const json nki = stats.is_object() ? stats.value("nki", json()) : json();
  const json ran = nki.is_object() ? nki.value("sources", json::object()) : json::object();
  std::vector<std::string> changed;
  for (const auto& [path, sha] : ran.items())
    if (!planned.contains(path) || planned[path] != sha) changed.push_back(path);
  for (const auto& [path, sha] : planned.items())
    if (!ran.contains(path)) changed.push_back(path);
  if (changed.empty()) return "";
  return fmt::format(
      "{} changed while the sweep ran (the run executed other bytes than the point was keyed by): its "
      "result is not kept; rerun the sweep",
      fmt::join(changed, ", "));
}

CheckedPoint check_point(const std::string& workload, const std::vector<std::string>& sets) {
  CheckedPoint c;
  try {
    workload::Workload w = workload::parse_workload(workload, sets);
    const workload::PreparedWorkload p = workload::prepare_workload(w);
    json inputs = json::array();
    for (const workload::InputEntry& e : w.inputs) inputs.push_back(input_json(p, e));
    json overrides = json::object();
    for (const auto& [k, v] : w.hw_overrides) overrides[k] = v;
    c.resolved = {{"kernel", w.kernel},
                  {"params", p.kernel->params()},
                  {"cores", p.cores},
                  {"hardware",
                   {{"config", config::read_json_document(config::resolve_config_path(w.hardware))},
                    {"overrides", overrides}}},
                  {"inputs", inputs},
                  {"outputs", p.written},
                  {"numerics", w.numerics}};
    if (w.kernel_source) {
      const json nki = p.kernel->frontend_stats();
      const json ran = nki.is_object() ? nki.value("sources", json::object()) : json::object();
      c.resolved["kernel_source"] = source_json(*w.kernel_source, ran);
      if (w.reference) c.resolved["reference"] = source_json(*w.reference, ran);
      c.resolved["imports"] = imports_json(w, ran);
      c.sources = ran;
    }
    c.key = short_sha256(c.resolved.dump());
    c.valid = true;
  } catch (const std::bad_alloc&) {
    c.reason = "out of memory while checking the point";
  } catch (const InputError& e) {
    c.reason = e.what();
  } catch (const Error& e) {
    c.reason = std::string("internal error: ") + e.what();
  }
  return c;
}

}  // namespace trnsim::sweep
