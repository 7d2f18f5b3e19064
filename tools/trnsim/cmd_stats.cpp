// trnsim stats FILE.json [--lines N]   (alias: trnsim summary)
// trnsim stats FILE.json --critical-path [--segments N]
// trnsim stats --compare A.json B.json
//
// Prints the summary table of a run again from its stats.json (the table `trnsim run` printed, plus the
// busiest N source lines), the run's critical path (the chain of instructions, transfers and waits that
// sets its time: time per resource and link kind, then its segments in time order), or the headline figures
// of two runs side by side with B/A ratios (before/after a tuning change). A missing file, a file that is not
// JSON or not a trnsim stats.json is an InputError (exit 1).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "sim/base/error.h"
#include "sim/base/log.h"
#include "sim/io/content_hash.h"
#include "sim/io/dir_lock.h"
#include "sim/io/enclosing_set.h"
#include "sim/io/file_kind.h"
#include "sim/io/output_files.h"
#include "sim/io/replace_check.h"
#include "sim/run/report.h"
#include "tools/sweep/report_script.h"
#include "tools/trnsim/commands.h"
#include "tools/trnsim/run_log.h"

namespace trnsim::cli {
namespace {

struct StatsCliOptions {
  std::vector<std::string> files;
  bool compare = false;
  bool critical_path = false;
  size_t lines = 10;
  size_t segments = 60;
  bool html = false;
  std::string html_file;  // "" = report.html next to the stats.json
};

// A note on stderr when the stats.json's folder is a chain's stage that a single run replaced since.
void note_replaced_stage(const std::string& stats_file) {
  const std::filesystem::path dir = std::filesystem::path(stats_file).parent_path();
  const std::string note = io::replaced_stage_note(dir.empty() ? "." : dir.string());
  if (!note.empty()) log::note(note);
}

// InputError for a stats.json that is not there although a run folder's record names it: the run wrote it,
// and it or its folder went elsewhere since (a chain's stage folder moved during the chain's run).
void check_not_moved_away(const std::string& stats_file) {
  if (io::file_kind(stats_file) != io::FileKind::kMissing) return;
  const std::string record = io::record_naming(stats_file);
  if (record.empty()) return;
  throw InputError(fmt::format(
      "{}: no such file; {} names it as a file a run wrote there: it, or its folder, was moved, renamed or "
      "removed since (a folder moved during the run took this run's files with it): give its path now, or "
      "run again",
      stats_file, record));
}

void stats_command(const StatsCliOptions& o) {
  for (const std::string& f : o.files) check_not_moved_away(f);
  for (const std::string& f : o.files) note_replaced_stage(f);
  if (o.compare && o.html)
    throw InputError("--html draws one run's report; --compare prints two runs' figures");
  if (o.compare) {
    if (o.files.size() != 2)
      throw InputError("--compare takes two stats.json files (A, then B), found " +
                       std::to_string(o.files.size()));
    const auto a = run::load_stats(o.files[0]);
    const auto b = run::load_stats(o.files[1]);
    std::fputs(run::format_compare(a, b, o.files[0], o.files[1]).c_str(), stdout);
    return;
  }
  if (o.files.size() != 1)
    throw InputError("expected one stats.json (or --compare A.json B.json), found " +
                     std::to_string(o.files.size()) + " files");
  // The stats.json's bytes as the report is drawn from them (a regular file's: a FIFO is read once).
  const auto stats_sha = [&]() -> std::string {
    if (io::file_kind(o.files[0]) != io::FileKind::kRegular) return "";
    try {
      return io::sha256_hex(io::read_regular_file(o.files[0], "the stats file"));
    } catch (const InputError&) {
      return "";
    }
  };
  const std::string drawn_sha = o.html ? stats_sha() : "";
  const auto j = run::load_stats(o.files[0]);
  if (o.html) {
    const std::string out = o.html_file.empty()
                                ? (std::filesystem::path(o.files[0]).parent_path() / "report.html").string()
                                : o.html_file;
    io::check_distinct_files({{o.files[0], "the stats file", true}, {out, "--html"}});
    // Links below the run's folder too (--html OUT/link/r.html): it is written under that folder's lock,
    // through its handle, which follows none (before: "OUT/link: cannot open the directory: Not a directory").
    const std::string stats_dir = std::filesystem::path(o.files[0]).parent_path().string();
    io::check_no_links(out, "--html", stats_dir.empty() ? "." : stats_dir);
    // The run's own report (OUT/report.html of --report), recorded and unchanged, is replaced as any file
    // trnsim wrote (sim/io/replace_check.h), and the run's record then names the new one.
    io::check_not_recorded(out, "--html", o.files[0]);
    io::check_may_replace(out, "--html");
    // The run's host time is in host.json beside stats.json (when the run wrote one): the report's "host s".
    const std::string run_dir = std::filesystem::path(o.files[0]).parent_path().string();
    const std::string host_file = (std::filesystem::path(run_dir) / run::kHostFileName).string();
    std::string host_text;
    if (io::file_kind(host_file) == io::FileKind::kRegular) try {
        host_text = io::read_regular_file(host_file, "a run's host.json");
      } catch (const InputError&) {
        // unreadable: the report shows no host time
      }
    io::set_writer_command("stats --html");
    try {
      const std::vector<io::OutputFile> page =
          sweep::draw_run_report(run::stats_text(j), run_dir, out, host_text);
      // Written under the locks of the stats.json's folder and the report's, and only while the stats.json
      // is still the one drawn: a run that replaced the set meanwhile is not followed by a report of the
      // set before it.
      const std::vector<io::DirLock> locks = io::lock_folders(
          {std::filesystem::path(run_dir.empty() ? "." : run_dir).string(),
           std::filesystem::path(out).has_parent_path() ? std::filesystem::path(out).parent_path().string()
                                                        : std::string(".")});
      if (stats_sha() != drawn_sha)
        throw InputError(
            "the file changed while the report was drawn (another run wrote its files there?): the report is "
            "not written; draw it again");
      // The run's record names the coming report before it can be in place (and keeps naming the one it
      // replaces): a kill at any point leaves a record that names whichever is there.
      const auto report =
          std::find_if(page.begin(), page.end(), [&](const io::OutputFile& f) { return f.path == out; });
      uint64_t coming_inode = 0;
      const io::BeforeRenames name_coming = [&](const std::vector<io::ManifestEntry>& coming) {
        for (const io::ManifestEntry& c : coming)
          if (report != page.end() && c.path == out) {
            io::rerecord_in_set(*report, o.files[0], io::RecordPhase::kComing, c.inode);
            coming_inode = c.inode;
          }
      };
      try {
        io::write_files_atomic(page, nullptr, name_coming);
      } catch (...) {
        if (coming_inode != 0)
          io::rerecord_in_set(*report, o.files[0], io::RecordPhase::kFailed, coming_inode);
        throw;
      }
      if (report != page.end()) io::rerecord_in_set(*report, o.files[0]);
    } catch (const InputError& e) {
      throw InputError(o.files[0] + ": " + e.what());
    }
    std::printf("wrote %s\n", out.c_str());
    return;
  }
  if (o.critical_path) {
    try {
      std::fputs(run::format_critical_path(j, o.segments).c_str(), stdout);
    } catch (const InputError& e) {
      throw InputError(o.files[0] + ": " + e.what());
    }
    return;
  }
  std::fputs(run::format_stats(j, o.lines).c_str(), stdout);
}

}  // namespace

void add_stats_command(CLI::App& app) {
  auto opts = std::make_shared<StatsCliOptions>();
  CLI::App* cmd = app.add_subcommand("stats", "Print the summary of a run's stats.json, or compare two runs");
  cmd->alias("summary");
  cmd->add_option("files", opts->files, "stats.json (two with --compare)")->required();
  cmd->add_flag("--compare", opts->compare, "show two runs side by side with ratios B/A");
  cmd->add_flag("--critical-path", opts->critical_path,
                "print the run's critical path: time per resource and link, then its segments in time order");
  cmd->add_option("--segments", opts->segments,
                  "critical-path segments to show (default 60; stats.json holds 400)")
      ->check(CLI::Range(size_t{0}, size_t{1000000}));
  cmd->add_option(
         "--html", opts->html_file,
         "write an HTML report of the run (engine time per core, critical path, roofline, busiest source "
         "lines, numerics) to FILE, by default report.html next to the stats.json")
      ->expected(0, 1);
  add_overwrite_option(cmd);
  add_log_options(cmd);
  cmd->add_option("--lines", opts->lines, "busiest source lines to show (default 10; stats.json holds 50)")
      ->check(CLI::Range(size_t{0}, size_t{1000000}));
  cmd->callback([opts, cmd] {
    opts->html = cmd->get_option("--html")->count() > 0;
    on_file(fmt::format("{}", fmt::join(opts->files, ", ")), [&] { stats_command(*opts); });
  });
}

}  // namespace trnsim::cli
