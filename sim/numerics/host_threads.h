// Helper threads kept for the whole process, to split one piece of host work (a matmul tile, an
// instruction's numerics) over the host's cores without starting threads for each piece.
#pragma once

#include <functional>

namespace trnsim::num {

// How many parts a split host computation uses: 2 on a host with at least 2 hardware threads, else 1.
int host_split_threads();

// Runs f(t) for t = 0 .. n-1 and returns when all have finished: f(0) on the calling thread, the others on
// the process's helper threads (started on first use). A caller that finds the helpers busy (another thread
// is inside host_split) runs its parts as run_parts does. An exception from any part is rethrown here
// after all parts have finished (the first one, by part number). Callers split work into parts that write
// disjoint memory, so the results do not depend on n or on which thread ran what.
void host_split(int n, const std::function<void(int)>& f);

// Runs f(t) for t = 0 .. n-1 on threads started for this call (parts 1 .. n-1) and on the calling thread
// (part 0), and returns when all have finished. A part whose thread cannot be started (a process or thread
// limit: ulimit -u) runs on the calling thread after part 0, so the work is done either way; an exception
// from any part is rethrown after all have finished (the first by part number), never left to end the
// process. Parts write disjoint memory: the results do not depend on which thread ran what.
void run_parts(int n, const std::function<void(int)>& f);

}  // namespace trnsim::num
