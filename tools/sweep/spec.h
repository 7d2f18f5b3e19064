// A sweep file (configs/sweeps/*.json, docs/sweeps.md): a base workload, the --set assignments every point
// shares, axes (each a --set path and its values), explicit points, and constraints that skip points.
//
//   {"name": "llama3_8b_down_bwd_tiling", "description": "...",
//    "workload": "../workloads/llama3_8b_mlp_down_bwd_mxfp8.json",   relative to the sweep file's folder
//    "set": {"numerics": false},                                     every point
//    "axes": [{"name": "order", "path": "params.tile_loop_order", "values": ["mnk", "nmk"]}, ...]
//            or {"params.tile_loop_order": ["mnk", "nmk"], ...}     (the name is then the path),
//    "points": [{"label": "nki-library tuned", "order": "nmk", ...}], explicit points, after the product
//    "constraints": ["dx_bm * dx_tile_m <= 1024", ...],             Lua expressions over the axis names
//    "objective": "total_time_ns", "maximize": false}               for trnsim tune
//
// An axis value is any JSON value (null: the kernel's auto); an axis without "path" has objects of
// {path: value} as values (several keys set together). The points are the cartesian product of the axes
// (the last axis varies fastest) that pass every constraint, then the listed points (not filtered).
// Errors: InputError "<sweep file>: <key>: <what is wrong>" for unknown keys, empty axes, unknown paths (a
// parameter the kernel does not have, a hardware parameter the config does not have), duplicate names or
// values, constraints that do not parse, name something unknown or exclude every point.
#pragma once

#include <lua.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace trnsim::sweep {

struct Axis {
  std::string name;  // the column and the name constraints use
  std::string path;  // the --set path; empty when each value is an object of {path: value}
  std::vector<nlohmann::json> values;
};

// One point of a sweep: its values per column and the --set assignments that make its workload.
struct Point {
  size_t index = 0;               // position in the sweep (product first, then listed points)
  std::string label;              // a listed point's "label"
  nlohmann::ordered_json values;  // column name -> value
  std::vector<std::string> sets;  // the sweep's "set", then the point's assignments, as PATH=JSON
};

struct Spec {
  std::string file;  // the sweep file as given
  std::string name, description;
  std::string workload;  // the base workload, relative to the sweep file's folder resolved
  std::vector<std::pair<std::string, nlohmann::json>> fixed;  // "set"
  std::vector<Axis> axes;
  std::vector<nlohmann::ordered_json> listed;  // "points", keys checked
  std::vector<std::string> columns;            // axis names, then paths only listed points set
  std::vector<std::string> constraints;
  std::string objective = "total_time_ns";
  bool maximize = false;

  // Points of the full product before constraints (saturates at UINT64_MAX).
  uint64_t product_size() const;
};

// Reads and checks a sweep file (keys, axes, values, the paths against the base workload's kernel and
// hardware, the constraints' syntax and names).
Spec parse_spec(const std::string& path);

// Constraints compiled once, evaluated per point (a Lua state: expressions over the axis names; an axis
// named by its path is also reachable as nested tables, params.tile_n).
class Constraints {
 public:
  explicit Constraints(const Spec& spec);
  ~Constraints();
  Constraints(const Constraints&) = delete;
  Constraints& operator=(const Constraints&) = delete;
  // Index of the first constraint `values` breaks, -1 if none. InputError naming the constraint when one
  // cannot be evaluated (an unknown name, arithmetic on a string) or gives something other than a boolean.
  int first_broken(const nlohmann::ordered_json& values) const;
  size_t size() const { return exprs_.size(); }

 private:
  const Spec& spec_;
  lua_State* L_ = nullptr;
  std::vector<int> refs_;  // compiled chunks in the registry
  std::vector<std::string> exprs_;
};

// The product point at `flat` (mixed radix over the axes, the last fastest), unfiltered.
Point product_point(const Spec& spec, uint64_t flat);
// A listed point (i-th of spec.listed) with index `index`.
Point listed_point(const Spec& spec, size_t i, size_t index);

// Every point of the sweep: the product filtered by the constraints, then the listed points. InputError if
// the product has more than `max_points` points, or if the constraints exclude every point of a product
// (naming how many points each constraint alone excludes).
struct Enumeration {
  std::vector<Point> points;
  uint64_t excluded = 0;  // product points the constraints skipped
};
Enumeration enumerate(const Spec& spec, uint64_t max_points);

// "PATH=JSON" for one assignment.
std::string set_assignment(const std::string& path, const nlohmann::json& value);

}  // namespace trnsim::sweep
