package dev.ebb;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The entry point (the C API's ebb_runtime_t over ebb::Runtime): one memory policy, the shared
 * capped CPU arena every session allocates from (by default), and a cache of loaded sessions keyed
 * by the model's content, device and options.
 *
 * <pre>{@code
 * try (Runtime runtime = Runtime.create();
 *      Session session = runtime.load("models/convnet/model.onnx");
 *      Tensor x = Tensor.fromArray(pixels, 1, 3, 64, 64);
 *      Outputs out = session.run(Map.of("x", x))) {   // its arena memory goes back once runs pause
 *   float[] y = out.get("y").toFloatArray();
 * }
 * }</pre>
 *
 * <p>One Runtime per process while its policy uses the shared CPU arena (the default): {@link
 * #create} throws {@link FailedPreconditionException} while another such Runtime, or a session of
 * it, is alive.
 *
 * <p>Thread safety: every method may be called from any thread. Sessions, pools and operations
 * made from it stay valid after it is closed (they keep what they need alive); closing drops this
 * handle, and use after close throws {@link IllegalStateException}.
 */
public final class Runtime extends NativeObject {
  static {
    NativeLibrary.load();
  }

  private Runtime(long handle) {
    super(handle);
  }

  /** A runtime with ebb's default policy (docs/memory-policy.md). */
  public static Runtime create() {
    return new Runtime(nativeCreate(null));
  }

  /**
   * A runtime from a policy in its JSON form, e.g. {@code {"cpu": {"arena": "per_session"}}}.
   *
   * @throws InvalidArgumentException a bad policy (the message names the key)
   */
  public static Runtime create(String policyJson) {
    return new Runtime(nativeCreate(policyJson));
  }

  /** A runtime from a policy file. @throws NotFoundException no such file */
  public static Runtime fromPolicyFile(Path policy) {
    return new Runtime(nativeCreateFromFile(policy.toString()));
  }

  /** ebb's version, "MAJOR.MINOR.PATCH". */
  public static String version() {
    return nativeVersion();
  }

  /** The ONNX Runtime library's version. */
  public static String ortVersion() {
    return nativeOrtVersion();
  }

  /** The C ABI version of the loaded libebb (its soname's number). */
  public static int abiVersion() {
    return nativeAbiVersion();
  }

  /** The policy in force as JSON, every field written. */
  public String policyJson() {
    try (Use runtime = use()) {
      return nativePolicy(runtime.handle());
    }
  }

  /**
   * Loads (or returns the cached) session of a model file: a second load of the same bytes on the
   * same device is the same loaded model ({@link Session#isSameModel}, {@link #loadCount}).
   *
   * @throws NotFoundException no such file
   * @throws InvalidArgumentException not a model
   */
  public Session load(String modelPath) {
    return load(modelPath, new LoadOptions());
  }

  public Session load(Path modelPath) {
    return load(modelPath.toString(), new LoadOptions());
  }

  public Session load(String modelPath, LoadOptions options) {
    try (Use runtime = use()) {
      return new Session(nativeLoad(runtime.handle(), modelPath, null, options.device, options.strictValue(),
                                options.name));
    }
  }

  /** The same for model bytes already in memory. */
  public Session loadBytes(byte[] model, LoadOptions options) {
    try (Use runtime = use()) {
      return new Session(nativeLoad(runtime.handle(), null, model, options.device, options.strictValue(),
                                options.name));
    }
  }

  /** Drops every cached session loaded from `modelPath`; returns how many. Handles stay usable. */
  public int unload(String modelPath) {
    try (Use runtime = use()) {
      return (int) nativeUnload(runtime.handle(), modelPath, 0);
    }
  }

  /** Drops one session from the cache; true if it was cached. */
  public boolean unload(Session session) {
    try (Use runtime = use(); Use s = session.use()) {
      return nativeUnload(runtime.handle(), null, s.handle()) == 1;
    }
  }

  /** Drops every session from the cache. */
  public void clear() {
    try (Use runtime = use()) {
      nativeClear(runtime.handle());
    }
  }

  /**
   * Gives idle memory back now: the shared CPU arena is shrunk (or by the last run in flight) and
   * heap pages go back to the OS; per-session arenas release on their next run that starts alone.
   */
  public void trim() {
    try (Use runtime = use()) {
      nativeTrim(runtime.handle());
    }
  }

  /** Successful loads so far (cache hits do not count). */
  public long loadCount() {
    try (Use runtime = use()) {
      return nativeLoadCount(runtime.handle());
    }
  }

  /** Sessions in the cache now. */
  public long cachedCount() {
    try (Use runtime = use()) {
      return nativeCachedCount(runtime.handle());
    }
  }

  /** Every arena (the shared one "cpu:shared", each cached session's own), RSS, its peak, now. */
  public MemoryReading memory() {
    try (Use runtime = use()) {
      long m = nativeMemory(runtime.handle());
      try {
        List<ArenaStats> arenas = new ArrayList<>();
        int n = nativeArenaCount(m);
        for (int i = 0; i < n; ++i) arenas.add(new ArenaStats(nativeArenaName(m, i), nativeArenaStats(m, i)));
        long[] rss = nativeRss(m);
        return new MemoryReading(rss[0], rss[1], arenas, nativeMemoryJson(m));
      } finally {
        nativeMemoryDestroy(m);
      }
    }
  }

  // --- Operations ---------------------------------------------------------------------------

  /** An operation whose runs keep the arena; its close gives the memory back. See {@link Operation}. */
  public Operation operation() {
    return operation(0, null);
  }

  /** An operation of `plannedRuns` runs: the last one releases. See {@link Operation}. */
  public Operation operation(int plannedRuns) {
    return operation(plannedRuns, null);
  }

  /** The same with progress and cancellation (`control` may be null; it must stay open until the operation closes). */
  public Operation operation(int plannedRuns, OperationControl control) {
    try (Use runtime = use()) {
      return new Operation(runtime.handle(), plannedRuns, control);
    }
  }

  /**
   * One run per frame ([1,C,H,W] tensors; sizes may differ), as ONE operation released after its
   * last run. Returns one result per frame (names ""). `control` may be null.
   */
  public Outputs runPerFrame(Session session, List<Tensor> frames, OperationControl control) {
    return frames(List.of(session), frames, control, (rt, s, f, c) -> nativeRunPerFrame(rt, s[0], f, c));
  }

  public Outputs runPerFrame(Session session, List<Tensor> frames) {
    return runPerFrame(session, frames, null);
  }

  /** One run over all frames stacked into a batch (equal sizes), split back per frame. */
  public Outputs runJoint(Session session, List<Tensor> frames, OperationControl control) {
    return frames(List.of(session), frames, control, (rt, s, f, c) -> nativeRunJoint(rt, s[0], f, c));
  }

  /** An image-to-image model over tiles of every frame, ONE operation: released after the last tile. */
  public Outputs runTiled(Session session, List<Tensor> frames, TileOptions tiles, OperationControl control) {
    TileOptions t = tiles != null ? tiles : new TileOptions();
    return frames(List.of(session), frames, control,
                  (rt, s, f, c) -> nativeRunTiled(rt, s[0], f, t.tile, t.overlap, t.scale, t.tilesPerRun, c));
  }

  public Outputs runTiled(Session session, List<Tensor> frames, TileOptions tiles) {
    return runTiled(session, frames, tiles, null);
  }

  /** Per frame, each model in turn (the output of one is the input of the next), as ONE operation. */
  public Outputs runPipeline(List<Session> stages, List<Tensor> frames, OperationControl control) {
    return frames(stages, frames, control, Runtime::nativeRunPipeline);
  }

  /** A ready-made operation's native call: runtime, sessions, frames and control (0: none) -> list handle. */
  private interface FramesCall {
    long run(long runtime, long[] sessions, long[] frames, long control);
  }

  /** Runs `call` with this runtime, `sessions`, `frames` and `control` in use for its duration. */
  private Outputs frames(List<Session> sessions, List<Tensor> frames, OperationControl control, FramesCall call) {
    try (Uses held = new Uses(2 + sessions.size() + frames.size())) {
      long runtime = held.add(this);
      long[] s = held.addAll(sessions);
      long[] f = held.addAll(frames);
      long c = control != null ? held.add(control) : 0;
      return Outputs.fromNative(call.run(runtime, s, f, c));
    }
  }

  @Override
  void free(long handle) {
    nativeDestroy(handle);
  }

  @Override
  String describe() {
    return "Runtime";
  }

  private static native long nativeCreate(String policyJson);
  private static native long nativeCreateFromFile(String path);
  private static native String nativeVersion();
  private static native String nativeOrtVersion();
  private static native int nativeAbiVersion();
  private static native String nativePolicy(long handle);
  private static native long nativeLoad(long handle, String path, byte[] bytes, String device, int strict, String name);
  private static native long nativeUnload(long handle, String path, long session);
  private static native void nativeClear(long handle);
  private static native void nativeTrim(long handle);
  private static native long nativeLoadCount(long handle);
  private static native long nativeCachedCount(long handle);
  private static native long nativeMemory(long handle);
  private static native int nativeArenaCount(long memory);
  private static native String nativeArenaName(long memory, int index);
  private static native long[] nativeArenaStats(long memory, int index);
  private static native long[] nativeRss(long memory);
  private static native String nativeMemoryJson(long memory);
  private static native void nativeMemoryDestroy(long memory);
  private static native long nativeRunPerFrame(long handle, long session, long[] frames, long control);
  private static native long nativeRunJoint(long handle, long session, long[] frames, long control);
  private static native long nativeRunTiled(long handle, long session, long[] frames, long tile, long overlap,
                                            long scale, int tilesPerRun, long control);
  private static native long nativeRunPipeline(long handle, long[] sessions, long[] frames, long control);
  private static native void nativeDestroy(long handle);
}
