// ebb/runtime.h — the entry point: one memory policy, one session cache.
//
// A Runtime owns the ONNX Runtime environment, the memory policy every
// session is created from, the shared capped CPU arena (by default), and the
// SessionCache. Start here:
//
//   auto runtime = ebb::Runtime::Create(policy);           // once per process
//   auto session = (*runtime)->Load("models/convnet/model.onnx");
//   auto outputs = (*session)->Run(inputs);               // releases at the end
//
// Loads are cached by model content, device and options; a session that
// runs out of memory is dropped from the cache so the next Load builds it
// afresh. Trim() gives idle arena memory back at any moment.
//
// One Runtime per process when the policy uses the shared CPU arena (ORT's
// environment is a process singleton): Create() fails with
// kFailedPrecondition while another such Runtime is alive.
//
// Thread safety: every method may be called concurrently.
// Ownership: sessions handed out stay valid after the Runtime is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ebb/device.h"
#include "ebb/memory_policy.h"
#include "ebb/memory_stats.h"
#include "ebb/session.h"
#include "ebb/session_cache.h"
#include "ebb/status.h"

namespace ebb {

namespace detail {
class RuntimeContext;
struct ModelSource;
}  // namespace detail

struct LoadOptions {
  DeviceRequest device;  // auto by default
  // Overrides the policy's strict_device for this load when set.
  std::optional<bool> strict_device;
  // Name for logs, errors and metrics; the file's parent folder or stem when empty.
  std::string name;
  // ONNX Runtime's graph optimization level for this model instead of the
  // policy's (MemoryPolicy::graph_optimization): a model folder's config.json
  // sets it for a model that runs faster at another level (the OCR models, at
  // "all"). A model loaded at two levels is two sessions, cached apart.
  std::optional<GraphOptimization> graph_optimization;
};

// Under ReleaseMode::kIdle: while one of these is alive, the Runtime's idle
// release waits (the server holds one per open sequence of requests). It ends
// the hold when destroyed; under other modes it does nothing.
class IdleReleaseHold {
 public:
  ~IdleReleaseHold();
  IdleReleaseHold(const IdleReleaseHold&) = delete;
  IdleReleaseHold& operator=(const IdleReleaseHold&) = delete;

 private:
  friend class Runtime;
  explicit IdleReleaseHold(std::shared_ptr<detail::RuntimeContext> ctx);
  std::shared_ptr<detail::RuntimeContext> ctx_;
};

class Runtime {
 public:
  static Result<std::unique_ptr<Runtime>> Create(const MemoryPolicy& policy = {});
  ~Runtime();

  const MemoryPolicy& policy() const;

  // Loads (or returns the cached) session for the model file. The file is
  // hashed (SHA-256, streamed) and read by ONNX Runtime; ebb keeps no copy of
  // it. A model with ONNX external data (weights in files beside it, named by
  // its tensors) is identified by every file it reads: each must be a regular
  // file inside the model file's folder, and is hashed too, so new weights
  // beside the same model file are a new model (ebb/model_signature.h,
  // ReadModelFiles). CPU sessions go through the optimized-model cache
  // (MemoryPolicy::optimized_model_cache): a model loaded before starts from
  // its cached optimized form. The heap a load leaves behind is trimmed before
  // returning.
  // Errors: kNotFound (no such file), kFailedPrecondition (a missing
  // external-data file), kInvalidArgument (not a valid model; an external-data location that is
  // absolute, leaves the model's folder, or is a link out of it, a folder or
  // an empty file), kUnavailable (strict device that cannot be used; a file
  // kept changing while it was read), kResourceExhausted.
  Result<std::shared_ptr<Session>> Load(const std::string& model_path, const LoadOptions& options = {});
  // Same, for model bytes already in memory. Bytes have no folder to find
  // external data in: a model that names external-data files is refused
  // (kInvalidArgument); load it from its file.
  Result<std::shared_ptr<Session>> LoadFromBytes(const std::string& bytes, const LoadOptions& options);

  // Drops every cached session loaded from `model_path`; returns how many.
  size_t Unload(const std::string& model_path);
  // Drops one session from the cache; true if it was cached.
  bool Unload(const Session& session);
  void Clear();

  // Gives idle arena memory back now: the shared CPU arena is shrunk at once
  // (or by the last run in flight), heap pages go back to the OS, and
  // per-session arenas release on their next run that starts alone.
  Status Trim();

  // Release when idle (ReleaseMode::kIdle, with the shared CPU arena): a
  // thread of the Runtime gives the shared arena back and trims the heap once
  // no run has ended for policy().idle_release_ms and none is in flight.
  // Sessions that outlive the Runtime are not idle-released any more (their
  // memory goes back when they are destroyed).
  // HoldIdleRelease: no idle release while the returned hold is alive.
  std::unique_ptr<IdleReleaseHold> HoldIdleRelease();
  // Idle releases done so far (0 under other modes).
  uint64_t idle_release_count() const;
  // Called on the idle timer's thread, once per release, with the name of
  // every session whose runs it gave memory back for (each also counts in
  // that Session's release_count()). Replacing it waits for a call in
  // progress; pass {} to remove it. A no-op under other modes.
  void SetIdleReleaseListener(std::function<void(const std::string& model)> listener);

  // Arena statistics (shared arena and every cached session's own arenas),
  // RSS, GPU memory.
  MemoryReading ReadMemory() const;
  // The shared CPU arena's statistics alone (cheaper than ReadMemory); nullopt
  // when the policy has no shared arena.
  std::optional<ArenaStats> ReadSharedArena() const;
  // The shared CPU arena's cap in bytes; 0 when the policy has no shared arena.
  int64_t shared_arena_cap() const;

  // Sessions in the runtime's cache now: loaded, and not yet dropped as unused.
  size_t cached_sessions() const;
  // Successful loads so far (cache hits do not count).
  uint64_t load_count() const;

 private:
  explicit Runtime(std::shared_ptr<detail::RuntimeContext> ctx);
  Result<std::shared_ptr<Session>> LoadSource(const detail::ModelSource& source, const std::string& sha256,
                                              const LoadOptions& options);

  std::shared_ptr<detail::RuntimeContext> ctx_;
  std::shared_ptr<SessionCache> cache_;
};

}  // namespace ebb
