#include "tools/sweep/point_check.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "kernels/workload/workload.h"
#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/config/hw_config.h"
#include "sim/config/json_document.h"
#include "sim/io/content_hash.h"
#include "tools/sweep/pool.h"

namespace trnsim::sweep {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json input_source_json(const workload::PreparedWorkload& p, const workload::InputEntry& e) {
  if (e.is_recipe) {
    const auto it = p.recipe_args.find(e.key);
    return {{"label", e.key},
            {"recipe", e.recipe},
            {"args", it != p.recipe_args.end() ? it->second : e.recipe_args}};
  }
  if (e.source.is_npy) {
    std::error_code ec;
    const fs::path path = fs::absolute(e.source.npy, ec);
    const auto size = fs::file_size(path, ec);
    const auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
    return {{"input", e.key}, {"npy", path.string()}, {"bytes", ec ? 0 : size}, {"mtime", ec ? 0 : mtime}};
  }
  return {{"input", e.key},
          {"generator", e.source.generator.name},
          {"seed", e.source.generator.seed},
          {"args", e.source.generator.args}};
}

json input_json(const workload::PreparedWorkload& p, const workload::InputEntry& e) {
  json j = input_source_json(p, e);
  // The declared dtype and shape (a Python kernel's inputs have them; they decide its program).
  if (e.dtype) j["dtype"] = kernels::dtype_str(*e.dtype);
  if (e.shape) j["shape"] = *e.shape;
  return j;
}

// A source file as the runner keys it (trnsim/_runner.py sources()): absolute, symlinks not resolved, so a
// link retargeted to a file of the same bytes keeps its key.
std::string canonical(const std::string& file) {
  std::error_code ec;
  return fs::absolute(file, ec).lexically_normal().string();
}

// A kernel or reference from a source file: its function and the SHA-256 of the bytes the loader ran
// (`ran`: the kernel's record of the Python files it executed, absolute path -> hex), so a point's key
// changes when the file does.
json source_json(const workload::KernelSource& s, const json& ran) {
  const auto it = ran.find(canonical(s.file));
  if (it == ran.end())
    throw InputError(fmt::format("'{}' was not recorded as run: cannot key the point", s.file));
  return {{"language", s.language}, {"function", s.function}, {"sha256", *it}};
}

// The modules the kernel and reference imported from their folders (what `ran` holds besides those two
// files): path relative to the kernel's folder -> SHA-256, so editing one reruns its points.
json imports_json(const workload::Workload& w, const json& ran) {
  std::set<std::string> own = {canonical(w.kernel_source->file)};
  if (w.reference) own.insert(canonical(w.reference->file));
  std::error_code ec;  // the kernel's neighbours are imported from the folder of the file it is
  const fs::path dir = fs::weakly_canonical(fs::absolute(w.kernel_source->file), ec).parent_path();
  json out = json::object();
  for (const auto& [path, sha] : ran.items())
    if (!own.count(path)) out[fs::path(path).lexically_relative(dir).string()] = sha;
  return out;
}

}  // namespace

std::string short_sha256(const std::string& text) {
  return io::sha256_hex(text).substr(0, 20);
}

std::string changed_sources(const json& planned, const json& stats) {
  if (!planned.is_object()) return "";
  const json nki = stats.is_object() ? stats.value("nki", json()) : json();
  const json ran = nki.is_object() ? nki.value("sources", json::object()) : json::object();
  std::vector<std::string> changed;
  for (const auto& [path, sha] : ran.items())
    if (!planned.contains(path) || planned[path] != sha) changed.push_back(path);
  for (const auto& [path, sha] : planned.items())
    if (!ran.contains(path)) changed.push_back(path);
  if (changed.empty()) return "";
  return fmt::format(
      "{} changed while the sweep ran (the run executed other bytes than the point was keyed by): its "
      "result is not kept; rerun the sweep",
      fmt::join(changed, ", "));
}

namespace {

CheckedPoint check_here(const std::string& workload, const std::vector<std::string>& sets) {
  CheckedPoint c;
  try {
    workload::Workload w = workload::parse_workload(workload, sets);
    const workload::PreparedWorkload p = workload::prepare_workload(w);
    json inputs = json::array();
    for (const workload::InputEntry& e : w.inputs) inputs.push_back(input_json(p, e));
    json overrides = json::object();
    for (const auto& [k, v] : w.hw_overrides) overrides[k] = v;
    c.resolved = {{"kernel", w.kernel},
                  {"params", p.kernel->params()},
                  {"cores", p.cores},
                  {"hardware",
                   {{"config", config::read_json_document(config::resolve_config_path(w.hardware))},
                    {"overrides", overrides}}},
                  {"inputs", inputs},
                  {"outputs", p.written},
                  {"numerics", w.numerics}};
    if (w.kernel_source) {
      const json nki = p.kernel->frontend_stats();
      const json ran = nki.is_object() ? nki.value("sources", json::object()) : json::object();
      c.resolved["kernel_source"] = source_json(*w.kernel_source, ran);
      if (w.reference) c.resolved["reference"] = source_json(*w.reference, ran);
      c.resolved["imports"] = imports_json(w, ran);
      c.sources = ran;
    }
    c.key = short_sha256(c.resolved.dump());
    c.valid = true;
  } catch (const std::bad_alloc&) {
    c.reason = "out of memory while checking the point";
  } catch (const InputError& e) {
    c.reason = e.what();
  } catch (const Error& e) {
    c.reason = std::string("internal error: ") + e.what();
  }
  return c;
}

json to_json(const CheckedPoint& c) {
  return {{"valid", c.valid},
          {"reason", c.reason},
          {"key", c.key},
          {"resolved", c.resolved},
          {"sources", c.sources}};
}

// The check in a child process (point_check.h): its result, or why there is none.
CheckedPoint check_in_child(const std::string& workload, const std::vector<std::string>& sets,
                            double timeout_seconds, const std::function<void()>& while_waiting) {
  CheckedPoint c;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0)
    throw Error(fmt::format("cannot check a point: pipe: {}", std::strerror(errno)));
  std::vector<std::string> args = {self_exe(), "sweep", "check", workload, "--result-fd", "3"};
  for (const std::string& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = -1;
  try {
    // Killed with the sweep; the kernel's prints go nowhere, as a run's in a sweep.
    pid = start_child(argv.data(), SIGKILL, [&] {
      // fd 3: the result (dup2 clears close-on-exec, except onto itself)
      if (p[1] == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(p[1], 3) < 0) _exit(126);
      const int null = open("/dev/null", O_RDWR);
      if (null >= 0)
        for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    });
  } catch (const Error&) {
    close(p[0]);
    close(p[1]);
    throw;
  }
  close(p[1]);
  std::string out;
  bool eof = false;
  while (!eof) {
    if (interrupt::requested()) {
      c.interrupted = true;
      c.reason = "interrupted";
      break;
    }
    if (timeout_seconds > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_seconds) {
      c.timed_out = true;
      c.reason = fmt::format(
          "timed out after {:g} s (--timeout) while the point was checked: its Python kernel did not "
          "return from its trace (an endless loop?)",
          timeout_seconds);
      break;
    }
    if (while_waiting) while_waiting();
    pollfd f{p[0], POLLIN, 0};
    if (poll(&f, 1, 50) <= 0) continue;
    char buf[65536];
    const ssize_t n = read(p[0], buf, sizeof buf);
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) eof = true;
  }
  close(p[0]);
  if (!eof) kill(pid, SIGKILL);  // it writes nothing but its result: nothing is left half-done
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!eof) return c;
  const json r = json::parse(out, nullptr, false);
  if (!r.is_object() || !r.contains("valid")) {
    c.reason = WIFSIGNALED(st) ? fmt::format("checking the point was killed by signal {}", WTERMSIG(st))
                               : fmt::format("checking the point ended with status {} and no result",
                                             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return c;
  }
  c.valid = r["valid"].get<bool>();
  c.reason = r.value("reason", "");
  c.key = r.value("key", "");
  c.resolved = r.value("resolved", json());
  c.sources = r.value("sources", json());
  return c;
}

}  // namespace

void record_check(json& pt, const CheckedPoint& c) {
  if (c.valid) {
    pt["key"] = c.key;
    if (!c.sources.is_null()) pt["sources"] = c.sources;
  } else if (c.timed_out) {
    pt["failed"] = c.reason;  // not the workload's fault as far as trnsim can tell: an error row
  } else
    pt["invalid"] = c.reason;
}

CheckedPoint check_point(const std::string& workload, const std::vector<std::string>& sets,
                         double timeout_seconds, const std::function<void()>& while_waiting) {
  bool python = false;
  try {
    python = workload::parse_workload(workload, sets).kernel_source.has_value();
  } catch (const Error&) {
    // check_here says why
  }
  return python ? check_in_child(workload, sets, timeout_seconds, while_waiting) : check_here(workload, sets);
}

void check_point_to_fd(const std::string& workload, const std::vector<std::string>& sets, int fd) {
  const std::string text =
      to_json(check_here(workload, sets)).dump(-1, ' ', false, json::error_handler_t::replace);
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(fmt::format("cannot write the point's check: {}", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
}

}  // namespace trnsim::sweep
