// One simulation at a time per process: SystemC's kernel is process-wide, so runs started from several Python
// threads take turns (a crash or a hang before). Taken after the GIL is released, so the running simulation
// can still call into Python (tracing a kernel, a progress callback) while the others wait.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>

#include "sim/base/error.h"

namespace trnsim::py {

class RunTurn {
 public:
  RunTurn() {
    // A run started from inside a run (a kernel or reference calling simulate_kernel) would wait for itself.
    if (owner().load() == std::this_thread::get_id())
      throw InputError("a simulation cannot start another: trnsim runs one at a time per process");
    mutex().lock();
    owner().store(std::this_thread::get_id());
  }
  ~RunTurn() {
    owner().store(std::thread::id{});
    mutex().unlock();
  }
  RunTurn(const RunTurn&) = delete;
  RunTurn& operator=(const RunTurn&) = delete;

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::atomic<std::thread::id>& owner() {
    static std::atomic<std::thread::id> id;
    return id;
  }
};

}  // namespace trnsim::py
