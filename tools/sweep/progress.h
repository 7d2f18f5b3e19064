// The progress line of a sweep on stderr: a bar, the counts, elapsed time and ETA. On a terminal it is
// redrawn in place (at most 10 times a second); otherwise a line (an info message, sim/base/log.h) is printed
// every 10 % or 30 s. Nothing when the messages' level is above info (--quiet).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace trnsim::sweep {

class Progress {
 public:
  explicit Progress(size_t total, std::string what = "points");
  // Counts so far: `done` of `total` resolved, of which `ran` were simulated in this process.
  void update(size_t done, size_t ran, size_t ok, size_t invalid, size_t failed, size_t kept,
              bool force = false);
  void finish();

 private:
  size_t total_;
  std::string what_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_;
  size_t last_decile_ = 0;
  bool drawn_ = false;
};

}  // namespace trnsim::sweep
