// A FIFO in a ring buffer that grows by doubling and never shrinks: for queues whose elements are larger
// than a std::deque block holds several of (std::deque would then allocate and free one block per element).
// The interface is the subset of std::deque's the project uses.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace trnsim {

template <class T>
class RingQueue {
 public:
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  void pop_front() {
    head_ = (head_ + 1) & (buf_.size() - 1);
    --count_;
  }
  void push_back(T&& v) {
    if (count_ == buf_.size()) grow();
    buf_[(head_ + count_) & (buf_.size() - 1)] = std::move(v);
    ++count_;
  }

 private:
  void grow() {
    std::vector<T> bigger(std::max<size_t>(8, 2 * buf_.size()));
    for (size_t i = 0; i < count_; ++i) bigger[i] = std::move(buf_[(head_ + i) & (buf_.size() - 1)]);
    buf_.swap(bigger);
    head_ = 0;
  }
  std::vector<T> buf_;  // a power-of-two size
  size_t head_ = 0, count_ = 0;
};

}  // namespace trnsim
