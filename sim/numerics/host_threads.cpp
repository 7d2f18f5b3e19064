#include "sim/numerics/host_threads.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace trnsim::num {
namespace {

// Parts 1 .. n-1 of one split at a time; each helper waits for a new split, runs its part, reports back.
class Helpers {
 public:
  ~Helpers() {
    {
      std::lock_guard<std::mutex> g(m_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // False (nothing run) when another caller is using the helpers.
  bool run(int n, const std::function<void(int)>& f, std::vector<std::exception_ptr>& errors) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> g(m_);
      while (static_cast<int>(threads_.size()) < n - 1) {
        const int id = static_cast<int>(threads_.size()) + 1;
        threads_.emplace_back([this, id] { loop(id); });
      }
      job_ = &f;
      errors_ = &errors;
      n_ = n;
      pending_ = n - 1;
      ++generation_;
    }
    wake_.notify_all();
    try {
      f(0);
    } catch (...) {
      errors[0] = std::current_exception();
    }
    std::unique_lock<std::mutex> g(m_);
    done_.wait(g, [&] { return pending_ == 0; });
    job_ = nullptr;
    errors_ = nullptr;
    return true;
  }

 private:
  void loop(int id) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> g(m_);
    for (;;) {
      wake_.wait(g, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (id >= n_) continue;
      const std::function<void(int)>* f = job_;
      std::exception_ptr* error = &(*errors_)[id];
      g.unlock();
      try {
        (*f)(id);
      } catch (...) {
        *error = std::current_exception();
      }
      g.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex busy_, m_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;
  std::vector<std::exception_ptr>* errors_ = nullptr;
  int n_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace

int host_split_threads() {
  static const int n = std::thread::hardware_concurrency() >= 2 ? 2 : 1;
  return n;
}

void run_parts(int n, const std::function<void(int)>& f) {
  if (n <= 0) return;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  const auto part = [&](int t) {
    try {
      f(t);
    } catch (...) {
      errors[static_cast<size_t>(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(n - 1));
  int started = 1;  // parts 1 .. started-1 have threads
  for (int t = 1; t < n; ++t) {
    try {
      pool.emplace_back(part, t);
    } catch (const std::system_error&) {
      break;  // no more threads: the rest run here
    }
    started = t + 1;
  }
  part(0);
  for (int t = started; t < n; ++t) part(t);
  for (auto& th : pool) th.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

void host_split(int n, const std::function<void(int)>& f) {
  if (n <= 1) {
    if (n == 1) f(0);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  static Helpers helpers;
  bool ran = false;
  try {
    ran = helpers.run(n, f, errors);
  } catch (const std::system_error&) {  // a helper thread could not be started
  }
  if (!ran) return run_parts(n, f);
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace trnsim::num
