// Every statistic of stats.json declared once: its key, unit, meaning and how two runs compare. stats.json's
// "definitions", the table `trnsim run` and `trnsim stats` print, and `trnsim stats --compare` are rendered
// from these declarations, and the writer refuses a key that is not declared (so every key has a definition).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace trnsim::run {

// Which way is better when two runs are compared (stats --compare prints B/A for both).
enum class Better { None, Lower, Higher };

struct StatDef {
  // Dotted JSON path. "*" matches one component of any name (engines.*.*.busy_ns), "[]" the elements of an
  // array (opcodes[].count).
  std::string key;
  // ns, us, bytes, bytes/partition, count, %, GB/s, FLOP, TFLOP/s, ratio, bool, text, or a metric's own unit.
  std::string unit;
  std::string description;
  std::string
      label;  // row label in the printed table and the comparison; empty: shown elsewhere or not at all
  Better better = Better::None;
  bool in_table = false;    // a headline row of the printed table
  bool in_compare = false;  // a row of stats --compare
};

const std::vector<StatDef>& stat_defs();
// The declaration matching a concrete dotted path (e.g. "engines.core0.PE.busy_ns"); null if none.
const StatDef* find_stat_def(std::string_view path);

}  // namespace trnsim::run
