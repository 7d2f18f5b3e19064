// The memory cgroups' limits (sim/base/cgroup_memory.h) on made-up /proc and /sys contents: v1 (which the
// memory check once did not read at all: a run under a v1 limit was OOM-killed without a message), v2, limits
// set on an ancestor, "no limit", a mount that shows a subtree.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>

#include "sim/base/cgroup_memory.h"

using trnsim::cgroup_memory_headroom;

namespace {

using Files = std::map<std::string, std::string>;

std::optional<uint64_t> headroom(const std::string& cgroup, const std::string& mountinfo,
                                 const Files& files) {
  return cgroup_memory_headroom(cgroup, mountinfo, [&](const std::string& p) -> std::optional<std::string> {
    const auto it = files.find(p);
    if (it == files.end()) return std::nullopt;
    return it->second;
  });
}

const std::string kV1Mounts =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";
const std::string kV2Mounts = "30 23 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";

}  // namespace

TEST_CASE("cgroup memory: a v1 limit is read (limit_in_bytes - usage_in_bytes)", "[cgroup]") {
  const std::string cg = "4:memory:/slurm/job_7\n2:cpu,cpuacct:/slurm/job_7\n0::/\n";
  const Files f = {{"/sys/fs/cgroup/memory/slurm/job_7/memory.limit_in_bytes", "1073741824\n"},
                   {"/sys/fs/cgroup/memory/slurm/job_7/memory.usage_in_bytes", "73741824\n"}};
  CHECK(headroom(cg, kV1Mounts, f) == uint64_t{1000000000});
}

TEST_CASE("cgroup memory: v1's \"no limit\" and a limit on an ancestor", "[cgroup]") {
  const std::string cg = "4:memory:/a/b\n";
  Files f = {{"/sys/fs/cgroup/memory/a/b/memory.limit_in_bytes", "9223372036854771712\n"},
             {"/sys/fs/cgroup/memory/a/b/memory.usage_in_bytes", "100\n"}};
  CHECK_FALSE(headroom(cg, kV1Mounts, f).has_value());
  f["/sys/fs/cgroup/memory/a/memory.limit_in_bytes"] = "5000\n";
  f["/sys/fs/cgroup/memory/a/memory.usage_in_bytes"] = "4000\n";
  CHECK(headroom(cg, kV1Mounts, f) == uint64_t{1000});
  // Usage above the limit: nothing left.
  f["/sys/fs/cgroup/memory/a/memory.usage_in_bytes"] = "6000\n";
  CHECK(headroom(cg, kV1Mounts, f) == uint64_t{0});
}

TEST_CASE("cgroup memory: v2 memory.max at each level, \"max\" meaning none", "[cgroup]") {
  const std::string cg = "0::/user.slice/job\n";
  Files f = {{"/sys/fs/cgroup/user.slice/job/memory.max", "max\n"},
             {"/sys/fs/cgroup/user.slice/job/memory.current", "500\n"}};
  CHECK_FALSE(headroom(cg, kV2Mounts, f).has_value());
  f["/sys/fs/cgroup/user.slice/memory.max"] = "2000\n";
  f["/sys/fs/cgroup/user.slice/memory.current"] = "1500\n";
  CHECK(headroom(cg, kV2Mounts, f) == uint64_t{500});
  f["/sys/fs/cgroup/user.slice/job/memory.max"] = "700\n";
  CHECK(headroom(cg, kV2Mounts, f) == uint64_t{200});
}

TEST_CASE("cgroup memory: a container's mount shows its own subtree as the root", "[cgroup]") {
  // /proc/self/cgroup names /docker/abc; the mount's root is that folder, mounted at /sys/fs/cgroup/memory.
  const std::string mounts = "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n";
  const Files f = {{"/sys/fs/cgroup/memory/memory.limit_in_bytes", "4096\n"},
                   {"/sys/fs/cgroup/memory/memory.usage_in_bytes", "96\n"}};
  CHECK(headroom("7:memory:/docker/abc\n", mounts, f) == uint64_t{4000});
  // Nothing readable, nothing mounted: no limit known.
  CHECK_FALSE(headroom("7:memory:/x\n", "", f).has_value());
  CHECK_FALSE(headroom("", kV1Mounts, {}).has_value());
}
