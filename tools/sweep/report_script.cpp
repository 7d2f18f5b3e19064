#include "tools/sweep/report_script.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "sim/base/error.h"
#include "sim/base/interrupt.h"

namespace trnsim::sweep {
namespace fs = std::filesystem;

namespace {

std::string find_script(const std::string& name) {
  std::vector<fs::path> tried;
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (int up = 0; up < 6 && !ec && !p.empty(); ++up) {
    tried.push_back(p / "tools" / "report" / name);
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
#ifdef TRNSIM_SOURCE_DIR
  tried.push_back(fs::path(TRNSIM_SOURCE_DIR) / "tools" / "report" / name);
#endif
  for (const fs::path& t : tried)
    if (fs::is_regular_file(t, ec)) return t.string();
  throw InputError(
      fmt::format("the report script tools/report/{} is not next to the trnsim binary nor in "
                  "the source tree",
                  name));
}

}  // namespace

void run_report_script(const std::string& script, const std::vector<std::string>& args) {
  const char* env = std::getenv("TRNSIM_PYTHON");
  const std::string python = env && *env ? env : "/usr/bin/python3";
  if (access(python.c_str(), X_OK) != 0)
    throw InputError(
        fmt::format("{} is missing: the HTML report needs Python 3 with matplotlib (Debian: "
                    "apt-get install python3-matplotlib)",
                    python));
  std::vector<std::string> a = {python, find_script(script)};
  a.insert(a.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Error(fmt::format("cannot start {}: {}", python, std::strerror(errno)));
  if (pid == 0) {
    dup2(2, 1);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(st)) {
    if (interrupt::requested()) throw Interrupted("interrupted while drawing the report");
    throw InputError(fmt::format("{} was killed by signal {}", script, WTERMSIG(st)));
  }
  const int code = WEXITSTATUS(st);
  if (code == 3)
    throw InputError("the HTML report needs matplotlib: apt-get install python3-matplotlib (Debian 12)");
  if (code != 0)
    throw InputError(fmt::format("{} failed (exit status {}): see its message above", script, code));
}

}  // namespace trnsim::sweep
