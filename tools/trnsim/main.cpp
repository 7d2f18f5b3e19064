// trnsim command line: one subcommand per file, registered here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "sim/base/error.h"
#include "tools/trnsim/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"trnsim: a cycle-approximate simulator of AWS Trainium (Trn2, Trn3)"};
  app.require_subcommand(1);

  // One line per command; append yours.
  trnsim::cli::add_quantize_command(app);
  trnsim::cli::add_run_command(app);
  trnsim::cli::add_list_command(app);
  trnsim::cli::add_validate_command(app);
  trnsim::cli::add_stats_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const trnsim::Error& e) {
    std::fprintf(stderr, "trnsim: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "trnsim: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {  // a bug, not bad input: still a message and an exit code, not an abort
    std::fprintf(stderr, "trnsim: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
