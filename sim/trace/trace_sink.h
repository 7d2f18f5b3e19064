// The interface the SystemC model calls to record a trace, and a sink that records nothing.
//
// Units: every timestamp passed in is simulated time in picoseconds. Writers store simulated nanoseconds,
// rounded to the nearest ns (500 ps rounds up): Perfetto integer ns, Chrome JSON µs with 3 decimals.
// On one slice track, slice and instant timestamps are made non-decreasing in call order (a call with an
// earlier time than the track's latest one is moved up to it and counted in clamped_events()), so slices
// always nest and never have a negative duration. Counter samples are written as given.
//
// Errors: a writer throws InputError naming the path when its file cannot be created or written, and
// trnsim::Error on misuse (unknown track, slice call on a counter track, slice_end without an open slice,
// any call after close()). Not thread-safe: one SystemC process context calls it.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>
#include <variant>

namespace trnsim::trace {

// A track handle. uuid 0 means "no track"; writers hand out uuids from 1 in creation order.
struct TrackId {
  uint64_t uuid = 0;
  constexpr bool valid() const { return uuid != 0; }
  constexpr auto operator<=>(const TrackId&) const = default;
};

// Counter units as Perfetto knows them; kCustom uses the unit name given with the track.
enum class CounterUnit : uint8_t { kTimeNs, kCount, kBytes, kCustom };

using AnnotationValue = std::variant<int64_t, uint64_t, double, bool, std::string_view>;

// One slice argument. Signed integers are stored as int64_t, unsigned as uint64_t, so any integer type works.
// Names and string values are only borrowed for the duration of the call. Annotation::repeated() marks a
// string value the caller expects to recur across events (an opcode, an operand text, a source line): the
// .pftrace writer then interns it (written once, referenced by id later). The content is the same either way.
struct Annotation {
  std::string_view name;
  AnnotationValue value;
  bool repeats = false;  // a string value worth interning; see repeated()

  template <std::signed_integral T>
  constexpr Annotation(std::string_view n, T v) : name(n), value(static_cast<int64_t>(v)) {}
  template <std::unsigned_integral T>
  requires(!std::same_as<T, bool>) constexpr Annotation(std::string_view n, T v)
      : name(n), value(static_cast<uint64_t>(v)) {}
  template <std::floating_point T>
  constexpr Annotation(std::string_view n, T v) : name(n), value(static_cast<double>(v)) {}
  constexpr Annotation(std::string_view n, bool v) : name(n), value(v) {}
  constexpr Annotation(std::string_view n, std::string_view v) : name(n), value(v) {}
  constexpr Annotation(std::string_view n, const char* v) : name(n), value(std::string_view(v)) {}

  static constexpr Annotation repeated(std::string_view n, std::string_view v) {
    Annotation a(n, v);
    a.repeats = true;
    return a;
  }
};

// Picoseconds to the nearest nanosecond (half rounds up).
constexpr uint64_t ps_to_ns(uint64_t ps) {
  return ps / 1000 + (ps % 1000 >= 500 ? 1 : 0);
}

class TraceSink {
 public:
  virtual ~TraceSink() = default;

  // False for a sink that drops everything: callers may skip building annotations.
  virtual bool enabled() const = 0;

  // A process-level group, e.g. one physical core. pid > 0 and unique (Perfetto reserves 0).
  TrackId process_track(int32_t pid, std::string_view name, int32_t sort_rank = 0) {
    return do_process_track(pid, name, sort_rank);
  }
  // A slice track under a process or another slice track (e.g. a DMA queue's sub-track for an overlapping
  // transfer). Siblings are shown in increasing sort_rank.
  TrackId thread_track(TrackId parent, std::string_view name, std::string_view description = {},
                       int32_t sort_rank = 0) {
    return do_thread_track(parent, name, description, sort_rank);
  }
  // A counter track under a process or slice track. unit_name names the unit for kCustom (e.g. "GB/s").
  TrackId counter_track(TrackId parent, std::string_view name, CounterUnit unit,
                        std::string_view unit_name = {}, int32_t sort_rank = 0) {
    return do_counter_track(parent, name, unit, unit_name, sort_rank);
  }

  // Opens a slice. flow_ids start (or continue) flows at this slice; terminating_flow_ids end flows here.
  // Flow ids are global to the trace and nonzero.
  void slice_begin(TrackId track, uint64_t ts_ps, std::string_view name,
                   std::span<const Annotation> args = {}, std::span<const uint64_t> flow_ids = {},
                   std::span<const uint64_t> terminating_flow_ids = {}) {
    do_slice_begin(track, ts_ps, name, args, flow_ids, terminating_flow_ids);
  }
  void slice_begin(TrackId track, uint64_t ts_ps, std::string_view name,
                   std::initializer_list<Annotation> args, std::span<const uint64_t> flow_ids = {},
                   std::span<const uint64_t> terminating_flow_ids = {}) {
    do_slice_begin(track, ts_ps, name, std::span<const Annotation>(args.begin(), args.size()), flow_ids,
                   terminating_flow_ids);
  }
  // Closes the innermost open slice of the track.
  void slice_end(TrackId track, uint64_t ts_ps) { do_slice_end(track, ts_ps); }
  // A counter sample, in the track's unit.
  void counter(TrackId track, uint64_t ts_ps, double value) { do_counter(track, ts_ps, value); }
  // A zero-duration event on a slice track.
  void instant(TrackId track, uint64_t ts_ps, std::string_view name, std::span<const Annotation> args = {}) {
    do_instant(track, ts_ps, name, args);
  }
  void instant(TrackId track, uint64_t ts_ps, std::string_view name, std::initializer_list<Annotation> args) {
    do_instant(track, ts_ps, name, std::span<const Annotation>(args.begin(), args.size()));
  }
  // Flushes and closes the file. Call it to see write errors; a destructor can only swallow them.
  void close() { do_close(); }

 private:
  virtual TrackId do_process_track(int32_t pid, std::string_view name, int32_t sort_rank) = 0;
  virtual TrackId do_thread_track(TrackId parent, std::string_view name, std::string_view description,
                                  int32_t sort_rank) = 0;
  virtual TrackId do_counter_track(TrackId parent, std::string_view name, CounterUnit unit,
                                   std::string_view unit_name, int32_t sort_rank) = 0;
  virtual void do_slice_begin(TrackId track, uint64_t ts_ps, std::string_view name,
                              std::span<const Annotation> args, std::span<const uint64_t> flow_ids,
                              std::span<const uint64_t> terminating_flow_ids) = 0;
  virtual void do_slice_end(TrackId track, uint64_t ts_ps) = 0;
  virtual void do_counter(TrackId track, uint64_t ts_ps, double value) = 0;
  virtual void do_instant(TrackId track, uint64_t ts_ps, std::string_view name,
                          std::span<const Annotation> args) = 0;
  virtual void do_close() = 0;
};

// Records nothing. Track calls return distinct ids so callers can keep their bookkeeping unchanged.
class NullSink final : public TraceSink {
 public:
  bool enabled() const override { return false; }

 private:
  TrackId do_process_track(int32_t, std::string_view, int32_t) override { return TrackId{++next_}; }
  TrackId do_thread_track(TrackId, std::string_view, std::string_view, int32_t) override {
    return TrackId{++next_};
  }
  TrackId do_counter_track(TrackId, std::string_view, CounterUnit, std::string_view, int32_t) override {
    return TrackId{++next_};
  }
  void do_slice_begin(TrackId, uint64_t, std::string_view, std::span<const Annotation>,
                      std::span<const uint64_t>, std::span<const uint64_t>) override {}
  void do_slice_end(TrackId, uint64_t) override {}
  void do_counter(TrackId, uint64_t, double) override {}
  void do_instant(TrackId, uint64_t, std::string_view, std::span<const Annotation>) override {}
  void do_close() override {}

  uint64_t next_ = 0;
};

}  // namespace trnsim::trace
