// trnsim command line: one subcommand per file, registered here.
#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <system_error>
#include <thread>

#include "kernels/ref/blas_threads.h"
#include "sim/base/address_limit.h"
#include "sim/base/error.h"
#include "sim/base/interrupt.h"
#include "sim/base/log.h"
#include "sim/io/output_files.h"
#include "tools/trnsim/commands.h"
#ifdef TRNSIM_WITH_PYTHON
#include "python/src/embed.h"
#endif

namespace {

int run_cli(int argc, char** argv);

// Every thread's stack: 8 MiB, whatever RLIMIT_STACK says (`ulimit -s 80` would otherwise give each thread
// 80 KiB, too little for the references). The command itself runs on such a thread too, not on the main
// thread, whose stack RLIMIT_STACK bounds.
constexpr size_t kThreadStackBytes = size_t{8} << 20;

}  // namespace

int main(int argc, char** argv) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) == 0) {
    if (pthread_attr_setstacksize(&attr, kThreadStackBytes) == 0) pthread_setattr_default_np(&attr);
    pthread_attr_destroy(&attr);
  }
  int rc = 2;
  try {
    std::thread cli([&] { rc = run_cli(argc, argv); });
    cli.join();
  } catch (const std::system_error& e) {  // no thread could be started (a process limit): run here
    rc = run_cli(argc, argv);
  }
  return rc;
}

namespace {

// Whether what the command printed reached stdout: a write that failed into a file or device (a full disk,
// ulimit -f, /dev/full) loses the result of `stats`, `list` or `validate` and is an error; a pipe whose
// reader left (`| head`) or a closed stdout is not.
bool stdout_intact() {
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!failed) return true;
  const int err = errno;
  struct stat st {};
  if (::fstat(STDOUT_FILENO, &st) != 0 || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) return true;
  trnsim::log::error(std::string("cannot write to stdout: ") + (err ? std::strerror(err) : "a write failed"));
  return false;
}

// A CPU-time limit whose soft and hard values are equal (`ulimit -t N`) ends the process with SIGKILL, no
// message and nothing cleaned up: the soft limit is lowered by one second so that SIGXCPU, which the
// handlers name and clean up after, comes first.
void soft_cpu_limit_first() {
  rlimit cpu{};
  if (getrlimit(RLIMIT_CPU, &cpu) != 0 || cpu.rlim_cur == RLIM_INFINITY || cpu.rlim_cur != cpu.rlim_max ||
      cpu.rlim_max < 2)
    return;
  cpu.rlim_cur = cpu.rlim_max - 1;
  setrlimit(RLIMIT_CPU, &cpu);
}

int run_cli(int argc, char** argv) {
  trnsim::interrupt::install_handlers();
  soft_cpu_limit_first();
  // Large host buffers (the references' per-expert operands, instruction scratch) are allocated and freed
  // many times. Kept in the heap instead of mapped and unmapped each time, a reuse does not fault in fresh
  // pages again (a large share of the system time, in a VM especially). Peak memory is unchanged. Not under
  // an address-space limit (ulimit -v), where 64 MiB steps of heap could exceed a small limit.
  if (!trnsim::address_space_limit()) {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    mallopt(M_TOP_PAD, 64 << 20);
  }
  trnsim::ref::one_blas_thread_under_address_limit(argv);
  // Most runs compute no host reference: OpenBLAS's idle threads need not spin meanwhile.
  trnsim::ref::park_blas_threads();
#ifdef TRNSIM_WITH_PYTHON
  trnsim::py::register_embedded_loader();
#endif
  CLI::App app{"trnsim: a cycle-approximate simulator of AWS Trainium (Trn2, Trn3)"};
  app.require_subcommand(1);

  // One line per command; append yours.
  trnsim::cli::add_quantize_command(app);
  trnsim::cli::add_run_command(app);
  trnsim::cli::add_list_command(app);
  trnsim::cli::add_validate_command(app);
  trnsim::cli::add_stats_command(app);
  trnsim::cli::add_sweep_command(app);
  trnsim::cli::add_tune_command(app);

  // The command, as the records of the files it writes name it (the first word that is no option).
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-') {
      trnsim::io::set_writer_command(std::string(argv[i]) == "summary" ? "stats" : argv[i]);
      break;
    }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {  // a command's own exit code (e.g. 3: numerics failed)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {  // bad command line: exit 1 like any other bad input
    if (e.get_exit_code() == 0) return app.exit(e);
    trnsim::log::error(std::string(e.what()) +
                       "\nRun 'trnsim --help' or 'trnsim COMMAND --help' for the options.");
    return 1;
  } catch (const trnsim::Interrupted& e) {
    trnsim::log::say(spdlog::level::err, std::string("trnsim: ") + e.what());
    trnsim::interrupt::exit_now();
  } catch (const trnsim::Error& e) {
    trnsim::log::error(e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    trnsim::log::error("out of memory");
    return 1;
  } catch (const std::exception& e) {  // a bug, not bad input: still a message and an exit code, not an abort
    trnsim::log::say(spdlog::level::err, std::string("trnsim: internal error: ") + e.what());
    return 2;
  }
  return stdout_intact() ? 0 : 1;
}

}  // namespace
