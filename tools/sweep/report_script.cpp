#include "tools/sweep/report_script.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/base/log.h"

namespace trnsim::sweep {
namespace fs = std::filesystem;

namespace {

// tools/report in the source tree trnsim was built from (recorded at build time), and nowhere else: never a
// folder found relative to the executable, where anyone who can write there could plant a script that this
// process would run (the hardware configs' rule, sim/config/hw_config.h).
std::string find_script(const std::string& name) {
  const fs::path path = fs::path(TRNSIM_SOURCE_DIR) / "tools" / "report" / name;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path.string();
  throw InputError(
      fmt::format("the report script {} is missing: the source tree trnsim was built from has moved "
                  "or lost it (rebuild trnsim from its source tree)",
                  path.string()));
}

// What a script said (its stdout and stderr), read from `path`: its non-empty lines.
std::vector<std::string> said(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (l.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(l);
  return lines;
}

// The first line of a staging folder's matplotlibrc (script_environment): a folder holding it is trnsim's.
constexpr const char* kStagedRc = "# trnsim's report scripts: matplotlib's defaults\n";

// Writes `text` to the new file `path` (a file of the staging folder); InputError "<path>: cannot stage
// <what>: <reason>" (a full $TMPDIR, a file-size limit).
void stage_file(const fs::path& path, const std::string& text, const std::string& what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  size_t done = 0;
  while (fd >= 0 && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const int err = fd < 0 ? errno : done < text.size() ? (errno != 0 ? errno : ENOSPC) : 0;
  if (fd >= 0 && ::close(fd) != 0 && done == text.size())
    throw InputError(fmt::format("{}: cannot stage {}: {}", path.string(), what, std::strerror(errno)));
  if (err != 0)
    throw InputError(fmt::format("{}: cannot stage {}: {}", path.string(), what, std::strerror(err)));
}

// The staging folders other trnsim processes of this user left in `tmp` when they were killed (SIGKILL: no
// handler ran) are removed: "trnsim-report.PID.XXXXXX", this user's, mode 0700, holding trnsim's
// matplotlibrc, and locked by no process (a live trnsim holds its folder's flock while it draws, in any PID
// namespace).
void remove_killed_stagings(const fs::path& tmp) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(tmp, ec)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = "trnsim-report.";
    if (name.rfind(prefix, 0) != 0) continue;
    const size_t dot = name.find('.', prefix.size());
    if (dot == std::string::npos || dot == prefix.size() ||
        name.find_first_not_of("0123456789", prefix.size()) != dot)
      continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    char head[64] = {};
    const int rc = ::openat(fd, "matplotlibrc", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (rc >= 0) {
      [[maybe_unused]] const ssize_t n = ::read(rc, head, sizeof head - 1);
      ::close(rc);
    }
    const bool ours = ::fstat(fd, &st) == 0 && st.st_uid == ::geteuid() && (st.st_mode & 07777) == 0700 &&
                      std::strcmp(head, kStagedRc) == 0;
    if (ours && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      fs::remove_all(e.path(), ec);  // never follows a symlink: only what is inside it goes
      log::note(fmt::format("{}: removed the staging folder of a trnsim report killed while it was drawn",
                            e.path().string()));
    }
    ::close(fd);
  }
}

// A folder only this process can enter (mkdtemp, mode 0700) under $TMPDIR or /tmp, named after this process
// (trnsim-report.PID.XXXXXX) and locked (flock) while it lives, removed with what is in it when the object
// goes, or when a signal ends the process (sim/base/interrupt.h); one a killed trnsim left is removed by the
// next (remove_killed_stagings).
class Staging {
 public:
  Staging() {
    const char* t = std::getenv("TMPDIR");
    const fs::path tmp = fs::absolute(t && *t ? t : "/tmp");
    remove_killed_stagings(tmp);
    std::string templ = (tmp / fmt::format("trnsim-report.{}.XXXXXX", ::getpid())).string();
    if (!::mkdtemp(templ.data()))
      throw InputError(
          fmt::format("{}: cannot create a folder for drawing the report: {}", templ, std::strerror(errno)));
    path_ = templ;
    cleanup_.emplace(path_.string(), interrupt::CleanupPath::Kind::kTree);
    lock_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (lock_ >= 0) ::flock(lock_, LOCK_EX | LOCK_NB);
    try {
      stage_file(path_ / "matplotlibrc", kStagedRc, "matplotlib's settings for the report");
    } catch (const InputError&) {
      remove();  // no destructor runs for a constructor that throws
      throw;
    }
  }
  ~Staging() { remove(); }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  std::optional<interrupt::CleanupPath> cleanup_;
  int lock_ = -1;  // the folder, flock'ed while it lives

  void remove() {
    std::error_code ec;
    fs::remove_all(path_, ec);  // never follows a symlink: only what is inside our own folder goes
    if (lock_ >= 0) ::close(lock_);
    lock_ = -1;
  }
};

// The environment of a report script: the caller's, with MATPLOTLIBRC naming an empty file of the staging
// folder, so that matplotlib takes its defaults (and the script's settings) wherever trnsim runs and
// whatever the user's own matplotlibrc says: the same page for everyone; TRNSIM_CALLER_DIR, trnsim's
// current folder (the script runs in the staging folder), for the paths a page shows relative to it.
std::vector<std::string> script_environment(const Staging& stage) {
  const fs::path rc = stage.path() / "matplotlibrc";  // made by Staging
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "MATPLOTLIBRC=", 13) != 0 && std::strncmp(*e, "TRNSIM_CALLER_DIR=", 18) != 0)
      env.emplace_back(*e);
  env.push_back("MATPLOTLIBRC=" + rc.string());
  std::error_code ec;
  env.push_back("TRNSIM_CALLER_DIR=" + fs::current_path(ec).string());
  return env;
}

// Runs tools/report/<script> with `args` in the staging folder `stage` (its current folder: matplotlib
// reads a matplotlibrc in the current folder before any other, and one in the user's folder would change
// the page or run code), its stdout and stderr into stage/said.txt: what it says goes through the logger
// (sim/base/log.h), each line a warning when it succeeds (a script says nothing unless something is amiss:
// a Python warning), and the last lines in the error when it fails. A signal that ends trnsim meanwhile
// kills the script first (sim/base/interrupt.h).
void run_report_script(const std::string& script, const std::vector<std::string>& args,
                       const Staging& stage) {
  const char* py_env = std::getenv("TRNSIM_PYTHON");
  const std::string python = py_env && *py_env ? py_env : "/usr/bin/python3";
  if (access(python.c_str(), X_OK) != 0)
    throw InputError(
        fmt::format("{} is missing: the HTML report needs Python 3 with matplotlib (Debian: "
                    "apt-get install python3-matplotlib)",
                    python));
  std::vector<std::string> a = {fs::absolute(python).string(), find_script(script)};
  for (const std::string& arg : args) a.push_back(fs::absolute(arg).string());
  std::vector<char*> argv;
  for (std::string& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = script_environment(stage);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const fs::path output = stage.path() / "said.txt";
  const std::string cwd = stage.path().string();
  const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) throw InputError(fmt::format("{}: cannot create: {}", output.string(), std::strerror(errno)));
  // No signal between the fork and the child's registration: one then would leave the script running.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // The script ends with trnsim also when no handler runs (a SIGKILL, the OOM killer): the kernel kills it
    // when its parent dies, or at once if the parent died before this line.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(127);
    interrupt::reset_in_child();
    dup2(out, 1);
    dup2(out, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (chdir(cwd.c_str()) != 0) _exit(127);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  const int fork_errno = errno;
  std::optional<interrupt::ChildProcess> child;
  if (pid > 0) child.emplace(pid);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  ::close(out);
  if (pid < 0) throw Error(fmt::format("cannot start {}: {}", python, std::strerror(fork_errno)));
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  child.reset();
  const std::vector<std::string> lines = said(output);
  if (WIFSIGNALED(st)) {
    if (interrupt::requested()) throw Interrupted("interrupted while drawing the report");
    throw InputError(fmt::format("{} was killed by signal {}", script, WTERMSIG(st)));
  }
  const int code = WEXITSTATUS(st);
  if (code == 3)
    throw InputError("the HTML report needs matplotlib: apt-get install python3-matplotlib (Debian 12)");
  if (code != 0) {
    constexpr size_t kLast = 5;  // a Python traceback ends with the exception
    const auto from = lines.size() > kLast ? lines.end() - kLast : lines.begin();
    std::string last;
    for (auto l = from; l != lines.end(); ++l) last += "\n  " + *l;
    throw InputError(fmt::format("{} failed (exit status {}){}", script, code,
                                 last.empty() ? std::string(", saying nothing") : ":" + last));
  }
  for (const std::string& l : lines) log::warning(fmt::format("{}: {}", script, l));
}

std::vector<uint8_t> read_staged(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!f.good() && !f.eof()) throw InputError(fmt::format("{}: cannot read the drawn report", p.string()));
  return bytes;
}

}  // namespace

std::vector<io::OutputFile> draw_run_report(const std::string& stats_text, const std::string& run_dir,
                                            const std::string& html_path, const std::string& host_text) {
  const Staging stage;
  // The run folder's name, so that a page named after the folder shows the user's folder.
  std::string name = fs::path(run_dir).lexically_normal().filename().string();
  if (name.empty() || name == "." || name == "..") name = "run";
  const fs::path dir = stage.path() / name;
  if (::mkdir(dir.c_str(), 0700) != 0)
    throw InputError(fmt::format("{}: cannot stage the report: {}", dir.string(), std::strerror(errno)));
  stage_file(dir / "stats.json", stats_text, "the stats for the report");
  if (!host_text.empty()) stage_file(dir / "host.json", host_text, "the host times for the report");
  run_report_script("run_report.py", {(dir / "stats.json").string(), (stage.path() / "report.html").string()},
                    stage);
  return {{html_path, read_staged(stage.path() / "report.html")}};
}

std::vector<io::OutputFile> draw_sweep_report(const std::string& dir) {
  const Staging stage;
  run_report_script("sweep_report.py", {dir, stage.path().string()}, stage);
  std::vector<io::OutputFile> files{
      {(fs::path(dir) / "report.html").string(), read_staged(stage.path() / "report.html")}};
  std::error_code ec;
  std::vector<fs::path> plots;
  for (const auto& e : fs::directory_iterator(stage.path() / "plots", ec))
    if (e.is_regular_file()) plots.push_back(e.path().filename());
  std::sort(plots.begin(), plots.end());
  for (const fs::path& p : plots)
    files.push_back({(fs::path(dir) / "plots" / p).string(), read_staged(stage.path() / "plots" / p)});
  return files;
}

}  // namespace trnsim::sweep
