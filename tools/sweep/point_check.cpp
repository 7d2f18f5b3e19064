#include "tools/sweep/point_check.h"

#include <filesystem>
#include <map>

#include "kernels/workload/workload.h"
#include "sim/base/error.h"
#include "sim/config/hw_config.h"
#include "sim/config/json_document.h"
#include "sim/io/content_hash.h"

namespace trnsim::sweep {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json input_json(const workload::PreparedWorkload& p, const workload::InputEntry& e) {
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
