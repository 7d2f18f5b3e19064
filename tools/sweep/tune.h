// trnsim tune SWEEP.json: the sweep's space searched for the best value of an objective (a results column,
// total_time_ns by default, lowest unless the sweep says "maximize") within a budget of evaluated points.
//
// Search: the listed points first (e.g. the default tiling and a library's tuned picks), then random points
// of the constrained product (a third of the budget), then greedy neighbourhood descent: the best point found
// so far has each axis moved to its neighbouring values (and, for an axis of at most 4 values, to every
// value) one at a time; the first better point becomes the centre; a centre whose neighbours are all tried
// hands over to the best point not yet a centre; when none is left, random points again. Why: tiling spaces
// are products of per-dimension choices whose effects are nearly separable (each phase's blocks, the loop
// order, the shard), so one-axis moves from a good point find the valley far faster than the grid, while the
// random start keeps the descent from settling on the first basin it meets. Points that break a constraint or
// fail trnsim validate cost nothing; points already kept in DIR/points/ count without running again.
// Deterministic for a seed.
#pragma once

#include <cstdint>
#include <string>

namespace trnsim::sweep {

struct TuneOptions {
  std::string out;  // "" = out/tune/<name>
  int budget = 100;
  std::string objective;  // "" = the sweep's
  bool maximize = false;
  bool maximize_given = false;
  uint64_t seed = 1;
  int jobs = 0;
  bool report = true;
  std::string write;  // the best workload file ("" = DIR/best_workload.json)
  // --timeout: seconds a point's run, or its check (a Python kernel's trace), may take before it is stopped
  // (an error row, as in trnsim sweep); 0: none.
  double timeout_seconds = 0;
};

int run_tune(const std::string& sweep_file, const TuneOptions& o);

}  // namespace trnsim::sweep
