// ebb/model_pool.h — many models on a device, within a memory budget.
//
// A ModelPool knows a set of named models (ModelSpec) and keeps loaded those
// that fit a per-device memory budget. Each loaded model carries a measured
// CHARGE: what loading it cost (the process RSS growth during its load, with
// loads serialised so the growth is its own; GPU memory growth on CUDA) plus
// the largest transient peak its operations have been seen to need (the RSS
// high-water mark over an operation that ran alone, reset through
// /proc/self/clear_refs: a model's first 8 calls, then one in 16; the
// arena's peak on CUDA). Before its first load a
// model is charged its file size, the only thing known then, and the charge
// never falls below it after: a loaded model holds at least its weights, even
// when its load grew RSS by less (it reused pages an earlier load touched, or
// ORT maps its external data and reads it at the first run). The file size
// is that of all its files: model.onnx and its ONNX external-data files
// (ReadModelFiles), read again after each load.
//
// Before a load, when the charge does not fit, idle models are evicted, least
// recently used first, until it fits. A model with a lease out (a call in
// flight) is never evicted, nor is a pinned one. If it still cannot fit, the
// caller gets kResourceExhausted, or waits for capacity when configured to
// (up to a timeout). A model charged more than the whole budget by itself is
// refused at once with kResourceExhausted, and unloaded if it was loaded (its
// charge measured larger than its file) and no call holds it. A real
// out-of-memory during a load or a run evicts idle models, trims, and retries
// once (RunWithRecovery), then reports.
//
// keep_alive (per model, per request): unload after that much idle time;
// 0 unloads right after the request; negative never unloads. It is applied
// when a request's lease comes back. Load() is a lifecycle operation, not a
// request: it leaves the model loaded whatever the keep-alive, until a request
// to it applies its keep-alive again (or it is unloaded, or evicted to fit).
//
// Looking at a model (StatusOf, SignatureOf, Snapshot) never loads it, never
// counts as a use, and never evicts another.
//
// States: UNLOADED --Acquire/Load--> LOADING --ok--> READY --evict/unload--> UNLOADED
//                                       \--error--> UNLOADED (reason kept)
//
// Thread safety: all methods may be called concurrently. A background thread
// unloads models whose keep-alive ran out.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ebb/model_signature.h"
#include "ebb/runtime.h"

namespace ebb {

struct ModelSpec {
  std::string name;
  std::string path;                      // the model file
  LoadOptions load;                      // device etc.; load.name is set to `name`
  bool pinned = false;                   // never evicted to fit the budget or by keep-alive
  std::optional<int64_t> keep_alive_ms;  // unset: the pool's default
};

// The longest PoolOptions::wait_for_capacity honoured (one hour).
inline constexpr int64_t kMaxWaitForCapacityMs = int64_t{60} * 60 * 1000;

struct PoolOptions {
  // CPU budget in bytes; 0 takes cpu_budget_fraction of physical memory.
  int64_t cpu_budget_bytes = 0;
  double cpu_budget_fraction = 0.75;
  // CUDA budget per device in bytes; 0 takes cuda_budget_fraction of the
  // device's memory (NVML), or no budget where that cannot be read.
  int64_t cuda_budget_bytes = 0;
  double cuda_budget_fraction = 0.9;
  // How long Acquire waits for models in flight to finish when nothing idle
  // can be evicted; 0 fails at once with kResourceExhausted.
  std::chrono::milliseconds wait_for_capacity{0};  // at most kMaxWaitForCapacityMs (longer is clamped)
  // keep_alive of models and requests that give none: negative = never unload.
  int64_t default_keep_alive_ms = -1;
  std::chrono::milliseconds reap_interval{50};
};

enum class PoolState { kUnloaded, kLoading, kReady };
const char* PoolStateName(PoolState state);  // "UNAVAILABLE", "LOADING", "READY"

enum class EvictReason { kBudget, kKeepAlive, kOutOfMemory, kUnload };
const char* EvictReasonName(EvictReason reason);  // "budget", "keep_alive", "out_of_memory", "unload"

struct ModelStatus {
  std::string name;
  PoolState state = PoolState::kUnloaded;
  std::string device;            // where it runs (or would: the request's kind)
  std::string reason;            // why it is not loaded, when known
  int64_t charge_bytes = 0;      // max(load_bytes + transient_bytes, file size); the file size before a first load
                                 // (file size: model.onnx and its external-data files)
  int64_t load_bytes = 0;        // measured at its last load
  int64_t transient_bytes = 0;   // largest operation peak seen
  int in_flight = 0;
  bool pinned = false;
  uint64_t loads = 0;
};

// What the pool did, for metrics and logs.
struct PoolEvent {
  enum class Kind { kLoad, kEvict } kind = Kind::kLoad;
  std::string name;
  bool on_demand = false;              // kLoad: a request needed it
  double load_ms = 0;                  // kLoad: how long the load took (the switch latency)
  EvictReason reason = EvictReason::kBudget;  // kEvict
};

class ModelPool;

struct AcquireOptions {
  std::optional<int64_t> keep_alive_ms;  // this request's keep_alive
  bool load_on_demand = true;
};

// A model held for one call: while a Lease is alive the model is not evicted.
class Lease {
 public:
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&&) = delete;
  Lease(const Lease&) = delete;
  ~Lease();

  const std::shared_ptr<Session>& session() const { return session_; }
  const std::string& name() const { return name_; }

 private:
  friend class ModelPool;
  Lease(ModelPool* pool, std::string name, std::shared_ptr<Session> session, std::optional<int64_t> keep_alive_ms)
      : pool_(pool), name_(std::move(name)), session_(std::move(session)), keep_alive_ms_(keep_alive_ms) {}

  ModelPool* pool_;
  std::string name_;
  std::shared_ptr<Session> session_;
  std::optional<int64_t> keep_alive_ms_;
  bool lifecycle_ = false;           // held by Load(), not by a request: keep-alive does not apply
  uint64_t measure_generation_ = 0;  // non-zero: this lease measures its model's transient peak
  int64_t rss_at_start_ = 0;
};

class ModelPool {
 public:
  using EventFn = std::function<void(const PoolEvent&)>;

  // REQUIRES: runtime outlives the pool. `on_event` is called outside locks.
  ModelPool(Runtime& runtime, PoolOptions options, EventFn on_event = nullptr);
  ~ModelPool();
  ModelPool(const ModelPool&) = delete;
  ModelPool& operator=(const ModelPool&) = delete;

  // Registers a model, or updates its spec (taking effect at its next load).
  void Add(ModelSpec spec);
  bool Contains(const std::string& name) const;

  // The model, loaded (on demand) and held for one call.
  // Errors: kNotFound (unknown), kUnavailable (not loaded and no on-demand
  // loading), kResourceExhausted (cannot fit the budget), load errors.
  Result<Lease> Acquire(const std::string& name, const AcquireOptions& options = {});

  // Runs `body` on the model; on kResourceExhausted the broken session is
  // dropped, idle models are evicted, arenas trimmed, and `body` runs once
  // more on a fresh load. Returns body's status.
  Status RunWithRecovery(const std::string& name, const AcquireOptions& options,
                         const std::function<Status(const std::shared_ptr<Session>&)>& body);

  // Loads a model now (evicting to fit) and keeps it loaded until a request
  // applies its keep-alive; unloads one (even pinned).
  Status Load(const std::string& name);
  Status Unload(const std::string& name);
  // Unloads a model (as Unload, waiting for a load in progress) and forgets
  // it: kNotFound afterwards, until it is Added again. A lease still out keeps
  // its session until it ends; the entry is erased when the last one ends.
  // Errors: kNotFound (unknown). Unload, Remove and Acquire may be called
  // concurrently on one model: whichever ends a wait after the entry was
  // removed gets kNotFound (Remove: Ok).
  Status Remove(const std::string& name);
  // Unloads idle models whose keep-alive ran out (the pool's thread does this too).
  void ReapNow();

  std::vector<ModelStatus> Snapshot() const;
  Result<ModelStatus> StatusOf(const std::string& name) const;
  // The inputs and outputs of the model's session, or of its last loaded one.
  // Errors: kNotFound (unknown), kUnavailable (never loaded).
  Result<ModelSignature> SignatureOf(const std::string& name) const;
  // Budget and charges in use on a device ("cpu", "cuda:0"); budget 0 = none.
  int64_t budget(const std::string& device) const;
  int64_t used(const std::string& device) const;

 private:
  struct Entry;
  friend class Lease;
  Result<Lease> AcquireImpl(const std::string& name, const AcquireOptions& options, bool on_demand);
  void Release(Lease& lease);
  // The entry of `name`, or null when unknown or removed. REQUIRES: mu_ held. Every wait on
  // changed_ may end with the entry erased (Remove, Release): callers look it up again after each.
  Entry* FindLocked(const std::string& name) const;
  int64_t ChargeOf(const Entry& e) const;
  int64_t UsedLocked(const std::string& device) const;
  std::string DeviceOf(const Entry& e) const;
  // Evicts idle models on `device` (LRU first) until `need` more bytes fit.
  bool MakeRoomLocked(const std::string& device, int64_t need, const std::string& except,
                      std::vector<PoolEvent>* events);
  void EvictLocked(Entry& e, EvictReason reason, std::vector<PoolEvent>* events);
  // Waits for a load of `name` in progress to end, then unloads it (Unload, Remove). Returns its
  // entry, or null when it was removed meanwhile. REQUIRES: lock held on mu_.
  Entry* UnloadLocked(const std::string& name, std::unique_lock<std::mutex>& lock, std::vector<PoolEvent>* events);
  // Loads `e`. REQUIRES: lock held, e in kLoading; released while loading.
  Status LoadLocked(Entry& e, bool on_demand, std::unique_lock<std::mutex>& lock, std::vector<PoolEvent>* events);
  void Emit(const std::vector<PoolEvent>& events) const;
  void Reaper();

  Runtime& runtime_;
  const PoolOptions options_;
  const EventFn on_event_;
  mutable std::mutex mu_;
  std::condition_variable changed_;                  // a load ended or a lease came back
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // guarded by mu_
  int in_flight_ = 0;                                // leases out, all models; guarded by mu_
  uint64_t generation_ = 0;                          // bumps on every Acquire; guarded by mu_
  std::mutex load_mu_;                               // one load at a time, so RSS growth is attributable
  bool stop_ = false;                                // guarded by mu_
  std::condition_variable stop_cv_;                  // wakes the reaper only to stop
  std::thread reaper_;
};

}  // namespace ebb
