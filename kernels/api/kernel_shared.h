// What kernel.cpp, kernel_memory.cpp and kernel_written.cpp share (the builder's own, not for kernels): the
// state of one build both cores' Kernel objects write into.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/api/kernel.h"
#include "sim/base/prefaulter.h"

namespace trnsim::kernels {

struct Kernel::Shared {
  uint64_t max_instructions = 0;
  uint64_t instructions = 0;
  bool declare_only = false;
  // Streams reserve address space ahead (build_program): no address-space limit (ulimit -v) is set.
  bool reserve_ahead = false;
  double hbm_bytes = 0;  // HBM tensors declared so far
  isa::Program program;
  std::vector<std::string> hbm_at;  // each HBM tensor's declaration line, by tensor index (hbm_label)
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, int> kinds;  // tensor name -> 0 input, 1 output, 2 scratch
  std::map<std::string, uint32_t> files;
  // The same by a Loc's file pointer (valid for the process's life, kernel.h): a file switch finds its index
  // without building and comparing strings (two pointers to one name share the index through `files`).
  std::unordered_map<const char*, uint32_t> file_by_pointer;
  std::map<std::string, uint16_t> phases;
  std::vector<AllocationRecord> allocations;
  std::vector<std::string> warnings;
  std::set<std::string> warned_at;  // source lines warned about (both cores' reads are one mistake)
  // Each on-chip tile name's allocation line (make_tile), for the messages naming a tile; nullopt for a name
  // allocated at two lines (which one a tile of that name came from is not known then).
  std::map<std::string, std::optional<Loc>> tile_locs;
  // BuildOptions::warn_unwritten_outputs: what each output tensor (by tensor index) had written, both cores.
  struct OutputWrites {
    std::string at;  // its declaration's source line
    int64_t bytes = 0;
    ByteSpans written;
  };
  bool warn_unwritten_outputs = false;
  std::map<uint32_t, OutputWrites> output_writes;
  // LNC2, with warn_unwritten_outputs: which bytes of the HBM tensors both cores see (outputs and shared_hbm
  // scratch; by tensor index; [begin, end) -> the latest access there: its source line and how many
  // core_barriers core 0 had made before it) core 0 wrote, and read. Core 1 writing bytes core 0 writes or
  // reads, or reading bytes core 0 writes, between the same barriers races with it on hardware
  // (Kernel::check_written warns).
  struct CoreWrite {
    int64_t end;
    uint32_t barriers;
    std::string at;
  };
  std::map<uint32_t, std::map<int64_t, CoreWrite>> core0_writes, core0_reads;
  // The race warned at each source line of core 1 (one warning a line): the bytes found racing there so far,
  // merged over all its accesses (a loop's stores, each against all of core 0's accesses), and the warning's
  // index in `warnings`, rewritten as the bytes grow.
  struct Race {
    uint32_t tensor;
    bool write, core0_write;
    std::vector<std::string> core0_at;  // core 0's lines, in the order found
    ByteSpans bytes;
    size_t index;
  };
  std::map<std::string, Race> races;
  // Each core's sendrecv calls in program order: build_program pairs the n-th of each core (the n-th transfer
  // of a core lands in the dst of the peer's n-th call).
  struct SendRecvCall {
    uint64_t src_elements = 0, dst_elements = 0;
    std::string src, dst, at;  // View::describe() of each, the call's source line
    InstRef transfer;          // the SendRecv instruction (index 0 in a declaration build)
  };
  std::array<std::vector<SendRecvCall>, 2> sendrecv_calls;
  // Maps the streams' next instruction slots on another thread (Kernel::prefault_ahead). Last: destroyed
  // first, so no range is mapped once the streams may be freed.
  Prefaulter prefaulter;
};

// How messages name an HBM tensor: "output 'y' float32 [256, 64] declared at k.py:9" ("shared_hbm tensor",
// "input", "scratch" for the others); a name the NKI front end made for a tensor the kernel declared without
// name= ("<tmp>", the kernel's variable in angle brackets: python/trnsim/nki/_jit.py _declare_hbm) unquoted
// and without its brackets ("shared_hbm tensor tmp float32 [128, 64] declared at k.py:12, without name="), so
// that it never reads as a name the kernel gave.
std::string hbm_label(const Kernel::Shared& shared, uint32_t tensor);

// Drops assume_written's views not yet taken (a declaration build's: its Kernel emits nothing).
void forget_assumed_written();

// "<at>: output 'y' float32 [256, 64]: no instruction writes row 255 of its 256 (256 of its 65536 bytes):
// ..." (or "rows 0-127, columns 32-63 (...)") for an output with bytes no instruction writes
// (BuildOptions::warn_unwritten_outputs); "" when it is all written.
std::string unwritten_output_warning(const isa::TensorDecl& t, const std::string& at, int64_t bytes,
                                     const ByteSpans& written);

}  // namespace trnsim::kernels
