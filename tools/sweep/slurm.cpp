#include "tools/sweep/slurm.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/base/json_excerpt.h"
#include "sim/config/json_document.h"
#include "sim/io/output_files.h"
#include "tools/sweep/pool.h"
#include "tools/sweep/results.h"
#include "tools/sweep/sweep.h"

namespace trnsim::sweep {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Captured {
  int status = -1;  // exit status, -1: could not run, 128+n: killed by signal n
  std::string out, err;
};

// Runs argv[0] (found on PATH) with its output captured.
Captured capture(const std::vector<std::string>& args) {
  Captured c;
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) return c;
  std::vector<std::string> a = args;
  std::vector<char*> argv;
  for (std::string& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return c;
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  const auto drain = [](int fd, std::string& s) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
      if (n > 0) s.append(buf, static_cast<size_t>(n));
    close(fd);
  };
  drain(out[0], c.out);
  drain(err[0], c.err);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  c.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return c;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// The last non-empty line of a tool's output (where sbatch puts its "fatal:" reason).
std::string last_line(const std::string& text) {
  const std::string t = trim(text);
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void write_text(const std::string& path, const std::string& text) {
  io::write_files_atomic({{path, {text.begin(), text.end()}, {}, true}});  // in the sweep's folder
}

// A submission folder's number (DIR/slurm/<n>); 0 for a name that is not one.
long long submission_number(const fs::path& p) {
  return std::strtoll(p.filename().c_str(), nullptr, 10);
}

std::vector<fs::path> submissions(const std::string& dir) {
  std::vector<fs::path> subs;
  std::error_code ec;
  const fs::path s = fs::path(dir) / "slurm";
  if (!fs::is_directory(s, ec)) return subs;
  for (const auto& e : fs::directory_iterator(s, ec))
    if (e.is_directory()) subs.push_back(e.path());
  std::sort(subs.begin(), subs.end(),
            [](const fs::path& a, const fs::path& b) { return submission_number(a) < submission_number(b); });
  return subs;
}

// squeue's states of a job's tasks ("PENDING" -> 3); nullopt if squeue cannot say (the job is gone).
std::map<std::string, int> job_states(const std::string& job_id) {
  std::map<std::string, int> states;
  const Captured c = capture({"squeue", "-h", "-r", "-j", job_id, "-o", "%T"});
  if (c.status != 0) return states;
  size_t pos = 0;
  while (pos < c.out.size()) {
    const size_t nl = c.out.find('\n', pos);
    const std::string line = trim(c.out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
    if (!line.empty()) ++states[line];
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return states;
}

struct Counts {
  size_t ok = 0, invalid = 0, failed = 0, missing = 0;
};

Counts count_rows(const json& plan, const std::string& dir) {
  Counts c;
  for (const json& pt : plan["points"]) {
    if (pt.contains("invalid")) {
      ++c.invalid;
      continue;
    }
    if (pt.contains("failed")) {  // its check timed out: no key
      ++c.failed;
      continue;
    }
    const json row = read_row(dir, pt["key"].get<std::string>());
    if (row_done(row))
      ++c.ok;
    else if (row.is_object())
      ++c.failed;
    else
      ++c.missing;
  }
  return c;
}

// Runs a slice of tasks in order.
class ListSource : public TaskSource {
 public:
  explicit ListSource(std::vector<Task> tasks) : tasks_(std::move(tasks)) {}
  std::optional<Task> next() override {
    if (next_ >= tasks_.size()) return std::nullopt;
    return tasks_[next_++];
  }
  bool done() const override { return next_ >= tasks_.size(); }
  void finished(const Task& t, const json& row) override {
    std::printf("point %s: %s%s\n", t.key.c_str(), row["status"].get<std::string>().c_str(),
                row.value("error", "").empty() ? "" : (": " + row["error"].get<std::string>()).c_str());
    std::fflush(stdout);
  }

 private:
  std::vector<Task> tasks_;
  size_t next_ = 0;
};

}  // namespace

int slurm_submit(const std::string& dir, const SlurmOptions& o) {
  const json plan = read_plan(dir);
  json todo = json::array();
  std::set<std::string> seen;
  for (const json& pt : plan["points"]) {
    if (pt.contains("invalid") || pt.contains("failed")) continue;
    const std::string key = pt["key"].get<std::string>();
    if (!seen.insert(key).second || row_done(read_row(dir, key))) continue;
    todo.push_back({{"key", key}, {"sets", pt["sets"]}, {"sources", pt.value("sources", json())}});
  }
  std::error_code ec;
  const std::string adir = fs::absolute(dir, ec).string();
  if (todo.empty()) {
    std::printf("%s: every point has its row: nothing to submit\n", dir.c_str());
    if (o.wait) collect(dir, o.report);
    return 0;
  }
  const Captured probe = capture({"sbatch", "--version"});
  if (probe.status == 127 && probe.err.empty())
    throw InputError(
        "--backend slurm: sbatch is not on PATH (install Slurm's client, Debian: slurm-client, or "
        "use the local backend)");
  // sbatch is there but cannot reach a cluster (no slurm.conf, no slurmctld): its own words say why.
  if (probe.status != 0)
    throw InputError(fmt::format(
        "--backend slurm: 'sbatch --version' failed (exit status {}): {} (is Slurm configured and "
        "slurmctld reachable from this machine? or use the local backend)",
        probe.status, text_excerpt(last_line(probe.err.empty() ? probe.out : probe.err), 200)));
  const size_t n = todo.size();
  size_t per = o.points_per_task > 0 ? static_cast<size_t>(o.points_per_task) : (n + 99) / 100;
  per = std::max(per, (n + 999) / 1000);  // Slurm's default MaxArraySize is 1001
  const size_t tasks = (n + per - 1) / per;
  const std::vector<fs::path> subs = submissions(dir);
  const long long number = subs.empty() ? 1 : submission_number(subs.back()) + 1;
  const fs::path sub = fs::path(adir) / "slurm" / std::to_string(number);
  fs::create_directories(sub, ec);
  if (ec) throw InputError(fmt::format("{}: cannot create: {}", sub.string(), ec.message()));
  const json spec = {{"dir", adir},
                     {"workload", plan["workload"]},
                     {"cwd", plan["cwd"]},
                     {"points_per_task", per},
                     {"keep_stats", o.keep_stats},
                     {"timeout_seconds", o.timeout_seconds},
                     {"points", todo}};
  write_text((sub / "tasks.json").string(), spec.dump(1) + "\n");
  const std::string script = fmt::format(
      "#!/bin/sh\n"
      "#SBATCH --job-name={}\n"
      "#SBATCH --array=0-{}%{}\n"
      "#SBATCH --output={}\n"
      "#SBATCH --cpus-per-task=1\n"
      "# trnsim sweep {}: {} points, {} per task (DIR/points/<key>.json holds each point's row)\n"
      "exec {} sweep task {} --task \"$SLURM_ARRAY_TASK_ID\"\n",
      shell_quote("trnsim-" + plan["name"].get<std::string>()).substr(0), tasks - 1,
      std::max(1, o.max_running), (sub / "task-%a.log").string(), plan["name"].get<std::string>(), n, per,
      shell_quote(self_exe()), shell_quote(sub.string()));
  write_text((sub / "job.sh").string(), script);
  std::vector<std::string> args = {"sbatch", "--parsable"};
  args.insert(args.end(), o.sbatch_args.begin(), o.sbatch_args.end());
  args.push_back((sub / "job.sh").string());
  const Captured c = capture(args);
  if (c.status != 0)
    throw InputError(fmt::format("sbatch failed (exit status {}): {}", c.status, trim(c.err + c.out)));
  std::string job = trim(c.out);
  job = job.substr(0, job.find(';'));
  write_text((sub / "job_id").string(), job + "\n");
  std::printf(
      "submitted Slurm job %s: %zu points in %zu array tasks of %zu (at most %d at once); "
      "trnsim sweep status %s, then trnsim sweep collect %s\n",
      job.c_str(), n, tasks, per, std::max(1, o.max_running), dir.c_str(), dir.c_str());
  std::fflush(stdout);
  if (!o.wait) return 0;
  interrupt::CooperativeSection coop;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const std::map<std::string, int> st = job_states(job);
    if (st.empty()) break;
    if (interrupt::requested())
      throw Interrupted(fmt::format("interrupted: job {} goes on (scancel {} to stop it)", job, job));
    if (o.wait_timeout_seconds > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            o.wait_timeout_seconds)
      throw InputError(fmt::format("job {} still runs after --wait-timeout {:g} s (trnsim sweep status {})",
                                   job, o.wait_timeout_seconds, dir));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return collect(dir, o.report) == 0 ? 0 : 1;
}

int slurm_task(const std::string& submission_dir, int task, int jobs) {
  const json spec = config::read_json_document((fs::path(submission_dir) / "tasks.json").string());
  const size_t per = spec["points_per_task"].get<size_t>();
  const json& pts = spec["points"];
  if (task < 0 || static_cast<size_t>(task) * per >= pts.size())
    throw InputError(fmt::format("{}: task {} has no points ({} points, {} per task)", submission_dir, task,
                                 pts.size(), per));
  std::vector<Task> tasks;
  for (size_t i = static_cast<size_t>(task) * per;
       i < pts.size() && i < (static_cast<size_t>(task) + 1) * per; ++i)
    tasks.push_back({pts[i]["key"].get<std::string>(), pts[i]["sets"].get<std::vector<std::string>>(),
                     pts[i].value("sources", json())});
  PoolConfig cfg;
  cfg.exe = self_exe();
  cfg.workload = spec["workload"].get<std::string>();
  cfg.dir = spec["dir"].get<std::string>();
  cfg.cwd = spec["cwd"].get<std::string>();
  cfg.jobs = std::max(1, jobs);
  cfg.keep_stats = spec.value("keep_stats", false);
  cfg.timeout_seconds = spec.value("timeout_seconds", 0.0);
  check_sweep_folder(cfg.dir);  // rows are never written through a link there (the local backend's check)
  std::printf("task %d: %zu points\n", task, tasks.size());
  std::fflush(stdout);
  ListSource src(std::move(tasks));
  run_pool(cfg, src);
  return 0;
}

int sweep_status(const std::string& dir) {
  const json plan = read_plan(dir);
  const Counts c = count_rows(plan, dir);
  std::printf("%s: %zu points: %zu done, %zu failed, %zu invalid, %zu without a row\n",
              plan.value("name", "").c_str(), plan["points"].size(), c.ok, c.failed, c.invalid, c.missing);
  for (const fs::path& sub : submissions(dir)) {
    std::string job;
    try {
      const json spec = config::read_json_document((sub / "tasks.json").string());
      std::FILE* f = std::fopen((sub / "job_id").c_str(), "r");
      char buf[64] = {0};
      if (f) {
        if (std::fgets(buf, sizeof buf, f) == nullptr) buf[0] = 0;
        std::fclose(f);
      }
      job = trim(buf);
      const std::map<std::string, int> st = job.empty() ? std::map<std::string, int>{} : job_states(job);
      std::string states;
      for (const auto& [k, v] : st) states += fmt::format("{}{} {}", states.empty() ? "" : ", ", v, k);
      std::printf("  submission %s: job %s, %zu points: %s\n", sub.filename().c_str(),
                  job.empty() ? "?" : job.c_str(), spec["points"].size(),
                  states.empty() ? "finished (not in squeue)" : states.c_str());
    } catch (const InputError& e) {
      std::printf("  submission %s: %s\n", sub.filename().c_str(), e.what());
    }
  }
  if (c.failed + c.missing > 0)
    std::printf("resubmit the %zu failed or missing points: trnsim sweep resubmit %s\n", c.failed + c.missing,
                dir.c_str());
  return 0;
}

}  // namespace trnsim::sweep
