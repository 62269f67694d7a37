"""Runtime, Session, operations and images over ebb's C API (include/ebb/c.h) through ctypes.

The rule of this package: conversions only. Every behaviour (validation, release, caching,
tiling, budgets) is the library's; this file turns Python values into C API calls (the GIL is
released during each: ctypes.CDLL does), and a status into the ebb.* exception of its code.
"""
import json
import os
import signal
import threading
import weakref
from ctypes import POINTER, byref, c_char_p, c_int, c_int64, c_size_t, c_void_p

from . import _tensors
from ._lib import PROGRESS, check, error, lib, path_arg, taken_json, taken_string, text, version
from ._tensors import Held, frames_in, frames_out, input_tensor, any_tensor, output

__version__ = version()

_H = c_void_p


def _new(fn, *args):
    """Calls a C constructor whose last argument is `T** out`; returns the handle (an int)."""
    out = c_void_p()
    check(fn(*args, byref(out)))
    return out.value


def _names(values):
    return (c_char_p * len(values))(*[text(v) for v in values])


def _output_names(outputs):
    if outputs is None:
        return None
    if isinstance(outputs, str) or not isinstance(outputs, (list, tuple)):
        raise TypeError(f"outputs must be None or a list of output names; got {outputs!r}")
    for name in outputs:
        if not isinstance(name, str):
            raise TypeError(f"output names must be str; got {name!r}")
    return list(outputs)


class TensorInfo:
    """A model input or output as the model declares it."""

    __slots__ = ("_name", "_type", "_shape")

    def __init__(self, name: str, dtype: int, shape):
        self._name, self._type, self._shape = name, dtype, shape

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self):
        """numpy dtype (BF16 as uint16 bits); None without NumPy."""
        return _tensors.NP_DTYPES[self._type] if _tensors.np is not None else None

    @property
    def type(self) -> str:
        """ebb's type name: "FP32", "INT64", ..."""
        return _tensors.DTYPES[self._type]

    @property
    def shape(self) -> tuple:
        """Dimensions; -1 marks a dynamic one."""
        return self._shape

    def __repr__(self):
        return f"TensorInfo(name='{self._name}', type={self.type}, shape={_tensors.shape_string(self._shape)})"


def _signature(h, count_fn, get_fn):
    infos = []
    name, dtype, shape, rank = c_char_p(), c_int(), POINTER(c_int64)(), c_size_t()
    for i in range(count_fn(h)):
        get_fn(h, i, byref(name), byref(dtype), byref(shape), byref(rank))
        infos.append(TensorInfo(name.value.decode(), dtype.value, tuple(shape[d] for d in range(rank.value))))
    return infos


_RUN_DOC = """Runs the model once, as ONE whole operation: the arena memory it grew
into is given back (the shared CPU arena is shrunk and freed heap pages return
to the OS) while the model stays loaded, under the policy's release mode: with
the default ("idle") once no run has ended for idle_release_ms, so runs made
back to back keep the arena and a pause gives it back; with "operation_end"
when the run ends (which pays the arena's regrowth on the next run). To run
several times and release at the last run, use ``runtime.operation()`` or a
ready-made operation (``runtime.run_tiled`` ...).

inputs: ``{input name: array}``, every model input once. A numpy.ndarray of
  the input's dtype that is C-contiguous and aligned is read in place, without
  a copy (do not write to it from another thread during the run); so is any
  buffer-protocol object (bytes, bytearray, array.array, memoryview, ebb.Tensor)
  whose format matches. Another dtype raises TypeError, another layout
  ValueError, both naming the input, the dtype and the shape the model expects;
  a wrong shape or name raises ebb.InvalidArgument (a ValueError). ebb converts
  nothing implicitly.
outputs: names of the outputs to compute; None computes all, in model order.

Returns ``{output name: numpy.ndarray}`` (with NumPy; else ebb.Tensor values);
the arrays are views of memory ebb made for them (never an arena's), freed
when they go. The GIL is released while the model runs, so other Python threads
keep running, and several threads may run models (even this one) at once.

Raises ebb.ResourceExhausted (also a MemoryError) when memory ran out: the
session is then dropped from the runtime's cache and the next load builds it
afresh."""


class Session:
    """A loaded model on one device (from Runtime.load).

    Sessions are shared with the runtime's cache; one stays usable after it left the
    cache or after its Runtime is gone. run() may be called from several threads at once."""

    __slots__ = ("_h", "_inputs", "_outputs", "_by_name", "_name", "__weakref__")

    def __init__(self):
        raise TypeError("sessions are made by Runtime.load")

    @classmethod
    def _own(cls, handle: int) -> "Session":
        s = object.__new__(cls)
        s._h = handle
        s._inputs = _signature(handle, lib.ebb_session_input_count, lib.ebb_session_input)
        s._outputs = _signature(handle, lib.ebb_session_output_count, lib.ebb_session_output)
        s._by_name = {i.name: i for i in s._inputs}
        s._name = lib.ebb_session_name(handle).decode()
        return s

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and lib is not None:
            lib.ebb_session_destroy(h)

    @property
    def name(self) -> str:
        return self._name

    @property
    def source_path(self) -> str:
        return lib.ebb_session_source_path(self._h).decode()

    @property
    def device(self) -> str:
        """Where it REALLY runs: "cpu", "cuda:0"."""
        return lib.ebb_session_device(self._h).decode()

    @property
    def provider(self) -> str:
        return lib.ebb_session_provider(self._h).decode()

    @property
    def fallback_reason(self) -> str:
        """Why it runs elsewhere than asked ("" when it does not)."""
        return lib.ebb_session_fallback_reason(self._h).decode()

    @property
    def inputs(self) -> list:
        return list(self._inputs)

    @property
    def outputs(self) -> list:
        return list(self._outputs)

    def metadata(self, key: str):
        """A value of the model's metadata_props, or None."""
        value = c_void_p()
        check(lib.ebb_session_metadata(self._h, text(key), byref(value)))
        v = taken_string(value)
        return v or None

    @property
    def release_targets(self) -> list:
        """The arena shrink entries of this session ("cpu:0", "gpu:0")."""
        value = c_void_p()
        check(lib.ebb_session_release_targets(self._h, byref(value)))
        return taken_json(value)

    @property
    def run_count(self) -> int:
        return lib.ebb_session_run_count(self._h)

    @property
    def release_count(self) -> int:
        """Runs that carried a release."""
        return lib.ebb_session_release_count(self._h)

    @property
    def in_flight(self) -> int:
        return lib.ebb_session_in_flight(self._h)

    def _inputs_of(self, held: Held, inputs):
        if not isinstance(inputs, dict):
            raise TypeError(f"inputs must be a dict {{input name: numpy.ndarray}}; got {type(inputs).__name__}")
        names, handles = [], []
        for name, value in inputs.items():
            if not isinstance(name, str):
                raise TypeError(f"input names must be str; got {name!r}")
            info = self._by_name.get(name)
            # An unknown name: the run boundary reports it with the model's input names.
            h = (input_tensor(held, value, info._type, info._shape, self._name, name) if info is not None
                 else any_tensor(held, value))
            names.append(text(name))
            handles.append(h)
        n = len(names)
        return (c_char_p * n)(*names), (c_void_p * n)(*handles), n

    def _call(self, run, inputs, outputs):
        held = Held()
        try:
            names, handles, n = self._inputs_of(held, inputs)
            wanted = _output_names(outputs)
            onames = _names(wanted) if wanted else None
            out = c_void_p()
            status = run(names, handles, n, onames, len(wanted) if wanted else 0, byref(out))
        finally:
            held.close()
        if status:
            raise error(status)
        return dict(_tensors.take_list(out.value))

    def run(self, inputs, outputs=None):
        return self._call(lambda *a: lib.ebb_session_run(self._h, *a), inputs, outputs)

    run.__doc__ = _RUN_DOC

    def __repr__(self):
        return f"<ebb.Session '{self._name}' on {self.device}>"


def _share(borrowed: int) -> Session:
    """A Session of its own over a borrowed session handle (a lease's, a pool body's)."""
    return Session._own(_new(lib.ebb_session_share, borrowed))


# --- operations ----------------------------------------------------------------------------------

def _check_cancel(cancel):
    if cancel is not None and not hasattr(cancel, "is_set"):
        raise TypeError("cancel must be None or a threading.Event (anything with is_set())")


class _Control:
    """Progress, cancellation and Ctrl-C for one operation: an ebb_control_t whose progress callback
    (called by the library between runs, on the running thread, with the GIL taken back by ctypes)
    calls on_progress and reads the cancel event. Ctrl-C: while the operation runs on the main thread
    with Python's default SIGINT handler, a handler that only notes the signal stands in (a
    KeyboardInterrupt raised inside a ctypes callback would be lost), the callback then cancels, and
    KeyboardInterrupt is raised when the operation has stopped."""

    def __init__(self, on_progress, cancel):
        _check_cancel(cancel)
        self.on_progress, self.cancel, self.error, self.interrupted = on_progress, cancel, None, False
        self.previous = None
        self.h = lib.ebb_control_create()
        if not self.h:
            raise MemoryError("ebb: out of memory")
        self.fn = PROGRESS(self._between)
        lib.ebb_control_set_progress(self.h, self.fn, None)
        if cancel is not None and cancel.is_set():
            lib.ebb_control_cancel(self.h)  # the operation then stops before its first run
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.previous = signal.signal(signal.SIGINT, self._note_interrupt)

    def _note_interrupt(self, signum, frame):
        self.interrupted = True

    def _between(self, _user, done, total):
        try:
            if self.interrupted:
                return 1
            if self.on_progress is not None and self.on_progress(done, total) is False:
                return 1
            if self.cancel is not None and self.cancel.is_set():
                return 1
            return 0
        except BaseException as e:  # nothing may escape into the library's loop
            self.error = e
            return 1

    def close(self, status):
        """Raises what stopped the operation: Ctrl-C, a Python error from between runs, else the status."""
        if self.h:
            lib.ebb_control_destroy(self.h)
            self.h = None
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None
        if self.interrupted or self.error is not None:
            if status:
                lib.ebb_status_destroy(status)
            e, self.error = self.error, None
            raise e if e is not None else KeyboardInterrupt
        check(status)


_FRAMES_DOC = """ Returns a list of arrays, one per frame.

frames: a list of numpy arrays (or buffers, see Session.run), all of one kind:
  * float32 NCHW tensors [1,C,H,W] (C-contiguous; read without a copy); the
    results are float32 tensors [1,C',H',W'];
  * uint8 HWC images [H,W,C] or [H,W] (as ebb.read_image gives): converted with
    ebb.image_to_tensor to the model's channel count (values v/255), and the
    results back with ebb.tensor_to_image (clamped to [0,1], x255, rounded) to
    uint8 [H',W',C'] images.
on_progress(done, total): called between runs with the GIL held; return False
  to cancel. Exceptions it raises stop the operation and are re-raised.
cancel: a threading.Event; setting it (from any thread) stops the operation
  before its next run with ebb.Cancelled. Ctrl-C (KeyboardInterrupt) also
  stops it between runs. A stopped or failed operation gives its memory back
  at once (Runtime.trim), as the C++ ebb::Operation does.

The whole operation runs with the GIL released; memory is released once,
after its last run."""


def _channels(session: Session) -> int:
    shape = session._inputs[0].shape if session._inputs else ()
    return shape[1] if len(shape) == 4 and shape[1] > 0 else 0


def _frames_call(first: Session, frames, on_progress, cancel, call):
    held = Held()
    try:
        handles, images = frames_in(held, frames, _channels(first))
    except BaseException:
        held.close()
        raise
    control = _Control(on_progress, cancel)
    out = c_void_p()
    try:
        status = call((c_void_p * len(handles))(*handles), len(handles), control.h, byref(out))
    finally:
        held.close()
    try:
        control.close(status)
    except BaseException:
        lib.ebb_tensors_destroy(out.value)  # results of an operation stopped after its last run
        raise
    return frames_out(out.value, images)


class Operation:
    """operation(total_runs=None, on_progress=None, cancel=None) -> Operation

Several runs as ONE operation, released once, after its last run:

    with runtime.operation() as op:
        for frame in frames:
            out = op.run(session, {"x": frame})

The caller never marks the last run. Without total_runs the runs keep the
arena and the release happens when the block ends (Runtime.trim: the shared CPU
arena is shrunk, heap pages go back); with total_runs=N the N-th run carries
the release itself, exactly as a planned C++ ebb::Operation does (needed where
trim cannot shrink an arena at once: per-session CPU arenas, CUDA). Both end at
the same memory floor as the C++ Operation (see python/bench and the tests).

on_progress(done, total): called after every run (total None when not
planned); return False to cancel: the next op.run raises ebb.Cancelled.
cancel: a threading.Event, checked before every run. A failed run, a
cancellation, or any exception leaving the block gives the memory back at
once, as a cancelled C++ operation does. Each op.run releases the GIL while the
model runs."""

    # The operation is the library's (ebb::ScopedOperation, through ebb_operation_t): its runs,
    # release, cancellation and ended states. Here only the `with` block, and `cancel` and
    # on_progress turned into its control's cancellation (no C callback per run).
    def __init__(self, runtime: "Runtime", total, on_progress, cancel):
        if total is not None and total < 0:
            raise ValueError("total_runs must be None or >= 0")
        _check_cancel(cancel)
        self._runtime, self._total, self._on_progress, self._cancel = runtime, total, on_progress, cancel
        self._h = self._control = None
        self._state = "new"

    def __enter__(self) -> "Operation":
        if self._state != "new":
            _raise("failed_precondition", "an operation is entered once; start a new one")
        self._control = lib.ebb_control_create()
        if not self._control:
            raise MemoryError("ebb: out of memory")
        self._h = _new(lib.ebb_operation_create, self._runtime._h, self._total or 0, self._control)
        self._state = "open"
        return self

    def __exit__(self, exc_type, exc, traceback) -> bool:
        self._state = "closed"
        if exc_type is not None:
            lib.ebb_operation_abandon(self._h)  # the memory goes back now (nothing when a run ended it)
            return False
        check(lib.ebb_operation_end(self._h))  # the deferred release, when no run carried it
        return False

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        control, self._control = getattr(self, "_control", None), None
        if lib is not None:
            if h:
                lib.ebb_operation_destroy(h)
            if control:
                lib.ebb_control_destroy(control)  # after the operation that borrowed it

    def run(self, session: Session, inputs, outputs=None):
        """One run of the operation: like Session.run (same inputs, outputs and errors),
but the run keeps the arena for the next run, unless it is the planned last one
(total_runs). The GIL is released while the model runs."""
        if self._state != "open":
            _raise("failed_precondition", "op.run() is only valid inside `with runtime.operation() as op:`")
        if self._cancel is not None and self._cancel.is_set():
            lib.ebb_control_cancel(self._control)  # the run below ends the operation: ebb.Cancelled
        out = session._call(lambda *a: lib.ebb_operation_run(self._h, session._h, *a), inputs, outputs)
        if self._on_progress is not None and self._on_progress(self.done, self._total) is False:
            lib.ebb_control_cancel(self._control)  # the next op.run raises ebb.Cancelled
        return out

    @property
    def done(self) -> int:
        """Runs finished so far."""
        return lib.ebb_operation_runs_done(self._h) if self._h else 0

    @property
    def total(self):
        """total_runs as planned (None when not planned)."""
        return self._total

    @property
    def released(self) -> bool:
        """Whether the operation's memory has been given back."""
        return bool(self._h and lib.ebb_operation_released(self._h))


from ._errors import Error as _errors_Error, _make  # noqa: E402


def _raise(code: str, message: str):
    raise _make(code, message)


# --- the runtime ---------------------------------------------------------------------------------

def _load_options(device: str, strict, name):
    options = lib.ebb_load_options_create()
    if not options:
        raise MemoryError("ebb: out of memory")
    try:
        check(lib.ebb_load_options_set_device(options, text(device)))
        if strict is not None:
            lib.ebb_load_options_set_strict(options, 1 if strict else 0)
        if name is not None:
            check(lib.ebb_load_options_set_name(options, text(name)))
    except BaseException:
        lib.ebb_load_options_destroy(options)
        raise
    return options


def _resolve(path, models, device="auto"):
    """(model file, device) as the ebb command resolves a model folder, file or name."""
    model_path, dev = c_void_p(), c_void_p()
    check(lib.ebb_model_resolve(path_arg(path, "path"), path_arg(models, "models"), b"models=", text(device),
                                byref(model_path), byref(dev)))
    return taken_string(model_path), taken_string(dev)


class Runtime:
    """Runtime(policy=None)

The entry point: one memory policy and one cache of loaded sessions, keyed by
the model's content (SHA-256 of the model file and of every external-data file
it names), device and options. policy: None (ebb's
defaults: one capped shared CPU arena, release at the end of each operation,
and for single runs once no run has ended for 50 ms),
a dict in the JSON form of docs/memory-policy.md, or the path of such a file.

One Runtime per process while the policy uses the shared CPU arena: creating a
second one raises ebb.FailedPrecondition. Every method may be called from any
thread."""

    def __init__(self, policy=None):
        self._h = None
        self._sessions = weakref.WeakValueDictionary()  # (name, path, device) -> Session: one object per session
        self._ocr = {}  # (pipeline folder, device) -> ebb_ocr_t handle: its three sessions stay loaded
        self._ocr_lock = threading.Lock()
        if policy is None:
            self._h = _new(lib.ebb_runtime_create, None, 0)
        elif isinstance(policy, dict):
            data = json.dumps(policy).encode()
            self._h = _new(lib.ebb_runtime_create, data, len(data))
        elif isinstance(policy, (str, bytes)) or hasattr(policy, "__fspath__"):
            self._h = _new(lib.ebb_runtime_create_from_file, path_arg(policy, "policy"))
        else:
            raise TypeError("policy must be None, a dict (docs/memory-policy.md) or the path of a policy JSON file")

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and lib is not None:
            self._drop_ocr()
            lib.ebb_runtime_destroy(h)

    def _drop_ocr(self):
        with self._ocr_lock:
            pipelines, self._ocr = list(self._ocr.values()), {}
        for handle in pipelines:
            lib.ebb_ocr_destroy(handle)

    @property
    def policy(self) -> dict:
        """The policy in force, every field written (a dict)."""
        return json.loads(lib.ebb_runtime_policy_json(self._h))

    def load(self, path, device: str = "auto", *, strict=None, name=None, models="models") -> Session:
        """Loads a model and returns its Session, or the cached one: a second
load of the same bytes on the same device returns the same session without loading again
(see load_count). path takes a model the way the ebb command does (ebb/model_location.h):
a model folder (its model.onnx, with its config.json when there is one: the config's
"device" applies when device is "auto"), a model file, or the name of a folder under
models (default "models", relative to the working directory): "models/convnet",
"models/convnet/model.onnx" and "convnet" are the same model. A model with ONNX external
data (weights in files beside it) is the same model only while those files are too: new
weights load anew. device: "auto" (CUDA when it can be used, else CPU), "cpu", "cuda",
"cuda:N". strict: fail with ebb.Unavailable instead of falling back to CPU (default: the
policy's). Raises ebb.NotFound (no such file, folder or name; a folder without model.onnx),
ebb.InvalidArgument (not a model; a broken config.json; an external-data file outside the
model's folder), ebb.FailedPrecondition (an external-data file missing). The GIL is released."""
        model_path, dev = _resolve(path, models, device)
        options = _load_options(dev, strict, name)
        try:
            return self._session(_new(lib.ebb_runtime_load, self._h, path_arg(model_path, "path"), options))
        finally:
            lib.ebb_load_options_destroy(options)

    def _session(self, handle: int) -> Session:
        """The Session object of a loaded session: the one already made when the cache gave the same session."""
        key = (lib.ebb_session_name(handle), lib.ebb_session_source_path(handle), lib.ebb_session_device(handle))
        known = self._sessions.get(key)
        if known is not None and lib.ebb_session_same(known._h, handle):
            lib.ebb_session_destroy(handle)
            return known
        session = Session._own(handle)
        self._sessions[key] = session
        return session

    def load_bytes(self, data: bytes, device: str = "auto", *, strict=None, name=None) -> Session:
        """Like load(), for model bytes already in memory. Bytes that name external-data files raise
ebb.InvalidArgument: they have no folder to find them in; load the file instead."""
        data = bytes(data)
        options = _load_options(device, strict, name)
        try:
            return self._session(_new(lib.ebb_runtime_load_bytes, self._h, data, len(data), options))
        finally:
            lib.ebb_load_options_destroy(options)

    def unload(self, target, *, models="models") -> int:
        """Drops from the cache the sessions loaded from a model (a folder, file or name, as load() takes it),
or one Session; returns how many. Sessions still referenced stay usable."""
        if isinstance(target, Session):
            return lib.ebb_runtime_unload_session(self._h, target._h)
        raw = path_arg(target, "target")
        try:
            model_path, _ = _resolve(target, models)
            raw = path_arg(model_path, "target")
        except _errors_Error:
            pass  # a file gone since its load: by its path
        return lib.ebb_runtime_unload_path(self._h, raw)

    def clear(self) -> None:
        """Drops every session from the cache, and the OCR pipelines ocr() keeps."""
        self._drop_ocr()
        lib.ebb_runtime_clear(self._h)

    def trim(self) -> None:
        """Gives idle memory back now: the shared CPU arena is shrunk (or by the last run in flight) and heap
pages return to the OS; per-session arenas release on their next run that starts alone."""
        check(lib.ebb_runtime_trim(self._h))

    def memory(self) -> dict:
        """The memory readings of MemoryReading::ToJson, as a dict: "rss_bytes", "peak_rss_bytes",
"arenas" (one dict per arena: "name" ("cpu:shared", "cpu:<model>", "gpu:N:<model>"), "reserved",
"in_use", "peak_in_use", "limit", "regions", "extensions", "shrinks", "allocations") and "gpus"."""
        reading = _new(lib.ebb_runtime_memory, self._h)
        try:
            return json.loads(lib.ebb_memory_json(reading))
        finally:
            lib.ebb_memory_destroy(reading)

    @property
    def load_count(self) -> int:
        """Successful loads so far (cache hits do not count)."""
        return lib.ebb_runtime_load_count(self._h)

    @property
    def cached(self) -> int:
        """Sessions in the cache now."""
        return lib.ebb_runtime_cached_count(self._h)

    def operation(self, total_runs=None, on_progress=None, cancel=None) -> Operation:
        return Operation(self, total_runs, on_progress, cancel)

    operation.__doc__ = Operation.__doc__

    def run_per_frame(self, session: Session, frames, *, on_progress=None, cancel=None) -> list:
        return _frames_call(session, frames, on_progress, cancel,
                            lambda f, n, c, out: lib.ebb_run_per_frame(self._h, session._h, f, n, c, out))

    run_per_frame.__doc__ = "One run per frame, in order (frames may differ in size), as one operation." + _FRAMES_DOC

    def run_joint(self, session: Session, frames, *, on_progress=None, cancel=None) -> list:
        return _frames_call(session, frames, on_progress, cancel,
                            lambda f, n, c, out: lib.ebb_run_joint(self._h, session._h, f, n, c, out))

    run_joint.__doc__ = ("One run over all frames stacked into one batch (frames of equal size), split back per "
                         "frame." + _FRAMES_DOC)

    def run_tiled(self, session: Session, frames, *, tile: int = 128, overlap: int = 8, scale: int = 0,
                  tiles_per_run: int = 1, on_progress=None, cancel=None) -> list:
        return _frames_call(session, frames, on_progress, cancel,
                            lambda f, n, c, out: lib.ebb_run_tiled(self._h, session._h, f, n, tile, overlap, scale,
                                                                   tiles_per_run, c, out))

    run_tiled.__doc__ = ("An image-to-image model over tiles of tile x tile pixels, each core with `overlap` pixels "
                         "of context, every tile of every frame in ONE operation: memory is released after the last "
                         "tile of the last frame. scale: output/input ratio (0: the model's metadata ebb.scale, else "
                         "measured). tiles_per_run tiles are stacked into one run." + _FRAMES_DOC)

    def run_pipeline(self, sessions, frames, *, on_progress=None, cancel=None) -> list:
        sessions = list(sessions)
        if not sessions:
            _raise("invalid_argument", "a pipeline needs at least one model")
        for s in sessions:
            if not isinstance(s, Session):
                raise TypeError(f"sessions must be ebb.Session objects; got {type(s).__name__}")
        stages = (c_void_p * len(sessions))(*[s._h for s in sessions])
        return _frames_call(sessions[0], frames, on_progress, cancel,
                            lambda f, n, c, out: lib.ebb_run_pipeline(self._h, stages, len(sessions), f, n, c, out))

    run_pipeline.__doc__ = ("Per frame, each model in turn (the output of one is the input of the next), as one "
                            "operation." + _FRAMES_DOC)


    def ocr(self, images, *, pipeline="ocr", models="models", device: str = "auto", on_progress=None,
            cancel=None) -> list:
        """Recognises the text of images with the OCR pipeline (PP-OCR's detector, angle classifier and
recogniser; docs/ocr.md), all images as ONE operation: its memory is given back once, after the last
run of the last image. The pipeline's three sessions stay loaded (kept by this Runtime, per pipeline
and device, until clear()), so later calls do not load again.

images: a list of image files (str or os.PathLike: PNG or JPEG), or of uint8 images [H,W,C] (C = 1,
  3 or 4) / [H,W] as ebb.read_image gives (numpy arrays or buffers), or both.
pipeline: a pipeline folder (config.json {"kind": "ocr", ...}) or its name under `models` (default
  "models", relative to the working directory), as `ebb ocr --pipeline` takes it.
device: "auto", "cpu", "cuda", "cuda:N".
on_progress, cancel: as for the ready-made operations (run_tiled): called between runs, return False
  to cancel; a threading.Event; Ctrl-C also stops it between runs.

Returns what `ebb ocr --json` prints, as Python values: one dict per image, in order,
{"image": the path as given (None for an array), "lines": [{"text": str, "confidence": float in [0,1],
"box": [[x, y], [x, y], [x, y], [x, y]]}]}, lines in reading order, boxes in the image's pixels
clockwise from the top left; an image without text has no lines. Raises ebb.NotFound (no such file;
no pipeline), ebb.InvalidArgument (a file that is not an image, named in the message; an image of
another size or channel count), ebb.Unavailable (OCR is not built: Windows). The GIL is released."""
        if _tensors._is_array(images) or not isinstance(images, (list, tuple)):
            raise TypeError("images must be a list of image paths or uint8 images [H,W,C]; got "
                            f"{_tensors.type_name(images)}")
        handle = self._ocr_pipeline(pipeline, models, device)
        held = Held()
        try:
            names, pixels, widths, heights, channels = [], [], [], [], []
            for index, image in enumerate(images):
                if isinstance(image, (str, os.PathLike)):
                    h = _new(lib.ebb_image_read, path_arg(image, f"image {index}"))
                    held.handles.append(h)
                    names.append(os.fspath(image))
                else:
                    h = _tensors.image_handle(held, image, f"image {index}")
                    names.append(None)
                shape = _tensors._shape_of(h)
                pixels.append(lib.ebb_tensor_data(h))
                heights.append(shape[0])
                widths.append(shape[1])
                channels.append(shape[2] if len(shape) == 3 else 1)
            n = len(images)
            control = _Control(on_progress, cancel)
            out = c_void_p()
            status = lib.ebb_ocr_images(handle, (c_void_p * n)(*pixels), (c_int * n)(*widths),
                                        (c_int * n)(*heights), (c_int * n)(*channels), n, control.h, byref(out))
        finally:
            held.close()
        try:
            control.close(status)
        except BaseException:
            if out.value:
                lib.ebb_free(out.value)  # the results of a call stopped after its last run
            raise
        pages = taken_json(out)
        return [{"image": name, "lines": page["lines"]} for name, page in zip(names, pages)]

    def _ocr_pipeline(self, pipeline, models, device: str) -> int:
        """The ebb_ocr_t of a pipeline folder (or its name under models) on a device: loaded once, then kept."""
        folder = os.fspath(pipeline) if isinstance(pipeline, (str, os.PathLike)) else pipeline
        if not isinstance(folder, str):
            raise TypeError(f"pipeline must be a str or os.PathLike; got {_tensors.type_name(pipeline)}")
        if not os.path.exists(folder):
            folder = os.path.join(os.fspath(models), folder)
        key = (os.path.realpath(folder), device)
        with self._ocr_lock:
            handle = self._ocr.get(key)
            if handle is None:
                options = _load_options(device, None, None)
                try:
                    handle = _new(lib.ebb_ocr_load, self._h, path_arg(folder, "pipeline"), options)
                finally:
                    lib.ebb_load_options_destroy(options)
                self._ocr[key] = handle
        return handle

# --- images and model folders ------------------------------------------------------------------

def read_image(path):
    """Reads a PNG or JPEG file (by its magic bytes) with ebb's image code: a uint8 array
[H,W,C], C = 1 (gray), 3 (RGB) or 4 (RGBA) (an ebb.Tensor without NumPy). Raises ebb.NotFound,
ebb.InvalidArgument (corrupt, truncated or unsupported file, named in the message)."""
    return output(_new(lib.ebb_image_read, path_arg(path, "path")))


def write_png(path, image) -> None:
    """Writes an 8-bit PNG with ebb's image code. image: uint8 [H,W,C] (C = 1, 3, 4) or [H,W];
or a float32 tensor [1,C,H,W] / [C,H,W] with values in [0,1] (clamped, scaled to 0..255, rounded)."""
    file = path_arg(path, "path")
    held = Held()
    try:
        np = _tensors.np
        if np is not None and isinstance(image, np.ndarray) and image.dtype == np.float32:
            if not image.flags.c_contiguous:
                raise ValueError("a float32 tensor image must be C-contiguous")
            h = _tensors.float_handle(held, image, "image")
        elif isinstance(image, _tensors.Tensor) and image.type == "FP32":
            h = _tensors.float_handle(held, image, "image")
        else:
            h = _tensors.image_handle(held, image, "image")
        check(lib.ebb_image_write_png(file, h))
    finally:
        held.close()


def image_to_tensor(image, channels: int = 3):
    """uint8 HWC image -> float32 [1,C,H,W] with values v/255 (C = 3: RGB, 1: luma, 4: RGBA), as ebb does."""
    held = Held()
    try:
        return output(_new(lib.ebb_image_to_tensor, _tensors.image_handle(held, image, "image"), channels))
    finally:
        held.close()


def tensor_to_image(tensor):
    """float32 [1,C,H,W] / [C,H,W] in [0,1] -> uint8 HWC image (clamped, x255, rounded)."""
    np = _tensors.np
    if np is not None and isinstance(tensor, np.ndarray):
        if tensor.dtype != np.float32 or not tensor.flags.c_contiguous:
            raise TypeError("tensor must be a C-contiguous float32 array [1,C,H,W] or [C,H,W]")
    held = Held()
    try:
        return output(_new(lib.ebb_tensor_to_image, _tensors.float_handle(held, tensor, "tensor")))
    finally:
        held.close()


def read_model_config(folder) -> dict:
    """The config.json of a model folder as ebb reads it (LoadModelConfig, strict: unknown keys and
out-of-range values raise ebb.InvalidArgument naming the file), written back with every field it has:
{"kind": "tensor" | "image_to_image", "pinned": bool, and when set "device", "tile": {"size", "overlap",
"tiles_per_run"}, "scale", "keep_alive_ms", "versions"}. A folder without config.json gives the defaults
({"kind": "tensor", "pinned": False}). config.json must be a regular file inside the folder (a link out of
it, a FIFO or a device is refused), of at most 64 KiB."""
    value = c_void_p()
    check(lib.ebb_model_config_json(path_arg(folder, "folder"), byref(value)))
    return taken_json(value)
