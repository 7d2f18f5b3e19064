#include "sim/base/available_memory.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/base/address_limit.h"
#include "sim/base/cgroup_memory.h"
#include "sim/base/env_bytes.h"
#include "sim/base/error.h"

namespace trnsim {

std::optional<uint64_t> meminfo(const std::string& key) {
  std::ifstream f("/proc/meminfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream s(line.substr(key.size() + 1));
    uint64_t kb = 0;
    if (s >> kb) return kb * 1024;
  }
  return std::nullopt;
}

std::optional<uint64_t> address_space_headroom() {
  const std::optional<uint64_t> limit = address_space_limit();
  if (!limit) return std::nullopt;
  // VmSize of /proc/self/status: the address space in use now.
  std::ifstream st("/proc/self/status");
  uint64_t used = 0;
  for (std::string line; std::getline(st, line);)
    if (line.rfind("VmSize:", 0) == 0) std::istringstream(line.substr(7)) >> used;
  used *= 1024;
  return *limit > used ? *limit - used : 0;
}

std::optional<uint64_t> available_host_bytes() {
  if (const std::optional<uint64_t> given = env_byte_count("TRNSIM_HOST_MEMORY_BYTES")) return given;
  const std::optional<uint64_t> avail = meminfo("MemAvailable");
  if (!avail) return std::nullopt;
  uint64_t bytes = *avail + meminfo("SwapFree").value_or(0);
  if (const std::optional<uint64_t> room = cgroup_memory_headroom()) bytes = std::min(bytes, *room);
  if (const std::optional<uint64_t> room = address_space_headroom()) bytes = std::min(bytes, *room);
  return bytes;
}

}  // namespace trnsim
