// The memory limits of the process's control groups, cgroup v1 (memory.limit_in_bytes) and v2
// (memory.max): a run refused for memory before any work must see the limit a container or a batch
// scheduler set, not only the machine's free memory.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace trnsim {

// Bytes the process may still allocate under its memory cgroups: the least, over its memory cgroup and
// every ancestor up to the mount point (v1 and v2 alike), of limit - usage (0 when usage exceeds the limit).
// nullopt when no level sets a limit or none can be read. The cgroups are found from /proc/self/cgroup and
// the mount points from /proc/self/mountinfo.
std::optional<uint64_t> cgroup_memory_headroom();

// The same from the two /proc files' text, reading the cgroup files with `read` (nullopt: cannot read).
std::optional<uint64_t> cgroup_memory_headroom(
    const std::string& proc_self_cgroup, const std::string& proc_self_mountinfo,
    const std::function<std::optional<std::string>(const std::string& path)>& read);

}  // namespace trnsim
