// prefault() on a thread of its own: the thread that asked goes on (writing the memory before the ranges it
// handed over) while the OS maps the next ones on the other core (the builder's instruction streams:
// docs/architecture.md, "Host memory").
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace trnsim {

class Prefaulter {
 public:
  Prefaulter() = default;
  ~Prefaulter();  // drops the ranges not started, waits for the one being mapped
  Prefaulter(const Prefaulter&) = delete;
  Prefaulter& operator=(const Prefaulter&) = delete;

  // Queues [begin, begin + bytes) (the thread starts with the first request). Where no thread can be
  // started, maps it now.
  void request(void* begin, size_t bytes);
  // Returns once every range handed over so far is mapped: call it before the memory they lie in is freed.
  void drain();

 private:
  void loop();

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::pair<void*, size_t>> queue_;
  bool busy_ = false;  // the thread is mapping a range it took off the queue
  bool stop_ = false;
  bool failed_ = false;  // the thread could not be started: map in the caller
  std::thread thread_;
};

}  // namespace trnsim
