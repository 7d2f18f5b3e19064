#include "tools/sweep/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "kernels/api/registry.h"
#include "kernels/workload/chain.h"
#include "kernels/workload/workload.h"
#include "sim/base/error.h"
#include "sim/base/json_excerpt.h"
#include "sim/config/hw_config.h"
#include "sim/config/json_document.h"
#include "tools/sweep/results.h"

namespace trnsim::sweep {
namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

const std::vector<std::string> kKeys = {"name",   "description", "workload",  "set",     "axes",
                                        "points", "constraints", "objective", "maximize"};
const std::vector<std::string> kWorkloadKeys = {"name", "description", "hardware", "kernel",  "params",
                                                "lnc",  "inputs",      "outputs",  "numerics"};

[[noreturn]] void fail(const std::string& file, const std::string& at, const std::string& msg) {
  throw InputError(at.empty() ? fmt::format("{}: {}", file, msg) : fmt::format("{}: {}: {}", file, at, msg));
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    parts.push_back(path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos));
    if (dot == std::string::npos) return parts;
    pos = dot + 1;
  }
}

std::vector<std::string> names_of(const std::vector<kernels::ParamSpec>& specs) {
  std::vector<std::string> n;
  for (const auto& s : specs) n.push_back(s.name);
  return n;
}

// What a path may name, from the base workload: its kernel's parameters, its hardware config's parameters,
// its input entries. Throws a message (without the file) when the path names nothing.
class PathChecker {
 public:
  explicit PathChecker(const std::string& workload) {
    w_ = workload::parse_workload(workload);
    if (w_.kernel_source) {
      // A kernel from a source file (a Python NKI kernel): its parameters are the function's keyword
      // arguments, known once its loader has read the file.
      kernel_ = w_.kernel;
      const auto bound = workload::bind_kernel(w_);
      params_ = bound->def().params();
      open_params_ = bound->def().open_params();
    } else {
      const kernels::KernelDef* k = kernels::registry().find(w_.kernel);
      if (k == nullptr) throw InputError(fmt::format("{}: kernel: unknown kernel '{}'", workload, w_.kernel));
      kernel_ = k->name();
      params_ = k->params();
    }
    hw_doc_ = config::read_json_document(config::resolve_config_path(w_.hardware));
  }

  // "" if `path` can be set, else why not.
  std::string problem(const std::string& path) const {
    const std::vector<std::string> parts = split_path(path);
    for (const std::string& p : parts)
      if (p.empty()) return fmt::format("'{}' is not a path (an empty component)", text_excerpt(path));
    const std::string& top = parts[0];
    if (std::find(kWorkloadKeys.begin(), kWorkloadKeys.end(), top) == kWorkloadKeys.end())
      return fmt::format("unknown path '{}': a workload has no key '{}' (its keys: {})", text_excerpt(path),
                         text_excerpt(top), fmt::join(kWorkloadKeys, ", "));
    if (top == "params") return param_problem(path, parts);
    if (top == "hardware") return hardware_problem(path, parts);
    if (top == "inputs") {
      if (parts.size() < 3) return "";
      for (const workload::InputEntry& e : w_.inputs)
        if (e.key == parts[1]) return "";
      std::vector<std::string> keys;
      for (const workload::InputEntry& e : w_.inputs) keys.push_back(e.key);
      return fmt::format("unknown path '{}': the workload has no input entry '{}' (its entries: {})",
                         text_excerpt(path), text_excerpt(parts[1]), fmt::join(keys, ", "));
    }
    if (parts.size() > 1 && (top == "kernel" || top == "reference"))
      return fmt::format(
          "path '{}' cannot be set by a sweep: a point's {} is one value, a kernel name or a Python file and "
          "its function together (a file without its function, or a function without its file, names "
          "nothing); set '{}' itself to whole values ({{\"nki\": \"k.py\", \"function\": \"f\"}})",
          text_excerpt(path), top, top);
    if (parts.size() > 1)
      return fmt::format("unknown path '{}': '{}' is a value, not an object", text_excerpt(path), top);
    return "";
  }

 private:
  std::string param_problem(const std::string& path, const std::vector<std::string>& parts) const {
    const std::vector<kernels::ParamSpec>* specs = &params_;
    std::string at = "";
    for (size_t i = 1; i < parts.size(); ++i) {
      const auto it = std::find_if(specs->begin(), specs->end(),
                                   [&](const kernels::ParamSpec& s) { return s.name == parts[i]; });
      if (it == specs->end() && i == 1 && open_params_) return "";  // a **kwargs name
      if (it == specs->end())
        return fmt::format(
            "unknown path '{}': {}", text_excerpt(path),
            kernels::no_parameter_message(fmt::format("kernel '{}'", kernel_), text_excerpt(parts[i]),
                                          names_of(*specs), at.empty() ? "" : at.substr(0, at.size() - 1)));
      if (i + 1 < parts.size() && it->type != kernels::ParamType::Object)
        return fmt::format("unknown path '{}': parameter '{}{}' of kernel '{}' is a {}, not an object",
                           text_excerpt(path), at, parts[i], kernel_, kernels::param_type_name(it->type));
      at += parts[i] + ".";
      specs = &it->fields;
    }
    return "";
  }

  std::string hardware_problem(const std::string& path, const std::vector<std::string>& parts) const {
    if (parts.size() == 1 || (parts.size() == 2 && parts[1] == "name")) return "";
    if (parts[1] != "overrides" || parts.size() < 3)
      return fmt::format(
          "unknown path '{}': hardware has a name and overrides (hardware.overrides.<parameter>)",
          text_excerpt(path));
    const json* node = &hw_doc_;
    std::string at;
    for (size_t i = 2; i < parts.size(); ++i) {
      if (!node->is_object() || !node->contains(parts[i]) || parts[i] == "source" || parts[i] == "value")
        return fmt::format("unknown path '{}': hardware config '{}' has no parameter '{}{}'",
                           text_excerpt(path), w_.hardware, at, text_excerpt(parts[i]));
      node = &(*node)[parts[i]];
      at += parts[i] + ".";
    }
    if (!node->is_object() || !node->contains("value"))
      return fmt::format("unknown path '{}': '{}' of hardware config '{}' is a group, not a parameter",
                         text_excerpt(path), at.substr(0, at.size() - 1), w_.hardware);
    return "";
  }

  workload::Workload w_;
  std::string kernel_;
  std::vector<kernels::ParamSpec> params_;
  bool open_params_ = false;  // a Python kernel taking **kwargs: any params.<name>
  json hw_doc_;
};

// The sweep file again, in document order (read_json_document has checked it; its objects sort keys).
ordered_json ordered_document(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ordered_json::parse(ss.str());
}

// Two values a point would set alike. Not json's ==, which takes 2^64 - 1 for -1 (it compares an unsigned
// and a signed integer after a cast) and 8 for 8.0 (a kernel refuses 8.0 as an integer): their text.
bool same_value(const json& a, const json& b) {
  return a.dump(-1, ' ', false, json::error_handler_t::replace) ==
         b.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Why an axis setting `later` undoes an earlier axis's `earlier`, or "": the same path (a point would keep
// only the later value), or a path around it (it replaces the earlier value: params.input_grad_config after
// params.input_grad_config.tile_n). A path inside an earlier one refines it and is fine.
std::string undoes(const std::string& later, const std::string& earlier, const std::string& earlier_at) {
  if (later == earlier)
    return fmt::format(
        "sets '{}', as {} does: a point would keep only this axis's value (sweep a path in one "
        "axis)",
        text_excerpt(later), earlier_at);
  if (earlier.size() > later.size() && earlier.compare(0, later.size(), later) == 0 &&
      earlier[later.size()] == '.')
    return fmt::format(
        "sets '{}', which replaces what {} sets ('{}') (an axis inside another comes after it)",
        text_excerpt(later), earlier_at, text_excerpt(earlier));
  return "";
}

void check_values_distinct(const std::string& file, const std::string& at, const std::vector<json>& values) {
  for (size_t i = 0; i < values.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (same_value(values[i], values[j]))
        fail(file, fmt::format("{}[{}]", at, i),
             fmt::format("{} is listed twice (also [{}])", json_excerpt(values[i]), j));
}

}  // namespace

uint64_t Spec::product_size() const {
  if (axes.empty()) return 0;
  uint64_t n = 1;
  for (const Axis& a : axes) {
    if (a.values.empty()) return 0;
    if (n > std::numeric_limits<uint64_t>::max() / a.values.size())
      return std::numeric_limits<uint64_t>::max();
    n *= a.values.size();
  }
  return n;
}

std::string set_assignment(const std::string& path, const json& value) {
  return path + "=" + value.dump(-1, ' ', false, json::error_handler_t::replace);
}

Spec parse_spec(const std::string& path) {
  const json doc = config::read_json_document(path);
  const std::string& f = path;
  if (!doc.is_object()) fail(f, "", "expected a JSON object (a sweep: workload, axes, points, constraints)");
  for (const auto& [k, v] : doc.items())
    if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end())
      fail(f, k, fmt::format("unknown key (expected {})", fmt::join(kKeys, ", ")));
  const ordered_json od = ordered_document(path);
  Spec s;
  s.file = path;
  const auto str = [&](const char* key, bool required) {
    if (!doc.contains(key)) {
      if (required) fail(f, key, "missing");
      return std::string();
    }
    if (!doc[key].is_string()) fail(f, key, "expected a string, found " + json_excerpt(doc[key]));
    return doc[key].get<std::string>();
  };
  s.name = str("name", true);
  if (s.name.empty() || s.name.size() > 200 || s.name.find('/') != std::string::npos || s.name == "." ||
      s.name == ".." || !std::all_of(s.name.begin(), s.name.end(), [](char c) {
        return static_cast<unsigned char>(c) >= 0x20;
      }))
    fail(f, "name", "not usable as a directory name (1-200 printable bytes, no '/')");
  s.description = str("description", false);
  const std::string wl = str("workload", true);
  if (wl.empty()) fail(f, "workload", "empty path");
  if (wl.find('\0') != std::string::npos)
    fail(f, "workload", fmt::format("'{}': a path cannot hold a NUL byte", text_excerpt(wl)));
  s.workload =
      fs::path(wl).is_absolute() ? wl : (fs::path(path).parent_path() / wl).lexically_normal().string();
  if (s.workload.empty()) s.workload = wl;
  if (doc.contains("objective")) s.objective = str("objective", false);
  if (doc.contains("maximize")) {
    if (!doc["maximize"].is_boolean()) fail(f, "maximize", "expected true or false");
    s.maximize = doc["maximize"].get<bool>();
  }

  // A chain's points would each fail at run time (a point runs one workload): refused now.
  bool chain = false;
  try {
    chain = workload::is_pipeline_file(s.workload) || workload::has_chained_inputs(s.workload);
  } catch (const InputError& e) {
    fail(f, "workload", e.what());
  }
  if (chain)
    fail(f, "workload",
         fmt::format(
             "{} is a chain (a pipeline, or a workload reading other workloads' outputs): a sweep runs "
             "one workload per point and does not sweep chains; sweep a stage's workload alone, or "
             "run the chain once per point with --set",
             wl));
  PathChecker paths = [&] {
    try {
      return PathChecker(s.workload);
    } catch (const InputError& e) {
      fail(f, "workload", e.what());
    }
  }();
  const auto check_path = [&](const std::string& at, const std::string& p) {
    const std::string why = paths.problem(p);
    if (!why.empty()) fail(f, at, why);
  };

  if (doc.contains("set")) {
    if (!od["set"].is_object()) fail(f, "set", "expected an object of {\"path\": value}");
    for (const auto& [k, v] : od["set"].items()) {
      check_path("set." + k, k);
      s.fixed.emplace_back(k, json(v));
    }
  }

  std::set<std::string> names;
  const auto add_name = [&](const std::string& at, const std::string& n) {
    if (n.empty()) fail(f, at, "empty name");
    if (std::any_of(n.begin(), n.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
      fail(f, at,
           fmt::format("name '{}' holds a control character (it heads a results column)", text_excerpt(n)));
    if (!names.insert(n).second) fail(f, at, fmt::format("name '{}' is used twice", text_excerpt(n)));
    s.columns.push_back(n);
  };
  if (doc.contains("axes")) {
    const ordered_json& ax = od["axes"];
    std::vector<std::pair<std::string, std::set<std::string>>> axis_paths;  // each earlier axis's
    const auto add_axis = [&](const std::string& at, Axis a, const ordered_json& values, bool short_form) {
      const std::string vat = short_form ? at : at + ".values";
      if (!values.is_array()) fail(f, vat, "expected a list of values, found " + json_excerpt(json(values)));
      if (values.empty()) fail(f, vat, "empty list: an axis needs at least one value");
      for (size_t i = 0; i < values.size(); ++i) {
        json v = json(values[i]);
        if (a.path.empty()) {
          if (!v.is_object() || v.empty())
            fail(f, fmt::format("{}.values[{}]", at, i),
                 "an axis without \"path\" takes objects of {\"path\": value} (several keys set together)");
          for (const auto& [k, _] : v.items()) check_path(fmt::format("{}.values[{}].{}", at, i, k), k);
        }
        a.values.push_back(std::move(v));
      }
      check_values_distinct(f, short_form ? at : at + ".values", a.values);
      std::set<std::string> sets;  // the paths this axis sets
      if (!a.path.empty()) sets.insert(a.path);
      for (const json& v : a.values)
        if (a.path.empty())
          for (const auto& [k, _] : v.items()) sets.insert(k);
      for (const auto& [other_at, other] : axis_paths)
        for (const std::string& p : sets)
          for (const std::string& q : other)
            if (const std::string why = undoes(p, q, other_at); !why.empty()) fail(f, at, why);
      axis_paths.emplace_back(at, std::move(sets));
      add_name(at + ".name", a.name);
      s.axes.push_back(std::move(a));
    };
    if (ax.is_object()) {
      for (const auto& [k, v] : ax.items()) {
        check_path("axes." + k, k);
        add_axis("axes." + k, Axis{k, k, {}}, v, true);
      }
    } else if (ax.is_array()) {
      for (size_t i = 0; i < ax.size(); ++i) {
        const std::string at = fmt::format("axes[{}]", i);
        const ordered_json& a = ax[i];
        if (!a.is_object()) fail(f, at, "expected {\"name\", \"path\", \"values\"}");
        for (const auto& [k, v] : a.items())
          if (k != "name" && k != "path" && k != "values")
            fail(f, at + "." + k, "unknown key (expected name, path, values)");
        if (!a.contains("values")) fail(f, at + ".values", "missing");
        Axis axis;
        if (a.contains("path")) {
          if (!a["path"].is_string()) fail(f, at + ".path", "expected a string");
          axis.path = a["path"].get<std::string>();
          check_path(at + ".path", axis.path);
        }
        if (a.contains("name")) {
          if (!a["name"].is_string()) fail(f, at + ".name", "expected a string");
          axis.name = a["name"].get<std::string>();
        } else if (axis.path.empty()) {
          fail(f, at + ".name", "missing (an axis without a path needs a name)");
        } else {
          axis.name = axis.path;
        }
        add_axis(at, std::move(axis), a["values"], false);
      }
    } else {
      fail(f, "axes",
           "expected a list of {\"name\", \"path\", \"values\"} or an object of {\"path\": [values]}");
    }
  }
  if (doc.contains("points")) {
    const ordered_json& pts = od["points"];
    if (!pts.is_array()) fail(f, "points", "expected a list of objects");
    if (pts.empty()) fail(f, "points", "empty list (leave \"points\" out for the product of the axes alone)");
    for (size_t i = 0; i < pts.size(); ++i) {
      const std::string at = fmt::format("points[{}]", i);
      if (!pts[i].is_object()) fail(f, at, "expected an object of {\"axis name or path\": value}");
      for (const auto& [k, v] : pts[i].items()) {
        if (k == "label") {
          if (!v.is_string()) fail(f, at + ".label", "expected a string");
          continue;
        }
        const auto axis =
            std::find_if(s.axes.begin(), s.axes.end(), [&](const Axis& a) { return a.name == k; });
        if (axis != s.axes.end()) {
          if (axis->path.empty() && (!v.is_object() || v.empty()))
            fail(f, at + "." + k, "axis '" + k + "' takes objects of {\"path\": value}");
          if (axis->path.empty())
            for (const auto& [p, _] : v.items()) check_path(at + "." + k + "." + p, p);
          continue;
        }
        check_path(at + "." + k, k);
        if (!names.count(k)) add_name(at + "." + k, k);
      }
      s.listed.push_back(pts[i]);
    }
  }
  if (s.axes.empty() && s.listed.empty())
    fail(f, "", "no points: give \"axes\" (their product is swept) or \"points\" (a list), or both");
  for (const std::string& c : s.columns)
    if (c == "index" || c == "label" || c == "status" || c == "host_seconds" || c == "key" || c == "error" ||
        is_metric(c))
      fail(f, "axes",
           fmt::format("'{}' names a column of the results (index, label, status, the metrics, "
                       "host_seconds, key, error): give the axis another \"name\"",
                       c));

  if (doc.contains("constraints")) {
    if (!doc["constraints"].is_array()) fail(f, "constraints", "expected a list of expressions (strings)");
    if (!doc["constraints"].empty() && s.axes.empty())
      fail(f, "constraints", "constraints filter the product of the axes, and there are no axes");
    for (size_t i = 0; i < doc["constraints"].size(); ++i) {
      const json& c = doc["constraints"][i];
      if (!c.is_string() || c.get<std::string>().empty())
        fail(f, fmt::format("constraints[{}]", i), "expected an expression (a non-empty string)");
      s.constraints.push_back(c.get<std::string>());
    }
    // Syntax and names, on the first point of the product.
    Constraints cs(s);
    if (s.product_size() > 0) cs.first_broken(product_point(s, 0).values);
  }
  return s;
}

// ---- points

namespace {

void append_sets(std::vector<std::string>& sets, const std::string& path, const json& v) {
  if (!path.empty()) {
    sets.push_back(set_assignment(path, v));
    return;
  }
  for (const auto& [k, x] : v.items()) sets.push_back(set_assignment(k, x));
}

std::vector<std::string> fixed_sets(const Spec& spec) {
  std::vector<std::string> sets;
  for (const auto& [p, v] : spec.fixed) sets.push_back(set_assignment(p, v));
  return sets;
}

}  // namespace

Point product_point(const Spec& spec, uint64_t flat) {
  Point p;
  p.index = static_cast<size_t>(flat);
  p.sets = fixed_sets(spec);
  std::vector<size_t> digit(spec.axes.size());
  for (size_t i = spec.axes.size(); i-- > 0;) {
    digit[i] = static_cast<size_t>(flat % spec.axes[i].values.size());
    flat /= spec.axes[i].values.size();
  }
  for (size_t i = 0; i < spec.axes.size(); ++i) {
    const json& v = spec.axes[i].values[digit[i]];
    p.values[spec.axes[i].name] = v;
    append_sets(p.sets, spec.axes[i].path, v);
  }
  for (const std::string& c : spec.columns)
    if (!p.values.contains(c)) p.values[c] = nullptr;
  return p;
}

Point listed_point(const Spec& spec, size_t i, size_t index) {
  Point p;
  p.index = index;
  p.sets = fixed_sets(spec);
  const ordered_json& lp = spec.listed[i];
  if (lp.contains("label")) p.label = lp["label"].get<std::string>();
  for (const std::string& c : spec.columns) {
    p.values[c] = nullptr;
    if (!lp.contains(c)) continue;
    const json v = json(lp[c]);
    p.values[c] = v;
    const auto axis =
        std::find_if(spec.axes.begin(), spec.axes.end(), [&](const Axis& a) { return a.name == c; });
    append_sets(p.sets, axis != spec.axes.end() ? axis->path : c, v);
  }
  return p;
}

Enumeration enumerate(const Spec& spec, uint64_t max_points) {
  Enumeration e;
  const uint64_t n = spec.product_size();
  if (n > max_points)
    throw InputError(fmt::format(
        "{}: axes: the product of the axes has {} points, more than {}{}", spec.file,
        n == std::numeric_limits<uint64_t>::max() ? std::string("over 1.8e19") : std::to_string(n),
        max_points,
        max_points < 10'000'000 ? " (pass --yes to run it anyway)"
                                : " (split the sweep, or use trnsim tune)"));
  Constraints cs(spec);
  std::vector<uint64_t> broken(cs.size());
  for (uint64_t i = 0; i < n; ++i) {
    Point p = product_point(spec, i);
    const int b = cs.first_broken(p.values);
    if (b >= 0) {
      ++e.excluded;
      ++broken[b];
      continue;
    }
    p.index = e.points.size();
    e.points.push_back(std::move(p));
  }
  if (n > 0 && e.points.empty()) {
    std::vector<std::string> each;
    for (size_t c = 0; c < cs.size(); ++c)
      each.push_back(fmt::format("constraints[{}] \"{}\" is the first broken on {}", c,
                                 text_excerpt(spec.constraints[c]), broken[c]));
    throw InputError(
        fmt::format("{}: constraints: they exclude every one of the {} points of the axes ({}): "
                    "they contradict each other or the axes' values",
                    spec.file, n, fmt::join(each, "; ")));
  }
  for (size_t i = 0; i < spec.listed.size(); ++i) e.points.push_back(listed_point(spec, i, e.points.size()));
  return e;
}

// ---- constraints (Lua)

namespace {

constexpr const char* kNullKey = "trnsim_sweep_null";

// __index of the environment: a name that is not an axis is an error, not nil.
int unknown_name(lua_State* L) {
  const char* k = lua_tostring(L, 2);
  return luaL_error(L, "unknown name '%s' (constraints read the axis names)", k ? k : "?");
}

void push_value(lua_State* L, const json& v) {
  if (v.is_boolean()) {
    lua_pushboolean(L, v.get<bool>());
  } else if (v.is_number_unsigned() &&
             v.get<uint64_t>() > uint64_t(std::numeric_limits<lua_Integer>::max())) {
    lua_pushnumber(L, static_cast<lua_Number>(v.get<uint64_t>()));  // not a wrapped negative integer
  } else if (v.is_number_integer()) {
    lua_pushinteger(L, v.get<lua_Integer>());
  } else if (v.is_number()) {
    lua_pushnumber(L, v.get<double>());
  } else if (v.is_string()) {
    lua_pushstring(L, v.get_ref<const std::string&>().c_str());
  } else if (v.is_null()) {
    lua_getfield(L, LUA_REGISTRYINDEX, kNullKey);
  } else {
    lua_pushstring(L, v.dump().c_str());
  }
}

// A constraint is an expression, yet Lua lets it loop (a function called in place): each evaluation may run
// this many VM instructions, far more than any real constraint needs, then it is an error, not a hang.
constexpr int kMaxInstructions = 10'000'000;

void too_long(lua_State* L, lua_Debug*) {
  luaL_error(L, "does not finish within %d Lua instructions (a loop?)", kMaxInstructions);
}

// lua_Alloc over realloc/free, counting the state's bytes in `ud` and refusing to grow past kMaxLuaBytes.
void* capped_alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  size_t& used = *static_cast<size_t*>(ud);
  const size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    std::free(ptr);
    used -= old;
    return nullptr;
  }
  if (nsize > old && used - old + nsize > Constraints::kMaxLuaBytes) return nullptr;
  void* p = std::realloc(ptr, nsize);
  if (p) used = used - old + nsize;
  return p;
}

void strict_table(lua_State* L) {
  lua_newtable(L);
  lua_newtable(L);
  lua_pushcfunction(L, unknown_name);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
}

}  // namespace

Constraints::Constraints(const Spec& spec) : spec_(spec) {
  if (spec.constraints.empty()) return;
  L_ = lua_newstate(capped_alloc, &lua_bytes_);
  if (L_ == nullptr) throw Error("cannot create a Lua state for the constraints");
  luaL_requiref(L_, "math", luaopen_math, 1);
  lua_pop(L_, 1);
  lua_newtable(L_);  // a unique value for JSON null
  lua_setfield(L_, LUA_REGISTRYINDEX, kNullKey);
  for (size_t i = 0; i < spec.constraints.size(); ++i) {
    const std::string code = "return (" + spec.constraints[i] + "\n)";
    const std::string name = fmt::format("=constraints[{}]", i);
    if (luaL_loadbufferx(L_, code.data(), code.size(), name.c_str(), "t") != LUA_OK) {
      std::string msg = lua_tostring(L_, -1);
      lua_close(L_);
      L_ = nullptr;
      throw InputError(fmt::format("{}: constraints[{}]: \"{}\" does not parse: {}", spec.file, i,
                                   text_excerpt(spec.constraints[i]), msg));
    }
    refs_.push_back(luaL_ref(L_, LUA_REGISTRYINDEX));
    exprs_.push_back(spec.constraints[i]);
  }
}

Constraints::~Constraints() {
  if (L_) lua_close(L_);
}

int Constraints::first_broken(const ordered_json& values) const {
  if (!L_) return -1;
  lua_State* L = L_;
  strict_table(L);  // the environment
  lua_getglobal(L, "math");
  lua_setfield(L, -2, "math");
  lua_getfield(L, LUA_REGISTRYINDEX, kNullKey);
  lua_setfield(L, -2, "null");
  for (const auto& [name, v] : values.items()) {
    // name "a.b.c": nested tables a.b, field c; a plain identifier: a global.
    std::vector<std::string> parts = split_path(name);
    lua_pushvalue(L, -1);
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      lua_pushstring(L, parts[i].c_str());
      lua_rawget(L, -2);
      if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        strict_table(L);
        lua_pushstring(L, parts[i].c_str());
        lua_pushvalue(L, -2);
        lua_rawset(L, -4);
      }
      lua_remove(L, -2);
    }
    lua_pushstring(L, parts.back().c_str());
    push_value(L, json(v));
    lua_rawset(L, -3);
    lua_pop(L, 1);
  }
  int broken = -1;
  for (size_t i = 0; i < refs_.size() && broken < 0; ++i) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, refs_[i]);
    lua_pushvalue(L, -2);
    lua_setupvalue(L, -2, 1);                                   // _ENV
    lua_sethook(L, too_long, LUA_MASKCOUNT, kMaxInstructions);  // restarts the count
    if (const int rc = lua_pcall(L, 0, 1, 0); rc != LUA_OK) {
      const std::string msg =
          rc == LUA_ERRMEM ? fmt::format("takes more than {} MiB of memory", Constraints::kMaxLuaBytes >> 20)
                           : lua_tostring(L, -1);
      lua_settop(L, 0);
      throw InputError(
          fmt::format("{}: constraints[{}]: \"{}\": {}", spec_.file, i, text_excerpt(exprs_[i]), msg));
    }
    if (!lua_isboolean(L, -1)) {
      const std::string got = luaL_typename(L, -1);
      lua_settop(L, 0);
      throw InputError(fmt::format("{}: constraints[{}]: \"{}\" gives a {}, expected true or false",
                                   spec_.file, i, text_excerpt(exprs_[i]), got));
    }
    if (!lua_toboolean(L, -1)) broken = static_cast<int>(i);
    lua_pop(L, 1);
  }
  lua_settop(L, 0);
  return broken;
}

}  // namespace trnsim::sweep
