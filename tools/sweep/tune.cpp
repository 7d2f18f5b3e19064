#include "tools/sweep/tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "kernels/workload/workload.h"
#include "sim/base/error.h"
#include "sim/base/log.h"
#include "sim/io/output_files.h"
#include "sim/io/replace_check.h"
#include "tools/sweep/point_check.h"
#include "tools/sweep/pool.h"
#include "tools/sweep/progress.h"
#include "tools/sweep/results.h"
#include "tools/sweep/spec.h"
#include "tools/sweep/sweep.h"

namespace trnsim::sweep {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

class Search : public TaskSource {
 public:
  Search(const Spec& spec, const TuneOptions& o, const std::string& dir, json& plan, int jobs)
      : spec_(spec),
        o_(o),
        dir_(dir),
        plan_(plan),
        jobs_(jobs),
        cs_(spec),
        rng_(o.seed),
        n_(spec.product_size()),
        progress_(static_cast<size_t>(o.budget), "evaluations") {
    random_quota_ = std::max<int>(jobs, o.budget / 3);
  }

  std::optional<Task> next() override {
    waiting_ = false;
    if (started_ >= o_.budget) return std::nullopt;
    while (started_ < o_.budget) {
      std::optional<Candidate> c = propose();
      if (!c) {
        if (!waiting_) exhausted_ = true;
        return std::nullopt;
      }
      if (std::optional<Task> t = consider(*c)) return t;
    }
    return std::nullopt;
  }
  bool done() const override { return (started_ >= o_.budget || exhausted_) && !waiting_; }
  void finished(const Task& t, const json& row) override {
    const double v = objective_of(row);
    running_.erase(t.key);
    value_[t.key] = v;
    for (uint64_t flat : by_key_[t.key]) flat_value_[flat] = v;
    ++finished_;
    (row_done(row) ? ok_ : failed_)++;
    progress_.update(finished_, ran_, ok_, invalid_, failed_, kept_,
                     finished_ == static_cast<size_t>(o_.budget));
  }
  void end() override { progress_.finish(); }

 private:
  struct Candidate {
    bool listed = false;
    uint64_t index = 0;  // flat product index, or the listed point's number
  };

  double objective_of(const json& row) const {
    if (!row_done(row) || !row.contains("metrics")) return kNaN;
    const json& m = row["metrics"];
    return m.contains(objective_) && m[objective_].is_number() ? m[objective_].get<double>() : kNaN;
  }
  bool better(double a, double b) const {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
    return maximize_ ? a > b : a < b;
  }

  // The best finished product point that has not been a centre yet.
  std::optional<uint64_t> best_centre() const {
    std::optional<uint64_t> best;
    for (const auto& [flat, v] : flat_value_)
      if (!expanded_.count(flat) && !std::isnan(v) && (!best || better(v, flat_value_.at(*best))))
        best = flat;
    return best;
  }

  std::vector<uint64_t> neighbours(uint64_t flat) const {
    std::vector<size_t> digit(spec_.axes.size());
    uint64_t f = flat;
    for (size_t i = spec_.axes.size(); i-- > 0;) {
      digit[i] = static_cast<size_t>(f % spec_.axes[i].values.size());
      f /= spec_.axes[i].values.size();
    }
    const auto flat_of = [&](const std::vector<size_t>& d) {
      uint64_t x = 0;
      for (size_t i = 0; i < d.size(); ++i) x = x * spec_.axes[i].values.size() + d[i];
      return x;
    };
    std::vector<uint64_t> out;
    for (size_t a = 0; a < spec_.axes.size(); ++a) {
      const size_t n = spec_.axes[a].values.size();
      std::vector<size_t> to;
      if (n <= 4) {
        for (size_t v = 0; v < n; ++v) to.push_back(v);
      } else {
        if (digit[a] > 0) to.push_back(digit[a] - 1);
        if (digit[a] + 1 < n) to.push_back(digit[a] + 1);
      }
      for (size_t v : to) {
        if (v == digit[a]) continue;
        std::vector<size_t> d = digit;
        d[a] = v;
        out.push_back(flat_of(d));
      }
    }
    return out;
  }

  // The next point to consider; nullopt with waiting_ set: none until a running point finishes.
  std::optional<Candidate> propose() {
    waiting_ = false;
    if (listed_next_ < spec_.listed.size()) return Candidate{true, listed_next_++};
    if (n_ == 0) return std::nullopt;
    if (tried_.size() >= n_) return std::nullopt;
    // Descent once the random third has started and a result is in.
    if (started_ >= random_quota_) {
      while (true) {
        if (!centre_ || expanded_.count(*centre_)) {
          // A better finished point than the centre becomes the centre (first improvement).
          centre_ = best_centre();
          if (!centre_) break;
          queue_.clear();
          for (uint64_t nb : neighbours(*centre_))
            if (!tried_.count(nb)) queue_.push_back(nb);
        } else if (auto b = best_centre(); b && better(flat_value_[*b], flat_value_[*centre_])) {
          expanded_.insert(*centre_);
          continue;
        }
        while (!queue_.empty() && tried_.count(queue_.front())) queue_.pop_front();
        if (!queue_.empty()) {
          const uint64_t nb = queue_.front();
          queue_.pop_front();
          return Candidate{false, nb};
        }
        expanded_.insert(*centre_);
        if (pending() > 0) {  // wait for results before widening the search
          waiting_ = true;
          return std::nullopt;
        }
      }
    }
    for (int attempt = 0; attempt < 100000; ++attempt) {
      const uint64_t flat = rng_() % n_;
      if (!tried_.count(flat)) return Candidate{false, flat};
      if (tried_.size() >= n_) break;
    }
    return std::nullopt;
  }

  size_t pending() const { return static_cast<size_t>(started_) - finished_; }

  // Checks a candidate: a task to run, or nothing (skipped, invalid, a duplicate, or kept).
  std::optional<Task> consider(const Candidate& c) {
    Point p;
    if (c.listed) {
      p = listed_point(spec_, c.index, 0);
    } else {
      tried_.insert(c.index);
      p = product_point(spec_, c.index);
      if (cs_.first_broken(p.values) >= 0) return std::nullopt;
    }
    p.index = plan_["points"].size();
    json pt = plan_point(p);
    const CheckedPoint chk = check_point(spec_.workload, p.sets, o_.timeout_seconds, collect_ended);
    if (chk.interrupted) return std::nullopt;  // the pool stops next
    if (chk.timed_out) {                       // an evaluation spent: an error row, as a run that timed out
      record_check(pt, chk);
      plan_["points"].push_back(pt);
      ++started_;
      ++finished_;
      ++failed_;
      progress_.update(finished_, ran_, ok_, invalid_, failed_, kept_,
                       finished_ == static_cast<size_t>(o_.budget));
      return std::nullopt;
    }
    if (!chk.valid) {
      if (invalid_++ == 0)
        first_invalid_ =
            fmt::format("{}: {}", p.values.dump(-1, ' ', false, json::error_handler_t::replace), chk.reason);
      if (c.listed) {
        pt["invalid"] = chk.reason;
        plan_["points"].push_back(pt);
      }
      if (++invalid_streak_ > 100000) exhausted_ = true;
      return std::nullopt;
    }
    invalid_streak_ = 0;
    pt["key"] = chk.key;
    if (!chk.sources.is_null()) pt["sources"] = chk.sources;
    plan_["points"].push_back(pt);
    if (!c.listed) by_key_[chk.key].push_back(c.index);
    if (auto v = value_.find(chk.key); v != value_.end()) {
      if (!c.listed) flat_value_[c.index] = v->second;
      return std::nullopt;
    }
    if (running_.count(chk.key)) return std::nullopt;
    ++started_;
    const json kept = read_row(dir_, chk.key);
    if (row_done(kept)) {
      ++kept_;
      finished(Task{chk.key, p.sets, chk.sources}, kept);
      return std::nullopt;
    }
    running_.insert(chk.key);
    ++ran_;
    return Task{chk.key, p.sets, chk.sources};
  }

 public:
  std::string objective_;
  bool maximize_ = false;
  // Points validation refused (product points are not rows of the results), and the first one's reason.
  size_t invalid() const { return invalid_; }
  const std::string& first_invalid() const { return first_invalid_; }

 private:
  const Spec& spec_;
  const TuneOptions& o_;
  std::string dir_;
  json& plan_;
  int jobs_;
  Constraints cs_;
  std::mt19937_64 rng_;
  uint64_t n_;
  Progress progress_;
  int random_quota_ = 0;
  int started_ = 0;
  size_t finished_ = 0, ran_ = 0, ok_ = 0, failed_ = 0, invalid_ = 0, kept_ = 0, invalid_streak_ = 0;
  size_t listed_next_ = 0;
  bool exhausted_ = false, waiting_ = false;
  std::set<uint64_t> tried_, expanded_;
  std::set<std::string> running_;
  std::map<std::string, double> value_;
  std::map<std::string, std::vector<uint64_t>> by_key_;
  std::map<uint64_t, double> flat_value_;
  std::string first_invalid_;
  std::optional<uint64_t> centre_;
  std::deque<uint64_t> queue_;
};

// Paths written relative to the base workload's folder, made absolute so that the file works anywhere.
void absolute_paths(json& doc, const std::string& base) {
  const fs::path dir = fs::absolute(base).parent_path();
  const auto fix = [&](json& v) {
    if (v.is_string() && !v.get<std::string>().empty() && !fs::path(v.get<std::string>()).is_absolute())
      v = (dir / v.get<std::string>()).lexically_normal().string();
  };
  const auto fix_hw = [&](json& v) {
    if (v.is_string() &&
        (v.get<std::string>().find('/') != std::string::npos || v.get<std::string>().ends_with(".json")))
      fix(v);
  };
  if (doc.contains("hardware")) {
    if (doc["hardware"].is_object() && doc["hardware"].contains("name"))
      fix_hw(doc["hardware"]["name"]);
    else
      fix_hw(doc["hardware"]);
  }
  if (doc.contains("inputs") && doc["inputs"].is_object())
    for (auto& [k, v] : doc["inputs"].items()) {
      if (v.is_string()) fix(v);
      if (v.is_object() && v.contains("npy")) fix(v["npy"]);
    }
}

// --write names a file of its own: not the sweep file or its workload (the tune reads them), not a file a run
// recorded, not a file in the tune's folder (its plan, points and results) other than best_workload.json.
void check_write_target(const std::string& write, const Spec& spec, const std::string& dir) {
  io::check_distinct_files({{write, "--write"},
                            {spec.file, "the sweep file", true},
                            {spec.workload, "the sweep's workload", true}});
  io::check_not_recorded(write, "--write");
  io::check_may_replace(write, "--write");
  std::error_code ec;
  const fs::path w = fs::weakly_canonical(fs::absolute(write), ec);
  const fs::path d = fs::weakly_canonical(fs::absolute(dir), ec);
  if (w == d / "best_workload.json") return;
  if (std::mismatch(d.begin(), d.end(), w.begin(), w.end()).first == d.end())
    throw InputError(
        fmt::format("--write '{}': cannot write: it is in the tune's folder {} (its plan, points and "
                    "results); name a file outside it",
                    write, dir));
}

}  // namespace

int run_tune(const std::string& sweep_file, const TuneOptions& o) {
  const Spec spec = parse_spec(sweep_file);
  if (o.budget < 1) throw InputError("--budget must be at least 1");
  const std::string objective = o.objective.empty() ? spec.objective : o.objective;
  if (!is_metric(objective) || objective == "numerics_pass") {
    std::vector<std::string> names;
    for (const Metric& m : metrics())
      if (std::string(m.column) != "numerics_pass") names.push_back(m.column);
    throw InputError(fmt::format("{}: objective '{}' is not a results column (one of: {})",
                                 o.objective.empty() ? spec.file + ": objective" : std::string("--objective"),
                                 objective, fmt::join(names, ", ")));
  }
  const bool maximize = o.maximize_given ? o.maximize : spec.maximize;
  if (spec.product_size() == 0 && spec.listed.empty()) throw InputError(spec.file + ": no points to tune");
  const std::string dir = o.out.empty() ? (fs::path("out") / "tune" / spec.name).string() : o.out;
  if (!o.write.empty()) check_write_target(o.write, spec, dir);
  const io::DirLock lock = prepare_dir(dir, spec.name);
  // The best workload a user may edit or annotate, as the sweep's results: replaced only as any output,
  // refused before any point runs.
  if (const std::string best = (fs::path(dir) / "best_workload.json").string(); o.write.empty())
    io::check_may_replace(best, "the tune's best_workload.json");
  json plan = plan_header(spec);
  plan["objective"] = objective;
  plan["maximize"] = maximize;
  write_plan(dir, plan);
  const int jobs = default_jobs(o.jobs);
  log::info(
      fmt::format("tune {}: {} of {} product points{}, budget {} evaluations, {} worker{}, results in {}",
                  spec.name, maximize ? "highest" : "lowest", spec.product_size(),
                  spec.listed.empty() ? "" : fmt::format(" and {} listed", spec.listed.size()), o.budget,
                  jobs, jobs == 1 ? "" : "s", dir));
  Search search(spec, o, dir, plan, jobs);
  search.objective_ = objective;
  search.maximize_ = maximize;
  PoolConfig cfg;
  cfg.exe = self_exe();
  cfg.workload = spec.workload;
  cfg.dir = dir;
  cfg.jobs = jobs;
  cfg.timeout_seconds = o.timeout_seconds;
  run_pool(cfg, search);
  write_plan(dir, plan);
  collect(dir, o.report);

  const std::vector<nlohmann::ordered_json> records = result_records(plan, dir);
  const nlohmann::ordered_json best = best_record(plan, records);
  if (best.is_null())
    throw InputError(fmt::format(
        "{}: no point ran successfully: see {}/results.csv{}", spec.file, dir,
        search.invalid() == 0 ? std::string()
                              : fmt::format("; {} point{} failed validation, the first: {}", search.invalid(),
                                            search.invalid() == 1 ? "" : "s", search.first_invalid())));
  const json& bp = plan["points"][best["index"].get<size_t>()];
  json doc = workload::workload_document(spec.workload, bp["sets"].get<std::vector<std::string>>());
  absolute_paths(doc, spec.workload);
  doc["name"] = doc.value("name", spec.name) + "_tuned";
  doc["description"] =
      fmt::format("{} Tuned by trnsim tune over {} ({} {}: {} = {}).", doc.value("description", ""),
                  spec.file, maximize ? "highest" : "lowest", objective, objective, best[objective].dump());
  const std::string text = doc.dump(2) + "\n";
  const std::string out = o.write.empty() ? (fs::path(dir) / "best_workload.json").string() : o.write;
  // In the tune's folder or at --write FILE, checked as any output (above) and recorded in its folder's
  // .trnsim-written, so the next tune replaces it while it is unchanged.
  io::write_files_atomic({{out, {text.begin(), text.end()}}});
  std::printf("best workload (%s = %s), written to %s:\n%s", objective.c_str(),
              best[objective].dump().c_str(), out.c_str(), text.c_str());
  return 0;
}

}  // namespace trnsim::sweep
