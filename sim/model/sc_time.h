// Conversions between SystemC time and trnsim's Picoseconds (the model runs SystemC at a 1 ps resolution).
#pragma once

#include <systemc>

#include <cstring>
#include <type_traits>

#include "sim/base/units.h"

namespace trnsim::model {

// sc_time_stamp()'s value, read inline (the library call was ~1.4 % of a DMA-heavy run).
inline Picoseconds now_ps() {
  return Picoseconds(sc_core::sc_get_curr_simcontext()->time_stamp().value());
}
// sc_time::from_value(d) without the library call (one per timed notification: ~2 % of bench_model's
// simulation): an sc_time is its value alone (checked below). The call would also mark the time resolution
// as fixed; run_program sets it (1 ps) before any event.
inline sc_core::sc_time to_sc(Picoseconds d) {
  static_assert(sizeof(sc_core::sc_time) == sizeof(sc_core::sc_time::value_type) &&
                std::is_standard_layout_v<sc_core::sc_time>);
  sc_core::sc_time t;
  const sc_core::sc_time::value_type v = d.count();
  std::memcpy(static_cast<void*>(&t), &v, sizeof v);
  return t;
}

}  // namespace trnsim::model
