#include "tools/sweep/point_check.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
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

// A kernel or reference from a source file: its function and the SHA-256 of the file's bytes, so a point's
// key changes when the file does (a file the kernel imports is not covered: docs/sweeps.md).
json source_json(const workload::KernelSource& s) {
  std::ifstream in(s.file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) throw InputError(fmt::format("cannot read '{}' to key the point", s.file));
  return {{"language", s.language}, {"function", s.function}, {"sha256", io::sha256_hex(ss.str())}};
}

}  // namespace

std::string short_sha256(const std::string& text) {
  return io::sha256_hex(text).substr(0, 20);
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
    if (w.kernel_source) c.resolved["kernel_source"] = source_json(*w.kernel_source);
    if (w.reference) c.resolved["reference"] = source_json(*w.reference);
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
