// Helper threads kept for the whole process, to split one piece of host work (a matmul tile, an
// instruction's numerics) over the host's cores without starting threads for each piece.
#pragma once

#include <functional>

namespace trnsim::num {

// How many parts a split host computation uses: 2 on a host with at least 2 hardware threads, else 1.
int host_split_threads();

// Runs f(t) for t = 0 .. n-1 and returns when all have finished: f(0) on the calling thread, each other part
// on whichever thread claims it first, the calling thread or one of the process's n-1 helper threads
// (started on first use): a helper that is slow to start leaves its part to the caller. A caller that finds
// the helpers busy (another thread is inside host_split) runs its parts as run_parts does. An exception from
// any part is rethrown here after all parts have finished (the first one, by part number). Callers split
// work into parts that write disjoint memory, so the results do not depend on n or on which thread ran what.
void host_split(int n, const std::function<void(int)>& f);

// host_split over host_split_threads() threads whatever n is: for many small parts (a matmul's 32-column
// panels) that the threads claim one at a time, so a thread the OS preempts holds up at most one part.
void host_for(int n, const std::function<void(int)>& f);

// Runs f(t) for t = 0 .. n-1 on threads started for this call (parts 1 .. n-1) and on the calling thread
// (part 0), and returns when all have finished. A part whose thread cannot be started (a process or thread
// limit: ulimit -u) runs on the calling thread after part 0, so the work is done either way; an exception
// from any part is rethrown after all have finished (the first by part number), never left to end the
// process. Parts write disjoint memory: the results do not depend on which thread ran what.
void run_parts(int n, const std::function<void(int)>& f);

}  // namespace trnsim::num
