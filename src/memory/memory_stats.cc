#include "ebb/memory_stats.h"

#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "port.h"

namespace ebb {
namespace {

// The few NVML entry points ebb needs, resolved at run time (port::Library)
// so that no NVIDIA library is needed to build or run ebb.
struct Nvml {
  struct Memory {
    unsigned long long total, free, used;
  };
  using Init = int (*)();
  using Count = int (*)(unsigned int*);
  using Handle = int (*)(unsigned int, void**);
  using Info = int (*)(void*, Memory*);

  bool ok = false;
  Count count = nullptr;
  Handle handle = nullptr;
  Info info = nullptr;

  Nvml() {
    Result<port::Library> lib = port::Library::Load(port::kNvmlLibraryName, /*now=*/true);
    if (!lib.ok()) return;
    auto init = reinterpret_cast<Init>(lib->Find("nvmlInit_v2"));
    count = reinterpret_cast<Count>(lib->Find("nvmlDeviceGetCount_v2"));
    handle = reinterpret_cast<Handle>(lib->Find("nvmlDeviceGetHandleByIndex_v2"));
    info = reinterpret_cast<Info>(lib->Find("nvmlDeviceGetMemoryInfo"));
    ok = init && count && handle && info && init() == 0;
    lib->Keep();  // for the rest of the process
  }
};

}  // namespace

int64_t ReadRssBytes() { return port::ResidentBytes(); }

int64_t ReadPeakRssBytes() { return port::PeakResidentBytes(); }

int64_t PhysicalMemoryBytes() {
  static const int64_t bytes = [] {
    const int64_t machine = port::MachineMemoryBytes();
    const int64_t limit = port::ProcessMemoryLimitBytes();
    return limit > 0 && limit < machine ? limit : machine;
  }();
  return bytes;
}

int64_t CgroupMemoryLimitBytes(const std::string& cgroup_root, const std::string& proc_self_cgroup) {
  return port::CgroupMemoryLimitBytes(cgroup_root, proc_self_cgroup);
}

std::vector<GpuMemory> ReadGpuMemory() {
  static Nvml nvml;  // loaded once; NVML is thread-safe after init
  std::vector<GpuMemory> gpus;
  unsigned int n = 0;
  if (!nvml.ok || nvml.count(&n) != 0) return gpus;
  for (unsigned int i = 0; i < n; ++i) {
    void* device = nullptr;
    Nvml::Memory m{};
    if (nvml.handle(i, &device) != 0 || nvml.info(device, &m) != 0) continue;
    gpus.push_back({static_cast<int>(i), static_cast<int64_t>(m.total), static_cast<int64_t>(m.used),
                    static_cast<int64_t>(m.free)});
  }
  return gpus;
}

int64_t MemoryReading::TotalReserved() const {
  int64_t total = 0;
  for (const ArenaStats& a : arenas) total += a.reserved;
  return total;
}

std::optional<ArenaStats> MemoryReading::Find(const std::string& name) const {
  for (const ArenaStats& a : arenas) {
    if (a.name == name) return a;
  }
  return std::nullopt;
}

std::string MemoryReading::ToJson() const {
  nlohmann::json arenas_json = nlohmann::json::array();
  for (const ArenaStats& a : arenas) {
    arenas_json.push_back({{"name", a.name},
                           {"reserved", a.reserved},
                           {"in_use", a.in_use},
                           {"peak_in_use", a.peak_in_use},
                           {"limit", a.limit},
                           {"regions", a.regions},
                           {"extensions", a.extensions},
                           {"shrinks", a.shrinks},
                           {"allocations", a.allocations}});
  }
  nlohmann::json gpus_json = nlohmann::json::array();
  for (const GpuMemory& g : gpus) {
    gpus_json.push_back({{"index", g.index}, {"total", g.total}, {"used", g.used}, {"free", g.free}});
  }
  return nlohmann::json{{"rss_bytes", rss_bytes},
                        {"peak_rss_bytes", peak_rss_bytes},
                        {"arenas", arenas_json},
                        {"gpus", gpus_json}}
      .dump();
}

}  // namespace ebb
