// trnsim validate's checks on one point of a sweep (parse the base workload with the point's --set
// assignments, check and build it), and the point's key: a hash of its resolved workload, under which its
// result is kept so that a rerun, another sweep or a Slurm task finds it.
// A point whose kernel is a Python file runs the user's code when it is built (the kernel's trace), which may
// never end or fill the memory: it is checked in a child process (`trnsim sweep check`), stopped by the
// sweep's --timeout and at once when the sweep is interrupted (SIGINT, SIGTERM). Other points are checked
// in-process (our own C++ kernels).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace trnsim::sweep {

struct CheckedPoint {
  bool valid = false;
  std::string reason;  // why not: trnsim validate's message
  std::string key;     // 20 hex digits of the SHA-256 of `resolved`
  // What the point runs, every default filled in: the kernel and its complete parameters, the cores, the
  // hardware config's document and overrides, each input's generator (with its arguments), .npy file (path,
  // size, modification time) or recipe (checked arguments), the outputs written, numerics. The workload's
  // name and description are not part of it.
  nlohmann::json resolved;
  // A Python kernel's record of the files it ran while the point was checked ({absolute path: SHA-256
  // hex}, stats.json "nki"."sources"), else null. The pool compares it with what the point's run reports,
  // so a file edited while the sweep runs never leaves its results under the old bytes' key.
  nlohmann::json sources;
  // Not checked: its check ran past the timeout (reason says so), or the sweep was interrupted meanwhile.
  bool timed_out = false;
  bool interrupted = false;
};

// Checks the point (above). timeout_seconds > 0 bounds a Python kernel's check (--timeout of trnsim sweep and
// trnsim tune). While a child checks it, `while_waiting` is called every 50 ms or so (the pool collects the
// runs that ended meanwhile: TaskSource::collect_ended).
CheckedPoint check_point(const std::string& workload, const std::vector<std::string>& sets,
                         double timeout_seconds = 0, const std::function<void()>& while_waiting = {});

// The plan's record of a checked point `pt` (plan.json "points"): its key (and Python sources) when valid,
// "failed" when its check timed out (an error row), else "invalid" with the reason.
void record_check(nlohmann::json& pt, const CheckedPoint& c);

// The child's side (`trnsim sweep check WORKLOAD --set ... --result-fd N`): checks the point in this process
// and writes the CheckedPoint as JSON to file descriptor `fd`.
void check_point_to_fd(const std::string& workload, const std::vector<std::string>& sets, int fd);

// 20 hex digits of the SHA-256 of `text` (io::sha256_hex, sim/io/content_hash.h).
std::string short_sha256(const std::string& text);

// "" if a run executed the Python files `planned` records (CheckedPoint::sources; null: nothing to check),
// judged by its stats.json; else why its result cannot be kept under the point's key, naming the files.
std::string changed_sources(const nlohmann::json& planned, const nlohmann::json& stats);

}  // namespace trnsim::sweep
