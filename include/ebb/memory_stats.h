// ebb/memory_stats.h — what memory looks like right now.
//
// A MemoryReading gathers, at one moment: every arena ebb knows of (from ONNX
// Runtime's own allocator statistics), the process RSS (from /proc), and GPU
// memory per device where an NVIDIA driver is present (read through NVML,
// loaded at run time; no build dependency, empty without a GPU).
//
// Thread safety: plain values; the reading functions may be called from any
// thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ebb {

// One BFC arena, as ORT reports it (Ort::Allocator::GetStats()).
struct ArenaStats {
  std::string name;            // "cpu:shared", "cpu:<model>", "gpu:0:<model>"
  int64_t reserved = 0;        // bytes held from the OS/driver (ORT: TotalAllocated)
  int64_t in_use = 0;          // bytes handed out to live tensors (ORT: InUse)
  int64_t peak_in_use = 0;     // high-water mark of in_use (ORT: MaxInUse)
  int64_t limit = 0;           // the arena's cap (ORT: Limit)
  int64_t regions = 0;         // live regions (ORT: NumArenaExtensions; a shrink lowers it)
  int64_t extensions = 0;      // regions ever added: live regions + regions freed by shrinks
  int64_t shrinks = 0;         // regions freed by shrinks (ORT: NumArenaShrinkages)
  int64_t allocations = 0;     // ORT: NumAllocs
};

struct GpuMemory {
  int index = 0;
  int64_t total = 0;
  int64_t used = 0;
  int64_t free = 0;
};

struct MemoryReading {
  std::vector<ArenaStats> arenas;
  int64_t rss_bytes = 0;
  int64_t peak_rss_bytes = 0;  // VmHWM: the process's high-water mark of RSS
  std::vector<GpuMemory> gpus;

  // Sum of `reserved` over all arenas.
  int64_t TotalReserved() const;
  // A copy of the arena called `name`; nullopt when there is none. A copy, so
  // that `runtime.ReadMemory().Find(...)` on a temporary reading is safe.
  std::optional<ArenaStats> Find(const std::string& name) const;
  // {"rss_bytes":..,"peak_rss_bytes":..,"arenas":[{...}],"gpus":[...]}
  std::string ToJson() const;
};

// Current resident set size of this process, in bytes.
int64_t ReadRssBytes();
// Peak resident set size (VmHWM), in bytes.
int64_t ReadPeakRssBytes();
// The memory this process may use, in bytes: the machine's physical memory,
// or the memory limit of the process's control group when that is lower (a
// container's limit: CgroupMemoryLimitBytes). Read once.
int64_t PhysicalMemoryBytes();
// The lowest memory limit of the control groups this process is in, read
// from the cgroup file system mounted at `cgroup_root`: cgroup v2
// `memory.max` and cgroup v1 `memory/memory.limit_in_bytes`, at the root of the
// mount (what a container sees of its own group) and under the group named
// for the process in `proc_self_cgroup` (the text of /proc/self/cgroup: the
// `0::/path` line for v2, the `N:memory:/path` line for v1) and its parents.
// "max", a value of 2^60 bytes or more (v1's "no limit" is 2^63 rounded down to
// a page), a missing or unreadable file all mean no limit. Returns 0 when no
// file sets a limit.
int64_t CgroupMemoryLimitBytes(const std::string& cgroup_root = "/sys/fs/cgroup",
                               const std::string& proc_self_cgroup = "/proc/self/cgroup");
// GPU memory per device through NVML; empty when no driver is present.
std::vector<GpuMemory> ReadGpuMemory();

}  // namespace ebb
