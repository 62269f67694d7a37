"""The ebb side of the add-on, without bpy: the cached runtime and models, and a job on a worker thread.

One Engine per Blender process (ENGINE below). It keeps one ebb.Runtime (it owns the shared CPU arena, so a
process has one) and the sessions of the model folders used so far, so a second click loads nothing. A Job
runs on a worker thread: it loads the model (ebb's cached session after the first job) and runs ONE ebb
operation, Runtime.run_tiled over every frame; ebb releases the GIL while it loads and runs, so Blender's
UI keeps drawing. The memory behaviour is all ebb's: the operation gives its
arena back after its last run, and a cancelled or failed one gives it back at once. The add-on only reads
the numbers (Runtime.memory()) to show them.

Thread rules: an Engine is used from Blender's main thread only. A Job's worker thread touches nothing
but its own fields (written before `finished` turns true; read after) and ebb.
"""
import gc
import os
import threading
import time

MiB = 1 << 20
ADDON_DIR = os.path.dirname(os.path.abspath(__file__))
# The bundled upscaler (copied in by examples/blender/build_addon.py).
BUNDLED_MODEL = os.path.join(ADDON_DIR, "models", "waifu2x_scale2x")
# Tiles when a model's config.json names none (the bundled model's own values).
DEFAULT_TILE = {"size": 128, "overlap": 8, "tiles_per_run": 1}
# How often a job reads the memory it shows (RSS, arenas) while it runs.
SAMPLE_SECONDS = 0.02


class AddonError(Exception):
    """A problem the add-on reports as it stands: no ebb, a bad model folder, a bad image."""


def import_ebb():
    """The ebb package, or AddonError saying how to install it."""
    try:
        import ebb
    except ImportError as e:
        raise AddonError(f"the Python package ebb is not installed in Blender's Python ({e}); "
                         "install its wheel as the add-on's README says") from None
    return ebb


def describe_error(error: BaseException) -> str:
    """A one-line message for a Blender report: ebb's status code and message, never a traceback."""
    code = getattr(error, "code", None)
    if code == "resource_exhausted":
        return f"out of memory: {error}"
    if code:
        return f"{code.replace('_', ' ')}: {error}"
    if isinstance(error, (AddonError, OSError)):
        return str(error)
    return f"{type(error).__name__}: {error}"


def model_file(folder: str) -> str:
    """The model.onnx of a model folder, or of its highest numeric version folder."""
    direct = os.path.join(folder, "model.onnx")
    if os.path.isfile(direct):
        return direct
    versions = [int(n) for n in os.listdir(folder)
                if n.isdigit() and os.path.isfile(os.path.join(folder, n, "model.onnx"))]
    if not versions:
        raise AddonError(f"model folder '{folder}' has no model.onnx")
    return os.path.join(folder, str(max(versions)), "model.onnx")


class ModelFolder:
    """An image_to_image model folder as checked on the main thread: its model file and config.json."""

    def __init__(self, folder: str, file: str, config: dict):
        self.folder, self.file, self.config = folder, file, config


class Model:
    """A loaded model folder: its session and its tiling (from its config.json)."""

    def __init__(self, source: ModelFolder, session, reading_after_load: dict):
        self.folder = source.folder
        self.session = session
        self.tile = dict(DEFAULT_TILE, **source.config.get("tile", {}))
        self.scale = source.config.get("scale", 0)  # 0: ebb reads the model's ebb.scale, else measures it
        self.after_load = reading_after_load

    @property
    def name(self) -> str:
        return os.path.basename(self.folder.rstrip(os.sep)) or self.folder


def reading(runtime) -> dict:
    """The numbers a job shows: process RSS and the bytes reserved by ebb's arenas (Runtime.memory())."""
    m = runtime.memory()
    return {"rss": m["rss_bytes"], "arena": sum(a["reserved"] for a in m["arenas"]),
            "shared_arena": next((a["reserved"] for a in m["arenas"] if a["name"] == "cpu:shared"), 0)}


def load(runtime, source: ModelFolder, known: "Model | None") -> Model:
    """Runtime.load of a model folder (any thread: Runtime is thread-safe). ebb returns its cached session
    when the file did not change, so a second job loads nothing; the reading after a real load is kept."""
    loads = runtime.load_count
    session = runtime.load(source.file, source.config.get("device", "auto"))
    fresh = runtime.load_count != loads or known is None
    return Model(source, session, reading(runtime) if fresh else known.after_load)


class Job:
    """Loads the model (a cache hit after the first job) and runs ONE ebb operation, Runtime.run_tiled over
    all frames, on a worker thread.

    `done` / `total` follow the runs; `cancel()` may be called from any thread and stops the operation
    before its next run (ebb then gives the memory back). When `finished`, exactly one of `results`
    (the frames, in the form they came in) and `error` (the exception, ebb.Cancelled for a cancel) is set,
    and `model` is the loaded model unless loading failed.
    """

    def __init__(self, runtime, source: ModelFolder, known: "Model | None", frames: list, tile_size: int,
                 label: str):
        self.runtime = runtime
        self.source, self._known = source, known
        self.model = None
        self.frames = frames
        self.tile_size = tile_size
        self.label = label
        self.done, self.total = 0, None
        self.results, self.error = None, None
        self.before = self.peak = self.after = None
        self.seconds = 0.0
        self._cancel = threading.Event()
        self._peak_lock = threading.Lock()
        self._thread = threading.Thread(target=self._work, name="ebb job", daemon=True)

    def start(self) -> "Job":
        self._thread.start()
        return self

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    @property
    def finished(self) -> bool:
        return self._thread.ident is not None and not self._thread.is_alive()

    def wait(self, timeout=None) -> bool:
        self._thread.join(timeout)
        return self.finished

    def _sample(self) -> None:
        now = reading(self.runtime)
        with self._peak_lock:
            self.peak = {k: max(self.peak[k], now[k]) for k in now}

    def _sample_until(self, stop: threading.Event) -> None:
        # Only reads: the peak of the panel's "took" (the last run releases inside itself, so the
        # progress callback after it would miss it).
        while not stop.wait(SAMPLE_SECONDS):
            self._sample()

    def _progress(self, done: int, total) -> None:  # worker thread, GIL held, between two runs
        self.done, self.total = done, total

    def _work(self) -> None:
        start = time.perf_counter()
        try:
            self.model = load(self.runtime, self.source, self._known)
            self._known = None
            self._run()
        except BaseException as e:  # reported on the main thread; nothing escapes a worker
            self.error = e
        self.frames = None
        self.after = reading(self.runtime)
        self.before = self.before or self.after
        self.peak = self.peak or self.after
        self.seconds = time.perf_counter() - start

    def _run(self) -> None:
        self.before = reading(self.runtime)
        self.peak = dict(self.before)
        stop = threading.Event()
        sampler = threading.Thread(target=self._sample_until, args=(stop,), name="ebb job memory", daemon=True)
        sampler.start()
        try:
            t = dict(self.model.tile, size=self.tile_size or self.model.tile["size"])
            self.results = self.runtime.run_tiled(
                self.model.session, self.frames, tile=t["size"], overlap=t["overlap"], scale=self.model.scale,
                tiles_per_run=t["tiles_per_run"], on_progress=self._progress, cancel=self._cancel)
        finally:
            stop.set()
            sampler.join()


class Engine:
    """The add-on's ebb state for this Blender process: runtime, models, the running job, the last job."""

    def __init__(self):
        self.runtime = None
        self.policy = None
        self.models = {}  # folder -> Model
        self.job = None
        self.last = None  # a summary dict of the last finished job (the panel shows it)

    def runtime_for(self, policy_file: str):
        """The Runtime with this memory policy (a JSON file; "" = ebb's defaults), made once."""
        ebb = import_ebb()
        policy = os.path.abspath(policy_file) if policy_file else None
        if self.runtime is not None and policy == self.policy:
            return self.runtime
        self.drop()  # a new policy needs a new Runtime, and one Runtime at a time owns the shared arena
        self.runtime = ebb.Runtime(policy)
        self.policy = policy
        return self.runtime

    def check(self, folder: str) -> ModelFolder:
        """An image_to_image model folder ("" = the bundled upscaler), checked: it exists, ebb reads its
        config.json (strict; errors name the file), it says image_to_image, it has a model.onnx."""
        ebb = import_ebb()
        folder = os.path.abspath(folder or BUNDLED_MODEL)
        if not os.path.isdir(folder):
            raise AddonError(f"model folder '{folder}' does not exist")
        config = ebb.read_model_config(folder)
        if config["kind"] != "image_to_image":
            raise AddonError(f"model folder '{folder}' is not an image_to_image model: its config.json must say "
                             f"\"kind\": \"image_to_image\" (it has kind '{config['kind']}')")
        return ModelFolder(folder, model_file(folder), config)

    def model(self, folder: str, policy_file: str = "") -> Model:
        """The loaded model of a folder, now, on this thread (scripts; the operators load in their job).
        Every call asks ebb again: its cached session unless the file changed; config.json re-read."""
        source = self.check(folder)
        runtime = self.runtime_for(policy_file)
        self.models[source.folder] = load(runtime, source, self.models.get(source.folder))
        return self.models[source.folder]

    def start(self, folder: str, policy_file: str, frames: list, tile_size: int, label: str) -> Job:
        """Checks the folder here (errors at once), then loads and runs on the job's thread."""
        if self.job is not None and not self.job.finished:
            raise AddonError(f"an ebb job is running ({self.job.label}); wait for it or press Esc")
        source = self.check(folder)
        runtime = self.runtime_for(policy_file)
        self.job = Job(runtime, source, self.models.get(source.folder), frames, tile_size, label).start()
        return self.job

    def finish(self, job: Job) -> None:
        """Records a finished job for the panel and forgets it."""
        if self.job is job:
            self.job = None
        if job.model is not None and job.runtime is self.runtime:
            self.models[job.model.folder] = job.model
        if job.error is None:
            outcome = "done"
        elif getattr(job.error, "code", None) == "cancelled":
            outcome = "cancelled"
        else:
            outcome = "failed: " + describe_error(job.error)
        self.last = {"label": job.label, "outcome": outcome, "runs": job.done, "total": job.total,
                     "seconds": job.seconds, "before": job.before, "peak": job.peak, "after": job.after,
                     "took": job.peak["rss"] - job.before["rss"], "gave_back": job.peak["rss"] - job.after["rss"]}

    def unload_models(self) -> None:
        """Unloads every model (ebb gives their memory back as it drops them); the next job loads again."""
        self.models.clear()
        if self.runtime is not None:
            self.runtime.clear()

    def drop(self) -> None:
        """Stops a running job and lets go of the runtime (add-on disabled, policy changed)."""
        if self.job is not None:
            self.job.cancel()
            self.job.wait()
            self.job = None
        self.models.clear()
        self.runtime = None
        gc.collect()


ENGINE = Engine()
