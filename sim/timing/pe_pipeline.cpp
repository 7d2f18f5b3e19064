#include "sim/timing/pe_pipeline.h"

namespace trnsim::timing {
namespace {

Picoseconds later(Picoseconds a, Picoseconds b) {
  return a < b ? b : a;
}

}  // namespace

PePipeline::PePipeline(const config::PeConfig& pe, Picoseconds limit)
    : clock_(pe.clock_GHz), ls_overlap_(pe.ls_overlap), throttle_(pe), limit_(limit) {}

PePipeline::Load PePipeline::load_stationary(Picoseconds ready, Cycles ls_cycles) {
  Load ls;
  ls.start = later(later(ready, ls_free_), ls_overlap_ ? mm_start_prev_ : mm_end_prev_);
  ls.end = end_after(ls.start, clock_, ls_cycles, limit_, "its LoadStationary would end");
  ls_free_ = ls.end;
  return ls;
}

PePipeline::Multiply PePipeline::multiply_moving(Picoseconds ready, Cycles mm_cycles) {
  Multiply mm;
  mm.start = later(ready, mm_end_prev_);
  mm.full_rate =
      Picoseconds(end_after(mm.start, clock_, mm_cycles, limit_, "its MultiplyMoving would end").count() -
                  mm.start.count());
  const Picoseconds dur = throttle_.run(mm.start, mm.full_rate);
  mm.throttle_cap = throttle_.cap_at(mm.start);  // after run(), which may re-engage the cap at mm.start
  mm.end = end_after(mm.start, dur, limit_, "its MultiplyMoving (throttled) would end");
  mm_start_prev_ = mm.start;
  mm_end_prev_ = mm.end;
  return mm;
}

PePipeline::Matmul PePipeline::matmul(Picoseconds ready, Cycles ls_cycles, Cycles mm_cycles) {
  Matmul m;
  m.ls = load_stationary(ready, ls_cycles);
  m.mm = multiply_moving(m.ls.end, mm_cycles);
  return m;
}

}  // namespace trnsim::timing
