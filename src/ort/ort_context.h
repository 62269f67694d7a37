// Internal: the state a Runtime shares with every session it created (the ORT
// env, the shared arena, the optimized-model cache, idle release). Free of
// ONNX Runtime's headers (its classes are only named here), so that runtime/
// can hold a context; what uses ORT's API includes ort_api.h, in ort/ only.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "arena_gate.h"
#include "ebb/memory_policy.h"
#include "idle_release.h"
#include "ebb/memory_stats.h"
#include "device_pool.h"
#include "ebb/status.h"
#include "optimized_model_cache.h"

// ONNX Runtime's classes, named only (ort_api.h includes their definitions).
struct OrtAllocator;
struct OrtEpDevice;
namespace Ort {
struct Allocator;
struct Env;
struct Session;
}  // namespace Ort

namespace ebb::detail {

// The CUDA provider library's path: beside ORT's own library (where ORT looks for it).
std::string CudaProviderLibraryPath();

// One CUDA device reached through ORT's device API (RegisterExecutionProviderLibrary, GetEpDevices)
// for the policy's `cuda.arena` `shared` or `env_allocator`, with the device memory that every CUDA
// session of the device shares. Made once per device by RuntimeContext::CudaDeviceFor.
struct CudaDevice {
  int index = 0;
  const OrtEpDevice* ep_device = nullptr;  // owned by the env (the registered library)
  // `shared`: the arena CreateSharedAllocator made for the device (owned by the env).
  OrtAllocator* shared_arena = nullptr;
  // `env_allocator`: ebb's pool, registered in the env (RegisterAllocator) through `pool_allocator`.
  std::unique_ptr<DevicePool> pool;
  std::unique_ptr<OrtAllocator> pool_allocator;
  // The shared arena's entry in the shrink list (gpu:N), one gate for every session of the device;
  // null without a shared arena.
  std::shared_ptr<ArenaGate> gate;
  // Why neither is there when the policy asked for one (ORT refused it): the device's sessions
  // then get their own arenas, as with `per_session`.
  std::string refused;
  std::string arena_name;  // "gpu:0:shared", "gpu:0:pool"
  size_t cap = 0;          // cuda.arena_settings.max_bytes (0: none)
};

// Turns ONNX Runtime's own telemetry off for this process unless the user set
// ORT_DISABLE_TELEMETRY: call it before the process's first ORT environment.
// ORT 1.29's Linux build otherwise starts an uploader thread (Microsoft's 1DS
// SDK) with its first environment, keeps it until exit, and writes a device id
// and an event database under ~/.cache/Microsoft/DeveloperTools/.onnxruntime
// (measured); that thread, still running while the process's static objects
// are destroyed, read freed memory at ebb serve's exit under AddressSanitizer.
// docs/memory-policy.md, "ONNX Runtime's telemetry".
void OptOutOfOrtTelemetry();

// State shared by a Runtime and every session it created.
class RuntimeContext {
 public:
  // Creates the env (with ORT's global thread pools, which every session
  // uses), opens the optimized-model cache when the policy enables it, and,
  // for CpuArenaMode::kShared, registers the capped env arena and builds the
  // tiny session used to trim it.
  static Result<std::shared_ptr<RuntimeContext>> Create(const MemoryPolicy& policy);
  ~RuntimeContext();

  const MemoryPolicy& policy() const { return policy_; }
  Ort::Env& env() { return *env_; }
  // Null unless the policy uses the shared CPU arena.
  const std::shared_ptr<ArenaGate>& shared_cpu_gate() const { return shared_gate_; }
  // The shared arena's cap in bytes (0 when there is no shared arena).
  size_t shared_cap() const { return shared_cap_; }

  // Frees every fully free region of the shared CPU arena now (a shrinking run
  // of the trim session) and trims the heap. REQUIRES: shared arena exists.
  Status TrimSharedArena();
  // Returns freed heap pages to the OS (malloc_trim) when the policy says so.
  // With a shared arena it is skipped unless a shrink freed arena regions
  // since the last call (malloc_trim walks every glibc heap: ~40 us a call
  // here, a quarter of a tiny model's request); `force` trims regardless.
  void TrimHeap(bool force = false);
  // The optimized-model cache, or nullptr when it is off or cannot be used
  // (cache_problem() says why).
  OptimizedModelCache* optimized_cache() const { return optimized_cache_.get(); }
  const std::string& cache_problem() const { return cache_problem_; }

  // Under ReleaseMode::kIdle with the shared CPU arena: the timer that gives
  // it back once no run has ended for the debounce. Null otherwise.
  IdleReleaser* idle() const { return idle_.get(); }

  // Statistics of the shared CPU arena, when there is one.
  std::optional<ArenaStats> ReadSharedArena() const;
  // Just its count of shrinks (what TrimHeap asks after every releasing run), read cheaply.
  std::optional<int64_t> SharedArenaShrinks() const;

  // Why CUDA cannot be used in this process, once a load found out (no
  // provider library, no driver); later loads skip the attempt.
  std::optional<std::string> cuda_unavailable() const;
  void set_cuda_unavailable(const std::string& reason);

  // Device `index` through ORT's device API: registers the CUDA provider library (once), finds
  // its OrtEpDevice for cuda:`index` and makes the device's shared arena or pool as the policy
  // says (once per device). Errors: the library cannot be registered (no GPU, no CUDA runtime;
  // also recorded as cuda_unavailable()), or the provider lists no device `index`. `library` is
  // the provider library's path (tests name a missing one).
  Result<const CudaDevice*> CudaDeviceFor(int index, const std::string& library = CudaProviderLibraryPath());
  // The shared CUDA arenas' and pools' figures ("gpu:N:shared", "gpu:N:pool").
  std::vector<ArenaStats> ReadCudaArenas() const;
  // Gives every CUDA pool's kept blocks back (`env_allocator`; the end of an operation).
  void ReleaseDevicePools();

 private:
  explicit RuntimeContext(const MemoryPolicy& policy);  // out of line: ORT's classes are incomplete here

  MemoryPolicy policy_;
  std::unique_ptr<Ort::Env> env_;
  std::shared_ptr<ArenaGate> shared_gate_;
  std::unique_ptr<Ort::Session> trim_session_;
  std::unique_ptr<Ort::Allocator> shared_allocator_;  // the shared arena, through the trim session
  std::unique_ptr<OptimizedModelCache> optimized_cache_;
  std::string cache_problem_;
  size_t shared_cap_ = 0;
  std::atomic<int64_t> shrinks_at_last_heap_trim_{-1};
  bool registered_ = false;
  mutable std::mutex cuda_mu_;
  std::optional<std::string> cuda_unavailable_;  // guarded by cuda_mu_
  bool cuda_library_registered_ = false;         // guarded by cuda_mu_
  std::map<int, std::unique_ptr<CudaDevice>> cuda_devices_;  // guarded by cuda_mu_; never erased
  std::unique_ptr<IdleReleaser> idle_;  // last: its thread stops before the rest goes
};

// Human-readable byte count: "64.0 MiB".
std::string FormatBytes(int64_t bytes);

}  // namespace ebb::detail
