// Helper threads kept for the whole process, to split one piece of host work (a matmul tile, an
// instruction's numerics) over the host's cores without starting threads for each piece.
#pragma once

#include <functional>

namespace trnsim::num {

// How many parts a split host computation uses: 2 on a host with at least 2 hardware threads, else 1.
int host_split_threads();

// Runs f(t) for t = 0 .. n-1 and returns when all have finished: f(0) on the calling thread, the others on
// the process's helper threads (started on first use). A caller that finds the helpers busy (another thread
// is inside host_split) runs its parts on threads of its own. An exception from any part is rethrown here
// after all parts have finished (the first one, by part number). Callers split work into parts that write
// disjoint memory, so the results do not depend on n or on which thread ran what.
void host_split(int n, const std::function<void(int)>& f);

}  // namespace trnsim::num
