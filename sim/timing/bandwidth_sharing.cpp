#include "sim/timing/bandwidth_sharing.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>

namespace trnsim::timing {

BandwidthSharing::BandwidthSharing(std::vector<double> capacities) : capacity_(std::move(capacities)) {}

void BandwidthSharing::set_capacity(int resource, double capacity) {
  if (next_id_ != 1) throw std::logic_error("BandwidthSharing::set_capacity after the first flow");
  capacity_.at(resource) = capacity;
  memo_.clear();
}

template <class Word>
size_t BandwidthSharing::KeyHash::operator()(const std::vector<Word>& key) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ key.size();
  for (const uint64_t w : key) h = (h ^ w) * 0x100000001B3ull + (h >> 29);
  return static_cast<size_t>(h ^ (h >> 32));
}

uint32_t BandwidthSharing::kind_of(double cap, const Uses& uses) {
  RecentKind k;
  const bool small = uses.size() <= 2;
  if (small) {
    k.cap = std::bit_cast<uint64_t>(cap);
    k.n = static_cast<uint32_t>(uses.size());
    for (size_t i = 0; i < uses.size(); ++i) {
      k.resource[i] = uses[i].resource;
      k.per_byte[i] = std::bit_cast<uint64_t>(uses[i].per_byte);
    }
    for (const RecentKind& r : recent_kinds_)
      if (r.n == k.n && r.cap == k.cap && r.resource == k.resource && r.per_byte == k.per_byte) return r.kind;
  }
  k.kind = kind_of_slow(cap, uses);
  if (small) {
    recent_kinds_[recent_next_] = k;
    recent_next_ = (recent_next_ + 1) % kRecentKinds;
  }
  return k.kind;
}

uint32_t BandwidthSharing::kind_of_slow(double cap, const Uses& uses) {
  kind_key_.clear();
  kind_key_.push_back(std::bit_cast<uint64_t>(cap));
  kind_key_.push_back(uses.size());
  for (const Use& u : uses) {
    kind_key_.push_back(static_cast<uint64_t>(u.resource));
    kind_key_.push_back(std::bit_cast<uint64_t>(u.per_byte));
  }
  if (const auto hit = kinds_.find(kind_key_); hit != kinds_.end()) return hit->second;
  const auto kind = static_cast<uint32_t>(kinds_.size());
  kinds_.emplace(kind_key_, kind);
  return kind;
}

uint64_t BandwidthSharing::add(double bytes, double cap, const Uses& uses, double now) {
  advance(now);
  if (kinds_.size() >= kKinds) {
    // Number the kinds afresh, the live flows' first; the memo's keys held the old numbers.
    kinds_.clear();
    memo_.clear();
    recent_kinds_.fill(RecentKind{});
    for (Flow& f : flows_) f.kind = kind_of(f.cap, f.uses);
  }
  uint64_t id = next_id_++;
  flows_.push_back({id, bytes, cap, 0.0, uses, kind_of(cap, uses)});
  stale_ = true;
  return id;
}

void BandwidthSharing::advance(double now) {
  if (now <= now_) return;
  settle();
  const double dt = now - now_;
  for (auto& f : flows_) f.remaining = std::max(0.0, f.remaining - f.rate * dt);
  now_ = now;
}

const std::vector<uint64_t>& BandwidthSharing::take_finished(double now) {
  advance(now);
  settle();
  std::vector<uint64_t>& done = done_;
  done.clear();
  // Completion times are rounded up to whole ps, so anything within one ps of work is finished.
  auto finished = [&](const Flow& f) { return f.remaining <= f.rate * 1.0 + 1e-9; };
  for (const auto& f : flows_)
    if (finished(f)) done.push_back(f.id);
  if (!done.empty()) {
    flows_.erase(std::remove_if(flows_.begin(), flows_.end(), finished), flows_.end());
    stale_ = true;
  }
  return done;
}

double BandwidthSharing::next_finish() const {
  settle();
  double best = -1;
  for (const auto& f : flows_) {
    if (f.rate <= 0) continue;
    double t = now_ + f.remaining / f.rate;
    if (best < 0 || t < best) best = t;
  }
  return best;
}

double BandwidthSharing::finish_time(uint64_t id) const {
  settle();
  for (const auto& f : flows_)
    if (f.id == id) return f.rate > 0 ? now_ + f.remaining / f.rate : -1;
  return -1;
}

double BandwidthSharing::rate(uint64_t id) const {
  settle();
  for (const auto& f : flows_)
    if (f.id == id) return f.rate;
  return 0;
}

double BandwidthSharing::load(int resource) const {
  settle();
  double sum = 0;
  for (const auto& f : flows_)
    for (const auto& u : f.uses)
      if (u.resource == resource) sum += f.rate * u.per_byte;
  return sum;
}

void BandwidthSharing::recompute() const {
  stale_ = false;
  key_.clear();
  for (const Flow& f : flows_) key_.push_back(f.kind);
  if (const auto hit = memo_.find(key_); hit != memo_.end()) {
    const std::vector<double>& rates = hit->second;
    for (size_t i = 0; i < flows_.size(); ++i) flows_[i].rate = rates[i];
    return;
  }
  fill_rates();
  if (memo_.size() >= kMemoEntries) memo_.clear();
  std::vector<double> rates(flows_.size());
  for (size_t i = 0; i < flows_.size(); ++i) rates[i] = flows_[i].rate;
  memo_.emplace(key_, std::move(rates));
}

void BandwidthSharing::fill_rates() const {
  const size_t nr = capacity_.size();
  const size_t nf = flows_.size();
  // The working arrays are members, sized here once per call and filled by plain loops: a DMA-heavy run
  // recomputes per transfer, and clearing them through assign() per round cost more than the arithmetic.
  Scratch& s = scratch_;
  s.used.resize(nr);
  s.weight.resize(nr);
  s.saturated.resize(nr);
  s.frozen.resize(nf);
  double* const used = s.used.data();  // capacity taken by frozen flows
  double* const weight = s.weight.data();
  char* const saturated = s.saturated.data();
  char* const frozen = s.frozen.data();
  const double* const capacity = capacity_.data();
  Flow* const flows = flows_.data();
  for (size_t r = 0; r < nr; ++r) used[r] = 0.0;
  for (size_t i = 0; i < nf; ++i) frozen[i] = 0;
  size_t left = nf;
  double level = 0;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  while (left > 0) {
    // Weight of the unfrozen flows on each resource and their smallest headroom to a cap: one pass over the
    // flows, each figure accumulated in flow order.
    for (size_t r = 0; r < nr; ++r) weight[r] = 0.0;
    double step = kInf;
    for (size_t i = 0; i < nf; ++i)
      if (!frozen[i]) {
        for (const auto& u : flows[i].uses) weight[u.resource] += u.per_byte;
        step = std::min(step, flows[i].cap - level);
      }
    for (size_t r = 0; r < nr; ++r)
      if (weight[r] > 0) step = std::min(step, (capacity[r] - used[r] - level * weight[r]) / weight[r]);
    step = std::max(0.0, step);
    level += step;
    // Freeze flows at their cap and flows on saturated resources.
    for (size_t r = 0; r < nr; ++r)
      saturated[r] = weight[r] > 0 && capacity[r] - used[r] - level * weight[r] <= 1e-12 * capacity[r];
    size_t before = left;
    for (size_t i = 0; i < nf; ++i) {
      if (frozen[i]) continue;
      Flow& f = flows[i];
      bool stop = f.cap - level <= 1e-12 * f.cap;
      for (const auto& u : f.uses) stop |= saturated[u.resource] != 0;
      if (stop) {
        frozen[i] = 1;
        --left;
        f.rate = level;
        for (const auto& u : f.uses) used[u.resource] += level * u.per_byte;
      }
    }
    if (left == before) {  // numerical corner: freeze everything at the current level
      for (size_t i = 0; i < nf; ++i)
        if (!frozen[i]) {
          frozen[i] = 1;
          flows[i].rate = level;
        }
      left = 0;
    }
  }
}

}  // namespace trnsim::timing
