// trnsim command line: one subcommand per file, registered here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "sim/base/error.h"

int main(int argc, char** argv) {
  CLI::App app{"trnsim: a cycle-approximate simulator of AWS Trainium (Trn2, Trn3)"};
  app.require_subcommand(1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const trnsim::Error& e) {
    std::fprintf(stderr, "trnsim: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
