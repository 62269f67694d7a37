// The model pool of the C API (include/ebb/c.h): ebb::ModelPool behind a
// handle. Lifetimes: a lease keeps its pool alive, the pool its runtime
// (ModelPool::Create), so handles may be destroyed in any order.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "c_api.h"

namespace ebb::c_api {
namespace {

const PoolEvent& EventOf(const ebb_pool_event_t* event) { return *reinterpret_cast<const PoolEvent*>(event); }

AcquireOptions AcquireArgs(const int64_t* keep_alive_ms, int load_on_demand, int64_t run_elements = -1,
                           int64_t timeout_ms = -1) {
  AcquireOptions options;
  if (keep_alive_ms) options.keep_alive_ms = *keep_alive_ms;
  options.load_on_demand = load_on_demand != 0;
  if (run_elements >= 0) options.run_elements = run_elements;
  if (timeout_ms >= 0) {
    options.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min(timeout_ms, kMaxWaitForCapacityMs));
  }
  return options;
}

nlohmann::json PointsJson(const std::vector<NeedPoint>& points) {
  nlohmann::json out = nlohmann::json::array();
  for (const NeedPoint& p : points) out.push_back({p.input_elements, p.bytes});
  return out;
}

// ebb::PoolOptions' defaults but admission by memory off: ebb_pool_run_with_recovery and
// ebb_pool_acquire carry no input size, so their runs reserve nothing, and only the charge-based
// budget (a charge holding the transient peak) keeps them in bounds. ebb_pool_run_admitted's
// callers turn it on (ebb_pool_options_set_memory_admission).
PoolOptions CDefaultOptions() {
  PoolOptions options;
  options.admit_by_memory = false;
  return options;
}

const ModelStatus* EntryAt(const ebb_pool_snapshot_t* snapshot, size_t index) {
  return snapshot && index < snapshot->models.size() ? &snapshot->models[index] : nullptr;
}

ebb_status_t* NoName(const char* function, const ebb_pool_t* pool, const char* name) {
  if (!pool) return NullArgument(function, "pool");
  if (!name) return NullArgument(function, "name");
  return nullptr;
}

}  // namespace
}  // namespace ebb::c_api

using namespace ebb;
using namespace ebb::c_api;

extern "C" {

// --- Options and events -----------------------------------------------------------------

ebb_pool_options_t* ebb_pool_options_create(void) { return new (std::nothrow) ebb_pool_options_t{CDefaultOptions()}; }

void ebb_pool_options_destroy(ebb_pool_options_t* options) { delete options; }

void ebb_pool_options_set_cpu_budget(ebb_pool_options_t* options, int64_t bytes, double fraction) {
  if (!options) return;
  options->options.cpu_budget_bytes = bytes;
  options->options.cpu_budget_fraction = fraction;
}

void ebb_pool_options_set_cuda_budget(ebb_pool_options_t* options, int64_t bytes, double fraction) {
  if (!options) return;
  options->options.cuda_budget_bytes = bytes;
  options->options.cuda_budget_fraction = fraction;
}

void ebb_pool_options_set_wait_for_capacity_ms(ebb_pool_options_t* options, int64_t ms) {
  if (options) options->options.wait_for_capacity = std::chrono::milliseconds(ms);
}

void ebb_pool_options_set_keep_alive_ms(ebb_pool_options_t* options, int64_t ms) {
  if (options) options->options.default_keep_alive_ms = ms;
}

void ebb_pool_options_set_wait_events(ebb_pool_options_t* options, int on) {
  if (options) options->wait_events = on != 0;
}

void ebb_pool_options_set_memory_admission(ebb_pool_options_t* options, int on, int64_t wait_ms) {
  if (!options) return;
  options->options.admit_by_memory = on != 0;
  if (wait_ms > 0) {
    options->options.wait_for_memory = std::chrono::milliseconds(std::min(wait_ms, kMaxWaitForCapacityMs));
  }
}

ebb_pool_event_kind_t ebb_pool_event_kind(const ebb_pool_event_t* event) {
  if (!event) return EBB_POOL_EVENT_LOAD;
  switch (EventOf(event).kind) {
    case PoolEvent::Kind::kEvict: return EBB_POOL_EVENT_EVICT;
    case PoolEvent::Kind::kWait: return EBB_POOL_EVENT_WAIT;
    case PoolEvent::Kind::kLoad: break;
  }
  return EBB_POOL_EVENT_LOAD;
}

double ebb_pool_event_wait_ms(const ebb_pool_event_t* event) { return event ? EventOf(event).wait_ms : 0; }

int ebb_pool_event_admitted(const ebb_pool_event_t* event) { return event && EventOf(event).admitted ? 1 : 0; }

const char* ebb_pool_event_model(const ebb_pool_event_t* event) { return event ? EventOf(event).name.c_str() : ""; }

int ebb_pool_event_on_demand(const ebb_pool_event_t* event) { return event && EventOf(event).on_demand ? 1 : 0; }

double ebb_pool_event_load_ms(const ebb_pool_event_t* event) { return event ? EventOf(event).load_ms : 0; }

const char* ebb_pool_event_reason(const ebb_pool_event_t* event) {
  if (!event || EventOf(event).kind != PoolEvent::Kind::kEvict) return "";
  return EvictReasonName(EventOf(event).reason);
}

// --- The pool ------------------------------------------------------------------------------

ebb_status_t* ebb_pool_create(ebb_runtime_t* runtime, const ebb_pool_options_t* options, ebb_pool_event_fn on_event,
                              void* user_data, ebb_pool_t** out) {
  constexpr const char* kFn = "ebb_pool_create";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!runtime) return NullArgument(kFn, "runtime");
    if (options) {
      if (Status st = CheckPoolOptions(options->options); !st.ok()) {
        return Error(StatusCode::kInvalidArgument, std::string(kFn) + ": " + st.message());
      }
    }
    ModelPool::EventFn events;
    if (on_event) {
      const bool wait_events = options && options->wait_events;
      events = [on_event, user_data, wait_events](const PoolEvent& e) {
        // A run that waited for memory only when asked for (ebb_pool_options_set_wait_events).
        if (e.kind == PoolEvent::Kind::kWait && !wait_events) return;
        on_event(user_data, reinterpret_cast<const ebb_pool_event_t*>(&e));
      };
    }
    *out = new ebb_pool_t{
        ModelPool::Create(runtime->runtime, options ? options->options : CDefaultOptions(), std::move(events))};
    return nullptr;
  });
}

void ebb_pool_destroy(ebb_pool_t* pool) { delete pool; }

ebb_status_t* ebb_pool_add(ebb_pool_t* pool, const char* name, const char* model_path, const ebb_load_options_t* load,
                           int pinned, const int64_t* keep_alive_ms) {
  constexpr const char* kFn = "ebb_pool_add";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (ebb_status_t* bad = NoName(kFn, pool, name)) return bad;
    if (!model_path) return NullArgument(kFn, "model_path");
    ModelSpec spec;
    spec.name = name;
    spec.path = model_path;
    if (load) spec.load = load->options;
    spec.pinned = pinned != 0;
    if (keep_alive_ms) spec.keep_alive_ms = *keep_alive_ms;
    pool->pool->Add(std::move(spec));
    return nullptr;
  });
}

int ebb_pool_contains(const ebb_pool_t* pool, const char* name) {
  if (!pool || !name) return 0;
  try {
    return pool->pool->Contains(name) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

ebb_status_t* ebb_pool_acquire(ebb_pool_t* pool, const char* name, const int64_t* keep_alive_ms, int load_on_demand,
                               ebb_lease_t** out) {
  return ebb_pool_acquire_for_run(pool, name, keep_alive_ms, load_on_demand, -1, -1, out);
}

ebb_status_t* ebb_pool_acquire_for_run(ebb_pool_t* pool, const char* name, const int64_t* keep_alive_ms,
                                       int load_on_demand, int64_t run_elements, int64_t timeout_ms,
                                       ebb_lease_t** out) {
  constexpr const char* kFn = "ebb_pool_acquire";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (ebb_status_t* bad = NoName(kFn, pool, name)) return bad;
    auto lease = std::make_unique<ebb_lease_t>();
    lease->pool = pool->pool;
    Result<Lease> acquired =
        pool->pool->Acquire(name, AcquireArgs(keep_alive_ms, load_on_demand, run_elements, timeout_ms));
    if (!acquired.ok()) return ToC(acquired.status());
    lease->lease.emplace(std::move(acquired).value());
    lease->session.session = lease->lease->session();
    lease->session.device = lease->session.session->device().ToString();
    *out = lease.release();
    return nullptr;
  });
}

ebb_session_t* ebb_lease_session(const ebb_lease_t* lease) {
  return lease ? const_cast<ebb_session_t*>(&lease->session) : nullptr;
}

const char* ebb_lease_name(const ebb_lease_t* lease) { return lease ? lease->lease->name().c_str() : ""; }

void ebb_lease_destroy(ebb_lease_t* lease) {
  if (!lease) return;
  lease->session.session.reset();  // the lease's own reference goes with it, below
  lease->lease.reset();            // a keep-alive of 0 unloads the model here
  delete lease;
}

ebb_status_t* ebb_pool_run_with_recovery(ebb_pool_t* pool, const char* name, const int64_t* keep_alive_ms,
                                         int load_on_demand, ebb_pool_body_fn body, void* user_data) {
  constexpr const char* kFn = "ebb_pool_run_with_recovery";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (ebb_status_t* bad = NoName(kFn, pool, name)) return bad;
    if (!body) return NullArgument(kFn, "body");
    return ToC(pool->pool->RunWithRecovery(
        name, AcquireArgs(keep_alive_ms, load_on_demand), [&](const std::shared_ptr<Session>& session) -> Status {
          std::unique_ptr<ebb_session_t> handle = MakeSession(session);
          return FromC(body(user_data, handle.get()));
        }));
  });
}

ebb_status_t* ebb_pool_run_admitted(ebb_pool_t* pool, const char* name, const int64_t* keep_alive_ms,
                                    int load_on_demand, int64_t run_elements, ebb_pool_body_fn body,
                                    void* user_data) {
  if (run_elements < 0) {
    return ToC(InvalidArgument("ebb_pool_run_admitted: run_elements " + std::to_string(run_elements) + " < 0"));
  }
  return ebb_pool_run_within(pool, name, keep_alive_ms, load_on_demand, run_elements, -1, body, user_data);
}

ebb_status_t* ebb_pool_run_within(ebb_pool_t* pool, const char* name, const int64_t* keep_alive_ms,
                                  int load_on_demand, int64_t run_elements, int64_t timeout_ms, ebb_pool_body_fn body,
                                  void* user_data) {
  constexpr const char* kFn = "ebb_pool_run_within";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (ebb_status_t* bad = NoName(kFn, pool, name)) return bad;
    if (!body) return NullArgument(kFn, "body");
    const AcquireOptions options = AcquireArgs(keep_alive_ms, load_on_demand, run_elements, timeout_ms);
    return ToC(pool->pool->RunWithRecovery(name, options, [&](const std::shared_ptr<Session>& session) -> Status {
      std::unique_ptr<ebb_session_t> handle = MakeSession(session);
      return FromC(body(user_data, handle.get()));
    }));
  });
}

ebb_status_t* ebb_pool_load(ebb_pool_t* pool, const char* name) {
  constexpr const char* kFn = "ebb_pool_load";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (ebb_status_t* bad = NoName(kFn, pool, name)) return bad;
    return ToC(pool->pool->Load(name));
  });
}

ebb_status_t* ebb_pool_unload(ebb_pool_t* pool, const char* name) {
  constexpr const char* kFn = "ebb_pool_unload";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (ebb_status_t* bad = NoName(kFn, pool, name)) return bad;
    return ToC(pool->pool->Unload(name));
  });
}

ebb_status_t* ebb_pool_remove(ebb_pool_t* pool, const char* name) {
  constexpr const char* kFn = "ebb_pool_remove";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (ebb_status_t* bad = NoName(kFn, pool, name)) return bad;
    return ToC(pool->pool->Remove(name));
  });
}

void ebb_pool_reap_now(ebb_pool_t* pool) {
  if (!pool) return;
  try {
    pool->pool->ReapNow();
  } catch (...) {
  }
}

int64_t ebb_pool_budget(const ebb_pool_t* pool, const char* device) {
  if (!pool || !device) return 0;
  try {
    return pool->pool->budget(device);
  } catch (...) {
    return 0;
  }
}

int64_t ebb_pool_used(const ebb_pool_t* pool, const char* device) {
  if (!pool || !device) return 0;
  try {
    return pool->pool->used(device);
  } catch (...) {
    return 0;
  }
}

// --- Status ---------------------------------------------------------------------------------

const char* ebb_pool_state_name(ebb_pool_state_t state) {
  const int v = static_cast<int>(state);
  if (v < 0 || v > static_cast<int>(PoolState::kReady)) return "";
  return PoolStateName(static_cast<PoolState>(v));
}

ebb_status_t* ebb_pool_status(const ebb_pool_t* pool, const char* name, ebb_pool_snapshot_t** out) {
  constexpr const char* kFn = "ebb_pool_status";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (ebb_status_t* bad = NoName(kFn, pool, name)) return bad;
    Result<ModelStatus> status = pool->pool->StatusOf(name);
    if (!status.ok()) return ToC(status.status());
    auto snapshot = std::make_unique<ebb_pool_snapshot_t>();
    snapshot->models.push_back(std::move(status).value());
    *out = snapshot.release();
    return nullptr;
  });
}

ebb_status_t* ebb_pool_snapshot(const ebb_pool_t* pool, ebb_pool_snapshot_t** out) {
  constexpr const char* kFn = "ebb_pool_snapshot";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!pool) return NullArgument(kFn, "pool");
    auto snapshot = std::make_unique<ebb_pool_snapshot_t>();
    snapshot->models = pool->pool->Snapshot();
    *out = snapshot.release();
    return nullptr;
  });
}

void ebb_pool_snapshot_destroy(ebb_pool_snapshot_t* snapshot) { delete snapshot; }

size_t ebb_pool_snapshot_count(const ebb_pool_snapshot_t* snapshot) { return snapshot ? snapshot->models.size() : 0; }

const char* ebb_pool_snapshot_name(const ebb_pool_snapshot_t* snapshot, size_t index) {
  const ModelStatus* m = EntryAt(snapshot, index);
  return m ? m->name.c_str() : "";
}

ebb_pool_state_t ebb_pool_snapshot_state(const ebb_pool_snapshot_t* snapshot, size_t index) {
  const ModelStatus* m = EntryAt(snapshot, index);
  return m ? static_cast<ebb_pool_state_t>(static_cast<int>(m->state)) : EBB_POOL_UNLOADED;
}

const char* ebb_pool_snapshot_device(const ebb_pool_snapshot_t* snapshot, size_t index) {
  const ModelStatus* m = EntryAt(snapshot, index);
  return m ? m->device.c_str() : "";
}

const char* ebb_pool_snapshot_reason(const ebb_pool_snapshot_t* snapshot, size_t index) {
  const ModelStatus* m = EntryAt(snapshot, index);
  return m ? m->reason.c_str() : "";
}

int64_t ebb_pool_snapshot_charge_bytes(const ebb_pool_snapshot_t* snapshot, size_t index) {
  const ModelStatus* m = EntryAt(snapshot, index);
  return m ? m->charge_bytes : 0;
}

int64_t ebb_pool_snapshot_load_bytes(const ebb_pool_snapshot_t* snapshot, size_t index) {
  const ModelStatus* m = EntryAt(snapshot, index);
  return m ? m->load_bytes : 0;
}

int64_t ebb_pool_snapshot_transient_bytes(const ebb_pool_snapshot_t* snapshot, size_t index) {
  const ModelStatus* m = EntryAt(snapshot, index);
  return m ? m->transient_bytes : 0;
}

int ebb_pool_snapshot_in_flight(const ebb_pool_snapshot_t* snapshot, size_t index) {
  const ModelStatus* m = EntryAt(snapshot, index);
  return m ? m->in_flight : 0;
}

int ebb_pool_snapshot_pinned(const ebb_pool_snapshot_t* snapshot, size_t index) {
  const ModelStatus* m = EntryAt(snapshot, index);
  return m && m->pinned ? 1 : 0;
}

uint64_t ebb_pool_snapshot_loads(const ebb_pool_snapshot_t* snapshot, size_t index) {
  const ModelStatus* m = EntryAt(snapshot, index);
  return m ? m->loads : 0;
}

char* ebb_pool_snapshot_json(const ebb_pool_snapshot_t* snapshot, size_t index) {
  const ModelStatus* m = EntryAt(snapshot, index);
  if (!m) return nullptr;
  try {
    const nlohmann::json j = {{"name", m->name},
                              {"state", PoolStateName(m->state)},
                              {"device", m->device},
                              {"reason", m->reason},
                              {"charge_bytes", m->charge_bytes},
                              {"load_bytes", m->load_bytes},
                              {"transient_bytes", m->transient_bytes},
                              {"in_flight", m->in_flight},
                              {"pinned", m->pinned},
                              {"loads", m->loads},
                              {"need_points", PointsJson(m->need_points)},
                              {"arena_need_points", PointsJson(m->arena_need_points)},
                              {"last_run_elements", m->last_run_elements},
                              {"last_need_bytes", m->last_need_bytes},
                              {"last_arena_need_bytes", m->last_arena_need_bytes},
                              {"reserved_bytes", m->reserved_bytes},
                              {"waiting_for_memory", m->waiting_for_memory},
                              {"out_of_memory", m->out_of_memory}};
    return NewCString(j.dump());
  } catch (...) {
    return nullptr;
  }
}

ebb_status_t* ebb_pool_predict_need_json(const ebb_pool_t* pool, const char* name, int64_t input_elements,
                                         char** json) {
  constexpr const char* kFn = "ebb_pool_predict_need_json";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!json) return NullArgument(kFn, "json");
    *json = nullptr;
    if (ebb_status_t* bad = NoName(kFn, pool, name)) return bad;
    Result<std::optional<NeedPrediction>> p = pool->pool->PredictNeed(name, input_elements);
    if (!p.ok()) return ToC(p.status());
    nlohmann::json j = nullptr;
    if (*p) {
      j = {{"memory_bytes", (*p)->memory_bytes},
           {"arena_bytes", (*p)->arena_bytes},
           {"memory_at_least", (*p)->memory_at_least},
           {"arena_at_least", (*p)->arena_at_least}};
    }
    return ReturnString(j.dump(), json);
  });
}

char* ebb_pool_admission_json(const ebb_pool_t* pool) {
  if (!pool) return nullptr;
  try {
    nlohmann::json out = nlohmann::json::array();
    for (const DeviceAdmission& d : pool->pool->Admission()) {
      out.push_back({{"device", d.device},
                     {"memory_limit_bytes", d.memory_limit_bytes},
                     {"reserved_bytes", d.reserved_bytes},
                     {"arena_cap_bytes", d.arena_cap_bytes},
                     {"arena_reserved_bytes", d.arena_reserved_bytes},
                     {"runs", d.runs},
                     {"alone", d.alone},
                     {"waiting", d.waiting},
                     {"admitted", d.admitted},
                     {"waited", d.waited},
                     {"wait_seconds", d.wait_seconds},
                     {"refused", d.refused},
                     {"timed_out", d.timed_out},
                     {"cancelled", d.cancelled}});
    }
    return NewCString(out.dump());
  } catch (...) {
    return nullptr;
  }
}

}  // extern "C"
