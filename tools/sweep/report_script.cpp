#include "tools/sweep/report_script.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

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

// Runs tools/report/<script> with `args`, its stdout and stderr into the file `output` (created): what it
// says goes through the logger (sim/base/log.h), each line a warning when it succeeds (a script says
// nothing unless something is amiss: a Python warning), and the last lines in the error when it fails.
void run_report_script(const std::string& script, const std::vector<std::string>& args,
                       const fs::path& output) {
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
  const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out < 0) throw InputError(fmt::format("{}: cannot create: {}", output.string(), std::strerror(errno)));
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    ::close(out);
    throw Error(fmt::format("cannot start {}: {}", python, std::strerror(e)));
  }
  if (pid == 0) {
    dup2(out, 1);
    dup2(out, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(out);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
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

// A folder only this process can enter (mkdtemp, mode 0700) under $TMPDIR or /tmp, removed with what is in
// it when the object goes.
class Staging {
 public:
  Staging() {
    const char* t = std::getenv("TMPDIR");
    std::string templ = (fs::path(t && *t ? t : "/tmp") / "trnsim-report.XXXXXX").string();
    if (!::mkdtemp(templ.data()))
      throw InputError(
          fmt::format("{}: cannot create a folder for drawing the report: {}", templ, std::strerror(errno)));
    path_ = templ;
  }
  ~Staging() {
    std::error_code ec;
    fs::remove_all(path_, ec);  // never follows a symlink: only what is inside our own folder goes
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

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
  fs::create_directory(dir);
  {
    std::ofstream f(dir / "stats.json", std::ios::binary);
    f << stats_text;
    if (!f.flush()) throw InputError(fmt::format("{}: cannot stage the stats for the report", dir.string()));
  }
  if (!host_text.empty()) {
    std::ofstream f(dir / "host.json", std::ios::binary);
    f << host_text;
    if (!f.flush())
      throw InputError(fmt::format("{}: cannot stage the host times for the report", dir.string()));
  }
  run_report_script("run_report.py", {(dir / "stats.json").string(), (stage.path() / "report.html").string()},
                    stage.path() / "said.txt");
  return {{html_path, read_staged(stage.path() / "report.html")}};
}

std::vector<io::OutputFile> draw_sweep_report(const std::string& dir) {
  const Staging stage;
  run_report_script("sweep_report.py", {dir, stage.path().string()}, stage.path() / "said.txt");
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
