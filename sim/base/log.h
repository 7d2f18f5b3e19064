// Every message trnsim gives its user (progress, notes, warnings, errors) goes through one spdlog logger,
// "trnsim". On stderr a message is its text alone, as trnsim has always printed it ("trnsim: note: ...");
// the console's level (the commands' --log-level, --quiet, --verbose) decides which reach it: info by
// default. A run's log file (OUT/trnsim.log, written with the run's other files) is a Record: every message
// from debug up (trace with --log-level trace), whatever the console shows, each with its UTC time and level.
// Thread-safe. A signal handler never logs (sim/base/interrupt.h writes its own message).
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>
#include <string_view>

namespace trnsim::log {

// The name of a run's log file in its output folder.
inline constexpr const char* kFileName = "trnsim.log";

// The logger every message goes through (created on first use, its console sink on stderr).
spdlog::logger& get();

// The console's level; info unless a command sets it.
void set_level(spdlog::level::level_enum level);
spdlog::level::level_enum level();
// "trace", "debug", "info", "warn", "error" or "off"; InputError "--log-level 'x': ..." otherwise.
spdlog::level::level_enum parse_level(const std::string& name);

// `text` as it is, at `level`.
void say(spdlog::level::level_enum level, std::string_view text);
// "trnsim: error: <m>", "trnsim: warning: <m>", "trnsim: note: <m>" (info), "trnsim: <m>" (info: progress)
// and "trnsim: debug: <m>".
void error(std::string_view m);
void warning(std::string_view m);
void note(std::string_view m);
void info(std::string_view m);
void debug(std::string_view m);
// A message `m` of a workload's run (WorkloadRunOptions::message), as "trnsim: <name>: <m>": a warning when
// `m` starts "warning: ", else info (notes and progress).
void run_message(std::string_view name, std::string_view m);

// A copy of every message from its construction to its destruction (or text()), for a log file: one line
// each, "<UTC time> <level> <text>". One Record at a time.
class Record {
 public:
  Record();
  ~Record();
  Record(const Record&) = delete;
  Record& operator=(const Record&) = delete;
  // What was recorded so far.
  std::string text() const;

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::sink> sink_;
};

}  // namespace trnsim::log
