// A vector of trivially copyable values that keeps up to N of them inline and moves to the heap beyond.
// For the short per-instruction lists (an instruction's semaphore waits and updates, a view's dims): a build
// of a large kernel makes millions of them, and std::vector's heap allocation per list was a tenth of the
// program build's host time. The interface is the subset of std::vector's the project uses.
// `Size` counts the values: uint16_t where the lists are short and the object's bytes count (an instruction's
// semaphore lists: a large program holds millions of instructions); at most its maximum values then.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace trnsim {

template <class T, uint32_t N, class Size = uint32_t>
class SmallVector {
  static_assert(N >= 1 && N <= std::numeric_limits<Size>::max() && std::is_unsigned_v<Size>);
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "SmallVector holds trivially copyable values only");

 public:
  using value_type = T;
  using size_type = size_t;
  using reference = T&;
  using const_reference = const T&;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() {}  // user-provided: a const object of a class holding one needs no initializer
  SmallVector(std::initializer_list<T> values) { assign(values.begin(), values.end()); }
  template <std::input_iterator It>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  SmallVector(const std::vector<T>& values) { assign(values.begin(), values.end()); }  // NOLINT: implicit
  SmallVector(const SmallVector& o) { copy_from(o); }
  SmallVector(SmallVector&& o) noexcept { take(o); }
  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) copy_from(o);
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~SmallVector() { release(); }

  operator std::vector<T>() const { return std::vector<T>(begin(), end()); }  // NOLINT: implicit

  static constexpr size_t max_size() { return std::numeric_limits<Size>::max(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  T* data() { return cap_ > N ? heap() : inline_data(); }
  const T* data() const { return cap_ > N ? heap() : inline_data(); }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& at(size_t i) {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data()[i];
  }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data()[i];
  }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  void push_back(const T& v) {
    if (size_ == cap_) {
      const T copy = v;                       // v may live in this vector
      const size_t twice = size_t{cap_} * 2;  // at most max_size(); one past it when full (grow's error)
      grow(cap_ < max_size() ? std::min(twice, max_size()) : twice);
      data()[size_++] = copy;
      return;
    }
    data()[size_++] = v;
  }
  template <class... A>
  T& emplace_back(A&&... args) {
    push_back(T{std::forward<A>(args)...});
    return back();
  }
  void pop_back() { --size_; }
  void resize(size_t n, const T& v = T{}) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = v;
    size_ = static_cast<Size>(n);
  }
  void assign(size_t n, const T& v) {
    clear();
    resize(n, v);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(*first);
  }
  T* insert(const T* pos, const T& v) {
    const size_t at = static_cast<size_t>(pos - begin());
    push_back(v);
    T* d = data();
    std::rotate(d + at, d + size_ - 1, d + size_);
    return d + at;
  }
  T* erase(const T* first, const T* last) {
    T* d = data();
    const size_t a = static_cast<size_t>(first - d), b = static_cast<size_t>(last - d);
    std::copy(d + b, d + size_, d + a);
    size_ -= static_cast<Size>(b - a);
    return d + a;
  }
  T* erase(const T* pos) { return erase(pos, pos + 1); }

 private:
  static constexpr size_t kBytes = N * sizeof(T) > sizeof(T*) ? N * sizeof(T) : sizeof(T*);
  // The heap pointer is copied in and out of buf_ (memcpy), so buf_ needs T's alignment only: with a 16-bit
  // Size and a 4-byte aligned T the whole vector packs to 4 bytes more than its inline values.
  static constexpr size_t kAlign = alignof(T);

  T* inline_data() { return std::launder(reinterpret_cast<T*>(buf_)); }
  const T* inline_data() const { return std::launder(reinterpret_cast<const T*>(buf_)); }
  T* heap() const {
    T* p;
    std::memcpy(&p, buf_, sizeof p);
    return p;
  }
  void set_heap(T* p) { std::memcpy(buf_, &p, sizeof p); }
  void grow(size_t n) {
    if (n > max_size())
      throw std::length_error("SmallVector: more than " + std::to_string(max_size()) + " values");
    T* p = static_cast<T*>(std::malloc(n * sizeof(T)));
    if (p == nullptr) throw std::bad_alloc();
    if (size_ > 0) std::memcpy(static_cast<void*>(p), static_cast<const void*>(data()), size_ * sizeof(T));
    release();
    set_heap(p);
    cap_ = static_cast<Size>(n);
  }
  void release() {
    if (cap_ > N) std::free(heap());
    cap_ = N;
  }
  void copy_from(const SmallVector& o) {
    size_ = 0;
    reserve(o.size_);
    if (o.size_ > 0)
      std::memcpy(static_cast<void*>(data()), static_cast<const void*>(o.data()), o.size_ * sizeof(T));
    size_ = o.size_;
  }
  void take(SmallVector& o) {  // this holds nothing on the heap
    if (o.cap_ > N)
      set_heap(o.heap());
    else if (o.size_ > 0)
      std::memcpy(buf_, o.buf_, o.size_ * sizeof(T));
    size_ = o.size_;
    cap_ = o.cap_;
    o.size_ = 0;
    o.cap_ = N;
  }

  Size size_ = 0;
  Size cap_ = N;  // > N: the values are on the heap, buf_ holds the pointer
  alignas(kAlign) unsigned char buf_[kBytes];
};

}  // namespace trnsim
