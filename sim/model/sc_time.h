// Conversions between SystemC time and trnsim's Picoseconds (the model runs SystemC at a 1 ps resolution).
#pragma once

#include <systemc>

#include "sim/base/units.h"

namespace trnsim::model {

// sc_time_stamp()'s value, read inline (the library call was ~1.4 % of a DMA-heavy run).
inline Picoseconds now_ps() {
  return Picoseconds(sc_core::sc_get_curr_simcontext()->time_stamp().value());
}
inline sc_core::sc_time to_sc(Picoseconds d) {
  return sc_core::sc_time::from_value(d.count());
}

}  // namespace trnsim::model
