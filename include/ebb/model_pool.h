// ebb/model_pool.h — many models on a device, within a memory budget, and runs
// admitted by the memory they will need.
//
// A ModelPool knows a set of named models (ModelSpec) and keeps loaded those
// that fit a per-device memory budget. Each loaded model carries a measured
// CHARGE: what loading it cost, i.e. what it holds while idle (the process RSS
// growth during its load, with loads serialised so the growth is its own; GPU
// memory growth on CUDA). Before its first load a model is charged its file
// size, the only thing known then, and the charge never falls below it after:
// a loaded model holds at least its weights, even when its load grew RSS by
// less (it reused pages an earlier load touched, or ORT maps its external data
// and reads it at the first run). The file size is that of all its files:
// model.onnx and its ONNX external-data files (ReadModelFiles), read again
// after each load. LOAD is the largest growth measured over the model's loads:
// a reload reads less when it reuses heap pages that its eviction freed but
// the heap kept (fragments malloc_trim cannot return), which the pool had
// already taken off the charges. Only loads with no lease out count (QUIET
// loads): beside one, the growth is also its runs' (serialised loads keep
// only other loads out); such a reading is taken until a quiet load
// replaces it, and raises nothing after. So charge = max(load, file size) (with admission off:
// max(load + transient, file size), below), plus what the caller says it
// holds for the model outside this measurement (SetOutsideBytes; 0 unless set). Not in it, measured: what a
// session's first run leaves behind. Its RSS grows by 0.3-0.7 MB then for the
// bundled models, but the heap bytes in use (mallinfo2) by 10-30 KB: the rest
// is free heap pages touched for the first time, which later loads and runs
// reuse (a third variant of a model reads 0), not a state the model holds.
//
// ADMISSION BY MEMORY (PoolOptions::admit_by_memory, on by default). A run is
// a lease acquired with AcquireOptions::run_elements (its input size; Run()
// and RunWithRecovery() with a size set it). Each model learns what its runs
// need beside its charge, as a function of their input size (ebb/run_need.h):
// a run that was alone in the pool is measured: on CPU its RSS high-water
// mark (reset through /proc/self/clear_refs) over its start, and, when it
// raised the shared arena's peak, that peak over what was in use at its start
// (its arena need, exact); on CUDA the peak of its session's own arena. Before
// a run starts, its predicted needs are RESERVED against what its device has
// left, less what the runs in flight there have reserved:
//   * its arena need against the shared CPU arena's cap, for CPU sessions
//     that allocate from it (its memory need where no arena need is known);
//   * its memory need (the RSS peak, at least the arena need) against the
//     budget (CPU: never above the machine's or the container's memory,
//     PhysicalMemoryBytes) minus the charges of the models loaded there. A run that does not fit
// waits, in arrival order per device (the first in line holds the others
// back), until reservations come back, up to its deadline (kUnavailable
// after it, kCancelled when AcquireOptions::cancelled says the caller left);
// when idle models' charges are what keeps it out, they are evicted (least
// recently used first) as for a load. A run that needs AT LEAST more than the
// device could ever give it, even alone, fails at once (kResourceExhausted,
// the need and the limit in the message); one whose prediction only (an upper
// bound: far beyond the sizes measured, it is loose) exceeds that runs alone.
// A model with no measurement yet runs ALONE on its device (it waits until the
// runs in flight there have drained, and holds the others back while it runs)
// to get one. As nothing predicts its need, idle models are evicted first
// (least recently used first) until the most it can take fits beside the
// charges: the shared CPU arena's cap, else the whole budget (every idle model
// goes). A model's first two measured runs (kRunsMeasuredAlone) run alone too,
// so that a need that follows the inputs' VALUES rather than their size (an output
// sized by a value: ConstantOfShape, Expand, Range, Resize with scales,
// NonMaxSuppression; the test model `zeros`, n -> f32[n]) shows before its runs
// go side by side. A measured run that needed more than twice what a run of
// the same size needed before (plus 32 MiB of slack for the noise of RSS
// readings) marks its model VALUE-DEPENDENT: its size predicts nothing, so
// every run of it runs alone from then on, measured (ModelStatus::
// value_dependent), and is refused only by the arena's cap, as it runs.
// What is sound under concurrency: nothing is measured while another lease is
// out (concurrent runs' RSS and arena peaks cannot be told apart); what else
// the process does meanwhile (a server decoding other requests) counts in an
// RSS measurement, which can only make it larger; the arena's peak is a
// high-water mark, so it teaches only runs that raise it; a prediction only
// grows, and it assumes a larger input never needs less. Under the idle release
// (the default) the shared arena keeps its free regions between runs, and a run
// that reuses them grows RSS by less than it needs: before a model's measured
// runs at its first two sizes the pool trims the runtime when the arena keeps
// more than kKeptArenaSlackBytes, so that they read as from an empty arena; a later
// reading over kept regions is a lower bound, which raises a prediction and
// never sets one below it. So with admission by memory off, before a model's
// first measured transient peak (part of its charge). Those kept regions are in
// no charge or reservation either: a load gives them back (a trim) before it
// adds its charge over them.
// Leases without run_elements (Load, a plain Acquire) reserve nothing.
//
// OUT OF MEMORY (RunWithRecovery): when a run still fails with
// kResourceExhausted (a prediction was low), the broken session and every idle
// model are evicted, arenas trimmed, and the run is retried ONCE, at the head
// of the line, ALONE: after the reservations in flight have drained, so that
// runs that failed together do not fail again together; the retry is measured
// and the model's prediction at that size raised to what was seen. With
// admission off, the retry is immediate (the behaviour before admission).
//
// Before a load, when the charge does not fit, idle models are evicted, least
// recently used first, until it fits. A model with a lease out (a call in
// flight) is never evicted, nor is a pinned one. If it still cannot fit, the
// caller gets kResourceExhausted, or waits for capacity when configured to
// (up to a timeout). A model charged more than the whole budget by itself is
// refused at once with kResourceExhausted, and unloaded if it was loaded (its
// charge measured larger than its file) and no call holds it.
//
// With admission off, a model's charge also holds the largest transient peak
// its operations were seen to need (measured as above, on its first 8 calls
// and then one in 16, or fewer, down to one in 256, while measurements find
// nothing new), once, whatever runs at the same time.
//
// keep_alive (per model, per request): unload after that much idle time;
// 0 unloads right after the request; negative never unloads. It is applied
// when a request's lease comes back. Load() is a lifecycle operation, not a
// request: it leaves the model loaded whatever the keep-alive, until a request
// to it applies its keep-alive again (or it is unloaded, or evicted to fit).
//
// Looking at a model (StatusOf, SignatureOf, Snapshot, PredictNeed) never
// loads it, never counts as a use, and never evicts another.
//
// States: UNLOADED --Acquire/Load--> LOADING --ok--> READY --evict/unload--> UNLOADED
//                                       \--error--> UNLOADED (reason kept)
// A run:  arrives --(first in line, fits)--> reserved --(lease back)--> returned
//            \--(deadline / cancelled / never fits)--> refused
//
// Thread safety: all methods may be called concurrently. A background thread
// unloads models whose keep-alive ran out.
//
// Ownership: a pool made by the constructor borrows its runtime (which must
// outlive it); one made by Create() shares the ownership of its runtime, so
// that a binding's handles on the runtime, the pool and its leases may go in
// any order (a lease needs its pool: the holder of a lease keeps the pool's
// shared_ptr too).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ebb/model_signature.h"
#include "ebb/run_need.h"
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

  // Admission by memory (see the file comment): runs reserve their predicted
  // need and wait for it. Off: the behaviour before it (runs are not reserved,
  // a charge holds one transient peak, an out-of-memory run is retried at once),
  // kept to compare against (`ebb bench concurrency`, `ebb serve
  // --no-memory-admission`).
  bool admit_by_memory = true;
  // How long a run waits for memory when its AcquireOptions give no deadline;
  // then kUnavailable. A minute: longer than a run of any model measured here,
  // shorter than the clients' usual timeouts. At most kMaxWaitForCapacityMs.
  std::chrono::milliseconds wait_for_memory{60000};
};

// Whether `options` hold budgets that mean something: bytes >= 0, fractions
// finite numbers in [0, 1] (NaN or a negative value would convert to an
// undefined byte count). Errors: kInvalidArgument naming the field.
Status CheckPoolOptions(const PoolOptions& options);

enum class PoolState { kUnloaded, kLoading, kReady };
const char* PoolStateName(PoolState state);  // "UNAVAILABLE", "LOADING", "READY"

enum class EvictReason { kBudget, kKeepAlive, kOutOfMemory, kUnload };
const char* EvictReasonName(EvictReason reason);  // "budget", "keep_alive", "out_of_memory", "unload"

// The elements of a run's inputs, all together (what a RunNeed is a function of).
int64_t InputElements(const std::vector<NamedTensor>& inputs);

struct ModelStatus {
  std::string name;
  PoolState state = PoolState::kUnloaded;
  std::string device;            // where it runs (or would: the request's kind)
  std::string reason;            // why it is not loaded, when known
  int64_t charge_bytes = 0;      // max(load_bytes, file size) (with admission off: + transient_bytes);
                                 // the file size before a first load; + SetOutsideBytes's
                                 // (file size: model.onnx and its external-data files)
  int64_t load_bytes = 0;        // the largest measured over its loads (of this file)
  int64_t transient_bytes = 0;   // largest operation peak seen
  int in_flight = 0;
  bool pinned = false;
  uint64_t loads = 0;
  // Admission by memory:
  std::vector<NeedPoint> need_points;        // the memory (RSS) its runs were measured to need, by input size
  std::vector<NeedPoint> arena_need_points;  // the shared arena they were measured to need (CPU)
  int64_t last_run_elements = 0;       // the latest run admitted: its input size,
  int64_t last_need_bytes = 0;         // what it reserved against the budget (its prediction; 0 when it ran
  int64_t last_arena_need_bytes = 0;   // alone to be measured), and against the arena's cap
  int64_t reserved_bytes = 0;          // reserved by its runs in flight now (against the budget)
  int waiting_for_memory = 0;          // its runs waiting for memory now
  uint64_t out_of_memory = 0;          // runs that failed with out-of-memory (each raised its prediction)
  int measured_runs = 0;               // runs measured (alone in the process)
  bool value_dependent = false;        // its runs' needs follow their inputs' values: each runs alone
};

// What a run is predicted to need (ebb/run_need.h: Predict, an upper bound, is
// reserved; AtLeast, a lower bound, is what a refusal rests on).
struct NeedPrediction {
  int64_t memory_bytes = 0;  // memory (RSS), reserved against the budget
  int64_t arena_bytes = 0;   // of it, in the shared CPU arena: reserved against its cap
  int64_t memory_at_least = 0;
  int64_t arena_at_least = 0;
};

// Admission by memory on one device, now and so far.
struct DeviceAdmission {
  std::string device;             // "cpu", "cuda:0"
  int64_t memory_limit_bytes = 0; // what runs may reserve against the budget now: the budget (CPU: at most the
                                  // machine's or container's memory) less the loaded models' charges; -1 = none
  int64_t reserved_bytes = 0;     // reserved against it by runs in flight
  int64_t held_bytes = 0;         // and by callers' outputs and replies after their runs (MemoryHold)
  int64_t arena_cap_bytes = 0;    // the shared CPU arena's cap (0: none)
  int64_t arena_reserved_bytes = 0;  // reserved against the cap by runs in flight
  int runs = 0;                   // runs in flight with a reservation
  bool alone = false;             // a run holds the device alone (first measurement, out-of-memory retry)
  int waiting = 0;                // runs waiting for memory now
  uint64_t admitted = 0;          // runs admitted so far,
  uint64_t waited = 0;            // of which had to wait,
  double wait_seconds = 0;        // for this long in all
  uint64_t refused = 0;           // runs that could never fit
  uint64_t timed_out = 0;         // runs whose deadline passed while waiting
  uint64_t cancelled = 0;         // runs whose caller left while waiting
};

// What the pool did, for metrics and logs.
struct PoolEvent {
  // kWait: a run waited for memory (only runs that waited), admitted or not.
  enum class Kind { kLoad, kEvict, kWait } kind = Kind::kLoad;
  std::string name;
  bool on_demand = false;              // kLoad: a request needed it
  double load_ms = 0;                  // kLoad: how long the load took (the switch latency)
  EvictReason reason = EvictReason::kBudget;  // kEvict
  double wait_ms = 0;                  // kWait: how long it waited
  bool admitted = false;               // kWait: whether it then ran (else: deadline, cancelled, removed)
};

class ModelPool;
namespace detail {
struct PoolEntry;  // a model in a ModelPool (src/pool/model_pool_internal.h)
}  // namespace detail

struct AcquireOptions {
  std::optional<int64_t> keep_alive_ms;  // this request's keep_alive
  bool load_on_demand = true;
  // The lease is for one run (or one operation) whose inputs hold this many
  // elements in all (InputElements): its predicted need is reserved before the
  // lease is handed out, and returned with it (admission by memory). Unset:
  // nothing is reserved (Load, inspection, callers who admit themselves).
  // A caller that holds a run lease and asks for another on the same device
  // may wait for its own reservation (until the deadline): release the first,
  // or take the second without run_elements.
  std::optional<int64_t> run_elements;
  // The latest moment a run waits for memory; unset: now + PoolOptions::wait_for_memory.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Polled (every 20 ms) while a run waits for memory, with the pool's lock
  // held: true means its caller went away, and it leaves the line with
  // kCancelled. Must be cheap and must not call the pool.
  std::function<bool()> cancelled;
};

// A model held for one call: while a Lease is alive the model is not evicted.
class Lease {
 public:
  Lease(Lease&&) noexcept = default;
  Lease& operator=(Lease&&) = delete;
  Lease(const Lease&) = delete;
  ~Lease();

  const std::shared_ptr<Session>& session() const { return session_; }
  const std::string& name() const { return name_; }

 private:
  friend class ModelPool;
  Lease(ModelPool* pool, std::string name, std::shared_ptr<Session> session, std::optional<int64_t> keep_alive_ms)
      : pool_(pool), name_(std::move(name)), session_(std::move(session)) {
    r_.keep_alive_ms = keep_alive_ms;
  }

  // The pool the lease goes back to; null once moved from (so the move is the default one).
  struct PoolRef {
    ModelPool* pool = nullptr;
    PoolRef(ModelPool* p) : pool(p) {}  // NOLINT: implicit, from the pool
    PoolRef(PoolRef&& o) noexcept : pool(std::exchange(o.pool, nullptr)) {}
    PoolRef& operator=(PoolRef&&) = delete;
    operator ModelPool*() const { return pool; }  // NOLINT
    ModelPool* operator->() const { return pool; }
  };
  // What the pool keeps for the lease until it comes back: its keep-alive, its
  // measurement, and its reservation under admission by memory.
  struct Reservation {
    std::optional<int64_t> keep_alive_ms;
    bool lifecycle = false;           // held by Load(), not by a request: keep-alive does not apply
    uint64_t measure_generation = 0;  // non-zero: this lease measures its model's transient peak
    bool scheduled_measurement = false;  // its call was due a measurement after the first ones (not a new size)
    int64_t rss_at_start = 0;
    // Admission by memory (a run lease):
    std::string device;               // where its reservation is ("" = none)
    int64_t reserved = 0;             // bytes reserved against the budget
    int64_t arena_reserved = 0;       // and against the shared arena's cap
    bool alone = false;               // it holds its device alone
    int64_t run_elements = -1;        // its input size (-1: not a run)
    bool retry = false;               // an out-of-memory retry: its measurement raises the prediction
    int64_t predicted = -1;           // its predictions when admitted (-1: none)
    int64_t arena_predicted = -1;
    int64_t arena_in_use_at_start = -1;  // shared arena (CPU) or own arena (CUDA) at the start, when measuring
    int64_t arena_peak_at_start = -1;
    // Free regions the shared arena kept at the start (CPU, measuring): a run that reuses them
    // grows RSS by less than it needs, so its reading is a lower bound.
    int64_t arena_kept_at_start = 0;
  };

  PoolRef pool_;
  std::string name_;
  detail::PoolEntry* entry_ = nullptr;  // its model's entry, which stays while a lease is out
  std::shared_ptr<Session> session_;
  Reservation r_;
};

// Memory a caller keeps after a run's lease ends (ModelPool::HoldMemory): the outputs it took,
// the reply a server encodes from them. Reserved against its device's budget as a run's need is,
// until the hold goes. Move-only; REQUIRES: the pool outlives it.
class MemoryHold {
 public:
  MemoryHold() = default;
  MemoryHold(MemoryHold&& other) noexcept
      : pool_(std::exchange(other.pool_, nullptr)), line_(other.line_), bytes_(other.bytes_) {}
  // Inline: a reply moves its hold several times on its way out, into an empty one as a rule.
  MemoryHold& operator=(MemoryHold&& other) noexcept {
    if (this != &other) {
      if (pool_) Release();
      pool_ = std::exchange(other.pool_, nullptr);
      line_ = other.line_;
      bytes_ = other.bytes_;
    }
    return *this;
  }
  MemoryHold(const MemoryHold&) = delete;
  MemoryHold& operator=(const MemoryHold&) = delete;
  ~MemoryHold() {
    if (pool_) Release();
  }
  int64_t bytes() const { return pool_ ? bytes_ : 0; }

 private:
  friend class ModelPool;
  MemoryHold(ModelPool* pool, void* line, int64_t bytes) : pool_(pool), line_(line), bytes_(bytes) {}
  void Release();  // gives the bytes back to the pool
  ModelPool* pool_ = nullptr;
  void* line_ = nullptr;  // its device's ModelPool::Line (lines are never erased): moved as a pointer, not a name
  int64_t bytes_ = 0;
};

class ModelPool {
 public:
  using EventFn = std::function<void(const PoolEvent&)>;

  // REQUIRES: runtime outlives the pool. `on_event` is called outside locks.
  ModelPool(Runtime& runtime, PoolOptions options, EventFn on_event = nullptr);
  // A pool that keeps `runtime` alive as long as it lives. Its last owner may
  // let it go on any thread, the pool's own keep-alive thread included (in
  // on_event): there the pool is destroyed on a thread of its own, once the
  // keep-alive thread returned from the callback (the pool's destructor joins
  // that thread; should even a thread not start, the pool is left allocated
  // rather than aborting). REQUIRES: runtime is not null.
  static std::shared_ptr<ModelPool> Create(std::shared_ptr<Runtime> runtime, PoolOptions options,
                                           EventFn on_event = nullptr);
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

  // Runs `body` on the model (one run or operation: set options.run_elements
  // for admission by memory); on kResourceExhausted the broken session is
  // dropped, idle models are evicted, arenas trimmed, and `body` runs once
  // more on a fresh load, alone (after the reservations in flight drained)
  // when admission is on. Returns body's status, or Acquire's errors, plus
  // kUnavailable (deadline) and kCancelled while waiting for memory.
  Status RunWithRecovery(const std::string& name, const AcquireOptions& options,
                         const std::function<Status(const std::shared_ptr<Session>&)>& body);
  // One Session::Run of the model with admission by memory (run_elements set
  // from `inputs`) and RunWithRecovery's recovery.
  Result<std::vector<NamedTensor>> Run(const std::string& name, const std::vector<NamedTensor>& inputs,
                                       const RunFlags& flags = {}, AcquireOptions options = {});

  // Reserves `bytes` on `device` (admission by memory) for memory a caller keeps after its run's
  // lease ends (its outputs, the reply it encodes from them), until the hold goes: runs admitted
  // meanwhile get what is left, and a run alone waits for holds to go as for runs in flight. Taken
  // at once, whatever is left: the memory is already there. Without admission, an empty hold.
  MemoryHold HoldMemory(const std::string& device, int64_t bytes);
  // Whether any MemoryHold is out, on any device: a lock-free read, for a caller deciding whether a
  // run could start without waiting (a run alone waits for every hold to go).
  bool HoldingMemory() const { return holds_out_.load(std::memory_order_acquire) > 0; }

  // Memory the caller holds for a model outside what the pool measures (a
  // server's per-model state, say), added to its charge from now on, so that
  // the budget covers it too; it replaces the previous value (0 at first)
  // and survives evictions and reloads. When the model is loaded, idle
  // models are evicted (least recently used first) until the charges fit
  // again, as after a load measured larger. Errors: kNotFound (unknown),
  // kInvalidArgument (negative).
  Status SetOutsideBytes(const std::string& name, int64_t bytes);

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
  // Whether the caller is the pool's own keep-alive thread (in on_event), where the pool must not be
  // destroyed: its destructor joins that thread.
  bool OnKeepAliveThread() const { return std::this_thread::get_id() == reaper_.get_id(); }

  std::vector<ModelStatus> Snapshot() const;
  Result<ModelStatus> StatusOf(const std::string& name) const;
  // Whether the model is loaded and ready now (StatusOf(name)->state == kReady, without the copy).
  bool IsReady(const std::string& name) const;
  // The inputs and outputs of the model's session, or of its last loaded one.
  // Errors: kNotFound (unknown), kUnavailable (never loaded).
  Result<ModelSignature> SignatureOf(const std::string& name) const;
  // Budget and charges in use on a device ("cpu", "cuda:0"); budget 0 = none.
  int64_t budget(const std::string& device) const;
  int64_t used(const std::string& device) const;
  // What a run of `input_elements` is predicted to need (nullopt: not measured
  // yet). Errors: kNotFound.
  Result<std::optional<NeedPrediction>> PredictNeed(const std::string& name, int64_t input_elements) const;
  // Admission by memory per device that has seen runs.
  std::vector<DeviceAdmission> Admission() const;

 private:
  using Entry = detail::PoolEntry;
  friend class Lease;
  friend class MemoryHold;
  void ReleaseHold(const MemoryHold& hold);
  struct Line;  // the runs of one device: reservations and the waiting line
  struct Reserved {
    int64_t bytes = 0;        // against the budget
    int64_t arena_bytes = 0;  // against the shared arena's cap
    bool alone = false;
    int64_t predicted = -1;   // -1: no prediction (not measured yet)
    int64_t arena_predicted = -1;
  };
  // What runs on a device may reserve in all; -1 = unbounded. ArenaWhy() and MemoryWhy() name each limit.
  struct Limits {
    int64_t arena = -1;  // the shared arena's cap (CPU)
    int64_t memory = -1; // the budget or the machine's (container's) memory, less charges
    // What `memory` was made of, for messages: they are written only when a run waits or is
    // refused (formatting them for every admitted run cost more than the rest of admission).
    std::string_view device;  // the caller's, alive while the Limits are used (under the pool's lock)
    int64_t room = 0, charges = 0;
    bool physical = false, alone = false;
    std::string ArenaWhy() const;
    std::string MemoryWhy() const;
  };
  enum class Admit { kAdmitted, kWait, kRefused };
  // A run's place in its device's line while it waits for memory.
  struct RunPlace {
    uint64_t ticket = 0;  // 0: none
    std::string device;
    bool waited = false;
  };
  // `retry`: an out-of-memory retry (first in line, alone, measured), holding
  // the place `retry_ticket` took in `retry_device`'s line before its failed
  // run's reservation came back (0: none).
  Result<Lease> AcquireImpl(const std::string& name, const AcquireOptions& options, bool on_demand,
                            bool retry = false, uint64_t retry_ticket = 0, const std::string& retry_device = "");
  // AcquireImpl's steps, on one Acquire in progress. REQUIRES: mu_ held (through `lock` where given;
  // the steps that wait release it meanwhile and look the entry up again after).
  struct Acquisition;  // what it asked for, its deadlines, its place in line, its outcome so far
  // What a step leaves: look again (after a wait or a load), the lease may go, refused (`failure`
  // set), no room without a wait, or not loaded and not to be loaded (`failure` set).
  enum class Step { kAgain, kDone, kFailed, kNoRoom, kNotLoaded };
  // Looks the entry up again after a wait; false (`failure`: removed) when it is gone.
  bool StillThereLocked(Acquisition& a);
  // Waits while a load of the model is in progress; false (`failure` set) when it was removed meanwhile.
  bool WaitWhileLoadingLocked(Acquisition& a, std::unique_lock<std::mutex>& lock);
  // True (`failure` set) when the model's charge exceeds the whole budget: no eviction or wait can
  // make room. It is then unloaded unless in use or pinned.
  bool RefusedEvenAloneLocked(Acquisition& a, Entry& e);
  // A loaded model: evicts idle ones until the loaded models fit; a run then takes its place in
  // line and its reservation (kDone), is refused (kFailed), or waited once (kAgain).
  Step MakeRoomToRunLocked(Acquisition& a, Entry& e, std::unique_lock<std::mutex>& lock);
  // An unloaded model: evicts idle ones until its charge fits, then loads it (kAgain, or kFailed
  // with the load's error); kNotLoaded when the caller does not load on demand.
  Step LoadToRunLocked(Acquisition& a, Entry& e, std::unique_lock<std::mutex>& lock);
  // No room without evicting a model in flight or pinned: waits for capacity until the deadline
  // (kAgain), then kFailed with kResourceExhausted.
  Step WaitForCapacityLocked(Acquisition& a, Entry& e, std::unique_lock<std::mutex>& lock);
  // Leaves the line, counts a wait, and hands out the lease (or returns `failure`); emits the
  // events outside the lock.
  Result<Lease> HandOutLeaseLocked(Acquisition& a, std::unique_lock<std::mutex>& lock);
  // Admission of a run of `e` (READY) for the waiter `ticket` (0: a run not in line, while the line
  // is empty): kAdmitted with
  // `*reserved` taken, kWait, or kRefused with `*refusal`. REQUIRES: mu_ held.
  Admit TryAdmitLocked(Entry& e, int64_t elements, uint64_t ticket, bool retry, Reserved* reserved,
                       Status* refusal, std::vector<PoolEvent>* events);
  // Takes (or keeps) `place` in `e`'s device's line, then admits the run
  // (kAdmitted, `*reserved` taken), refuses it (kRefused, `*failure`: it could
  // never fit, its deadline passed, its caller left), or waits once, until a
  // reservation comes back, the deadline or the next poll of `cancelled`
  // (kWait: the caller looks its entry up again and calls once more).
  // REQUIRES: mu_ held through `lock`, `e` READY.
  Admit AdmitOrWaitLocked(Entry& e, const AcquireOptions& options, int64_t elements, bool retry,
                          std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point deadline,
                          std::unique_lock<std::mutex>& lock, RunPlace* place, Reserved* reserved, Status* failure,
                          std::vector<PoolEvent>* events);
  void LeaveLineLocked(RunPlace* place);
  // What runs on `device` may reserve in all. `alone`: with every other model
  // evicted (only `own_charge` left). REQUIRES: mu_ held.
  // `used`: UsedLocked(device) when the caller has it (else < 0: read here, where needed).
  Limits RunLimitsLocked(const std::string& device, int64_t own_charge, bool alone, int64_t used = -1) const;
  // A run's predicted needs: memory, arena (nullopt: not measured). REQUIRES: mu_ held.
  std::pair<std::optional<int64_t>, std::optional<int64_t>> PredictLocked(const Entry& e, int64_t elements) const;
  // Why a run waits, for the message of one that waited too long. REQUIRES: mu_ held.
  std::string WaitReasonLocked(const Entry& e, int64_t elements, bool retry) const;
  // Whether the lease is one of its model's first measured runs (of a run lease: its need at its
  // first two sizes; else, with admission by memory off, its transient peak, part of the charge)
  // while the shared arena keeps more than kKeptArenaSlackBytes of free regions (under the idle
  // release, until runs pause): its reading would miss what it reuses, so the runtime is trimmed
  // first. REQUIRES: mu_ held.
  bool FirstMeasurementOverKeptArenaLocked(const Entry& e, const Lease& lease) const;
  // The free regions the shared CPU arena keeps until the idle release gives them back (reserved
  // less in use; 0 without a shared arena or under another release mode, which keeps them as it
  // chose: never, or released at their operation's end).
  int64_t SharedArenaKeptBytes() const;
  void StartMeasuringLocked(Entry& e, Lease& lease);
  void NoteValueDependenceLocked(Entry& e, const RunNeed& basis, const Lease& lease, int64_t seen);
  void FinishMeasuringLocked(Entry& e, const Lease& lease);
  void ReturnReservationLocked(const Lease& lease);
  ModelStatus StatusLocked(const std::string& name, const Entry& e) const;
  Line& LineOf(const std::string& device);
  void Release(Lease& lease);
  // The entry of `name`, or null when unknown or removed. REQUIRES: mu_ held. Every wait on
  // changed_ may end with the entry erased (Remove, Release): callers look it up again after each.
  Entry* FindLocked(const std::string& name) const;
  // Forgets an entry: out of entries_ and all_ together (the only way one leaves them). Destroys *e.
  void EraseEntryLocked(Entry* e);
  int64_t ChargeOf(const Entry& e) const;
  int64_t UsedLocked(const std::string& device) const;
  // Where the entry runs: its resolved device once loaded, else the one its spec asks for.
  const std::string& DeviceOf(const Entry& e) const;
  bool IsOn(const Entry& e, const std::string& device) const;  // DeviceOf(e) == device
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

  std::shared_ptr<Runtime> owned_runtime_;  // Create()'s: declared first, so it goes last
  Runtime& runtime_;
  const PoolOptions options_;
  const EventFn on_event_;
  mutable std::mutex mu_;
  std::atomic<int64_t> holds_out_{0};  // MemoryHolds alive (HoldingMemory); changed under mu_
  std::condition_variable changed_;                  // a load ended or a lease came back
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // guarded by mu_
  std::vector<Entry*> all_;  // entries_'s, in one array for the loops of every run (UsedLocked); guarded by mu_
  // The entry FindLocked found last, kept at hand (one model asked for many times in a row; a map
  // lookup compares names all the way down); guarded by mu_, cleared by EraseEntryLocked.
  mutable Entry* found_ = nullptr;
  int in_flight_ = 0;                                // leases out, all models; guarded by mu_
  uint64_t leases_handed_ = 0;                       // leases handed out so far, all models; guarded by mu_
  // Bumps on every Acquire and as a load starts: a run measured across a bump shared the process
  // with another lease or a load, and its peak is not its own (no run starts being measured while
  // `loading_`, so a load's end needs no bump). Guarded by mu_.
  uint64_t generation_ = 0;
  int loading_ = 0;                                  // loads in progress; guarded by mu_
  std::map<std::string, std::unique_ptr<Line>> lines_;  // per device; guarded by mu_
  Line* cpu_line_ = nullptr;  // lines_["cpu"] once made (LineOf); guarded by mu_
  uint64_t next_ticket_ = 0;                         // guarded by mu_
  std::mutex load_mu_;                               // one load at a time, so RSS growth is attributable
  bool stop_ = false;                                // guarded by mu_
  std::condition_variable stop_cv_;                  // wakes the reaper only to stop
  std::thread reaper_;
};

}  // namespace ebb
