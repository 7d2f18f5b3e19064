#include "tools/sweep/sweep.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/base/json_excerpt.h"
#include "sim/base/log.h"
#include "sim/config/json_document.h"
#include "sim/io/file_kind.h"
#include "sim/io/made_folders.h"
#include "sim/io/output_files.h"
#include "sim/io/replace_check.h"
#include "tools/sweep/point_check.h"
#include "tools/sweep/pool.h"
#include "tools/sweep/progress.h"
#include "tools/sweep/report_script.h"
#include "tools/sweep/results.h"

namespace trnsim::sweep {
namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

std::string sweep_dir(const Spec& spec, const std::string& out) {
  return out.empty() ? (fs::path("out") / "sweeps" / spec.name).string() : out;
}

namespace {

// The plans a sweep kept aside in the folder (keep_edited_plan): plan.edited.json, plan.edited.2.json, ...
// that are regular files, in that order.
std::vector<std::string> kept_plans(const std::string& dir) {
  std::vector<std::string> kept;
  const io::Fd d = io::open_dir_for_write(dir);
  for (int n = 1; d.ok() && n < 1000; ++n) {
    const std::string name = n == 1 ? "plan.edited.json" : fmt::format("plan.edited.{}.json", n);
    struct stat st {};
    if (::fstatat(d.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
      kept.push_back(name);
  }
  return kept;
}

// A folder with no plan.json but a plan kept aside: a sweep may have been killed between keeping an edited
// plan.json aside and writing its own, or the user moved it. Nothing records which kept plan was plan.json,
// so none is put back (an automatic rename could pick another file, and --overwrite would then replace the
// user's edit): the error names the kept plans and the command that puts one back. "" when plan.json is
// there or no plan is kept.
std::string missing_plan_message(const std::string& dir) {
  const std::string path = (fs::path(dir) / "plan.json").string();
  if (io::file_kind(path) != io::FileKind::kMissing) return "";
  const std::vector<std::string> kept = kept_plans(dir);
  if (kept.empty()) return "";
  std::string names;
  for (const std::string& k : kept) names += (names.empty() ? "" : ", ") + (fs::path(dir) / k).string();
  return fmt::format(
      "{}: no such file, and the folder holds {} kept aside ({}; a sweep keeps an edited plan.json there, "
      "and one killed before it wrote its own leaves no plan.json): nothing is changed; put the plan back "
      "with `mv {} {}`{}, then run the command again",
      path, kept.size() == 1 ? "a plan" : "plans", names, (fs::path(dir) / kept.back()).string(), path,
      kept.size() == 1 ? "" : " (or the one of them that was plan.json)");
}

}  // namespace

io::DirLock prepare_dir(const std::string& dir, const std::string& name) {
  std::error_code ec;
  const fs::path plan = fs::path(dir) / "plan.json";
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw InputError(fmt::format("{}: exists and is not a directory", dir));
  io::check_no_dangling_link(dir, dir);  // mkdir would say only "File exists"
  fs::create_directories(dir, ec);
  if (ec) throw InputError(fmt::format("{}: cannot create: {}", dir, ec.message()));
  // The lock first: a sweep that has just made the folder (no plan.json yet) is another sweep at work, not
  // a folder of other files.
  io::DirLock lock;
  io::lock_for_run(lock, dir, dir, "sweep or tune", "it holds the folder's lock");
  if (const std::string missing = missing_plan_message(dir); !missing.empty()) throw InputError(missing);
  if (fs::exists(plan, ec)) {
    json p;
    std::string unread;
    try {
      p = config::read_json_document(plan.string());
    } catch (const InputError& e) {
      unread = e.what();
    }
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string() || !p.contains("points"))
      throw InputError(fmt::format(
          "{}: is not a trnsim sweep plan{}: the folder {} is not a sweep's; choose another --out, nothing "
          "there is overwritten",
          plan.string(), unread.empty() ? " (no \"name\" and \"points\")" : " (" + unread + ")", dir));
    const std::string other = p["name"].get<std::string>();
    if (other != name)
      throw InputError(
          fmt::format("{}: holds the results of sweep '{}' (plan.json), not '{}': choose another --out", dir,
                      text_excerpt(other), text_excerpt(name)));
  } else if (!fs::is_empty(dir, ec)) {
    throw InputError(
        fmt::format("{}: exists and is not a sweep folder (no plan.json): choose another --out, nothing "
                    "there is overwritten",
                    dir));
  }
  check_sweep_folder(dir);
  return lock;
}

void check_sweep_folder(const std::string& dir) {
  std::error_code ec;
  for (const char* f : {"plan.json", "results.csv", "results.jsonl", "report.html", "best_workload.json"}) {
    const std::string p = (fs::path(dir) / f).string();
    io::check_no_links(p, std::string("the sweep's ") + f, dir);
    if (fs::is_directory(p, ec))
      throw InputError(
          fmt::format("{}: is a folder, not a file: the sweep writes its {} there; move it away "
                      "or choose another --out",
                      p, f));
  }
  for (const char* d : {"points", "plots", "stats", ".runs"}) {
    const std::string p = (fs::path(dir) / d).string();
    io::check_no_links(p, std::string("the sweep's folder ") + d, dir);
    const fs::file_status st = fs::symlink_status(p, ec);
    if (fs::exists(st) && !fs::is_directory(st))
      throw InputError(
          fmt::format("{}: is a file, not a folder: the sweep keeps its {} there; move it away "
                      "or choose another --out",
                      p, d));
  }
  check_rows(dir);
  // The results and report a user reads and may annotate: replaced only as any output (recorded in
  // DIR/.trnsim-written and unchanged, or --overwrite: sim/io/replace_check.h), refused before any point
  // runs.
  for (const char* f : {"results.csv", "results.jsonl", "report.html"})
    if (const std::string p = (fs::path(dir) / f).string(); fs::exists(fs::symlink_status(p, ec)))
      io::check_may_replace(p, std::string("the sweep's ") + f);
}

int default_jobs(int jobs) {
  if (jobs > 0) return jobs;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

json plan_header(const Spec& spec) {
  std::error_code ec;
  json axes = json::array();
  for (const Axis& a : spec.axes) axes.push_back({{"name", a.name}, {"path", a.path}});
  return {{"name", spec.name},
          {"description", spec.description},
          {"sweep", fs::absolute(spec.file, ec).string()},
          {"workload", fs::absolute(spec.workload, ec).string()},
          {"cwd", fs::current_path(ec).string()},
          {"columns", spec.columns},
          {"axes", axes},
          {"objective", spec.objective},
          {"maximize", spec.maximize},
          {"points", json::array()}};
}

json plan_point(const Point& p) {
  json j = {{"index", p.index}, {"values", json(p.values)}, {"sets", p.sets}};
  if (!p.label.empty()) j["label"] = p.label;
  return j;
}

json read_plan(const std::string& dir) {
  const std::string path = (fs::path(dir) / "plan.json").string();
  if (const std::string missing = missing_plan_message(dir); !missing.empty()) throw InputError(missing);
  json p = config::read_json_document(path);
  if (!p.is_object() || !p.contains("points") || !p.contains("columns") || !p.contains("workload"))
    throw InputError(path + ": not a trnsim sweep plan");
  return p;
}

namespace {

// A plan.json that is not the one trnsim wrote (edited by hand, or an older trnsim's, which recorded none) is
// kept aside under a free name (plan.edited.json, plan.edited.2.json, ...), with a note, before the sweep
// writes its own, unless --overwrite: a user's edit is never replaced silently. Under the folder's lock.
void keep_edited_plan(const std::string& dir) {
  if (io::overwrite_allowed()) return;
  const io::Fd d = io::open_dir_for_write(dir);
  struct stat st {};
  if (!d.ok() || ::fstatat(d.get(), "plan.json", &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
    return;
  const std::string plan = (fs::path(dir) / "plan.json").string();
  const std::string why = io::replace_refusal_at(d.get(), "plan.json", plan);
  if (why.empty()) return;
  for (int n = 1; n < 1000; ++n) {
    const std::string aside = n == 1 ? "plan.edited.json" : fmt::format("plan.edited.{}.json", n);
    if (::renameat2(d.get(), "plan.json", d.get(), aside.c_str(), RENAME_NOREPLACE) == 0) {
      log::note(fmt::format("{}: kept as {} ({}): the sweep writes its plan anew", plan,
                            (fs::path(dir) / aside).string(), why));
      return;
    }
    if (errno != EEXIST)
      throw InputError(
          fmt::format("{}: cannot keep it aside ({}), and trnsim will not replace it: {}; pass "
                      "--overwrite to replace it",
                      plan, std::strerror(errno), why));
  }
  throw InputError(
      fmt::format("{}: trnsim will not replace it ({}), and plan.edited.json to "
                  "plan.edited.999.json exist; pass --overwrite to replace it",
                  plan, why));
}

}  // namespace

void write_plan(const std::string& dir, const json& plan) {
  const std::string text = plan.dump(1) + "\n";
  // The sweep's folder is its own (prepare_dir: empty or this sweep's when it started), but its plan a user
  // may edit: replaced as any output (recorded in DIR/.trnsim-written and unchanged), else kept aside.
  keep_edited_plan(dir);
  io::write_files_atomic({{(fs::path(dir) / "plan.json").string(), {text.begin(), text.end()}, {}, false}});
}

namespace {

// The local backend's points: checked in-process one at a time (ahead of the workers while they are busy),
// each either invalid, already kept (a finished row under its key), a duplicate of one queued, or a task.
class LocalSource : public TaskSource {
 public:
  LocalSource(const Spec& spec, const std::vector<Point>& points, json& plan, const std::string& dir,
              bool rerun, int jobs, double timeout)
      : spec_(spec),
        points_(points),
        plan_(plan),
        dir_(dir),
        rerun_(rerun),
        jobs_(jobs),
        timeout_(timeout),
        progress_(points.size()) {}

  std::optional<Task> next() override {
    while (ready_.empty() && cursor_ < points_.size() && !interrupt::requested()) check_next();
    if (ready_.empty()) return std::nullopt;
    Task t = std::move(ready_.front());
    ready_.pop_front();
    return t;
  }
  bool done() const override { return cursor_ >= points_.size() && ready_.empty(); }
  bool idle() override {
    if (cursor_ >= points_.size() || ready_.size() >= static_cast<size_t>(jobs_) || interrupt::requested())
      return false;
    check_next();
    return true;
  }
  void finished(const Task& t, const json& row) override {
    const size_t n = waiting_[t.key];
    waiting_.erase(t.key);
    ++ran_;
    (row_done(row) ? ok_ : failed_) += n;
    done_ += n;
    show(done_ == points_.size());
  }
  void end() override { progress_.finish(); }
  size_t ran() const { return ran_; }

 private:
  void check_next() {
    const Point& p = points_[cursor_++];
    json& pt = plan_["points"][p.index];
    pt = plan_point(p);
    const CheckedPoint c = check_point(spec_.workload, p.sets, timeout_, collect_ended);
    if (c.interrupted) {  // not checked: the pool stops next, nothing of this point is kept
      --cursor_;
      return;
    }
    record_check(pt, c);
    if (c.timed_out) {
      ++failed_;
      ++done_;
    } else if (!c.valid) {
      ++invalid_;
      ++done_;
    } else if (auto w = waiting_.find(c.key); w != waiting_.end()) {
      ++w->second;  // the same workload as a point queued or running
    } else if (!rerun_ && row_done(read_row(dir_, c.key))) {
      ++kept_;
      ++ok_;
      ++done_;
    } else {
      waiting_[c.key] = 1;
      ready_.push_back(Task{c.key, p.sets, c.sources});
    }
    show(false);
  }
  void show(bool force) { progress_.update(done_, ran_, ok_, invalid_, failed_, kept_, force); }

  const Spec& spec_;
  const std::vector<Point>& points_;
  json& plan_;
  std::string dir_;
  bool rerun_;
  int jobs_;
  double timeout_;  // --timeout, also for a point's check
  Progress progress_;
  size_t cursor_ = 0, done_ = 0, ran_ = 0, ok_ = 0, invalid_ = 0, failed_ = 0, kept_ = 0;
  std::deque<Task> ready_;
  std::map<std::string, size_t> waiting_;  // key -> points waiting for it
};

std::string describe_values(const ordered_json& values) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : values.items()) {
    std::string t = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (t.size() > 120) t = t.substr(0, 117) + "...";
    parts.push_back(fmt::format("{}={}", k, t));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

void check_all(const Spec& spec, const std::vector<Point>& points, json& plan, double timeout_seconds) {
  Progress progress(points.size(), "points checked");
  size_t invalid = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    json pt = plan_point(points[i]);
    const CheckedPoint c = check_point(spec.workload, points[i].sets, timeout_seconds);
    if (c.interrupted) throw Interrupted("interrupted");
    record_check(pt, c);
    if (!c.valid) ++invalid;
    plan["points"].push_back(pt);
    progress.update(i + 1, 0, i + 1 - invalid, invalid, 0, 0, i + 1 == points.size());
    if (interrupt::requested()) throw Interrupted("interrupted");
  }
  progress.finish();
}

int run_local(const std::string& sweep_file, const SweepOptions& o) {
  const Spec spec = parse_spec(sweep_file);
  const Enumeration e = enumerate(spec, o.yes ? kMaxPoints : kConfirmPoints);
  const std::string dir = sweep_dir(spec, o.out);
  const io::DirLock lock = prepare_dir(dir, spec.name);
  const int jobs = default_jobs(o.jobs);
  json plan = plan_header(spec);
  write_plan(dir, plan);  // marks the folder as this sweep's from the start
  plan["points"] = json::array();
  for (size_t i = 0; i < e.points.size(); ++i) plan["points"].push_back(nullptr);
  log::info(fmt::format(
      "sweep {}: {} points{}, {} worker{}, results in {}", spec.name, e.points.size(),
      e.excluded ? fmt::format(" ({} of the product skipped by the constraints)", e.excluded) : "", jobs,
      jobs == 1 ? "" : "s", dir));
  PoolConfig cfg;
  cfg.exe = self_exe();
  cfg.workload = spec.workload;
  cfg.dir = dir;
  cfg.jobs = jobs;
  cfg.keep_stats = o.keep_stats;
  cfg.timeout_seconds = o.timeout_seconds;
  LocalSource src(spec, e.points, plan, dir, o.rerun, jobs, o.timeout_seconds);
  run_pool(cfg, src);
  write_plan(dir, plan);
  collect(dir, o.report);
  return 0;
}

ordered_json best_record(const json& plan, const std::vector<ordered_json>& records) {
  const std::string obj = plan.value("objective", "total_time_ns");
  const bool maximize = plan.value("maximize", false);
  ordered_json best = nullptr;
  for (const ordered_json& r : records) {
    if (r.value("status", "") != "ok" || !r.contains(obj) || !r[obj].is_number()) continue;
    const double v = r[obj].get<double>();
    if (best.is_null() || (maximize ? v > best[obj].get<double>() : v < best[obj].get<double>())) best = r;
  }
  return best;
}

size_t collect(const std::string& dir, bool report) {
  check_sweep_folder(dir);
  const json plan = read_plan(dir);
  const std::vector<ordered_json> records = result_records(plan, dir);
  write_results(dir, plan, records);
  std::map<std::string, size_t> count;
  for (const ordered_json& r : records) ++count[r.value("status", "")];
  const size_t missing = count["missing"] + count["error"];
  std::printf("%s: %zu points: %zu ok, %zu invalid, %zu failed, %zu numerics failed, %zu not run\n",
              plan.value("name", "").c_str(), records.size(), count["ok"], count["invalid"], count["error"],
              count["numerics_fail"], count["missing"]);
  const ordered_json best = best_record(plan, records);
  const std::string obj = plan.value("objective", "total_time_ns");
  if (!best.is_null()) {
    ordered_json values = ordered_json::object();
    for (const json& c : plan["columns"]) values[c.get<std::string>()] = best[c.get<std::string>()];
    std::printf("best by %s (%s): point %s%s: %s = %s\n", obj.c_str(),
                plan.value("maximize", false) ? "highest" : "lowest", best["index"].dump().c_str(),
                best["label"].get<std::string>().empty()
                    ? ""
                    : (" '" + best["label"].get<std::string>() + "'").c_str(),
                obj.c_str(), best[obj].dump().c_str());
    std::printf("  %s\n", describe_values(values).c_str());
  }
  std::printf("wrote %s/results.csv, %s/results.jsonl", dir.c_str(), dir.c_str());
  std::fflush(stdout);
  if (report) {
    try {
      std::vector<io::OutputFile> page = draw_sweep_report(dir);
      std::error_code ec;
      fs::create_directory(fs::path(dir) / "plots", ec);  // the set writes into existing folders only
      io::write_files_atomic(page);
      std::printf(", %s/report.html, %s/plots/", dir.c_str(), dir.c_str());
    } catch (const InputError& e) {
      std::printf("\n");
      std::fflush(stdout);
      log::warning(fmt::format("no HTML report: {}", e.what()));
      return missing;
    }
  }
  std::printf("\n");
  std::fflush(stdout);
  return missing;
}

}  // namespace trnsim::sweep
