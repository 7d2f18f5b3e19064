#include "tools/sweep/pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/base/log.h"
#include "sim/config/json_document.h"
#include "sim/io/output_files.h"
#include "tools/sweep/point_check.h"
#include "tools/sweep/results.h"

namespace trnsim::sweep {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Child {
  pid_t pid = -1;
  int pidfd = -1;
  Task task;
  Clock::time_point start;
  std::string scratch, errfile;
  bool timed_out = false;
  Clock::time_point kill_at{};  // SIGKILL after this once SIGTERM was sent (0: not sent)
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The message trnsim printed: its last "trnsim: error:" line, else its last line.
std::string error_message(const std::string& errfile, const std::string& fallback) {
  std::ifstream in(errfile);
  std::string line, last, err;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.rfind("trnsim: error: ", 0) == 0) err = line.substr(15);
    if (line.rfind("trnsim: internal error: ", 0) == 0) err = line.substr(8);
  }
  std::string m = !err.empty() ? err : !last.empty() ? last : fallback;
  if (m.size() > 2000) m = m.substr(0, 2000) + "...";
  return m;
}

class Pool {
 public:
  Pool(const PoolConfig& cfg, TaskSource& src) : cfg_(cfg), src_(src) {
    runs_ = (fs::path(cfg.dir) / ".runs").string();
    std::error_code ec;
    fs::create_directories(runs_, ec);
    if (ec) throw InputError(fmt::format("{}: cannot create: {}", runs_, ec.message()));
  }

  void run() {
    interrupt::CooperativeSection coop;
    src_.collect_ended = [this] { reap(0); };
    struct Reset {
      TaskSource& s;
      ~Reset() {
        s.collect_ended = [] {};
      }
    } reset{src_};
    while (true) {
      if (interrupt::requested()) stop_all();
      reap(0);
      bool started = false;
      while (static_cast<int>(kids_.size()) < cfg_.jobs) {
        std::optional<Task> t = src_.next();
        if (!t) break;
        spawn(std::move(*t));
        started = true;
        if (interrupt::requested()) break;
      }
      if (kids_.empty() && src_.done()) break;
      if (started) continue;
      if (src_.idle()) continue;
      reap(kids_.empty() ? 20 : 200);
    }
    // A source that stops on a signal without throwing (tune's, whose point check was interrupted) ends the
    // run as an interrupted one, not as a finished one.
    if (interrupt::requested()) stop_all();
    std::error_code ec;
    fs::remove(runs_, ec);  // when empty
  }

 private:
  void spawn(Task t) {
    Child c;
    c.task = std::move(t);
    // A folder new to runs/ (never one removed first: whatever is there under that name, a leftover or a
    // symlink to someone's folder, stays), the run's --out.
    for (int n = 0;; ++n) {
      c.scratch = (fs::path(runs_) / fmt::format("{}.{}.{}", c.task.key, getpid(), n)).string();
      if (::mkdir(c.scratch.c_str(), 0700) == 0) break;
      if (errno != EEXIST)
        throw Error(
            fmt::format("{}: cannot create the point's run folder: {}", c.scratch, std::strerror(errno)));
    }
    c.errfile = c.scratch + ".stderr";
    std::vector<std::string> args = {cfg_.exe, "run", cfg_.workload, "--out", c.scratch};
    for (const std::string& s : c.task.sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string cwd = cfg_.cwd, errfile = c.errfile;
    c.start = Clock::now();
    const pid_t pid = start_child(argv.data(), SIGTERM, [&] {
      if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
      const int null = open("/dev/null", O_RDWR);
      const int err = open(errfile.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
      }
      if (err >= 0) dup2(err, 2);
    });
    c.pid = pid;
    c.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    kids_.push_back(std::move(c));
  }

  // Waits up to `timeout_ms` for a child to end, then collects every child that ended.
  void reap(int timeout_ms) {
    if (kids_.empty()) {
      if (timeout_ms > 0) poll(nullptr, 0, timeout_ms);
      return;
    }
    std::vector<pollfd> fds;
    for (const Child& c : kids_)
      if (c.pidfd >= 0) fds.push_back({c.pidfd, POLLIN, 0});
    // Without pidfds (an old kernel) the loop polls every 20 ms.
    poll(fds.data(), fds.size(), fds.size() == kids_.size() ? timeout_ms : std::min(timeout_ms, 20));
    for (size_t i = 0; i < kids_.size();) {
      Child& c = kids_[i];
      int st = 0;
      const pid_t r = waitpid(c.pid, &st, WNOHANG);
      if (r == c.pid) {
        Child done = std::move(c);
        kids_.erase(kids_.begin() + static_cast<long>(i));
        finish(done, st);
        continue;
      }
      if (cfg_.timeout_seconds > 0 && !c.timed_out && seconds_since(c.start) > cfg_.timeout_seconds) {
        c.timed_out = true;
        kill(c.pid, SIGTERM);
        c.kill_at = Clock::now() + std::chrono::seconds(10);
      }
      if (c.kill_at != Clock::time_point{} && Clock::now() > c.kill_at) kill(c.pid, SIGKILL);
      ++i;
    }
  }

  void finish(Child& c, int status) {
    if (c.pidfd >= 0) close(c.pidfd);
    const double host = seconds_since(c.start);
    json row = {{"key", c.task.key}, {"host_seconds", host}, {"error", ""}};
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    const std::string stats = (fs::path(c.scratch) / "stats.json").string();
    if (c.timed_out) {
      row["status"] = "error";
      row["error"] = fmt::format("timed out after {:g} s (--timeout)", cfg_.timeout_seconds);
    } else if (code == 0 || code == 3) {
      try {
        const json st = config::read_json_document(stats);
        row["metrics"] = metrics_of(st);
        row["status"] = code == 0 ? "ok" : "numerics_fail";
        if (code == 3) row["error"] = "a numerics check failed";
        if (const std::string changed = changed_sources(c.task.sources, st); !changed.empty()) {
          row.erase("metrics");
          row["status"] = "error";
          row["error"] = changed;
        }
      } catch (const InputError& e) {
        row["status"] = "error";
        row["error"] = std::string("the run wrote no readable stats.json: ") + e.what();
      }
    } else {
      row["status"] = "error";
      const std::string fallback = WIFSIGNALED(status)
                                       ? fmt::format("trnsim run was killed by signal {}", WTERMSIG(status))
                                       : fmt::format("trnsim run exited with status {}", code);
      std::string msg = error_message(c.errfile, fallback);
      if (code == 127) msg = fmt::format("cannot execute {}", cfg_.exe);
      if (code == 126) msg = fmt::format("cannot enter the working directory {}", cfg_.cwd);
      row["error"] = msg;
      row["exit_status"] = code;
    }
    if (row["status"] != "error" && cfg_.keep_stats) {
      // Kept as any output is written (sim/io/output_files.h): the folder locked, all or nothing, never
      // through a rename that would replace whatever the user put there by halves.
      std::error_code ec;
      const fs::path kept = fs::path(cfg_.dir) / "stats" / (c.task.key + ".json");
      fs::create_directories(kept.parent_path(), ec);
      std::ifstream in(stats, std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      try {
        if (in.good() || in.eof()) io::write_files_atomic({{kept.string(), std::move(bytes), {}, true}});
      } catch (const InputError& e) {
        log::warning(e.what());
      }
    }
    write_row(cfg_.dir, row);
    cleanup(c);
    src_.finished(c.task, row);
  }

  void cleanup(const Child& c) {
    std::error_code ec;
    fs::remove_all(c.scratch, ec);
    fs::remove(c.errfile, ec);
  }

  [[noreturn]] void stop_all() {
    for (Child& c : kids_) kill(c.pid, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!kids_.empty()) {
      for (size_t i = 0; i < kids_.size();) {
        int st = 0;
        if (waitpid(kids_[i].pid, &st, WNOHANG) == kids_[i].pid) {
          if (kids_[i].pidfd >= 0) close(kids_[i].pidfd);
          cleanup(kids_[i]);
          kids_.erase(kids_.begin() + static_cast<long>(i));
          continue;
        }
        if (Clock::now() > deadline) kill(kids_[i].pid, SIGKILL);
        ++i;
      }
      poll(nullptr, 0, 10);
    }
    std::error_code ec;
    fs::remove(runs_, ec);
    throw Interrupted("interrupted: the points that finished are kept (rerun to go on)");
  }

  const PoolConfig& cfg_;
  TaskSource& src_;
  std::string runs_;
  std::vector<Child> kids_;
};

}  // namespace

void run_pool(const PoolConfig& cfg, TaskSource& source) {
  struct End {
    TaskSource& s;
    ~End() { s.end(); }
  } end{source};
  Pool(cfg, source).run();
}

pid_t start_child(char* const* argv, int death_signal, const std::function<void()>& in_child) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error(fmt::format("cannot start {}: fork: {}", argv[0], std::strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, death_signal);
    if (getppid() != parent) _exit(143);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    in_child();
    execv(argv[0], argv);
    _exit(127);
  }
  setpgid(pid, pid);  // as the child does: whichever runs first
  return pid;
}

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the trnsim binary (/proc/self/exe): " + ec.message());
  return p.string();
}

}  // namespace trnsim::sweep
