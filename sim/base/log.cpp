#include "sim/base/log.h"

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string_view>
#include <utility>

#include "sim/base/error.h"
#include "sim/base/interrupt.h"

namespace trnsim::log {

namespace {

using spdlog::level::level_enum;

struct State {
  std::shared_ptr<spdlog::sinks::stderr_sink_mt> console = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  std::shared_ptr<spdlog::logger> logger;
  std::mutex mutex;        // the fields below
  bool recording = false;  // a Record is attached
  level_enum console_level = level_enum::info;

  State() {
    console->set_pattern("%v");
    console->set_level(console_level);
    logger = std::make_shared<spdlog::logger>("trnsim", console);
    logger->set_level(console_level);
    logger->flush_on(level_enum::trace);  // the console sink flushes each line
  }
  // The logger passes what any sink takes: the console's level, and debug (or trace) for a Record.
  void relevel() {
    logger->set_level(recording ? std::min(console_level, level_enum::debug) : console_level);
  }
};

State& state() {
  static State s;
  return s;
}

// A Record's message: its text less the level word the text names when it is the line's level ("trnsim:
// debug: x" at debug, "trnsim: w: warning: x" at warn), so that "<time> <level> <message>" names the level
// once. Notes keep "note:" (info is their level, "note" their kind).
class TextOnce : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    const std::string_view word = msg.level == level_enum::debug  ? "debug: "
                                  : msg.level == level_enum::warn ? "warning: "
                                  : msg.level == level_enum::err  ? "error: "
                                                                  : "";
    constexpr std::string_view kTrnsim = "trnsim: ";
    size_t at = std::string_view::npos;
    if (!word.empty() && text.starts_with(kTrnsim)) {
      // Right after "trnsim: ", or after a run's name there ("trnsim: NAME: warning: ...").
      const size_t name_end = text.find(": ", kTrnsim.size());
      if (text.substr(kTrnsim.size()).starts_with(word))
        at = kTrnsim.size();
      else if (name_end != std::string_view::npos &&
               text.substr(kTrnsim.size(), name_end - kTrnsim.size()).find(' ') == std::string_view::npos &&
               text.substr(name_end + 2).starts_with(word))
        at = name_end + 2;
    }
    if (at != std::string_view::npos) {
      dest.append(text.data(), text.data() + at);
      text.remove_prefix(at + word.size());
    }
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<TextOnce>(); }
};

}  // namespace

spdlog::logger& get() {
  return *state().logger;
}

void set_level(level_enum l) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.console_level = l;
  s.console->set_level(l);
  s.relevel();
  interrupt::set_messages(l <= level_enum::warn, l <= level_enum::err);
}

level_enum level() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.console_level;
}

level_enum parse_level(const std::string& name) {
  // Our names, not spdlog's (its own spell warn "warning" and error "error" or "err", by version).
  static const std::pair<std::string_view, level_enum> kNames[] = {
      {"trace", level_enum::trace}, {"debug", level_enum::debug}, {"info", level_enum::info},
      {"warn", level_enum::warn},   {"error", level_enum::err},   {"off", level_enum::off}};
  for (const auto& [n, l] : kNames)
    if (name == n) return l;
  throw InputError(fmt::format("--log-level '{}': expected trace, debug, info, warn, error or off", name));
}

void say(level_enum l, std::string_view text) {
  get().log(l, "{}", text);
}

void error(std::string_view m) {
  get().error("trnsim: error: {}", m);
}

void warning(std::string_view m) {
  get().warn("trnsim: warning: {}", m);
}

void note(std::string_view m) {
  get().info("trnsim: note: {}", m);
}

void info(std::string_view m) {
  get().info("trnsim: {}", m);
}

void debug(std::string_view m) {
  get().debug("trnsim: debug: {}", m);
}

void run_message(std::string_view name, std::string_view m) {
  get().log(m.starts_with("warning: ") ? level_enum::warn : level_enum::info, "trnsim: {}: {}", name, m);
}

Record::Record() {
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<TextOnce>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %*");
  sink->set_formatter(std::move(formatter));
  sink->set_level(level_enum::trace);
  sink_ = sink;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.logger->sinks().push_back(sink_);
  s.recording = true;
  s.relevel();
}

Record::~Record() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto& sinks = s.logger->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  s.recording = false;
  s.relevel();
}

std::string Record::text() const {
  sink_->flush();
  return out_.str();
}

}  // namespace trnsim::log
