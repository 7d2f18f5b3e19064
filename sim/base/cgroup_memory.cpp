#include "sim/base/cgroup_memory.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

namespace trnsim {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

// A byte count as the cgroup files write it; nullopt for "max", absent or anything else.
std::optional<uint64_t> number(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  std::string t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (t.empty() || t.size() > 20 || t.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  try {
    return std::stoull(t);
  } catch (...) {
    return std::nullopt;
  }
}

// v1 writes "no limit" as a huge page-aligned number (9223372036854771712 on x86-64).
constexpr uint64_t kNoLimitV1 = uint64_t{1} << 62;

struct Mount {
  std::string root, point;
  bool v2 = false;
};

}  // namespace

std::optional<uint64_t> cgroup_memory_headroom(
    const std::string& proc_self_cgroup, const std::string& proc_self_mountinfo,
    const std::function<std::optional<std::string>(const std::string& path)>& read) {
  // Mounts: "ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS".
  std::optional<Mount> v1, v2;
  std::istringstream mi(proc_self_mountinfo);
  for (std::string line; std::getline(mi, line);) {
    const std::vector<std::string> f = split(line, ' ');
    const auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || dash + 1 == f.end()) continue;
    const std::string type = *(dash + 1);
    const std::string super = dash + 3 < f.end() ? *(dash + 3) : "";
    if (type == "cgroup2" && !v2) v2 = Mount{f[3], f[4], true};
    if (type == "cgroup" && !v1) {
      const std::vector<std::string> opts = split(super, ',');
      if (std::find(opts.begin(), opts.end(), "memory") != opts.end()) v1 = Mount{f[3], f[4], false};
    }
  }
  std::optional<uint64_t> least;
  const auto walk = [&](const Mount& m, const std::string& cgroup_path) {
    // The cgroup's folder below the mount point (the mount may show a subtree: its root).
    std::string rel = cgroup_path;
    if (m.root != "/" && rel.rfind(m.root, 0) == 0) rel = rel.substr(m.root.size());
    std::vector<std::string> parts;
    for (const std::string& p : split(rel, '/'))
      if (!p.empty() && p != "." && p != "..") parts.push_back(p);
    for (size_t depth = parts.size() + 1; depth-- > 0;) {
      std::string dir = m.point;
      for (size_t i = 0; i < depth; ++i) dir += "/" + parts[i];
      const auto limit = number(read(dir + (m.v2 ? "/memory.max" : "/memory.limit_in_bytes")));
      if (!limit || (!m.v2 && *limit >= kNoLimitV1)) continue;
      const auto usage = number(read(dir + (m.v2 ? "/memory.current" : "/memory.usage_in_bytes")));
      const uint64_t room = usage ? (*limit > *usage ? *limit - *usage : 0) : *limit;
      least = least ? std::min(*least, room) : room;
    }
  };
  // "HIERARCHY:CONTROLLERS:PATH": v2 is "0::PATH", v1's memory controller lists "memory".
  std::istringstream cg(proc_self_cgroup);
  for (std::string line; std::getline(cg, line);) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.substr(0, a) == "0" && controllers.empty() && v2) walk(*v2, path);
    const std::vector<std::string> cs = split(controllers, ',');
    if (v1 && std::find(cs.begin(), cs.end(), "memory") != cs.end()) walk(*v1, path);
  }
  return least;
}

std::optional<uint64_t> cgroup_memory_headroom() {
  const auto slurp = [](const std::string& path) -> std::optional<std::string> {
    std::ifstream f(path);
    if (!f) return std::nullopt;
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
  };
  return cgroup_memory_headroom(slurp("/proc/self/cgroup").value_or(""),
                                slurp("/proc/self/mountinfo").value_or(""), slurp);
}

}  // namespace trnsim
