// The signal handler of sim/base/interrupt.h, in a forked child so the test process survives.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "sim/base/interrupt.h"

namespace fs = std::filesystem;
using trnsim::interrupt::CleanupPath;

namespace {

// Runs `child` in a fork and returns its wait status. The child starts with the signals at their defaults, as
// a process started from a terminal has them (a background job of a script starts with SIGINT ignored,
// which the handlers keep ignored).
template <class F>
int in_child(F child) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGXCPU}) std::signal(sig, SIG_DFL);
    child();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("trnsim_interrupt_" + std::to_string(::getpid()) + name);
  fs::remove_all(d);
  return d;
}

}  // namespace

TEST_CASE("a signal outside a cooperative section removes the registered paths and kills", "[interrupt]") {
  const fs::path dir = scratch("a");
  const int status = in_child([&] {
    trnsim::interrupt::install_handlers();
    fs::create_directories(dir / "inner");
    std::fclose(std::fopen((dir / "inner" / "x.tmp").c_str(), "w"));
    std::fclose(std::fopen((dir / "kept.npy").c_str(), "w"));
    // Registered outer folder first: it is not empty until the inner one is gone.
    CleanupPath outer(dir.string(), CleanupPath::Kind::kEmptyFolder);
    CleanupPath inner((dir / "inner").string(), CleanupPath::Kind::kEmptyFolder);
    CleanupPath tmp((dir / "inner" / "x.tmp").string(), CleanupPath::Kind::kFile);
    std::raise(SIGINT);
    ::_exit(7);  // not reached
  });
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGINT);
  CHECK_FALSE(fs::exists(dir / "inner"));
  CHECK(fs::exists(dir / "kept.npy"));  // an unregistered file stays, and so its folder
  fs::remove_all(dir);
}

TEST_CASE("a registration that ended is not cleaned up", "[interrupt]") {
  const fs::path dir = scratch("b");
  const int status = in_child([&] {
    trnsim::interrupt::install_handlers();
    fs::create_directories(dir);
    std::fclose(std::fopen((dir / "out.npy").c_str(), "w"));
    { CleanupPath done((dir / "out.npy").string(), CleanupPath::Kind::kFile); }
    std::raise(SIGTERM);
  });
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(fs::exists(dir / "out.npy"));
  fs::remove_all(dir);
}

TEST_CASE("in a cooperative section the first signal sets the flag, the second kills", "[interrupt]") {
  const fs::path dir = scratch("c");
  const int status = in_child([&] {
    trnsim::interrupt::install_handlers();
    fs::create_directories(dir);
    CleanupPath folder(dir.string(), CleanupPath::Kind::kEmptyFolder);
    trnsim::interrupt::CooperativeSection section;
    if (trnsim::interrupt::requested()) ::_exit(3);
    std::raise(SIGINT);
    if (!trnsim::interrupt::requested() || trnsim::interrupt::signal_number() != SIGINT) ::_exit(4);
    if (!fs::exists(dir)) ::_exit(5);  // nothing removed yet: the run ends itself
    ::usleep(300'000);                 // a second request, not the copy sent to the process group
    std::raise(SIGINT);
    ::_exit(6);  // not reached
  });
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGINT);
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("in a cooperative section a copy of the signal within 0.25 s is the same request", "[interrupt]") {
  // `timeout` sends its signal to the process and again to the process group: both land here at once.
  const int status = in_child([] {
    trnsim::interrupt::install_handlers();
    trnsim::interrupt::CooperativeSection section;
    std::raise(SIGTERM);
    std::raise(SIGTERM);
    if (!trnsim::interrupt::requested() || trnsim::interrupt::signal_number() != SIGTERM) ::_exit(4);
    ::_exit(0);  // still running: the model would stop at its next completion
  });
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("exit_now after a cooperative stop dies of the recorded signal", "[interrupt]") {
  const int status = in_child([] {
    trnsim::interrupt::install_handlers();
    {
      trnsim::interrupt::CooperativeSection section;
      std::raise(SIGTERM);
    }
    trnsim::interrupt::exit_now();
  });
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
}

TEST_CASE("a signal removes every empty level of a nested folder the run created", "[interrupt]") {
  // --out a/b/c/d registers four folders, outermost first: each goes once the one inside it has gone.
  const fs::path dir = scratch("d");
  const int status = in_child([&] {
    trnsim::interrupt::install_handlers();
    std::vector<CleanupPath> levels;
    fs::path p = dir;
    for (const char* level : {"a", "b", "c", "d"}) {
      p /= level;
      levels.emplace_back(p.string(), CleanupPath::Kind::kEmptyFolder);
      fs::create_directory(p.parent_path());
      fs::create_directory(p);
    }
    std::raise(SIGTERM);
    ::_exit(7);  // not reached
  });
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(fs::exists(dir));  // not registered: the folder that was there before
  CHECK_FALSE(fs::exists(dir / "a"));
  fs::remove_all(dir);
}

TEST_CASE("every signal that would end the process is handled; one ignored at the start stays ignored",
          "[interrupt]") {
  const fs::path dir = scratch("sigs");
  for (int sig : {SIGXCPU, SIGUSR1}) {
    const int status = in_child([&] {
      trnsim::interrupt::install_handlers();
      fs::create_directories(dir);
      CleanupPath folder(dir.string(), CleanupPath::Kind::kEmptyFolder);
      std::raise(sig);
      ::_exit(7);  // not reached
    });
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK_FALSE(fs::exists(dir));  // the handler ran: the registered folder is gone
  }
  // nohup: SIGHUP ignored before the handlers are installed stays ignored.
  int status = in_child([] {
    std::signal(SIGHUP, SIG_IGN);
    trnsim::interrupt::install_handlers();
    std::raise(SIGHUP);
    ::_exit(5);
  });
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 5));
  // A closed pipe and a file-size limit do not end the process: the write fails instead.
  status = in_child([] {
    trnsim::interrupt::install_handlers();
    std::raise(SIGPIPE);
    std::raise(SIGXFSZ);
    ::_exit(6);
  });
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 6));
}

TEST_CASE("a signal that lands on another thread is acted on by the main thread", "[interrupt]") {
  // The main thread keeps (re)creating a registered file, as a run creates its temporaries. Were the handler
  // to clean up on the thread the signal landed on, the main thread would go on meanwhile and often create
  // the file again between the cleanup and the end of the process: a temporary left behind.
  const fs::path dir = scratch("t");
  fs::create_directories(dir);
  const std::string file = (dir / ".x.tmp.1.0").string();
  for (int round = 0; round < 20; ++round) {
    const int status = in_child([&] {
      trnsim::interrupt::install_handlers();
      CleanupPath registered(file, CleanupPath::Kind::kFile);
      std::thread other([] { ::pthread_kill(::pthread_self(), SIGTERM); });
      for (;;) {
        const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) ::close(fd);
      }
    });
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGTERM);
    CHECK_FALSE(fs::exists(file));
    fs::remove(file);
  }
  fs::remove_all(dir);
}

TEST_CASE("a read of a registered input mapping past its truncated file exits 1 after the cleanup",
          "[interrupt]") {
  const fs::path dir = scratch("bus");
  fs::create_directories(dir);
  const fs::path input = dir / "in.npy";
  const int status = in_child([&] {
    trnsim::interrupt::install_handlers();
    const int fd = ::open(input.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    const size_t len = 2 * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(len)) != 0) ::_exit(5);
    void* a = ::mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (a == MAP_FAILED) ::_exit(6);
    std::fclose(std::fopen((dir / "x.tmp").c_str(), "w"));
    CleanupPath tmp((dir / "x.tmp").string(), CleanupPath::Kind::kFile);
    trnsim::interrupt::MappedInput mapped(a, len, input.string());
    if (::ftruncate(fd, 0) != 0) ::_exit(7);
    [[maybe_unused]] volatile char c = static_cast<const volatile char*>(a)[len - 1];  // SIGBUS
    ::_exit(8);                                                                        // not reached
  });
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK_FALSE(fs::exists(dir / "x.tmp"));
  fs::remove_all(dir);
}
