#include "tools/sweep/progress.h"

#include <unistd.h>

#include <fmt/format.h>

#include <cstdio>

#include "sim/base/log.h"

namespace trnsim::sweep {

using Clock = std::chrono::steady_clock;

Progress::Progress(size_t total, std::string what)
    : total_(total), what_(std::move(what)), tty_(isatty(STDERR_FILENO) != 0), start_(Clock::now()) {}

void Progress::update(size_t done, size_t ran, size_t ok, size_t invalid, size_t failed, size_t kept,
                      bool force) {
  if (log::level() > spdlog::level::info) return;  // --quiet
  const auto now = Clock::now();
  const size_t decile = total_ ? done * 10 / total_ : 10;
  if (!force) {
    if (tty_ && now - last_ < std::chrono::milliseconds(100)) return;
    if (!tty_ && decile == last_decile_ && now - last_ < std::chrono::seconds(30)) return;
  }
  last_ = now;
  last_decile_ = decile;
  const double el = std::chrono::duration<double>(now - start_).count();
  const size_t left = total_ > done ? total_ - done : 0;
  std::string eta = "ETA -";
  if (ran > 0 && done > kept + invalid)
    eta = fmt::format("ETA {:.0f} s", el / static_cast<double>(ran) * left);
  if (left == 0) eta = "done";
  constexpr int kWidth = 24;
  const int fill = total_ ? static_cast<int>(kWidth * done / total_) : kWidth;
  const std::string bar = std::string(fill, '#') + std::string(kWidth - fill, '.');
  const std::string line = fmt::format("[{}] {}/{} {}: {} ok, {} invalid, {} failed, {} kept | {:.1f} s, {}",
                                       bar, done, total_, what_, ok, invalid, failed, kept, el, eta);
  if (tty_) {  // redrawn in place: not a line of the log
    std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
    std::fflush(stderr);
    drawn_ = true;
  } else {
    log::say(spdlog::level::info, line);
  }
}

void Progress::finish() {
  if (tty_ && drawn_) std::fputc('\n', stderr);
  drawn_ = false;
}

}  // namespace trnsim::sweep
