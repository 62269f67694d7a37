"""ebb.ModelPool over the C API's pool (ebb_pool_*). Lifetimes: a Lease keeps its pool alive, the
pool its Runtime (the library shares ownership), so Python may drop them in any order.

Events: the library calls on_event from the thread that caused the event, including the pool's
keep-alive thread; ctypes takes the GIL there. At interpreter exit (atexit, before threads are
stopped) every lease still out is returned and every pool handle dropped, so no keep-alive thread
calls into a finalizing interpreter.
"""
import collections
import threading
import weakref
from ctypes import byref, c_int64, c_void_p

from ._ebb import Runtime, Session, _new, _resolve, _share
from ._errors import Error
from ._lib import POOL_BODY, POOL_EVENT, check, error, lib, status_of, taken_json, text

_KEPT_EVENTS = 1024
_MAX_WAIT_MS = 24 * 3600 * 1000  # at least ebb::kMaxWaitForCapacityMs: the library clamps it


class ModelStatus:
    """One model of a ModelPool (ModelPool.status / snapshot)."""

    __slots__ = ("_d",)

    def __init__(self, d: dict):
        self._d = d

    name = property(lambda self: self._d["name"])
    state = property(lambda self: self._d["state"], doc='"UNAVAILABLE", "LOADING" or "READY".')
    device = property(lambda self: self._d["device"])
    reason = property(lambda self: self._d["reason"], doc="Why it is not loaded, when known.")
    charge_bytes = property(lambda self: self._d["charge_bytes"])
    load_bytes = property(lambda self: self._d["load_bytes"])
    transient_bytes = property(lambda self: self._d["transient_bytes"])
    in_flight = property(lambda self: self._d["in_flight"])
    pinned = property(lambda self: self._d["pinned"])
    loads = property(lambda self: self._d["loads"])
    need_points = property(lambda self: [tuple(p) for p in self._d["need_points"]],
                           doc="The memory (RSS) its runs were measured to need: [(input_elements, bytes)].")
    arena_need_points = property(lambda self: [tuple(p) for p in self._d["arena_need_points"]],
                                 doc="The shared CPU arena its runs were measured to need.")
    last_run_elements = property(lambda self: self._d["last_run_elements"])
    last_need_bytes = property(lambda self: self._d["last_need_bytes"])
    last_arena_need_bytes = property(lambda self: self._d["last_arena_need_bytes"])
    reserved_bytes = property(lambda self: self._d["reserved_bytes"])
    waiting_for_memory = property(lambda self: self._d["waiting_for_memory"])
    out_of_memory = property(lambda self: self._d["out_of_memory"])

    def __repr__(self):
        return f"ModelStatus(name='{self.name}', state={self.state}, charge_bytes={self.charge_bytes})"


def _statuses(snapshot: int) -> list:
    try:
        return [ModelStatus(taken_json(lib.ebb_pool_snapshot_json(snapshot, i)))
                for i in range(lib.ebb_pool_snapshot_count(snapshot))]
    finally:
        lib.ebb_pool_snapshot_destroy(snapshot)


class PoolEvent:
    """What a ModelPool did: a load, an eviction, or a run's wait for memory."""

    __slots__ = ("kind", "name", "on_demand", "load_ms", "reason", "wait_ms", "admitted")

    def __init__(self, e: int):
        self.kind = ("load", "evict", "wait")[lib.ebb_pool_event_kind(e)]
        self.name = lib.ebb_pool_event_model(e).decode()
        self.on_demand = bool(lib.ebb_pool_event_on_demand(e))
        self.load_ms = lib.ebb_pool_event_load_ms(e)
        self.reason = lib.ebb_pool_event_reason(e).decode() if self.kind == "evict" else None
        self.wait_ms = lib.ebb_pool_event_wait_ms(e)
        self.admitted = bool(lib.ebb_pool_event_admitted(e))

    def __repr__(self):
        return f"PoolEvent({self.kind} '{self.name}')"


class Lease:
    """A model held for one piece of work (ModelPool.acquire): while it is
out, the model is not evicted. Use it as a context manager, or call release()."""

    def __init__(self, handle: int, name: str, pool: "ModelPool"):
        self._h, self._name = handle, name
        self._event_fn = pool._event_fn  # the pool lives on while a lease is out: so must its callback
        self._session = _share(lib.ebb_lease_session(handle))
        _LEASES.add(self)

    @property
    def session(self) -> Session:
        """The model's Session."""
        if self._h is None:
            raise _failed("this lease has been released")
        return self._session

    @property
    def name(self) -> str:
        return self._name

    @property
    def released(self) -> bool:
        return self._h is None

    def release(self) -> None:
        """Gives the model back to the pool (its keep-alive applies from now)."""
        h, self._h = self._h, None
        if h:
            self._session = None
            _drop(lib.ebb_lease_destroy, h)  # a keep_alive of 0 unloads the model here (GIL released)

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, exc_type, exc, traceback) -> bool:
        self.release()
        return False

    def __del__(self):
        if lib is not None:
            self.release()


def _failed(message: str) -> Error:
    from ._errors import _make
    return _make("failed_precondition", message)


def _deadline(input_elements, timeout_s, wait_for_memory_ms):
    """(elements, timeout_ms) for the C API: timeout_s None waits the pool's wait_for_memory_ms, passed as an
    explicit deadline so that 0 means what it says in Python (do not wait), not the C setter's "default"."""
    if input_elements is not None and input_elements < 0:
        raise ValueError("input_elements must be >= 0")
    if timeout_s is not None and not timeout_s >= 0:
        raise ValueError("timeout_s must be >= 0")
    elements = -1 if input_elements is None else int(input_elements)
    timeout = wait_for_memory_ms if timeout_s is None else int(min(timeout_s * 1000, _MAX_WAIT_MS))
    return elements, timeout


class ModelPool:
    """ModelPool(runtime, *, budget_bytes=0, budget_fraction=0.75, cuda_budget_bytes=0,
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
wait_for_memory_ms: how long a run admitted by memory waits for its memory when
  the call gives no timeout_s (default 60000, a minute); 0: it does not wait
  (ebb.Unavailable at once when its memory is not free now). Unlike the C API's
  setter, where 0 means "the default".
on_event(event): called with an ebb.PoolEvent on the thread that caused it
  (including the pool's keep-alive thread), with the GIL held; events() also
  returns the latest ones.

    pool = ebb.ModelPool(runtime, budget_bytes=512 << 20)
    pool.add("det", "models/ppocr_det/model.onnx", pinned=True)
    with pool.acquire("det") as lease:
        out = lease.session.run({"x": image})

The pool keeps its Runtime alive, and a Lease its pool."""

    def __init__(self, runtime: Runtime, *, budget_bytes: int = 0, budget_fraction: float = 0.75,
                 cuda_budget_bytes: int = 0, cuda_budget_fraction: float = 0.9, wait_for_capacity_ms: int = 0,
                 keep_alive_ms: int = -1, on_event=None, admit_by_memory: bool = True,
                 wait_for_memory_ms: int = 60000):
        self._h = None
        if not isinstance(runtime, Runtime):
            raise TypeError(f"runtime must be an ebb.Runtime; got {type(runtime).__name__}")
        if on_event is not None and not callable(on_event):
            raise TypeError("on_event must be callable")
        if wait_for_memory_ms < 0:
            raise ValueError("wait_for_memory_ms must be >= 0 (0: do not wait for memory)")
        self._runtime = runtime
        # Every Python call passes it as its deadline (_deadline): the C setter takes 0 as "the default, a
        # minute", so 0 (do not wait) exists only in these deadlines.
        self._wait_for_memory_ms = int(min(wait_for_memory_ms, _MAX_WAIT_MS))
        self._on_event = on_event
        self._events = collections.deque(maxlen=_KEPT_EVENTS)
        self._events_lock = threading.Lock()
        options = lib.ebb_pool_options_create()
        if not options:
            raise MemoryError("ebb: out of memory")
        try:
            lib.ebb_pool_options_set_cpu_budget(options, budget_bytes, budget_fraction)
            lib.ebb_pool_options_set_cuda_budget(options, cuda_budget_bytes, cuda_budget_fraction)
            lib.ebb_pool_options_set_wait_for_capacity_ms(options, wait_for_capacity_ms)
            lib.ebb_pool_options_set_keep_alive_ms(options, keep_alive_ms)
            lib.ebb_pool_options_set_memory_admission(options, 1 if admit_by_memory else 0,
                                                      self._wait_for_memory_ms)
            lib.ebb_pool_options_set_wait_events(options, 1)
            self._event_fn = POOL_EVENT(_deliverer(weakref.ref(self)))
            self._h = _new(lib.ebb_pool_create, runtime._h, options, self._event_fn, None)
        finally:
            lib.ebb_pool_options_destroy(options)
        _POOLS.add(self)

    def _deliver(self, e):
        event = PoolEvent(e)
        with self._events_lock:
            self._events.append(event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except BaseException as err:  # nothing may escape into the pool's threads
                import sys
                sys.unraisablehook(_Unraisable(err, "ebb.ModelPool on_event"))

    def _pool(self):
        if not self._h:
            raise _failed("the model pool is closed")
        return self._h

    def _close(self) -> None:
        h, self._h = self._h, None
        if h:
            _drop(lib.ebb_pool_destroy, h)

    def __del__(self):
        if lib is not None and getattr(self, "_h", None):
            self._close()

    def add(self, name: str, path, device: str = "auto", *, pinned: bool = False, keep_alive_ms=None,
            strict=None) -> None:
        """Registers a model (or updates its spec, taking effect at its next load): path is a model folder,
file or name under "models", as Runtime.load takes it. pinned: never evicted."""
        from ._ebb import _load_options
        from ._lib import path_arg
        model_path, dev = _resolve(path, "models", device)
        options = _load_options(dev, strict, None)
        keep = byref(c_int64(keep_alive_ms)) if keep_alive_ms is not None else None
        try:
            check(lib.ebb_pool_add(self._pool(), text(name), path_arg(model_path, "path"), options,
                                   1 if pinned else 0, keep))
        finally:
            lib.ebb_load_options_destroy(options)

    def acquire(self, name: str, *, keep_alive_ms=None, load_on_demand: bool = True, input_elements=None,
                timeout_s=None) -> Lease:
        """The model, loaded on demand (evicting idle models to fit), held until the lease is released.
input_elements: the lease is for one run with that many input elements in all: its predicted
  memory is reserved until the lease is released (admission by memory; None reserves nothing).
timeout_s: how long to wait for memory (default: the pool's wait_for_memory_ms).
Raises ebb.NotFound (unknown name), ebb.Unavailable (not loaded and load_on_demand=False; or
waited past the timeout for memory), ebb.ResourceExhausted (cannot fit the budget; a run that
could never fit). The GIL is released while it loads or waits."""
        elements, timeout = _deadline(input_elements, timeout_s, self._wait_for_memory_ms)
        keep = byref(c_int64(keep_alive_ms)) if keep_alive_ms is not None else None
        h = _new(lib.ebb_pool_acquire_for_run, self._pool(), text(name), keep, 1 if load_on_demand else 0,
                 elements, timeout)
        return Lease(h, name, self)

    def run_with_recovery(self, name: str, fn, *, keep_alive_ms=None, load_on_demand: bool = True,
                          input_elements=None, timeout_s=None):
        """Calls fn(session) with the model held and returns its result. With input_elements (the
elements of the run's inputs together, e.g. sum(a.size for a in inputs.values())), the run is
admitted by memory first (see ModelPool). If fn raises ebb.ResourceExhausted, the broken session
and every idle model are evicted, memory is trimmed, and fn runs once more on a fresh load (with
input_elements: alone, after the runs in flight have drained, and its model's prediction is raised
to what that run needed); a second failure is raised."""
        elements, timeout = _deadline(input_elements, timeout_s, self._wait_for_memory_ms)
        keep = byref(c_int64(keep_alive_ms)) if keep_alive_ms is not None else None
        result = {}

        def body(_user, session):
            result.pop("error", None)
            try:
                result["value"] = fn(_share(session))
                return None
            except BaseException as e:
                result["error"] = e
                return status_of(e)

        callback = POOL_BODY(body)
        status = lib.ebb_pool_run_within(self._pool(), text(name), keep, 1 if load_on_demand else 0, elements,
                                         timeout, callback, None)
        if status:
            exc = result.get("error")
            if exc is not None:
                lib.ebb_status_destroy(status)
                raise exc
            raise error(status)
        return result.get("value")

    def load(self, name: str) -> None:
        """Loads a model now (evicting idle ones to fit)."""
        check(lib.ebb_pool_load(self._pool(), text(name)))

    def unload(self, name: str) -> None:
        """Unloads a model, pinned or not (leases still out finish first)."""
        check(lib.ebb_pool_unload(self._pool(), text(name)))

    def reap_now(self) -> None:
        """Unloads idle models whose keep-alive ran out (the pool's thread also does this)."""
        lib.ebb_pool_reap_now(self._pool())

    def status(self, name: str) -> ModelStatus:
        return _statuses(_new(lib.ebb_pool_status, self._pool(), text(name)))[0]

    def snapshot(self) -> list:
        return _statuses(_new(lib.ebb_pool_snapshot, self._pool()))

    def budget(self, device: str = "cpu") -> int:
        """The budget of a device ("cpu", "cuda:0"); 0 = none."""
        return lib.ebb_pool_budget(self._pool(), text(device))

    def used(self, device: str = "cpu") -> int:
        """The sum of the charges of the models loaded there."""
        return lib.ebb_pool_used(self._pool(), text(device))

    def predict_need(self, name: str, input_elements: int):
        """What a run of that many input elements is predicted to need (memory_bytes, arena_bytes: reserved)
and needs at least (memory_at_least, arena_at_least: what a refusal rests on), or None before its
model was measured."""
        value = c_void_p()
        check(lib.ebb_pool_predict_need_json(self._pool(), text(name), input_elements, byref(value)))
        return taken_json(value)

    def admission(self) -> list:
        """Admission by memory per device: limit, reserved, runs in flight and waiting, and totals."""
        return taken_json(lib.ebb_pool_admission_json(self._pool()))

    def events(self) -> list:
        """The events since the last call (at most the latest 1024), oldest first."""
        with self._events_lock:
            out = list(self._events)
            self._events.clear()
        return out

    def __contains__(self, name: str) -> bool:
        return bool(lib.ebb_pool_contains(self._pool(), text(name)))

    @property
    def runtime(self) -> Runtime:
        return self._runtime


_IN_EVENT = threading.local()  # set while a pool's thread delivers an event to Python


def _drop(destroy, handle: int) -> None:
    """Destroys a pool or lease handle; on a pool's own thread (the last reference to a pool or lease went
    inside on_event) from another thread instead, since the pool's end joins the thread delivering."""
    if getattr(_IN_EVENT, "active", False):
        threading.Thread(target=destroy, args=(handle,), daemon=True).start()
    else:
        destroy(handle)


def _deliverer(pool_ref):
    # A weak reference: the pool's callback must not keep the pool alive.
    def deliver(_user, e):
        _IN_EVENT.active = True
        try:
            pool = pool_ref()
            if pool is not None:
                pool._deliver(e)
            del pool
        finally:
            _IN_EVENT.active = False
    return deliver


class _Unraisable:
    def __init__(self, exc: BaseException, where: str):
        self.exc_type, self.exc_value, self.exc_traceback = type(exc), exc, exc.__traceback__
        self.err_msg, self.object = f"Exception ignored in {where}", None


_POOLS = weakref.WeakSet()
_LEASES = weakref.WeakSet()


def _shutdown() -> None:
    """At interpreter exit: leases go back and pool handles are dropped (their keep-alive threads joined)."""
    for lease in list(_LEASES):
        lease.release()
    for pool in list(_POOLS):
        pool._on_event = None
        pool._close()
