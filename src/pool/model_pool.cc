#include "ebb/model_pool.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "ebb/model_signature.h"
#include "log.h"
#include "model_pool_internal.h"
#include "port.h"

namespace ebb {

using Clock = PoolClock;

namespace {

// The bytes of every file the model reads: the model file and its external-data
// files (what its weights take at least, once loaded); the model file's size
// alone when they cannot be listed (its load then says why); 0 without a file.
int64_t ModelBytes(const std::string& path) {
  if (Result<ModelFiles> files = ReadModelFiles(path); files.ok()) return files->total_bytes;
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(bytes);
}

// A budget fraction as a byte count: NaN and values outside [0, 1] (which CheckPoolOptions refuses)
// are clamped, never converted undefined.
int64_t FractionOf(double fraction, int64_t total) {
  if (!(fraction > 0)) return 0;
  return static_cast<int64_t>(std::min(fraction, 1.0) * static_cast<double>(total));
}

}  // namespace

Status CheckPoolOptions(const PoolOptions& options) {
  const auto fraction_ok = [](double f) { return std::isfinite(f) && f >= 0 && f <= 1; };
  if (options.cpu_budget_bytes < 0 || options.cuda_budget_bytes < 0) {
    return InvalidArgument("a memory budget in bytes must be >= 0 (0 = a fraction of memory), got " +
                           std::to_string(options.cpu_budget_bytes < 0 ? options.cpu_budget_bytes
                                                                       : options.cuda_budget_bytes));
  }
  if (!fraction_ok(options.cpu_budget_fraction) || !fraction_ok(options.cuda_budget_fraction)) {
    return InvalidArgument("a memory budget fraction must be a number in [0, 1], got " +
                           std::to_string(fraction_ok(options.cpu_budget_fraction) ? options.cuda_budget_fraction
                                                                                   : options.cpu_budget_fraction));
  }
  return Status::Ok();
}

const char* PoolStateName(PoolState state) {
  switch (state) {
    case PoolState::kUnloaded: return "UNAVAILABLE";
    case PoolState::kLoading: return "LOADING";
    case PoolState::kReady: return "READY";
  }
  return "UNKNOWN";
}

const char* EvictReasonName(EvictReason reason) {
  switch (reason) {
    case EvictReason::kBudget: return "budget";
    case EvictReason::kKeepAlive: return "keep_alive";
    case EvictReason::kOutOfMemory: return "out_of_memory";
    case EvictReason::kUnload: return "unload";
  }
  return "unknown";
}

namespace detail {

void ResetPeakRss() { port::ResetPeakResident(); }

int64_t GpuUsed(int index) {
  for (const GpuMemory& g : ReadGpuMemory()) {
    if (g.index == index) return g.used;
  }
  return 0;
}

}  // namespace detail

int64_t InputElements(const std::vector<NamedTensor>& inputs) {
  int64_t elements = 0;
  for (const NamedTensor& input : inputs) elements += input.tensor.element_count();
  return elements;
}

Lease::~Lease() {
  if (pool_) pool_->Release(*this);
}

ModelPool::ModelPool(Runtime& runtime, PoolOptions options, EventFn on_event)
    : runtime_(runtime), options_(options), on_event_(std::move(on_event)) {
  reaper_ = std::thread([this] { Reaper(); });
}

std::shared_ptr<ModelPool> ModelPool::Create(std::shared_ptr<Runtime> runtime, PoolOptions options,
                                             EventFn on_event) {
  auto pool = std::make_unique<ModelPool>(*runtime, options, std::move(on_event));
  pool->owned_runtime_ = std::move(runtime);
  // Let go on the keep-alive thread (a lease ended in on_event), the pool cannot join that thread
  // there: a thread of its own destroys it.
  return std::shared_ptr<ModelPool>(pool.release(), [](ModelPool* p) noexcept {
    if (p->OnKeepAliveThread()) {
      try {
        std::thread([p] { delete p; }).detach();
      } catch (...) {
      }
      return;
    }
    delete p;
  });
}

ModelPool::~ModelPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  reaper_.join();
}

void ModelPool::Add(ModelSpec spec) {
  const int64_t file_bytes = ModelBytes(spec.path);
  spec.load.name = spec.name;
  std::lock_guard<std::mutex> lock(mu_);
  auto& e = entries_[spec.name];
  if (!e) {
    e = std::make_unique<Entry>();
    all_.push_back(e.get());
  }
  if (e->spec.path != spec.path) {  // another file: what its runs need is not known
    e->need = RunNeed();
    e->arena_need = RunNeed();
    e->measured_runs = 0;
    e->measure_every = kMeasureEvery;
    e->value_dependent = false;
    e->load_bytes = 0;
    e->load_quiet = false;
  }
  e->removed = false;
  e->file_bytes = file_bytes;
  e->spec = std::move(spec);
  const DeviceRequest& d = e->spec.load.device;
  e->requested_device = d.kind == DeviceRequest::Kind::kCuda ? d.ToString() : "cpu";
}

ModelPool::Entry* ModelPool::FindLocked(const std::string& name) const {
  if (!found_ || found_->spec.name != name) {
    const auto it = entries_.find(name);
    if (it == entries_.end()) return nullptr;
    found_ = it->second.get();
  }
  return found_->removed ? nullptr : found_;
}

void ModelPool::EraseEntryLocked(Entry* e) {
  if (found_ == e) found_ = nullptr;
  std::erase(all_, e);
  const std::string name = e->spec.name;  // the key outlives the entry it names
  entries_.erase(name);
}

bool ModelPool::Contains(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return FindLocked(name) != nullptr;
}

const std::string& ModelPool::DeviceOf(const Entry& e) const {
  return e.device.empty() ? e.requested_device : e.device;
}

bool ModelPool::IsOn(const Entry& e, const std::string& device) const { return DeviceOf(e) == device; }

int64_t ModelPool::ChargeOf(const Entry& e) const {
  // Never below the file size: a loaded model holds its weights, even when its load's RSS growth
  // reads smaller (it reused heap pages that earlier loads had touched and the trim kept). With
  // admission by memory a run reserves its transient need while it runs; without, the charge
  // holds the largest one seen, once. What its owner holds for it outside the measurement comes on top.
  if (!e.loaded_once) return e.file_bytes + e.outside_bytes;
  return std::max(e.load_bytes + (options_.admit_by_memory ? 0 : e.transient_bytes), e.file_bytes) + e.outside_bytes;
}

int64_t ModelPool::budget(const std::string& device) const {
  if (IsCpu(device)) {
    return options_.cpu_budget_bytes
               ? options_.cpu_budget_bytes
               : FractionOf(options_.cpu_budget_fraction, PhysicalMemoryBytes());
  }
  if (options_.cuda_budget_bytes) return options_.cuda_budget_bytes;
  auto request = DeviceRequest::Parse(device);
  for (const GpuMemory& g : ReadGpuMemory()) {
    if (request.ok() && g.index == request->index) {
      return FractionOf(options_.cuda_budget_fraction, static_cast<int64_t>(g.total));
    }
  }
  return 0;  // unknown: no budget
}

int64_t ModelPool::UsedLocked(const std::string& device) const {
  int64_t used = 0;
  for (const Entry* e : all_) {
    if (e->state != PoolState::kUnloaded && IsOn(*e, device)) used += ChargeOf(*e);
  }
  return used;
}

int64_t ModelPool::used(const std::string& device) const {
  std::lock_guard<std::mutex> lock(mu_);
  return UsedLocked(device);
}

void ModelPool::EvictLocked(Entry& e, EvictReason reason, std::vector<PoolEvent>* events) {
  if (e.session) runtime_.Unload(*e.session);  // out of the cache; freed with its last lease
  e.session.reset();
  e.state = PoolState::kUnloaded;
  e.device.clear();
  e.reason = std::string("evicted: ") + EvictReasonName(reason);
  events->push_back({PoolEvent::Kind::kEvict, e.spec.name, false, 0, reason});
}

bool ModelPool::MakeRoomLocked(const std::string& device, int64_t need, const std::string& except,
                               std::vector<PoolEvent>* events) {
  const int64_t limit = budget(device);
  if (limit <= 0) return true;
  while (UsedLocked(device) + need > limit) {
    Entry* victim = nullptr;
    for (auto& [name, e] : entries_) {
      if (name == except || e->state != PoolState::kReady || e->in_flight > 0 || e->spec.pinned) continue;
      if (!IsOn(*e, device)) continue;
      if (!victim || e->last_used < victim->last_used) victim = e.get();
    }
    if (!victim) return false;
    EvictLocked(*victim, EvictReason::kBudget, events);
  }
  return true;
}

Status ModelPool::LoadLocked(Entry& e, bool on_demand, std::unique_lock<std::mutex>& lock,
                             std::vector<PoolEvent>* events) {
  const ModelSpec spec = e.spec;
  // A load grows RSS: no run is measured across it (its growth would be charged to that run): the
  // bump ends the measuring of runs in flight, and none starts until `loading_` is back to 0.
  ++loading_;
  ++generation_;
  // Whether a lease is out at any moment of the load (one out now, or one handed out before its end).
  const bool leases_at_start = in_flight_ > 0;
  const uint64_t leases_before = leases_handed_;
  lock.unlock();
  Result<std::shared_ptr<Session>> session = Status(Internal("not loaded"));
  int64_t grew = 0;
  const auto start = Clock::now();
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::lock_guard<std::mutex> one_load(load_mu_);
    const bool cuda = spec.load.device.kind == DeviceRequest::Kind::kCuda;
    // Load trims the heap after building the session; trim it before too, so
    // that the growth is the model's idle cost, not heap that others freed
    // earlier. Arenas follow the release mode, except the free regions the
    // shared arena keeps after runs (the idle release's, until runs pause):
    // they are in no charge or reservation, so they go back before a charge is
    // added over them (the runtime's trim, which never shrinks under a run).
    if (!cuda && SharedArenaKeptBytes() > kKeptArenaSlackBytes) {
      (void)runtime_.Trim();
    } else if (!cuda && runtime_.policy().trim_heap_after_release) {
      port::TrimHeap();
    }
    const int64_t before = cuda ? detail::GpuUsed(spec.load.device.index) : ReadRssBytes();
    session = runtime_.Load(spec.path, spec.load);
    if (session.ok()) {
      const bool on_gpu = (*session)->device().kind == DeviceKind::kCuda;
      grew = (on_gpu ? detail::GpuUsed((*session)->device().index) : ReadRssBytes()) - before;
      break;
    }
    if (session.status().code() != StatusCode::kResourceExhausted || attempt == 1) break;
    // A real out-of-memory while loading: evict every idle model, trim, retry once.
    lock.lock();
    for (auto& [name, other] : entries_) {
      if (other.get() != &e && other->state == PoolState::kReady && other->in_flight == 0 && !other->spec.pinned) {
        EvictLocked(*other, EvictReason::kOutOfMemory, events);
      }
    }
    lock.unlock();
    (void)runtime_.Trim();
  }
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  // The files as loaded now (weights may have been replaced since Add).
  const int64_t file_bytes = session.ok() ? ModelBytes(spec.path) : 0;
  lock.lock();
  --loading_;
  if (!session.ok()) {
    e.state = PoolState::kUnloaded;
    e.reason = session.status().message();
    changed_.notify_all();
    return session.status();
  }
  e.session = *session;
  e.signature = ModelSignature{(*session)->inputs(), (*session)->outputs()};
  e.device = (*session)->device().ToString();
  e.state = PoolState::kReady;
  e.reason.clear();
  // The largest load measured: a reload reads less when it reuses heap pages that its model's
  // eviction freed but the heap kept (fragments malloc_trim cannot return), pages the pool took back
  // from the charges at the eviction; charged the smaller reading, evicted and reloaded models
  // drifted below what RSS held (2 MiB for two detectors over 16 requests of `ebb bench switch`).
  // A load beside leases out is not its own: their runs grew (or shrank) RSS meanwhile, by up to a
  // run's whole transient (a storm of tiny models read up to 1.2 MiB for a 40 KiB load). Such a
  // reading counts only until a load with no lease out measures the model, which replaces it.
  const int64_t reading = std::max<int64_t>(grew, 0);
  if (!leases_at_start && leases_handed_ == leases_before) {
    e.load_bytes = e.load_quiet ? std::max(e.load_bytes, reading) : reading;
    e.load_quiet = true;
  } else if (!e.load_quiet) {
    e.load_bytes = std::max(e.load_bytes, reading);
  }
  e.file_bytes = file_bytes;
  e.loaded_once = true;
  e.last_used = Clock::now();
  ++e.loads;
  events->push_back({PoolEvent::Kind::kLoad, spec.name, on_demand, load_ms, EvictReason::kBudget});
  // The measured charge may exceed the provisional one: make room for it.
  (void)MakeRoomLocked(e.device, 0, spec.name, events);
  changed_.notify_all();
  return Status::Ok();
}

Result<Lease> ModelPool::Acquire(const std::string& name, const AcquireOptions& options) {
  return AcquireImpl(name, options, /*on_demand=*/true);
}

// One Acquire in progress: what it asked for, its deadlines, and where it stands. Guarded by mu_.
struct ModelPool::Acquisition {
  const std::string& name;
  const AcquireOptions& options;
  bool on_demand = false;
  bool retry = false;
  Clock::time_point start;
  Clock::time_point deadline;         // for capacity (PoolOptions::wait_for_capacity)
  Clock::time_point memory_deadline;  // for memory, a run's (AcquireOptions::deadline)
  bool run = false;                   // a run admitted by memory: it reserves its need
  int64_t elements = 0;               // its input size
  RunPlace place;                     // its place in its device's line
  Entry* entry = nullptr;             // looked up again after every wait (Remove may erase it)
  Reserved reserved;                  // what an admitted run reserved
  Status failure;
  std::vector<PoolEvent> events;
};

Result<Lease> ModelPool::AcquireImpl(const std::string& name, const AcquireOptions& options, bool on_demand,
                                     bool retry, uint64_t retry_ticket, const std::string& retry_device) {
  std::unique_lock<std::mutex> lock(mu_);
  // A run's place in its device's line (a retry's was taken before its failed run's lease went).
  Acquisition a{name, options, on_demand, retry};
  a.place = RunPlace{retry_ticket, retry_device};
  a.entry = FindLocked(name);
  if (!a.entry) {
    LeaveLineLocked(&a.place);
    return NotFound("unknown model '" + name + "'");
  }
  a.start = Clock::now();
  // Clamped, so that adding them to the clock cannot overflow.
  auto clamped = [](std::chrono::milliseconds ms) {
    return std::clamp(ms, std::chrono::milliseconds(0), std::chrono::milliseconds(kMaxWaitForCapacityMs));
  };
  a.deadline = a.start + clamped(options_.wait_for_capacity);
  a.run = options_.admit_by_memory && options.run_elements.has_value();
  a.elements = a.run ? std::max<int64_t>(*options.run_elements, 1) : 0;
  a.memory_deadline = options.deadline.value_or(a.start + clamped(options_.wait_for_memory));
  // The algorithm: once no load of the model is in progress, a model too large for the whole budget
  // is refused; a loaded one gets room (and a run its reservation), an unloaded one is loaded; and
  // when idle models cannot make room, it waits for capacity. Every wait ends in another look.
  Step step = Step::kAgain;
  while (step == Step::kAgain) {
    if (!WaitWhileLoadingLocked(a, lock)) {
      step = Step::kFailed;
      break;
    }
    Entry& e = *a.entry;
    if (RefusedEvenAloneLocked(a, e)) {
      step = Step::kFailed;
      break;
    }
    step = e.state == PoolState::kReady ? MakeRoomToRunLocked(a, e, lock) : LoadToRunLocked(a, e, lock);
    if (step == Step::kNoRoom) step = WaitForCapacityLocked(a, e, lock);
  }
  if (step == Step::kNotLoaded) {
    // No wait counted, as it always was; but an earlier look may have evicted models to make room
    // (then the model itself was evicted while this call waited): those evictions are reported.
    LeaveLineLocked(&a.place);
    lock.unlock();
    Emit(a.events);
    return a.failure;
  }
  return HandOutLeaseLocked(a, lock);
}

bool ModelPool::StillThereLocked(Acquisition& a) {
  a.entry = FindLocked(a.name);
  if (!a.entry) a.failure = NotFound("model '" + a.name + "' was removed");
  return a.entry != nullptr;
}

bool ModelPool::WaitWhileLoadingLocked(Acquisition& a, std::unique_lock<std::mutex>& lock) {
  while (a.entry->state == PoolState::kLoading) {
    changed_.wait(lock);
    if (!StillThereLocked(a)) return false;
  }
  return true;
}

bool ModelPool::RefusedEvenAloneLocked(Acquisition& a, Entry& e) {
  const std::string& device = DeviceOf(e);
  const int64_t limit = budget(device), charge = ChargeOf(e);
  if (limit <= 0 || charge <= limit) return false;
  // It alone exceeds the whole budget (as measured, or its file before a first load): no eviction
  // and no wait can make room. Unloaded unless in use or pinned, so that it does not hold memory
  // that nothing can run.
  const bool unload = e.state == PoolState::kReady && e.in_flight == 0 && !e.spec.pinned;
  a.failure = ResourceExhausted("the memory budget of " + std::to_string(limit) + " bytes on " + device +
                                " cannot fit model '" + a.name + "' even alone (charge " + std::to_string(charge) +
                                " bytes, " + (e.loaded_once ? "as measured once loaded" : "its file size") + ")" +
                                (unload ? "; it was unloaded" : ""));
  if (unload) {
    EvictLocked(e, EvictReason::kBudget, &a.events);
    changed_.notify_all();
  }
  return true;
}

ModelPool::Step ModelPool::MakeRoomToRunLocked(Acquisition& a, Entry& e, std::unique_lock<std::mutex>& lock) {
  // Before an operation too: charges grow as models run, so the models loaded together must still fit.
  if (!MakeRoomLocked(DeviceOf(e), 0, a.name, &a.events)) return Step::kNoRoom;
  if (!a.run) return Step::kDone;
  const Admit admit = AdmitOrWaitLocked(e, a.options, a.elements, a.retry, a.start, a.memory_deadline, lock,
                                        &a.place, &a.reserved, &a.failure, &a.events);
  if (admit == Admit::kAdmitted) return Step::kDone;
  if (admit == Admit::kRefused) return Step::kFailed;
  return StillThereLocked(a) ? Step::kAgain : Step::kFailed;
}

ModelPool::Step ModelPool::LoadToRunLocked(Acquisition& a, Entry& e, std::unique_lock<std::mutex>& lock) {
  if (!a.options.load_on_demand) {
    a.failure = Unavailable("model '" + a.name + "' is not loaded" + (e.reason.empty() ? "" : " (" + e.reason + ")"));
    return Step::kNotLoaded;
  }
  if (!MakeRoomLocked(DeviceOf(e), ChargeOf(e), a.name, &a.events)) return Step::kNoRoom;
  e.state = PoolState::kLoading;
  a.failure = LoadLocked(e, a.on_demand, lock, &a.events);
  return a.failure.ok() ? Step::kAgain : Step::kFailed;
}

ModelPool::Step ModelPool::WaitForCapacityLocked(Acquisition& a, Entry& e, std::unique_lock<std::mutex>& lock) {
  if (Clock::now() < a.deadline) {
    changed_.wait_until(lock, a.deadline);
    return StillThereLocked(a) ? Step::kAgain : Step::kFailed;
  }
  const std::string& device = DeviceOf(e);
  a.failure = ResourceExhausted("the memory budget of " + std::to_string(budget(device)) + " bytes on " + device +
                                " cannot fit model '" + a.name + "' (charge " + std::to_string(ChargeOf(e)) +
                                " bytes): " + std::to_string(UsedLocked(device)) +
                                " bytes are held by models in flight or pinned");
  return Step::kFailed;
}

Result<Lease> ModelPool::HandOutLeaseLocked(Acquisition& a, std::unique_lock<std::mutex>& lock) {
  LeaveLineLocked(&a.place);
  if (a.place.waited) {
    const double wait_ms = std::chrono::duration<double, std::milli>(Clock::now() - a.start).count();
    Line& line = LineOf(a.place.device);  // set by the first place taken in a line
    ++line.waited;
    line.wait_seconds += wait_ms / 1000;
    PoolEvent event{PoolEvent::Kind::kWait, a.name};
    event.wait_ms = wait_ms;
    event.admitted = a.failure.ok();
    a.events.push_back(event);
  }
  if (!a.failure.ok()) {
    lock.unlock();
    Emit(a.events);
    return a.failure;
  }
  Entry& e = *a.entry;
  ++e.in_flight;
  ++in_flight_;
  ++leases_handed_;
  ++generation_;
  e.last_used = Clock::now();
  Lease lease(this, a.name, e.session, a.options.keep_alive_ms);
  lease.entry_ = &e;
  if (a.run) {
    lease.r_.device = e.device;
    lease.r_.reserved = a.reserved.bytes;
    lease.r_.arena_reserved = a.reserved.arena_bytes;
    lease.r_.arena_predicted = a.reserved.arena_predicted;
    lease.r_.alone = a.reserved.alone;
    lease.r_.run_elements = a.elements;
    lease.r_.retry = a.retry;
    lease.r_.predicted = a.reserved.predicted;
  }
  if (FirstMeasurementOverKeptArenaLocked(e, lease)) {
    // The run would reuse the regions the shared arena keeps and read as needing less than it
    // does: they go back first. `e` stays meanwhile (its lease is out).
    lock.unlock();
    (void)runtime_.Trim();
    lock.lock();
  }
  StartMeasuringLocked(e, lease);
  ++e.calls;
  lock.unlock();
  Emit(a.events);
  return lease;
}

void ModelPool::Release(Lease& lease) {
  std::vector<PoolEvent> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    ReturnReservationLocked(lease);
    // The lease's entry: it stays while a lease is out (Remove leaves it to the last one, below).
    if (lease.entry_) {
      Entry& e = *lease.entry_;
      --e.in_flight;
      e.last_used = Clock::now();
      const bool same_session = e.session == lease.session_;
      if (same_session) FinishMeasuringLocked(e, lease);
      // A charge that grew may no longer fit beside the others: evict idle ones now.
      if (same_session && e.state == PoolState::kReady) (void)MakeRoomLocked(e.device, 0, e.spec.name, &events);
      if (lease.r_.lifecycle) {
        e.keep_alive_ms = -1;  // loaded by Load(): held until a request applies its keep-alive
      } else {
        e.keep_alive_ms = lease.r_.keep_alive_ms.value_or(e.spec.keep_alive_ms.value_or(options_.default_keep_alive_ms));
      }
      if (same_session && e.keep_alive_ms == 0 && e.in_flight == 0 && !e.spec.pinned && e.state == PoolState::kReady) {
        EvictLocked(e, EvictReason::kKeepAlive, &events);
      }
      if (e.removed && e.in_flight == 0) {  // the last lease of a removed model
        EraseEntryLocked(&e);
      }
    }
  }
  changed_.notify_all();
  lease.session_.reset();
  Emit(events);
}

Status ModelPool::RunWithRecovery(const std::string& name, const AcquireOptions& options,
                                  const std::function<Status(const std::shared_ptr<Session>&)>& body) {
  const bool admitted = options_.admit_by_memory && options.run_elements.has_value();
  Status status;
  uint64_t retry_ticket = 0;
  std::string retry_device;
  for (int attempt = 0; attempt < 2; ++attempt) {
    // With admission, the retry waits at the head of the line until the runs in flight have
    // drained, then runs alone and is measured: runs that failed together retry one by one.
    Result<Lease> lease =
        AcquireImpl(name, options, /*on_demand=*/true, /*retry=*/admitted && attempt == 1, retry_ticket, retry_device);
    if (!lease.ok()) return lease.status();
    status = body(lease->session());
    if (status.code() != StatusCode::kResourceExhausted || attempt == 1) return status;
    // The run boundary dropped the broken session from the cache; drop it
    // here too, evict every idle model, trim, and try once more.
    std::vector<PoolEvent> events;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [other_name, e] : entries_) {
        const bool broken = e->session == lease->session();
        const bool idle = e->state == PoolState::kReady && e->in_flight == 0 && !e->spec.pinned;
        if (broken || (idle && other_name != name)) EvictLocked(*e, EvictReason::kOutOfMemory, &events);
      }
      if (Entry* e = FindLocked(name)) ++e->out_of_memory;
      if (admitted && !lease->r_.device.empty()) {
        // Its place at the head of the line is taken before its reservation comes back, so that
        // no run waiting meanwhile gets in first.
        retry_ticket = ++next_ticket_;
        retry_device = lease->r_.device;
        LineOf(retry_device).Enqueue(retry_ticket, /*retry=*/true, name);
      }
    }
    Emit(events);
    detail::LogWarning("model '" + name + "' ran out of memory; evicted idle models and retrying once" +
                       (admitted ? std::string(", alone, after the runs in flight") : std::string()));
    // The lease goes here, before the retry.
    { Lease done = std::move(lease).value(); }
    (void)runtime_.Trim();
  }
  return status;
}

Result<std::vector<NamedTensor>> ModelPool::Run(const std::string& name, const std::vector<NamedTensor>& inputs,
                                                const RunFlags& flags, AcquireOptions options) {
  options.run_elements = InputElements(inputs);
  std::vector<NamedTensor> outputs;
  Status status = RunWithRecovery(name, options, [&](const std::shared_ptr<Session>& session) {
    auto result = session->Run(inputs, flags);
    if (!result.ok()) return result.status();
    outputs = std::move(result).value();
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return outputs;
}

Status ModelPool::SetOutsideBytes(const std::string& name, int64_t bytes) {
  if (bytes < 0) return InvalidArgument("outside bytes must not be negative (" + std::to_string(bytes) + ")");
  std::vector<PoolEvent> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry* e = FindLocked(name);
    if (!e) return NotFound("unknown model '" + name + "'");
    e->outside_bytes = bytes;
    // A larger charge: the models loaded beside it must still fit, as after a load measured larger.
    if (e->state == PoolState::kReady) (void)MakeRoomLocked(DeviceOf(*e), 0, name, &events);
    changed_.notify_all();
  }
  Emit(events);
  return Status::Ok();
}

Status ModelPool::Load(const std::string& name) {
  Result<Lease> lease = AcquireImpl(name, {.keep_alive_ms = std::nullopt, .load_on_demand = true}, /*on_demand=*/false);
  if (!lease.ok()) return lease.status();
  lease->r_.lifecycle = true;
  return Status::Ok();
}

ModelPool::Entry* ModelPool::UnloadLocked(const std::string& name, std::unique_lock<std::mutex>& lock,
                                          std::vector<PoolEvent>* events) {
  Entry* e = FindLocked(name);
  // Every wait can end with the entry gone (Remove): look it up again after each.
  while (e && e->state == PoolState::kLoading) {
    changed_.wait(lock);
    e = FindLocked(name);
  }
  if (e && e->state == PoolState::kReady) EvictLocked(*e, EvictReason::kUnload, events);
  return e;
}

Status ModelPool::Unload(const std::string& name) {
  std::vector<PoolEvent> events;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!FindLocked(name)) return NotFound("unknown model '" + name + "'");
    Entry* e = UnloadLocked(name, lock, &events);
    if (!e) return NotFound("model '" + name + "' was removed");
    e->reason = "unloaded";
  }
  Emit(events);
  return Status::Ok();
}

Status ModelPool::Remove(const std::string& name) {
  std::vector<PoolEvent> events;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!FindLocked(name)) return NotFound("unknown model '" + name + "'");
    Entry* e = UnloadLocked(name, lock, &events);
    if (!e) return Status::Ok();  // removed meanwhile
    e->reason = "removed";
    // A lease still out decrements its entry when it ends (Release erases it then): until
    // then it stays, unloaded and invisible.
    if (e->in_flight == 0) {
      EraseEntryLocked(e);
    } else {
      e->removed = true;
    }
  }
  changed_.notify_all();
  Emit(events);
  return Status::Ok();
}

void ModelPool::ReapNow() {
  std::vector<PoolEvent> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    for (auto& [name, e] : entries_) {
      if (e->state != PoolState::kReady || e->in_flight > 0 || e->spec.pinned || e->keep_alive_ms <= 0) continue;
      // Compared in milliseconds: a keep-alive converted to the clock's nanoseconds could overflow.
      if (std::chrono::duration_cast<std::chrono::milliseconds>(now - e->last_used).count() >= e->keep_alive_ms) {
        EvictLocked(*e, EvictReason::kKeepAlive, &events);
      }
    }
  }
  Emit(events);
}

void ModelPool::Reaper() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    // Its own condition variable: waking it at every lease returned would cost
    // a context switch per request.
    stop_cv_.wait_for(lock, options_.reap_interval);
    if (stop_) break;
    lock.unlock();
    ReapNow();
    lock.lock();
  }
}

std::vector<ModelStatus> ModelPool::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ModelStatus> out;
  for (const auto& [name, e] : entries_) {
    if (!e->removed) out.push_back(StatusLocked(name, *e));
  }
  return out;
}

Result<ModelStatus> ModelPool::StatusOf(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* found = FindLocked(name);
  if (!found) return NotFound("unknown model '" + name + "'");
  return StatusLocked(name, *found);
}

bool ModelPool::IsReady(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* e = FindLocked(name);
  return e && e->state == PoolState::kReady;
}

Result<ModelSignature> ModelPool::SignatureOf(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry* e = FindLocked(name);
  if (!e) return NotFound("unknown model '" + name + "'");
  if (!e->signature) return Unavailable("model '" + name + "' has not been loaded yet");
  return *e->signature;
}

void ModelPool::Emit(const std::vector<PoolEvent>& events) const {
  if (!on_event_) return;
  for (const PoolEvent& e : events) on_event_(e);
}

}  // namespace ebb
