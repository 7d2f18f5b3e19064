#include "sim/model/semaphores.h"

#include <string>

#include "sim/base/error.h"
#include "sim/model/sc_time.h"
#include "sim/timing/cost_model.h"
#include "sim/timing/time_limit.h"

namespace trnsim::model {

Semaphores::Semaphores(sc_core::sc_module_name name, const config::HwConfig& hw, ModelObserver* observer,
                       Picoseconds limit, std::function<void(std::exception_ptr)> on_error)
    : sc_module(name),
      sync_(hw.sync),
      observer_(observer),
      limit_(limit),
      on_error_(std::move(on_error)),
      latency_(timing::ns_to_ps(sync_.semaphore_latency_ns)),
      peer_latency_(timing::ns_to_ps(sync_.cross_core_latency_ns)) {
  for (int c = 0; c < 2; ++c) {
    value_[c].assign(sync_.semaphores_per_core, 0);
    last_[c].assign(sync_.semaphores_per_core, SemaphoreSource{0, isa::Engine::SP, kNever});
    waiters_[c].assign(sync_.semaphores_per_core, {});
  }
  SC_METHOD(update);
  sensitive << ev_;
  dont_initialize();
}

void Semaphores::apply(int core, uint16_t sem, int32_t delta, const SemaphoreSource& src) {
  int64_t& v = value_[core][sem];
  v += delta;
  last_[core][sem] = src;
  if (observer_) {
    observer_->on_semaphore(core, sem, v, now_ps());
    observer_->on_semaphore_update(core, sem, v - delta, v, now_ps(), src);
  }
  // Wakes, in registration order, the waiters whose value is reached; the others stay registered.
  auto& w = waiters_[core][sem];
  size_t kept = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (v >= w[i].value)
      w[i].wake->notify();
    else
      w[kept++] = w[i];
  }
  w.resize(kept);
}

void Semaphores::signal(int core, uint16_t sem, int32_t delta, Picoseconds at, const SemaphoreSource& src) {
  if (sem >= value_[core].size())
    throw RuleError("semaphore update of S[" + std::to_string(sem) + "] out of range (the core has " +
                    std::to_string(value_[core].size()) + " semaphores)");
  const Picoseconds now = now_ps();
  if (at <= now) {
    apply(core, sem, delta, src);
    return;
  }
  delayed_.push({at.count(), seq_++, core, sem, delta, src});
  // A pending notification at or before `at` stands (SystemC would discard this one).
  if (at.count() < wake_at_) {
    ev_.notify(to_sc(Picoseconds(at.count() - now.count())));
    wake_at_ = at.count();
  }
}

void Semaphores::post(int core, const isa::SemUpdates& updates, Picoseconds at, const SemaphoreSource& src) {
  for (const auto& u : updates) {
    const int target = u.peer ? 1 - core : core;
    signal(
        target, u.sem, u.delta,
        timing::end_after(at, u.peer ? peer_latency_ : latency_, limit_, "its semaphore update would arrive"),
        src);
  }
}

void Semaphores::update() {
  try {
    const uint64_t now = now_ps().count();
    wake_at_ = kNoWake;  // ev_ fired
    while (!delayed_.empty() && delayed_.top().at <= now) {
      Pending p = delayed_.top();
      delayed_.pop();
      apply(p.core, p.sem, p.delta, p.src);
    }
    if (!delayed_.empty()) {
      ev_.notify(to_sc(Picoseconds(delayed_.top().at - now)));
      wake_at_ = delayed_.top().at;
    }
  } catch (...) {
    on_error_(std::current_exception());
  }
}

}  // namespace trnsim::model
