// ebb.ModelPool over ebb::ModelPool. Lifetimes: a Lease keeps its pool alive,
// the pool keeps its Runtime alive (shared ownership through PoolCore), so
// Python may drop them in any order.
//
// Events: the library calls on_event from the thread that caused the event,
// including the pool's keep-alive thread; the callback takes the GIL there. At
// interpreter exit (atexit, before threads are stopped) delivery to Python is
// switched off, so the keep-alive thread never touches a finalizing interpreter.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>

#include "binding.h"
#include "ebb/model_location.h"
#include "ebb/model_pool.h"

namespace ebb::python {
namespace {

struct PoolCore {
  std::shared_ptr<Runtime> runtime;  // declared first: outlives the pool
  py::object on_event;               // None or a callable; touched with the GIL only
  std::atomic<bool> deliver{false};  // whether events go to on_event
  std::mutex events_mu;
  std::deque<PoolEvent> events;      // the latest events, for events(); guarded by events_mu
  std::unique_ptr<ModelPool> pool;

  ~PoolCore() {
    deliver = false;
    if (PyGILState_Check()) {
      py::gil_scoped_release nogil;  // the keep-alive thread may be waiting for the GIL
      pool.reset();
    } else {
      pool.reset();
    }
  }

  ModelPool& get() {
    if (!pool) Throw(FailedPrecondition("the model pool is closed"));
    return *pool;
  }

  void OnEvent(const PoolEvent& e) {
    {
      std::lock_guard<std::mutex> lock(events_mu);
      events.push_back(e);
      if (events.size() > kKeptEvents) events.pop_front();
    }
    if (!deliver) return;
    py::gil_scoped_acquire gil;
    if (!deliver) return;
    try {
      on_event(e);
    } catch (py::error_already_set& err) {
      err.discard_as_unraisable("ebb.ModelPool on_event");
    } catch (const std::exception& err) {  // nothing may escape into the pool's threads
      PyErr_SetString(PyExc_RuntimeError, err.what());
      py::error_already_set().discard_as_unraisable("ebb.ModelPool on_event");
    }
  }

  static constexpr size_t kKeptEvents = 1024;
};

// Every live pool, so that atexit can switch event delivery off.
std::mutex& RegistryMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<std::weak_ptr<PoolCore>>& Registry() {
  static auto* pools = new std::vector<std::weak_ptr<PoolCore>>;
  return *pools;
}

std::shared_ptr<PoolCore> MakePool(std::shared_ptr<Runtime> runtime, int64_t budget_bytes, double budget_fraction,
                                   int64_t cuda_budget_bytes, double cuda_budget_fraction, int64_t wait_ms,
                                   int64_t keep_alive_ms, py::object on_event, bool admit_by_memory,
                                   int64_t wait_for_memory_ms) {
  if (!on_event.is_none() && !PyCallable_Check(on_event.ptr())) throw py::type_error("on_event must be callable");
  PoolOptions options;
  options.cpu_budget_bytes = budget_bytes;
  options.cpu_budget_fraction = budget_fraction;
  options.cuda_budget_bytes = cuda_budget_bytes;
  options.cuda_budget_fraction = cuda_budget_fraction;
  options.wait_for_capacity = std::chrono::milliseconds(wait_ms);
  options.default_keep_alive_ms = keep_alive_ms;
  options.admit_by_memory = admit_by_memory;
  if (wait_for_memory_ms < 0) throw py::value_error("wait_for_memory_ms must be >= 0");
  options.wait_for_memory = std::chrono::milliseconds(std::min(wait_for_memory_ms, kMaxWaitForCapacityMs));
  auto core = std::make_shared<PoolCore>();
  core->runtime = std::move(runtime);
  core->on_event = std::move(on_event);
  core->deliver = !core->on_event.is_none();
  core->pool = std::make_unique<ModelPool>(*core->runtime, options,
                                           [raw = core.get()](const PoolEvent& e) { raw->OnEvent(e); });
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& registry = Registry();
  std::erase_if(registry, [](const std::weak_ptr<PoolCore>& w) { return w.expired(); });
  registry.push_back(core);
  return core;
}

void Shutdown() {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  for (const auto& weak : Registry()) {
    if (auto core = weak.lock()) core->deliver = false;
  }
}

class PyLease {
 public:
  PyLease(std::shared_ptr<PoolCore> core, Lease lease)
      : core_(std::move(core)), name_(lease.name()), lease_(std::move(lease)) {}
  ~PyLease() { Release(); }

  void Release() {
    if (!lease_) return;
    if (PyGILState_Check()) {
      py::gil_scoped_release nogil;  // a keep_alive of 0 unloads the model now
      lease_.reset();
    } else {
      lease_.reset();
    }
  }
  const std::shared_ptr<Session>& session() const {
    if (!lease_) Throw(FailedPrecondition("this lease has been released"));
    return lease_->session();
  }
  const std::string& name() const { return name_; }
  bool released() const { return !lease_; }

 private:
  std::shared_ptr<PoolCore> core_;  // keeps the pool (and its runtime) alive while the lease is out
  std::string name_;
  std::optional<Lease> lease_;
};

AcquireOptions AcquireArgs(std::optional<int64_t> keep_alive_ms, bool load_on_demand,
                           std::optional<int64_t> input_elements, std::optional<double> timeout_s) {
  AcquireOptions options;
  options.keep_alive_ms = keep_alive_ms;
  options.load_on_demand = load_on_demand;
  if (input_elements && *input_elements < 0) throw py::value_error("input_elements must be >= 0");
  options.run_elements = input_elements;
  if (timeout_s) {
    if (!(*timeout_s >= 0)) throw py::value_error("timeout_s must be >= 0");
    const double ms = std::min(*timeout_s * 1000, static_cast<double>(kMaxWaitForCapacityMs));
    options.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(ms));
  }
  return options;
}

py::object RunWithRecovery(PoolCore& core, const std::string& name, const py::object& fn,
                           const AcquireOptions& options) {
  py::object value = py::none();
  std::optional<py::error_already_set> error;
  Status status;
  {
    py::gil_scoped_release nogil;
    status = core.get().RunWithRecovery(name, options, [&](const std::shared_ptr<Session>& session) -> Status {
      py::gil_scoped_acquire gil;
      error.reset();
      try {
        value = fn(session);
        return Status::Ok();
      } catch (py::error_already_set& e) {
        Status s = StatusFromPython(e);
        error = std::move(e);
        return s;
      } catch (const std::exception& e) {  // nothing may escape into the pool
        return Internal(e.what());
      }
    });
  }
  if (!status.ok()) {
    if (error) throw py::error_already_set(*error);
    Throw(status);
  }
  return value;
}

constexpr const char* kPoolDoc = R"doc(ModelPool(runtime, *, budget_bytes=0, budget_fraction=0.75, cuda_budget_bytes=0,
          cuda_budget_fraction=0.9, wait_for_capacity_ms=0, keep_alive_ms=-1, on_event=None,
          admit_by_memory=True, wait_for_memory_ms=60000)

Named models kept loaded within a per-device memory budget (ebb::ModelPool).
Each loaded model is charged what it measurably costs while loaded; to fit a
new one, idle models are evicted, least recently used first (never pinned
ones, never ones with a lease out).

Admission by memory: a run (run_with_recovery or acquire with input_elements,
the number of elements of its inputs together) reserves what its model's runs
were measured to need at that size before it starts, against the shared
arena's cap and the budget left; it waits in arrival order when that does not
fit (ebb.Unavailable after wait_for_memory_ms or timeout_s), and raises
ebb.ResourceExhausted at once, with the predicted need and the limit, when it
could never fit. A model's first run runs alone, to be measured.
admit_by_memory=False: the behaviour before it (the charge holds one
transient peak; nothing is reserved).

budget_bytes: CPU budget (0: budget_fraction of physical memory).
wait_for_capacity_ms: how long acquire() waits for leases to come back when
  nothing idle can be evicted, before raising ebb.ResourceExhausted.
keep_alive_ms: default idle time before a model is unloaded (-1 never, 0 right
  after each lease).
on_event(event): called with an ebb.PoolEvent on the thread that caused it
  (including the pool's keep-alive thread), with the GIL held; events() also
  returns the latest ones.

    pool = ebb.ModelPool(runtime, budget_bytes=512 << 20)
    pool.add("det", "models/ppocr_det/model.onnx", pinned=True)
    with pool.acquire("det") as lease:
        out = lease.session.run({"x": image})

The pool keeps its Runtime alive, and a Lease its pool.)doc";

}  // namespace

void BindPool(py::module_& m) {
  py::class_<ModelStatus>(m, "ModelStatus", "One model of a ModelPool (ModelPool.status / snapshot).")
      .def_readonly("name", &ModelStatus::name)
      .def_property_readonly(
          "state", [](const ModelStatus& s) { return PoolStateName(s.state); }, "\"UNAVAILABLE\", \"LOADING\" or \"READY\".")
      .def_readonly("device", &ModelStatus::device)
      .def_readonly("reason", &ModelStatus::reason, "Why it is not loaded, when known.")
      .def_readonly("charge_bytes", &ModelStatus::charge_bytes)
      .def_readonly("load_bytes", &ModelStatus::load_bytes)
      .def_readonly("transient_bytes", &ModelStatus::transient_bytes)
      .def_readonly("in_flight", &ModelStatus::in_flight)
      .def_readonly("pinned", &ModelStatus::pinned)
      .def_readonly("loads", &ModelStatus::loads)
      .def_property_readonly(
          "need_points",
          [](const ModelStatus& s) {
            py::list points;
            for (const NeedPoint& p : s.need_points) points.append(py::make_tuple(p.input_elements, p.bytes));
            return points;
          },
          "The memory (RSS) its runs were measured to need: [(input_elements, bytes)], by increasing size.")
      .def_property_readonly(
          "arena_need_points",
          [](const ModelStatus& s) {
            py::list points;
            for (const NeedPoint& p : s.arena_need_points) points.append(py::make_tuple(p.input_elements, p.bytes));
            return points;
          },
          "The shared CPU arena its runs were measured to need (runs that raised the arena's peak).")
      .def_readonly("last_run_elements", &ModelStatus::last_run_elements, "The input size of its latest run admitted.")
      .def_readonly("last_need_bytes", &ModelStatus::last_need_bytes,
                    "What that run was predicted to need and reserved (0: it ran alone to be measured).")
      .def_readonly("last_arena_need_bytes", &ModelStatus::last_arena_need_bytes,
                    "What it reserved against the shared arena's cap.")
      .def_readonly("reserved_bytes", &ModelStatus::reserved_bytes, "Reserved by its runs in flight now.")
      .def_readonly("waiting_for_memory", &ModelStatus::waiting_for_memory, "Its runs waiting for memory now.")
      .def_readonly("out_of_memory", &ModelStatus::out_of_memory, "Its runs that ran out of memory (each raised it).")
      .def("__repr__", [](const ModelStatus& s) {
        return "ModelStatus(name='" + s.name + "', state=" + PoolStateName(s.state) +
               ", charge_bytes=" + std::to_string(s.charge_bytes) + ")";
      });

  py::class_<PoolEvent>(m, "PoolEvent", "What a ModelPool did: a load or an eviction.")
      .def_property_readonly("kind",
                             [](const PoolEvent& e) {
                               switch (e.kind) {
                                 case PoolEvent::Kind::kLoad: return "load";
                                 case PoolEvent::Kind::kEvict: return "evict";
                                 case PoolEvent::Kind::kWait: return "wait";
                               }
                               return "unknown";
                             },
                             "\"load\", \"evict\", or \"wait\" (a run waited for memory).")
      .def_readonly("wait_ms", &PoolEvent::wait_ms, "wait: how long the run waited.")
      .def_readonly("admitted", &PoolEvent::admitted, "wait: whether it then ran.")
      .def_readonly("name", &PoolEvent::name)
      .def_readonly("on_demand", &PoolEvent::on_demand, "load: a request needed it.")
      .def_readonly("load_ms", &PoolEvent::load_ms, "load: how long it took.")
      .def_property_readonly(
          "reason",
          [](const PoolEvent& e) -> py::object {
            if (e.kind != PoolEvent::Kind::kEvict) return py::none();
            return py::str(EvictReasonName(e.reason));
          },
          "evict: \"budget\", \"keep_alive\", \"out_of_memory\" or \"unload\"; None for a load.")
      .def("__repr__", [](const PoolEvent& e) {
        const char* kind = e.kind == PoolEvent::Kind::kLoad ? "load" : e.kind == PoolEvent::Kind::kEvict ? "evict" : "wait";
        return std::string("PoolEvent(") + kind + " '" + e.name + "')";
      });

  py::class_<PyLease>(m, "Lease", R"doc(A model held for one piece of work (ModelPool.acquire): while it is
out, the model is not evicted. Use it as a context manager, or call release().)doc")
      .def_property_readonly("session", &PyLease::session, "The model's Session.")
      .def_property_readonly("name", &PyLease::name)
      .def_property_readonly("released", &PyLease::released)
      .def("release", &PyLease::Release, "Gives the model back to the pool (its keep-alive applies from now).")
      .def("__enter__", [](PyLease& l) -> PyLease& { return l; }, py::return_value_policy::reference_internal)
      .def(
          "__exit__",
          [](PyLease& l, const py::object&, const py::object&, const py::object&) {
            l.Release();
            return false;
          },
          py::arg("exc_type"), py::arg("exc"), py::arg("traceback"));

  py::class_<PoolCore, std::shared_ptr<PoolCore>>(m, "ModelPool", kPoolDoc)
      .def(py::init(&MakePool), py::arg("runtime"), py::kw_only(), py::arg("budget_bytes") = 0,
           py::arg("budget_fraction") = 0.75, py::arg("cuda_budget_bytes") = 0, py::arg("cuda_budget_fraction") = 0.9,
           py::arg("wait_for_capacity_ms") = 0, py::arg("keep_alive_ms") = -1, py::arg("on_event") = py::none(),
           py::arg("admit_by_memory") = true, py::arg("wait_for_memory_ms") = 60000)
      .def(
          "add",
          [](PoolCore& core, const std::string& name, const py::object& path, const std::string& device, bool pinned,
             std::optional<int64_t> keep_alive_ms, std::optional<bool> strict) {
            ModelSpec spec;
            spec.name = name;
            // A model folder, file or name under "models", as Runtime.load and the ebb command take it.
            const ModelLocation model =
                Unwrap(ResolveModel(py::str(py::module_::import("os").attr("fspath")(path)), "models", "models="));
            spec.path = model.path;
            spec.load.device = Unwrap(DeviceRequest::Parse(DeviceFor(device, model)));
            spec.load.strict_device = strict;
            spec.pinned = pinned;
            spec.keep_alive_ms = keep_alive_ms;
            py::gil_scoped_release nogil;
            core.get().Add(std::move(spec));
          },
          py::arg("name"), py::arg("path"), py::arg("device") = "auto", py::kw_only(), py::arg("pinned") = false,
          py::arg("keep_alive_ms") = py::none(), py::arg("strict") = py::none(),
          "Registers a model (or updates its spec, taking effect at its next load): path is a model folder, "
          "file or name under \"models\", as Runtime.load takes it. pinned: never evicted.")
      .def(
          "acquire",
          [](const std::shared_ptr<PoolCore>& core, const std::string& name, std::optional<int64_t> keep_alive_ms,
             bool load_on_demand, std::optional<int64_t> input_elements, std::optional<double> timeout_s) {
            AcquireOptions options = AcquireArgs(keep_alive_ms, load_on_demand, input_elements, timeout_s);
            Result<Lease> lease = [&] {
              py::gil_scoped_release nogil;
              return core->get().Acquire(name, options);
            }();
            return std::make_unique<PyLease>(core, Unwrap(std::move(lease)));
          },
          py::arg("name"), py::kw_only(), py::arg("keep_alive_ms") = py::none(), py::arg("load_on_demand") = true,
          py::arg("input_elements") = py::none(), py::arg("timeout_s") = py::none(),
          R"doc(The model, loaded on demand (evicting idle models to fit), held until the lease is released.
input_elements: the lease is for one run with that many input elements in all: its predicted
  memory is reserved until the lease is released (admission by memory; None reserves nothing).
timeout_s: how long to wait for memory (default: the pool's wait_for_memory_ms).
Raises ebb.NotFound (unknown name), ebb.Unavailable (not loaded and load_on_demand=False; or
waited past the timeout for memory), ebb.ResourceExhausted (cannot fit the budget; a run that
could never fit). The GIL is released while it loads or waits.)doc")
      .def(
          "run_with_recovery",
          [](PoolCore& core, const std::string& name, const py::object& fn, std::optional<int64_t> keep_alive_ms,
             bool load_on_demand, std::optional<int64_t> input_elements, std::optional<double> timeout_s) {
            return RunWithRecovery(core, name, fn, AcquireArgs(keep_alive_ms, load_on_demand, input_elements, timeout_s));
          },
          py::arg("name"), py::arg("fn"), py::kw_only(), py::arg("keep_alive_ms") = py::none(),
          py::arg("load_on_demand") = true, py::arg("input_elements") = py::none(), py::arg("timeout_s") = py::none(),
          R"doc(Calls fn(session) with the model held and returns its result. With input_elements (the
elements of the run's inputs together, e.g. sum(a.size for a in inputs.values())), the run is
admitted by memory first (see ModelPool). If fn raises ebb.ResourceExhausted, the broken session
and every idle model are evicted, memory is trimmed, and fn runs once more on a fresh load (with
input_elements: alone, after the runs in flight have drained, and its model's prediction is raised
to what that run needed); a second failure is raised.)doc")
      // Calls that take the pool's lock or load run without the GIL (call_guard).
      .def("load", [](PoolCore& core, const std::string& name) { Check(core.get().Load(name)); }, py::arg("name"),
           py::call_guard<py::gil_scoped_release>(), "Loads a model now (evicting idle ones to fit).")
      .def("unload", [](PoolCore& core, const std::string& name) { Check(core.get().Unload(name)); },
           py::arg("name"), py::call_guard<py::gil_scoped_release>(),
           "Unloads a model, pinned or not (leases still out finish first).")
      .def("reap_now", [](PoolCore& core) { core.get().ReapNow(); }, py::call_guard<py::gil_scoped_release>(),
           "Unloads idle models whose keep-alive ran out (the pool's thread also does this).")
      .def("status", [](PoolCore& core, const std::string& name) { return Unwrap(core.get().StatusOf(name)); },
           py::arg("name"), py::call_guard<py::gil_scoped_release>())
      .def("snapshot", [](PoolCore& core) { return core.get().Snapshot(); }, py::call_guard<py::gil_scoped_release>())
      .def("budget", [](PoolCore& core, const std::string& device) { return core.get().budget(device); },
           py::arg("device") = "cpu", py::call_guard<py::gil_scoped_release>(),
           "The budget of a device (\"cpu\", \"cuda:0\"); 0 = none.")
      .def("used", [](PoolCore& core, const std::string& device) { return core.get().used(device); },
           py::arg("device") = "cpu", py::call_guard<py::gil_scoped_release>(),
           "The sum of the charges of the models loaded there.")
      .def(
          "predict_need",
          [](PoolCore& core, const std::string& name, int64_t input_elements) -> py::object {
            Result<std::optional<NeedPrediction>> p = [&] {
              py::gil_scoped_release nogil;
              return core.get().PredictNeed(name, input_elements);
            }();
            std::optional<NeedPrediction> prediction = Unwrap(std::move(p));
            if (!prediction) return py::none();
            py::dict d;
            d["memory_bytes"] = prediction->memory_bytes;
            d["arena_bytes"] = prediction->arena_bytes;
            d["memory_at_least"] = prediction->memory_at_least;
            d["arena_at_least"] = prediction->arena_at_least;
            return d;
          },
          py::arg("name"), py::arg("input_elements"),
          "What a run of that many input elements is predicted to need (memory_bytes, arena_bytes: reserved)\n"
          "and needs at least (memory_at_least, arena_at_least: what a refusal rests on), or None before its\n"
          "model was measured.")
      .def(
          "admission",
          [](PoolCore& core) {
            std::vector<DeviceAdmission> devices;
            {
              py::gil_scoped_release nogil;
              devices = core.get().Admission();
            }
            py::list out;
            for (const DeviceAdmission& d : devices) {
              py::dict a;
              a["device"] = d.device;
              a["memory_limit_bytes"] = d.memory_limit_bytes;
              a["reserved_bytes"] = d.reserved_bytes;
              a["arena_cap_bytes"] = d.arena_cap_bytes;
              a["arena_reserved_bytes"] = d.arena_reserved_bytes;
              a["runs"] = d.runs;
              a["alone"] = d.alone;
              a["waiting"] = d.waiting;
              a["admitted"] = d.admitted;
              a["waited"] = d.waited;
              a["wait_seconds"] = d.wait_seconds;
              a["refused"] = d.refused;
              a["timed_out"] = d.timed_out;
              a["cancelled"] = d.cancelled;
              out.append(a);
            }
            return out;
          },
          "Admission by memory per device: limit, reserved, runs in flight and waiting, and totals.")
      .def(
          "events",
          [](PoolCore& core) {
            std::lock_guard<std::mutex> lock(core.events_mu);
            std::vector<PoolEvent> list(core.events.begin(), core.events.end());
            core.events.clear();
            return list;
          },
          "The events since the last call (at most the latest 1024), oldest first.")
      .def("__contains__", [](PoolCore& core, const std::string& name) { return core.get().Contains(name); },
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("runtime", [](const PoolCore& core) { return core.runtime; });

  m.def("_shutdown", &Shutdown, "Called at interpreter exit: pools stop calling on_event.");
}

}  // namespace ebb::python
