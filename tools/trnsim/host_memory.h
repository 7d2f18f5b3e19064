// Host memory for a run with numerics: what it needs at least and what the machine has, so that a layer too
// big for this machine is refused with a message before any work, instead of being killed by the kernel's
// out-of-memory killer minutes later.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/base/available_memory.h"

namespace trnsim::cli {

// available_host_bytes(): sim/base/available_memory.h.
using trnsim::available_host_bytes;

// What a run needs, in bytes: memory only RAM (or swap) can hold, and memory the OS can page
// (sim/base/host_bytes.h): scratch files on the output's filesystem and mapped input files.
struct HostMemoryNeed {
  double anonymous = 0;
  double scratch = 0;
  double mapped = 0;
  // The files the run writes into its output folder (the .npy outputs, --dump-inputs, and the estimates of
  // run_files_bytes): at the write's peak each is a new file beside the earlier run's, before the renames,
  // while the scratch files still hold the tensors.
  double written = 0;
  // The --trace file(s), on the trace's own filesystem (trace_bytes); 0 without --trace or to a device.
  double trace = 0;
  // The --report HTML (report_bytes), on its own filesystem as the trace; 0 without --report.
  double report = 0;
  // A chain's stages (and their files) are held together until the chain writes: their needs add up.
  HostMemoryNeed& operator+=(const HostMemoryNeed& o) {
    anonymous += o.anonymous, scratch += o.scratch, mapped += o.mapped, written += o.written,
        trace += o.trace, report += o.report;
    return *this;
  }
};

// Upper estimates, in bytes, of the files whose size is known only once the run is over.
// stats.json, host.json and the run's record (.trnsim-files) of a run of a program with `tensors` tensors,
// writing `files` files in all.
double run_files_bytes(size_t tensors, size_t files);
// A --trace of a program of `instructions` instructions.
double trace_bytes(uint64_t instructions);
// A --report of a run of a program with `tensors` tensors.
double report_bytes(size_t tensors);

// Counted once per process (a chain's stages share them), on top of the needs: the stacks of the threads
// that compute with numerics (main.cpp gives each 8 MiB): the command's, the references' and those splitting
// the numerics (num::host_split_threads: 2 on any multi-core host). 0 without numerics.
double thread_stack_bytes(bool numerics);

// Whether a run that needs `need` (with numerics or not) keeps its scratch buffers in memory files
// (sim/base/host_bytes.h, set_scratch_in_memory): when its anonymous memory (with thread_stack_bytes) and
// its scratch together are at most half of available_host_bytes() (nothing else can page them out: half
// leaves room for an estimate that is a lower bound and for other processes), or at most
// TRNSIM_SCRATCH_IN_MEMORY_BYTES when that is set (0: always scratch files), and never more than
// available_host_bytes() (memory files cannot be paged out). InputError unless that variable is a plain
// decimal byte count.
bool scratch_in_memory(const HostMemoryNeed& need, bool numerics);

// `need` as its memory lies once scratch_in_memory has chosen: with `in_memory`, the scratch bytes are RAM
// (counted with the anonymous part) and take no room on the output's filesystem.
HostMemoryNeed placed(HostMemoryNeed need, bool in_memory);

// InputError "<file>: this run needs at least ... of host memory ..." naming the figures when `need` does
// not fit: the anonymous part (with thread_stack_bytes) in available_host_bytes(), the scratch and written
// parts together in the free space of the filesystem that holds (or will hold) `out_dir`, all of it in the
// address-space limit (`ulimit -v`) when one is set. `numerics` and `dump_inputs` choose the advice
// (--no-numerics, without
// --dump-inputs).
// `trace` (the --trace path, "" for none) names the filesystem of need.trace: the output's when both are on
// one, else its own, checked apart; `report` (the --report path) the same for need.report.
void check_host_memory_need(const HostMemoryNeed& need, const std::string& file, bool numerics,
                            bool dump_inputs, const std::string& out_dir, const std::string& trace = "",
                            const std::string& report = "");

// The decision and the check in their order, as `trnsim run` and a chain both make them: scratch_in_memory
// chooses where the scratch goes, check_host_memory_need checks `need` placed there (same arguments, same
// InputErrors). Returns whether the large tensors are to be memory files (for set_scratch_in_memory).
bool place_and_check_host_memory(const HostMemoryNeed& need, const std::string& file, bool numerics,
                                 bool dump_inputs, const std::string& out_dir, const std::string& trace = "",
                                 const std::string& report = "");

}  // namespace trnsim::cli
