// Ctrl-C, SIGTERM, SIGHUP and every other signal whose default action ends the process (SIGXCPU, a CPU-time
// limit; SIGUSR1, SIGUSR2, SIGALRM, as schedulers send; SIGIO, SIGVTALRM, SIGPROF, SIGSTKFLT, SIGPWR and the
// real-time signals): a run that is interrupted leaves nothing half-written behind. A signal the process
// started with ignored (nohup) or handled by someone else stays so. SIGPIPE and SIGXFSZ are ignored: a write
// to a closed pipe or past a file-size limit (ulimit -f) fails with EPIPE or EFBIG instead, which the run
// reports (a file it cannot write) or ignores (its messages to a closed pipe). SIGQUIT and the crash signals
// (SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGSYS, SIGTRAP) keep their core dumps, after the registered
// paths below are removed (a report's staging folder and script, the output folder the run created), except
// while a set's renames are under way (SignalsHeld: the next trnsim settles the set from its record, as after
// a SIGKILL).
//   - During a cooperative section (the simulation), the first signal only sets a flag: the model stops at
//     its next instruction completion and throws Interrupted, so the trace is closed and marked incomplete
//     like any failed run's. A second signal ends the process at once, unless it came within 0.25 s of the
//     first (the copy that `timeout` or a process-group kill sends).
//   - Anywhere else the handler ends the process at once.
// Whichever thread a signal lands on (the reference thread, BLAS's), the thread that installed the handlers
// acts on it: no other thread goes on creating files while the handler cleans up.
// Ending the process at once means: rename the registered backups back over their files (an earlier record
// a set was replacing), unlink the registered temporary files, remove the registered folders if they are
// empty (a folder this run created), then die of the signal (exit status 128 + signal number).
// The handler cannot log through spdlog (sim/base/log.h: locks, allocation): it writes its one-line message
// to stderr with write(2), made before any signal (install_handlers), and only if the console's level lets
// it through (set_messages, which log::set_level calls): "stopping the simulation" is a warning (the run
// then stops and reports the interruption as an error through the logger, in its log file too); the message
// of a process that ends at once is an error. Only async-signal-safe calls run in the handler. At most
// kMaxCleanupPaths paths are registered at a time; beyond that a path is silently left out (a leftover
// temporary, never a lost user file).
// SIGBUS (a read of a mapped file's page that is no longer there: an input file truncated while the run
// reads it, sim/base/host_bytes.h) is handled too, on the thread that faulted: when the address lies in a
// registered input mapping (MappedInput), the handler writes "error: PATH: the file changed size while the
// run read it ...", cleans up as above and exits with status 1 (bad input, as any other). Any other SIGBUS
// (a fault elsewhere, or kill -BUS) is a crash signal as above.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "sim/base/error.h"

namespace trnsim {

// The user interrupted the run (SIGINT, SIGTERM, ...) during a cooperative section.
class Interrupted : public Error {
 public:
  using Error::Error;
};

}  // namespace trnsim

namespace trnsim::interrupt {

inline constexpr int kMaxCleanupPaths = 128;

// Installs the handlers (above). Call once, early in main.
void install_handlers();

// Which of the handler's own messages reach stderr: `warnings` ("stopping the simulation"), `errors`
// ("interrupted" when the process ends at once). Both until called. log::set_level keeps them in step with
// the console's level (--quiet: errors only; --log-level off: neither).
void set_messages(bool warnings, bool errors);

// The signals install_handlers handles by name (SIGINT, SIGTERM, SIGHUP, ...; the real-time signals too, not
// listed here).
std::vector<int> handled_signals();

// True once a signal arrived during a cooperative section.
bool requested();
// The signal that arrived, 0 if none.
int signal_number();

// Unlinks the registered files, removes the registered empty folders and dies of the received signal (or
// SIGINT when none was recorded). Never returns.
[[noreturn]] void exit_now();

// While alive, a signal is held back (a set of renames that must all happen or none, then the earlier set's
// files removed): when the section ends, the process says it was interrupted once the files were in place
// and ends as the signal asks.
class SignalsHeld {
 public:
  SignalsHeld();
  ~SignalsHeld();
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;
};

// While alive, the first signal sets the flag instead of ending the process.
class CooperativeSection {
 public:
  CooperativeSection();
  ~CooperativeSection();
  CooperativeSection(const CooperativeSection&) = delete;
  CooperativeSection& operator=(const CooperativeSection&) = delete;
};

// While alive, `path` is unlinked (a file) or removed if empty (a folder) when a signal ends the process;
// for kTree, the folder `path` is removed with everything in it (a private staging folder; at most 12 levels,
// never through a symlink); for kRestore, the file `path` is renamed back over `to` (a backup link of a file
// being replaced) and any name of it left (a backup that was still the same file as `to`) unlinked.
class CleanupPath {
 public:
  enum class Kind { kFile, kEmptyFolder, kRestore, kTree };
  CleanupPath(const std::string& path, Kind kind);
  // `path` relative to the folder open as `dir_fd` (the descriptor must stay open while this lives): a
  // folder renamed meanwhile is still the one cleaned.
  CleanupPath(int dir_fd, const std::string& path, Kind kind);
  // kRestore: `backup` back to `to`, both names in the folder open as `dir_fd` (`to` at most 255 bytes).
  CleanupPath(int dir_fd, const std::string& backup, const std::string& to);
  ~CleanupPath();
  CleanupPath(CleanupPath&& o) noexcept : slot_(o.slot_) { o.slot_ = -1; }
  CleanupPath& operator=(CleanupPath&&) = delete;
  CleanupPath(const CleanupPath&) = delete;

 private:
  int slot_ = -1;  // -1: not registered (the table was full or the path too long)
};

// While alive, the child process `pid` (a report script) is killed (SIGKILL) and reaped when a signal ends
// the process, before the paths above are removed: none is left running, writing into them. At most
// kMaxChildren at a time. Register it with signals blocked from before the fork (no signal between the two).
inline constexpr int kMaxChildren = 16;
class ChildProcess {
 public:
  explicit ChildProcess(pid_t pid);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

 private:
  int slot_ = -1;
};

// In a forked child before exec: the signals whose handler is ours go back to their default action (a
// signal between the fork and the exec would otherwise run the parent's cleanup in the child).
// Async-signal-safe.
void reset_in_child();

// While alive, a SIGBUS at an address in [addr, addr + len) is reported as the input file `path` having
// changed size during the run (above). At most kMaxMappedInputs at a time; beyond that one is left out (its
// SIGBUS kills the process as before).
inline constexpr int kMaxMappedInputs = 256;
class MappedInput {
 public:
  MappedInput(const void* addr, size_t len, const std::string& path);
  ~MappedInput();
  MappedInput(const MappedInput&) = delete;
  MappedInput& operator=(const MappedInput&) = delete;

 private:
  int slot_ = -1;
};

}  // namespace trnsim::interrupt
