// Program order: the builder emits instructions in the order the kernel calls the nki:: ops, and each
// engine runs its stream in that order. The hardware runs what the compiler scheduled, so a kernel ported
// from NKI says in its own code which order the NKI compiler's schedule gives; nothing is reordered behind
// its back. With NKI's default scheduler the next iteration's loads go ahead of this iteration's stores
// (the published profiles of the tutorial, vector-add and transpose kernels show one iteration's compute
// overlapping the next one's loads); a kernel compiled with the scheduler off (nki-autotune's
// `enable-instruction-scheduling=false`) keeps its program order.
//
// pipelined_loop emits a loop in that software-pipelined order: the prefetch stage of iteration
// i + lookahead is emitted before the body of iteration i. The prefetch stage (the loads, into buffers from
// tile pools) returns a per-iteration state the body receives (the tiles it loaded).
//
//   pipelined_loop(n, 1,
//     [&](int64_t i) { Tiles t{a.next(), b.next()}; load(t, i); return t; },
//     [&](int64_t i, Tiles& t) { compute(t); store(t, i); });
//   // emits: load 0, load 1, body 0, load 2, body 1, ..., body n-1
//
// The order is only legal if the prefetch of i + lookahead does not touch what iterations i .. i + lookahead
// - 1 still use: the pools it draws from need at least lookahead + 1 buffers per iteration's worth of tiles
// (the builder tracks dependencies in emission order, so a shortfall gives wrong numerics, which the ports'
// tests would catch).
#pragma once

#include <cstdint>
#include <deque>
#include <type_traits>
#include <utility>

#include "sim/base/error.h"

namespace trnsim::kernels {

template <class Prefetch, class Body>
void pipelined_loop(int64_t n, int64_t lookahead, Prefetch&& prefetch, Body&& body) {
  using State = std::invoke_result_t<Prefetch&, int64_t>;
  static_assert(!std::is_void_v<State>, "pipelined_loop: the prefetch stage returns the iteration's state");
  if (lookahead < 0) throw InputError("pipelined_loop: lookahead must be >= 0");
  std::deque<State> ahead;  // states of iterations i .. i + lookahead
  int64_t fetched = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (; fetched < n && fetched <= i + lookahead; ++fetched) ahead.push_back(prefetch(fetched));
    body(i, ahead.front());
    ahead.pop_front();
  }
}

}  // namespace trnsim::kernels
