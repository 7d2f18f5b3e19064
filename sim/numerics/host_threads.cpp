#include "sim/numerics/host_threads.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace trnsim::num {
namespace {

// Parts of one split at a time. The caller runs part 0, then every part not yet claimed; a helper that wakes
// while parts are left claims them one at a time. The caller waits only for parts a helper has started, so a
// helper the OS has not scheduled yet (a busy host) costs nothing, and parts of uneven cost even out.
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
  bool run(int n, int helpers, const std::function<void(int)>& f, std::vector<std::exception_ptr>& errors) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> g(m_);
      while (static_cast<int>(threads_.size()) < helpers) {
        const int id = static_cast<int>(threads_.size()) + 1;
        threads_.emplace_back([this, id] { loop(id); });
      }
      job_ = &f;
      errors_ = &errors;
      n_ = n;
      helpers_ = helpers;
      next_.store(1, std::memory_order_relaxed);
      open_ = true;
      ++generation_;
    }
    wake_.notify_all();
    run_part(0);
    claim_parts();
    std::unique_lock<std::mutex> g(m_);
    open_ = false;  // helpers waking from now on find nothing to do
    done_.wait(g, [&] { return active_ == 0; });
    job_ = nullptr;
    errors_ = nullptr;
    return true;
  }

 private:
  void run_part(int i) {
    try {
      (*job_)(i);
    } catch (...) {
      (*errors_)[static_cast<size_t>(i)] = std::current_exception();
    }
  }
  void claim_parts() {
    for (int i = next_.fetch_add(1, std::memory_order_relaxed); i < n_;
         i = next_.fetch_add(1, std::memory_order_relaxed))
      run_part(i);
  }

  void loop(int id) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> g(m_);
    for (;;) {
      wake_.wait(g, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (!open_ || id > helpers_) continue;
      ++active_;  // the caller waits for this helper from here on
      g.unlock();
      claim_parts();
      g.lock();
      if (--active_ == 0) done_.notify_one();
    }
  }

  std::mutex busy_, m_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  // The current split (set under m_, read by a helper once it is active, which the caller waits for).
  const std::function<void(int)>* job_ = nullptr;
  std::vector<std::exception_ptr>* errors_ = nullptr;
  int n_ = 0, helpers_ = 0, active_ = 0;
  std::atomic<int> next_{0};  // the next part to claim
  uint64_t generation_ = 0;
  bool open_ = false, stop_ = false;
};

// Runs parts 0 .. n-1 on the helpers (at most `helpers` of them) and the calling thread; run_parts when
// another caller has the helpers or a helper cannot be started.
void split_parts(int n, int helpers, const std::function<void(int)>& f) {
  if (n <= 1) {
    if (n == 1) f(0);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  static Helpers pool;
  bool ran = false;
  try {
    ran = pool.run(n, std::min(helpers, n - 1), f, errors);
  } catch (const std::system_error&) {  // a helper thread could not be started
  }
  if (!ran && helpers + 1 >= n) return run_parts(n, f);
  if (!ran) {  // parts claimed by helpers + 1 threads of this call
    std::atomic<int> next{0};
    run_parts(helpers + 1, [&](int) {
      for (int i = next++; i < n; i = next++) try {
          f(i);
        } catch (...) {
          errors[static_cast<size_t>(i)] = std::current_exception();
        }
    });
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

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
  split_parts(n, n - 1, f);
}

void host_for(int n, const std::function<void(int)>& f) {
  split_parts(n, host_split_threads() - 1, f);
}

}  // namespace trnsim::num
