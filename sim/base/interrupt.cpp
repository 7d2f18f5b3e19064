#include "sim/base/interrupt.h"
#include "sim/base/interrupt_note.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <string>
#include <vector>

namespace trnsim::interrupt {
namespace {

constexpr size_t kPathBytes = 4096;
// Signals whose default action ends the process (without a core dump): a user, a scheduler (Slurm's
// --signal, a CPU-time limit) or a shell asks the run to end. SIGQUIT and the crash signals keep their core
// dumps; SIGPIPE and SIGXFSZ are ignored instead (install_handlers).
constexpr int kSignals[] = {SIGINT,  SIGTERM, SIGHUP,    SIGXCPU, SIGUSR1,   SIGUSR2,
                            SIGALRM, SIGIO,   SIGVTALRM, SIGPROF, SIGSTKFLT, SIGPWR};
constexpr int kMaxSignal = 65;

// What the handler prints for each signal, made before any signal can arrive (strsignal is not
// async-signal-safe).
char g_stop_msg[kMaxSignal][160];   // during a cooperative section, first signal
char g_die_msg[kMaxSignal][160];    // ending the process at once
char g_held_msg[kMaxSignal][160];   // ending it after a SignalsHeld section
char g_crash_msg[kMaxSignal][160];  // a crash signal the kernel sent (a fault), not kill(2)

// A slot's state: kFree, kWriting (being filled, invisible to the handler), or a Kind + 2.
enum : int { kFree = 0, kWriting = 1 };

struct Slot {
  std::atomic<int> state{kFree};
  int dir_fd = AT_FDCWD;  // `path` is relative to it
  char path[kPathBytes];
  char to[256];  // kRestore: the name `path` goes back to
};

Slot g_slots[kMaxCleanupPaths];
std::atomic<int> g_cooperative{0};
std::atomic<int> g_signal{0};
std::atomic<int> g_held{0};          // SignalsHeld sections alive
std::atomic<int> g_held_signal{0};   // a signal that arrived during one
std::atomic<int64_t> g_first_ns{0};  // when the first signal arrived (CLOCK_MONOTONIC)
std::atomic<bool> g_say_warnings{true}, g_say_errors{true};  // set_messages
static_assert(std::atomic<bool>::is_always_lock_free, "the handler reads them");

// Writes `msg` to stderr (async-signal-safe) if the console takes messages of its kind.
void say(const char* msg, bool error) {
  if (!(error ? g_say_errors : g_say_warnings).load(std::memory_order_relaxed)) return;
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, msg, std::strlen(msg));
}

// `timeout`, `kill -- -PGID` and job control send one signal to the process and again to its process group:
// a copy that close after the first is the same request, not a second Ctrl-C.
constexpr int64_t kSameRequestNs = 250'000'000;
pid_t g_main_tid = 0;  // the thread that installed the handlers (runs the command): the only one that acts

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Removes the folder `name` in `dir_fd` with everything in it, never following a symlink (one is unlinked
// as a file), at most kTreeDepth levels deep. Only async-signal-safe calls: getdents64 into a buffer on the
// stack, as readdir may allocate.
constexpr int kTreeDepth = 12;
void remove_tree(int dir_fd, const char* name, int depth) {
  const int fd = ::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  // Entries removed while the folder is read may hide others: read it again while anything goes.
  for (bool removed = true; removed;) {
    removed = false;
    ::lseek(fd, 0, SEEK_SET);
    alignas(8) char buf[2048];
    for (long n; (n = ::syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0;)
      for (long off = 0; off < n;) {
        // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name
        unsigned short reclen;
        std::memcpy(&reclen, buf + off + 16, sizeof reclen);
        const unsigned char type = static_cast<unsigned char>(buf[off + 18]);
        const char* entry = buf + off + 19;
        off += reclen;
        if (std::strcmp(entry, ".") == 0 || std::strcmp(entry, "..") == 0) continue;
        if (::unlinkat(fd, entry, 0) == 0) {
          removed = true;
        } else if ((type == DT_DIR || type == DT_UNKNOWN) && depth < kTreeDepth) {
          remove_tree(fd, entry, depth + 1);
          removed = true;
        }
      }
  }
  ::close(fd);
  ::unlinkat(dir_fd, name, AT_REMOVEDIR);
}

// Child processes (a report script): killed and reaped before anything is removed, so none writes on.
std::atomic<pid_t> g_children[kMaxChildren];

void cleanup_registered() {
  for (std::atomic<pid_t>& c : g_children)
    if (const pid_t pid = c.exchange(0); pid > 0) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  // Backups back first (the record of the set they belong to names the temporaries unlinked next). A rename
  // between two links of one file does nothing: the backup is unlinked then.
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == static_cast<int>(CleanupPath::Kind::kRestore) + 2) {
      ::renameat(s.dir_fd, s.path, s.dir_fd, s.to);
      ::unlinkat(s.dir_fd, s.path, 0);
    }
  // Then files, then the folders, pass after pass while one goes, so that an inner folder goes before the
  // one holding it whatever their slots (--out a/b/c registers three).
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == static_cast<int>(CleanupPath::Kind::kFile) + 2)
      ::unlinkat(s.dir_fd, s.path, 0);
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == static_cast<int>(CleanupPath::Kind::kTree) + 2)
      remove_tree(s.dir_fd, s.path, 0);
  for (bool removed = true; removed;) {
    removed = false;
    for (Slot& s : g_slots)
      if (s.state.load(std::memory_order_acquire) == static_cast<int>(CleanupPath::Kind::kEmptyFolder) + 2 &&
          ::unlinkat(s.dir_fd, s.path, AT_REMOVEDIR) == 0)
        removed = true;
  }
}

// Raises `sig` again with it unblocked (inside its handler it is blocked), so that its action, the default
// one put back by the caller, happens now.
void raise_unblocked(int sig) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  std::raise(sig);
}

// set_done_note's words, said by die once g_done_ready is set.
char g_done_note[kPathBytes + 16];
std::atomic<bool> g_done_ready{false};

// Once the command's files are all in place, what every signal that ends the process says after its own
// message (SIGTERM as SIGQUIT or a crash).
void say_done_note() {
  if (g_done_ready.load(std::memory_order_acquire)) say(g_done_note, true);
}

[[noreturn]] void die(int sig) {
  say_done_note();
  cleanup_registered();
  std::signal(sig, SIG_DFL);
  raise_unblocked(sig);
  ::_exit(128 + sig);  // not reached: the default action ends the process
}

void on_signal(int sig, siginfo_t*, void*) {
  // Only the thread running the command acts: a signal that lands on another thread (the idle main thread,
  // the reference thread, BLAS's) is handed to it (merging with a copy still pending there). Acting on
  // another thread would let the command go on meanwhile: a temporary it creates after the cleanup would be
  // left.
  if (g_main_tid != 0 && ::gettid() != g_main_tid && ::syscall(SYS_tgkill, ::getpid(), g_main_tid, sig) == 0)
    return;
  if (g_held.load() > 0) {  // the section ends the process after its renames
    g_held_signal.store(sig);
    return;
  }
  const int64_t now = now_ns();
  const bool first = g_signal.exchange(sig) == 0;
  if (first) g_first_ns.store(now);
  if (!first && g_cooperative.load() > 0 && now - g_first_ns.load() < kSameRequestNs) return;
  const bool stop = first && g_cooperative.load() > 0;
  say(stop ? g_stop_msg[sig] : g_die_msg[sig], !stop);
  if (stop) return;
  die(sig);
}

// A crash or core-dump signal sent by kill(2) (kill -BUS, kill -TRAP) that landed on a thread other than the
// command's is handed to the command's thread, re-armed as `handler` with `flags` (SA_RESETHAND put the
// default back): cleaning up here would let the command go on meanwhile (a report script killed by the
// cleanup, the command then read its removed staging folder and said "cannot read the drawn report").
// True when handed over.
bool hand_over_sent(int sig, const siginfo_t* info, void (*handler)(int, siginfo_t*, void*), int flags) {
  if (info->si_code > 0 || g_main_tid == 0 || ::gettid() == g_main_tid) return false;
  struct sigaction sa {};
  sa.sa_sigaction = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = flags | SA_SIGINFO;
  sigaction(sig, &sa, nullptr);
  return ::syscall(SYS_tgkill, ::getpid(), g_main_tid, sig) == 0;
}

// A crash or core-dump signal's message, then the registered paths removed unless a set's renames are under
// way (then, as after a SIGKILL, the next trnsim writing there settles the set from its record).
void say_and_clean_up_crash(int sig, const siginfo_t* info) {
  say(info->si_code > 0 ? g_crash_msg[sig] : g_die_msg[sig], true);
  say_done_note();
  if (g_held.load() == 0) cleanup_registered();
}

// Input files mapped for reading (MappedInput): the address range and the message a SIGBUS there prints.
struct MappedSlot {
  std::atomic<int> state{kFree};  // kFree, kWriting, or kUsed
  uintptr_t lo = 0, hi = 0;
  char msg[kPathBytes + 256];
};
constexpr int kUsed = 2;
MappedSlot g_mapped[kMaxMappedInputs];

// A fault on a page of a registered input mapping: the file shrank under the run. Runs on the thread that
// faulted (returning would fault again), so it cannot hand over to the main thread as on_signal does.
void on_bus(int sig, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  if (info->si_code > 0)  // sent by the kernel for a fault, not by kill(2)
    for (MappedSlot& s : g_mapped)
      if (s.state.load(std::memory_order_acquire) == kUsed && addr >= s.lo && addr < s.hi) {
        say(s.msg, true);
        cleanup_registered();
        ::_exit(1);
      }
  // Not ours: as any crash signal (on_core_signal), the registered paths are removed (a report's script and
  // staging folder, the output folder the run created), then the default action, a core dump (a fault
  // happens again on return; a signal sent by kill(2) is raised again once unblocked, on the command's
  // thread).
  if (hand_over_sent(sig, info, on_bus, 0)) return;
  say_and_clean_up_crash(sig, info);
  std::signal(sig, SIG_DFL);
  if (info->si_code <= 0) raise_unblocked(sig);
}

// Signals that end the process with a core dump: a crash (SIGSEGV, SIGILL, SIGFPE, SIGSYS, an abort), SIGQUIT
// and SIGTRAP (a breakpoint without a debugger, or kill -TRAP). SIGBUS has its own handler (on_bus).
constexpr int kCoreSignals[] = {SIGQUIT, SIGILL, SIGABRT, SIGFPE, SIGSEGV, SIGSYS, SIGTRAP};

// A crash or a core-dump signal: the registered paths are removed (a report's staging folder, the output
// folder the run created, temporaries), unless a set's renames are under way (then, as after a SIGKILL, the
// next trnsim writing there settles the set from its record), then the default action: a core dump. Runs on
// the thread that got the signal (a fault cannot be handed over). SA_RESETHAND has put the default back: a
// fault happens again on return, an abort() raises again, a signal sent by kill(2) is raised here.
void on_core_signal(int sig, siginfo_t* info, void*) {
  if (hand_over_sent(sig, info, on_core_signal, SA_RESETHAND)) return;
  say_and_clean_up_crash(sig, info);
  if (info->si_code <= 0) raise_unblocked(sig);
}

// Installs `handler` for `sig` only where the default action is in place: a signal the caller ignores stays
// ignored (nohup's SIGHUP, a background job's SIGINT), a handler someone else installed stays (a profiler's,
// a sanitizer's).
void install_if_default(int sig, void (*handler)(int, siginfo_t*, void*), int flags) {
  struct sigaction old {};
  if (sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL)
    return;
  struct sigaction sa {};
  sa.sa_sigaction = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = flags | SA_SIGINFO;
  sigaction(sig, &sa, nullptr);
}

// "\ntrnsim: interrupted (SIGTERM)\n" and the other messages of `sig`, into the tables above.
void make_messages(int sig) {
  // Why the run ends, in the words of the one who asked.
  std::string why;
  if (sig == SIGXCPU)
    why = " (SIGXCPU: the CPU time limit, ulimit -t, is reached)";
  else
    why = sigabbrev_np(sig) ? " (SIG" + std::string(sigabbrev_np(sig)) + ")"
                            : " (signal " + std::to_string(sig) + ")";
  std::snprintf(g_stop_msg[sig], sizeof g_stop_msg[sig],
                "\ntrnsim: interrupted%s: stopping the simulation (again to quit at once)\n", why.c_str());
  std::snprintf(g_die_msg[sig], sizeof g_die_msg[sig], "\ntrnsim: interrupted%s\n", why.c_str());
  std::snprintf(g_held_msg[sig], sizeof g_held_msg[sig],
                "\ntrnsim: interrupted%s once the files being written were all in place\n", why.c_str());
  std::snprintf(g_crash_msg[sig], sizeof g_crash_msg[sig],
                "\ntrnsim: crashed%s: an internal error (please report it with the command)\n", why.c_str());
}

}  // namespace

void install_handlers() {
  make_messages(SIGBUS);
  install_if_default(SIGBUS, on_bus, 0);
  for (int sig : kCoreSignals) {
    make_messages(sig);
    install_if_default(sig, on_core_signal, SA_RESETHAND);
  }
  g_main_tid = ::gettid();
  // A closed pipe or a file-size limit is an error of the write that meets it (EPIPE, EFBIG), which the run
  // reports or, for its messages, ignores: it does not end the run (its files are still written, all or
  // nothing, or a failed write leaves them as they were).
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<int> sigs = handled_signals();
  for (int s = SIGRTMIN; s <= SIGRTMAX && s < kMaxSignal; ++s) sigs.push_back(s);
  for (int sig : sigs) {
    make_messages(sig);
    install_if_default(sig, on_signal, SA_RESTART);
  }
}

void set_done_note(const std::string& note) {
  g_done_ready.store(false, std::memory_order_release);
  std::snprintf(g_done_note, sizeof g_done_note, "trnsim: %.4000s\n", note.c_str());
  g_done_ready.store(true, std::memory_order_release);
}

void set_messages(bool warnings, bool errors) {
  g_say_warnings.store(warnings);
  g_say_errors.store(errors);
}

std::vector<int> handled_signals() {
  return {std::begin(kSignals), std::end(kSignals)};
}

bool requested() {
  return g_signal.load(std::memory_order_relaxed) != 0;
}

int signal_number() {
  return g_signal.load();
}

void exit_now() {
  const int sig = g_signal.load();
  die(sig != 0 ? sig : SIGINT);
}

SignalsHeld::SignalsHeld() {
  g_held.fetch_add(1);
}

SignalsHeld::~SignalsHeld() {
  if (g_held.fetch_sub(1) == 1 && g_held_signal.load() != 0) {
    const int sig = g_held_signal.load();
    say(g_held_msg[sig], true);
    die(sig);
  }
}

CooperativeSection::CooperativeSection() {
  g_cooperative.fetch_add(1);
}

CooperativeSection::~CooperativeSection() {
  g_cooperative.fetch_sub(1);
}

CleanupPath::CleanupPath(const std::string& path, Kind kind) : CleanupPath(AT_FDCWD, path, kind) {}

CleanupPath::CleanupPath(int dir_fd, const std::string& path, Kind kind) {
  if (path.size() + 1 > kPathBytes) return;
  for (int i = 0; i < kMaxCleanupPaths; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kWriting)) continue;
    g_slots[i].dir_fd = dir_fd;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(static_cast<int>(kind) + 2, std::memory_order_release);
    slot_ = i;
    return;
  }
}

CleanupPath::CleanupPath(int dir_fd, const std::string& backup, const std::string& to) {
  if (backup.size() + 1 > kPathBytes || to.size() + 1 > sizeof g_slots[0].to) return;
  for (int i = 0; i < kMaxCleanupPaths; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kWriting)) continue;
    g_slots[i].dir_fd = dir_fd;
    std::memcpy(g_slots[i].path, backup.c_str(), backup.size() + 1);
    std::memcpy(g_slots[i].to, to.c_str(), to.size() + 1);
    g_slots[i].state.store(static_cast<int>(Kind::kRestore) + 2, std::memory_order_release);
    slot_ = i;
    return;
  }
}

CleanupPath::~CleanupPath() {
  if (slot_ >= 0) g_slots[slot_].state.store(kFree, std::memory_order_release);
}

ChildProcess::ChildProcess(pid_t pid) {
  for (int i = 0; i < kMaxChildren; ++i) {
    pid_t expected = 0;
    if (g_children[i].compare_exchange_strong(expected, pid)) {
      slot_ = i;
      return;
    }
  }
}

ChildProcess::~ChildProcess() {
  if (slot_ >= 0) g_children[slot_].store(0);
}

void reset_in_child() {
  // No allocation here (after a fork of a threaded process): every signal number, not handled_signals().
  for (int sig = 1; sig < kMaxSignal && sig <= SIGRTMAX; ++sig) {
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) != 0 || (now.sa_flags & SA_SIGINFO) == 0 ||
        (now.sa_sigaction != on_signal && now.sa_sigaction != on_bus && now.sa_sigaction != on_core_signal))
      continue;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
  }
}

MappedInput::MappedInput(const void* addr, size_t len, const std::string& path) {
  for (int i = 0; i < kMaxMappedInputs; ++i) {
    int expected = kFree;
    if (!g_mapped[i].state.compare_exchange_strong(expected, kWriting)) continue;
    MappedSlot& s = g_mapped[i];
    s.lo = reinterpret_cast<uintptr_t>(addr);
    s.hi = s.lo + len;
    std::snprintf(s.msg, sizeof s.msg,
                  "error: %s: the file changed size while the run read it (an input must not change during a "
                  "run)\n",
                  path.c_str());
    s.state.store(kUsed, std::memory_order_release);
    slot_ = i;
    return;
  }
}

MappedInput::~MappedInput() {
  if (slot_ >= 0) g_mapped[slot_].state.store(kFree, std::memory_order_release);
}

}  // namespace trnsim::interrupt
