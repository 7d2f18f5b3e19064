// The worker pool: runs points as `trnsim run` child processes (one simulation per process), at most `jobs`
// at a time, and keeps each finished point's row (results.h). Used by the local backend (`trnsim sweep`,
// `trnsim tune`) and by each Slurm array task on its slice.
//
// Children run in their own process group, so a Ctrl-C at the terminal reaches the pool alone: it stops
// starting points, sends each running child SIGTERM (a run then leaves nothing behind, README "Exit codes"),
// waits for them, removes their scratch folders and throws Interrupted. Finished points are kept. A point
// that fails (any exit status but 0 and 3, a signal, a timeout) is an "error" row with trnsim's message; the
// pool goes on. A child also gets SIGTERM if the pool dies (PR_SET_PDEATHSIG).
#pragma once

#include <nlohmann/json.hpp>

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace trnsim::sweep {

struct Task {
  std::string key;
  std::vector<std::string> sets;  // --set assignments of the point
  // A Python kernel's record of the files it ran when the point was checked (CheckedPoint::sources), or
  // null. A run that reports other bytes (a file edited since) gets an "error" row, not a result under `key`.
  nlohmann::json sources;
};

struct PoolConfig {
  std::string exe;       // the trnsim binary
  std::string workload;  // the base workload
  std::string dir;       // the sweep's folder: points/, stats/, scratch in .runs/
  std::string cwd;       // the children's working directory (where --set paths are relative to)
  int jobs = 1;
  bool keep_stats = false;     // keep each point's stats.json as DIR/stats/<key>.json
  double timeout_seconds = 0;  // per point; 0: none
};

// Where tasks come from: next() hands the next task to run (nullopt: none now; done() then says whether
// any will come); idle() does a little background work while every worker is busy (false: nothing to do).
class TaskSource {
 public:
  virtual ~TaskSource() = default;
  virtual std::optional<Task> next() = 0;
  virtual bool done() const = 0;
  virtual bool idle() { return false; }
  // A point finished: its row (already kept in DIR/points/).
  virtual void finished(const Task& t, const nlohmann::json& row) = 0;
  // The pool is done with the source (after the last task, or when interrupted): e.g. end a progress line.
  virtual void end() {}
  // Set by run_pool while it runs: collects the runs that ended (their rows kept, finished() called) without
  // waiting. A source that blocks in next() or idle() (a point checked in a child process, up to --timeout)
  // calls it now and then, so a run that ended meanwhile is kept at once, not left a zombie.
  std::function<void()> collect_ended = [] {};
};

// Runs the source's tasks to the end. Throws Interrupted after a Ctrl-C / SIGTERM (see above).
void run_pool(const PoolConfig& cfg, TaskSource& source);

// The path of the running trnsim binary (/proc/self/exe).
std::string self_exe();

// Starts `argv` (argv[0] the program, a null-terminated array prepared before the call) as a child in its
// own process group (a Ctrl-C at the terminal reaches this process alone), which gets `death_signal` if this
// process dies (PR_SET_PDEATHSIG), with every signal unblocked; `in_child` runs in the child just before
// execv (only async-signal-safe calls: dup2, open, chdir, _exit). Returns its pid; Error if fork fails.
pid_t start_child(char* const* argv, int death_signal, const std::function<void()>& in_child);

}  // namespace trnsim::sweep
