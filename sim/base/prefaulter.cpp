#include "sim/base/prefaulter.h"

#include <system_error>

#include "sim/base/prefault.h"

namespace trnsim {

Prefaulter::~Prefaulter() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Prefaulter::request(void* begin, size_t bytes) {
  if (bytes == 0) return;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(m_);
    if (!failed_ && !thread_.joinable()) {
      try {
        thread_ = std::thread([this] { loop(); });
      } catch (const std::system_error&) {
        failed_ = true;
      }
    }
    if (!failed_) {
      queue_.emplace_back(begin, bytes);
      queued = true;
    }
  }
  if (queued)
    cv_.notify_all();
  else
    prefault(begin, bytes);
}

void Prefaulter::drain() {
  std::unique_lock<std::mutex> lock(m_);
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void Prefaulter::loop() {
  std::unique_lock<std::mutex> lock(m_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const auto [begin, bytes] = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    prefault(begin, bytes);
    lock.lock();
    busy_ = false;
    cv_.notify_all();  // drain() waits for this
  }
}

}  // namespace trnsim
