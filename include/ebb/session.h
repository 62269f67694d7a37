// ebb/session.h — a loaded model on one device, and the run boundary.
//
// Session::Run is the run boundary: the only place in ebb that executes a
// model (and so the only caller of ONNX Runtime's Run). It takes the inputs
// and whether this run ends the caller's operation. When it does, and the
// policy's release mode says so, the run gives back the arena memory the
// operation used:
//   * it asks ORT to shrink exactly the arenas this session really has
//     ("cpu:0" for the CPU arena, "gpu:<its real device id>" on CUDA) and
//     nothing else; a session without a shrinkable arena runs plainly, with no
//     shrink configuration at all;
//   * outputs are written into caller-owned buffers whenever their shapes are
//     known (static, or seen before for these input shapes), so no output pins
//     an arena region; otherwise they are copied out and the region is freed
//     right after by a trim of the shared arena;
//   * freed heap pages go back to the OS (malloc_trim), so RSS falls too;
//   * when another run is still in flight on the same arena, the ending run
//     does not shrink under it: the release is left pending and the last run
//     to leave that arena performs it. (A per-session arena, which has no
//     trim, carries a pending release on its next run that starts alone.)
// Under ReleaseMode::kIdle (the default) no run releases: each one that ends
// restarts the Runtime's idle timer, whose own thread gives the shared CPU arena
// back once no run has ended for the debounce and none is in flight (a session
// whose arenas only its own runs can shrink releases as under kOperationEnd).
// So a loop of single runs keeps its arena between runs and gives it back when
// the loop pauses; the runs of an explicit operation carry kOperationEnd
// (OperationReleaseMode) and its last run releases at once.
// Outputs are identical with and without a release.
//
// Running out of memory: a run that fails for lack of arena memory (a capped
// shared CPU arena, a CUDA arena) while other runs were on the same arena may
// fit alone, the others having taken the memory: it waits for them to end
// (runs arriving meanwhile wait behind it) and runs again alone, up to
// RunFlags::memory_deadline (kUnavailable past it). Only a run that fails
// alone returns kResourceExhausted, and only then is the session dropped from
// its cache. A ModelPool's admitted runs go through the same arenas, so plain
// runs and the pool's wait for one another (src/arena_gate.h).
//
// Thread safety: Run() may be called concurrently from any number of threads.
// Ownership: sessions are shared (std::shared_ptr) between the cache and
// callers; dropping one from the cache never destroys it under a running call.
// Two model files with the same bytes share one loaded model (the cache is
// keyed by content): a Load under another name returns another Session object
// on the same loaded model, which keeps its own name() and source_path() in
// everything it reports (run errors, logs, arena names), and shares the model's
// arenas, counters and cache entry with the others.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ebb/device.h"
#include "ebb/memory_policy.h"
#include "ebb/memory_stats.h"
#include "ebb/status.h"
#include "ebb/tensor.h"

namespace ebb {

namespace detail {
struct SessionState;
}  // namespace detail

// A model input or output as the model declares it; -1 marks a dynamic dim.
struct TensorInfo {
  std::string name;
  DataType type = DataType::kFloat32;
  Shape shape;
};

// What one call of Run did, for tests, reports and metrics.
struct RunRecord {
  uint64_t sequence = 0;         // 1-based, per session
  bool ends_operation = false;   // as the caller said
  bool release_wanted = false;   // the policy wanted a release after this run
  std::string release_spec;      // the arenas this run released, as ORT's shrink list names them; "" = none
                                 // (a shared CUDA arena is shrunk by a call after the run, not through the list)
  bool release_deferred = false; // wanted, but another run was in flight on an arena
  bool trimmed = false;          // this run trimmed the shared arena after its outputs were freed
  bool outputs_preallocated = false;  // outputs were written to caller-owned buffers
  // It ran out of memory beside other runs on its arenas, waited for them to end and ran again alone.
  bool waited_alone = false;
  StatusCode status = StatusCode::kOk;
  double milliseconds = 0;
};

using RunObserver = std::function<void(const RunRecord&)>;

// How a session was created (Session::load_record()).
struct LoadRecord {
  double milliseconds = 0;          // session creation, hashing excluded
  bool from_optimized_cache = false;  // mapped from the optimized-model cache
  bool wrote_optimized_cache = false; // this load added the cache entry
  std::string optimized_cache_note;   // why the cache was not used, or an entry was rejected ("" otherwise)
  GraphOptimization graph_optimization = GraphOptimization::kExtended;  // the level the session was built at
};

// How long a run that ran out of memory beside other runs waits for them to end, to run again
// alone, when RunFlags::memory_deadline is unset (as long as a ModelPool's run waits for memory).
inline constexpr std::chrono::milliseconds kWaitForMemory{60000};

struct RunFlags {
  // Whether this run is the last of the caller's operation. A single call is a
  // whole operation, hence the default.
  bool ends_operation = true;
  // Outputs to compute, by name, each at most once (a name given twice is
  // kInvalidArgument, as the server refuses it); empty computes all of them,
  // in model order.
  std::vector<std::string> outputs;
  // Until when a run that ran out of memory beside other runs may wait to run
  // alone (see Run); unset: kWaitForMemory after it started.
  std::optional<std::chrono::steady_clock::time_point> memory_deadline;
  // Called once, on the calling thread, after the run (success or failure).
  const RunObserver* observer = nullptr;
  // The release mode for this run instead of the policy's (unset: the
  // policy's). Operations pass OperationReleaseMode's (kOperationEnd under an
  // idle policy, so that their last run releases at once), as the server does
  // for the requests of an explicit sequence.
  std::optional<ReleaseMode> release;
};

class Session {
 public:
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The name it was loaded under (the model file's stem unless given).
  const std::string& name() const;
  // Where this session's model file came from ("" when loaded from memory).
  const std::string& source_path() const;
  // The device the session REALLY runs on, with the fallback reason if any.
  const ResolvedDevice& device() const;
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  // A value of the model's metadata_props ("" when absent).
  std::string metadata(const std::string& key) const;
  // The arena shrink entries this session has ("cpu:0", "gpu:0"); empty when
  // it has no shrinkable arena.
  std::vector<std::string> release_targets() const;

  // The run boundary (see the file comment).
  // Errors: kInvalidArgument for unknown/missing inputs or a wrong type or
  // shape, an unknown output or one asked for twice; kResourceExhausted when
  // memory ran out for the run alone (the session is then dropped from its
  // cache); kUnavailable when it ran out beside other runs and its memory
  // deadline passed while it waited for them; kInternal for other ORT failures.
  Result<std::vector<NamedTensor>> Run(const std::vector<NamedTensor>& inputs, const RunFlags& flags = {});

  // Whether this session and `other` are the same loaded model: the cache gave
  // it twice, or it was loaded from two files with the same content.
  bool IsSameModel(const Session& other) const;

  // Whether runs of this session and of `other` allocate from a common arena
  // (the shared CPU arena, or being the same loaded model).
  bool SharesArenaWith(const Session& other) const;

  // How the session was created: time, and whether the optimized-model cache
  // served it (see MemoryPolicy::optimized_model_cache).
  const LoadRecord& load_record() const;

  // Runs started so far, and releases: runs that carried a release request,
  // plus idle releases that gave back memory this session's runs had used.
  uint64_t run_count() const;
  uint64_t release_count() const;
  // Runs in flight right now.
  int in_flight() const;

  // Statistics of this session's own arenas (a shared arena is reported by the
  // Runtime, not here).
  std::vector<ArenaStats> ReadOwnArenas() const;
  // Statistics of the device's shared CUDA arena or pool this session's runs
  // allocate from ("gpu:N:shared", "gpu:N:pool": MemoryPolicy's cuda.arena
  // shared or env_allocator), shared with the device's other CUDA sessions;
  // nullopt for a CPU session or one with a CUDA arena of its own.
  std::optional<ArenaStats> ReadSharedDeviceArena() const;

  // Internal: built by the Runtime.
  explicit Session(std::unique_ptr<detail::SessionState> state);
  // Internal: the loaded model of `shared` under another name and path (Runtime::Load).
  Session(const Session& shared, std::string name, std::string source_path);
  detail::SessionState& state() { return *state_; }
  const detail::SessionState& state() const { return *state_; }

 private:
  friend class SessionCache;  // whether a cached model is held by anyone but the cache
  std::shared_ptr<detail::SessionState> state_;  // the loaded model, shared by every name of its content
  std::string name_;
  std::string source_path_;
};

}  // namespace ebb
