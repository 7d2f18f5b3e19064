#include "tools/trnsim/run_log.h"

#include <filesystem>

namespace trnsim::cli {

void add_log_options(CLI::App* cmd) {
  CLI::Option* level = cmd->add_option_function<std::string>(
      "--log-level", [](const std::string& name) { log::set_level(log::parse_level(name)); },
      "messages on stderr from this level up: trace, debug, info (default), warn, error or off");
  CLI::Option* quiet = cmd->add_flag_callback(
      "--quiet", [] { log::set_level(spdlog::level::err); }, "errors only on stderr (--log-level error)");
  CLI::Option* verbose = cmd->add_flag_callback(
      "--verbose", [] { log::set_level(spdlog::level::debug); }, "also debug messages (--log-level debug)");
  quiet->excludes(verbose);
  level->excludes(quiet);
  level->excludes(verbose);
}

io::OutputFile run_log_file(const std::string& out_dir, const log::Record& record) {
  const std::string text = record.text();
  return {(std::filesystem::path(out_dir) / log::kFileName).string(),
          std::vector<uint8_t>(text.begin(), text.end())};
}

}  // namespace trnsim::cli
