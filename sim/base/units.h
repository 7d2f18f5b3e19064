// Strong types for time (gem5 style): engine cycles and picoseconds never mix by accident.
// Costs are computed in an engine's own cycles and converted to picoseconds once, at the module boundary.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>

namespace trnsim {

// A count of cycles of one engine's clock.
class Cycles {
 public:
  constexpr Cycles() = default;
  constexpr explicit Cycles(uint64_t n) : n_(n) {}
  constexpr uint64_t count() const { return n_; }
  constexpr Cycles operator+(Cycles o) const { return Cycles(n_ + o.n_); }
  constexpr Cycles& operator+=(Cycles o) {
    n_ += o.n_;
    return *this;
  }
  constexpr auto operator<=>(const Cycles&) const = default;

 private:
  uint64_t n_ = 0;
};

// Simulated time in picoseconds (the SystemC time resolution trnsim uses).
class Picoseconds {
 public:
  constexpr Picoseconds() = default;
  constexpr explicit Picoseconds(uint64_t ps) : ps_(ps) {}
  constexpr uint64_t count() const { return ps_; }
  constexpr double ns() const { return static_cast<double>(ps_) / 1000.0; }
  constexpr Picoseconds operator+(Picoseconds o) const { return Picoseconds(ps_ + o.ps_); }
  constexpr Picoseconds& operator+=(Picoseconds o) {
    ps_ += o.ps_;
    return *this;
  }
  constexpr auto operator<=>(const Picoseconds&) const = default;

 private:
  uint64_t ps_ = 0;
};

// One engine clock. to_time rounds up to the next whole picosecond, so a cost is never shortened.
class ClockDomain {
 public:
  constexpr ClockDomain() = default;
  explicit ClockDomain(double ghz) : ghz_(ghz), period_ps_(1000.0 / ghz) {}
  double ghz() const { return ghz_; }
  double period_ps() const { return period_ps_; }
  Picoseconds to_time(Cycles c) const {
    return Picoseconds(static_cast<uint64_t>(std::ceil(static_cast<double>(c.count()) * period_ps_ - 1e-9)));
  }

 private:
  double ghz_ = 1.0;
  double period_ps_ = 1000.0;
};

}  // namespace trnsim
