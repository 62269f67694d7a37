package dev.ebb;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * Named models kept loaded within a per-device memory budget (the C API's ebb_pool_t over
 * ebb::ModelPool). Each loaded model is charged what it measurably costs (its load plus its
 * largest transient peak); to fit a new one, idle models are evicted, least recently used first,
 * never pinned ones or ones with a lease out.
 *
 * <pre>{@code
 * try (ModelPool pool = new ModelPool(runtime, new PoolOptions().cpuBudget(512L << 20))) {
 *   pool.add("det", "models/ppocr_det/model.onnx", new ModelOptions().pinned(true));
 *   try (Lease lease = pool.acquire("det"); Outputs out = lease.session().run(inputs)) { ... }
 * }
 * }</pre>
 *
 * <p>Events (loads, evictions) are kept, the latest 1024, for {@link #events()}. The pool keeps
 * its Runtime alive, and a Lease its pool. Thread safety: every method may be called from any
 * thread; a background thread unloads models whose keep-alive ran out.
 */
public final class ModelPool extends NativeObject {
  static {
    NativeLibrary.load();
  }

  public ModelPool(Runtime runtime) {
    this(runtime, new PoolOptions());
  }

  public ModelPool(Runtime runtime, PoolOptions options) {
    super(create(runtime, options));
  }

  private static long create(Runtime runtime, PoolOptions o) {
    try (Use rt = runtime.use()) {
      return nativeCreate(rt.handle(), o.cpuBudgetBytes, o.cpuBudgetFraction, o.cudaBudgetBytes,
                          o.cudaBudgetFraction, o.waitForCapacityMs, o.keepAliveMs, o.memoryAdmission,
                          o.waitForMemoryMs);
    }
  }

  /** Registers a model, or updates its spec (taking effect at its next load). */
  public void add(String name, String modelPath) {
    add(name, modelPath, new ModelOptions());
  }

  public void add(String name, String modelPath, ModelOptions options) {
    try (Use pool = use()) {
      LoadOptions l = options.load;
      nativeAdd(pool.handle(), name, modelPath, l.device, l.strictValue(), options.pinned,
                options.keepAliveMs != null, options.keepAliveMs != null ? options.keepAliveMs : 0);
    }
  }

  public boolean contains(String name) {
    try (Use pool = use()) {
      return nativeContains(pool.handle(), name);
    }
  }

  /**
   * The model, loaded on demand (evicting idle models to fit), held until the lease is closed.
   *
   * @throws NotFoundException unknown name
   * @throws UnavailableException not loaded and loadOnDemand is false
   * @throws ResourceExhaustedException it cannot fit the budget
   */
  public Lease acquire(String name) {
    return acquire(name, new AcquireOptions());
  }

  public Lease acquire(String name, AcquireOptions options) {
    Use pool = use();
    try {
      return new Lease(nativeAcquire(pool.handle(), name, options.keepAliveMs != null,
                                     options.keepAliveMs != null ? options.keepAliveMs : 0, options.loadOnDemand),
                       pool);  // the lease keeps this use until it is freed
    } catch (Throwable e) {
      pool.close();
      throw e;
    }
  }

  /**
   * Calls `body` with the model held and returns its result. If it throws {@link
   * ResourceExhaustedException}, the broken session and every idle model are evicted, memory is
   * trimmed, and `body` runs once more on a fresh load; a second failure is thrown. The session
   * passed to `body` is valid during the call only: when `body` returns, runs on it that other
   * threads started are waited for, and any later use throws {@link IllegalStateException}. With admission by memory on ({@link
   * PoolOptions#memoryAdmission}) and {@link AcquireOptions#runElements} given, the run's predicted
   * need is reserved first (it may wait for memory: {@link UnavailableException} when the wait
   * passed its deadline, {@link ResourceExhaustedException} at once when it could never fit), and
   * the retry runs alone, after the runs in flight drained.
   */
  public <T> T runWithRecovery(String name, Function<Session, T> body) {
    return runWithRecovery(name, new AcquireOptions(), body);
  }

  public <T> T runWithRecovery(String name, AcquireOptions options, Function<Session, T> body) {
    Body<T> call = new Body<>(body);
    try (Use pool = use()) {
      nativeRunWithRecovery(pool.handle(), name, options.keepAliveMs != null,
                            options.keepAliveMs != null ? options.keepAliveMs : 0, options.loadOnDemand,
                            options.runElements, call);
    } catch (EbbException e) {
      if (call.error != null) throw call.error; // the body's own exception, not its translation
      throw e;
    }
    return call.result;
  }

  /** Called by the native code with the borrowed session; returns what to report: null or the exception. */
  static final class Body<T> {
    private final Function<Session, T> body;
    T result;
    RuntimeException error;

    Body(Function<Session, T> body) {
      this.body = body;
    }

    /** Returns null, or {code, message} for the status the pool sees. */
    Object[] call(long session) {
      Session s = Session.borrowed(session, null);
      try {
        result = body.apply(s);
        error = null;
        return null;
      } catch (EbbException e) {
        error = e;
        return new Object[] {e.code().value(), e.getMessage()};
      } catch (RuntimeException e) {
        error = e;
        return new Object[] {StatusCode.INTERNAL.value(), "Java exception: " + e};
      } finally {
        // The session is the lease's, freed (and maybe unloaded) as soon as this returns: wait for
        // every use of it that the body handed to other threads to end; later ones throw.
        s.closeAndWait();
      }
    }
  }

  /** Loads a model now (kept loaded until a request applies its keep-alive). */
  public void load(String name) {
    try (Use pool = use()) {
      nativeLoad(pool.handle(), name);
    }
  }

  /** Unloads a model, pinned or not (leases still out finish first). */
  public void unload(String name) {
    try (Use pool = use()) {
      nativeUnload(pool.handle(), name);
    }
  }

  /** Unloads and forgets a model: {@link NotFoundException} afterwards until it is added again. */
  public void remove(String name) {
    try (Use pool = use()) {
      nativeRemove(pool.handle(), name);
    }
  }

  /** Unloads idle models whose keep-alive ran out (the pool's thread does this too). */
  public void reapNow() {
    try (Use pool = use()) {
      nativeReapNow(pool.handle());
    }
  }

  /** The status of one model; never loads it. @throws NotFoundException unknown */
  public ModelStatus status(String name) {
    return snapshot(name).get(0);
  }

  /** The status of every model. */
  public List<ModelStatus> snapshot() {
    return snapshot(null);
  }

  /** The budget of a device ("cpu", "cuda:0"); 0 = none. */
  public long budget(String device) {
    try (Use pool = use()) {
      return nativeBudget(pool.handle(), device);
    }
  }

  /** The sum of the charges of the models loaded on a device. */
  public long used(String device) {
    try (Use pool = use()) {
      return nativeUsed(pool.handle(), device);
    }
  }

  /** The events since the last call (at most the latest 1024), oldest first. */
  public List<PoolEvent> events() {
    try (Use pool = use()) {
      Object[] raw = nativeEvents(pool.handle());
      List<PoolEvent> out = new ArrayList<>(raw.length);
      for (Object o : raw) {
        Object[] e = (Object[]) o;
        out.add(new PoolEvent((Integer) e[0], (String) e[1], (Boolean) e[2], (Double) e[3], (String) e[4]));
      }
      return out;
    }
  }

  private List<ModelStatus> snapshot(String name) {
    try (Use pool = use()) {
      long snap = nativeSnapshot(pool.handle(), name);
      try {
        int n = nativeSnapshotCount(snap);
        List<ModelStatus> out = new ArrayList<>(n);
        for (int i = 0; i < n; ++i) {
          String[] text = nativeSnapshotText(snap, i);
          out.add(new ModelStatus(text[0], nativeSnapshotState(snap, i), text[1], text[2], nativeSnapshotValues(snap, i)));
        }
        return out;
      } finally {
        nativeSnapshotDestroy(snap);
      }
    }
  }

  @Override
  void free(long handle) {
    nativeDestroy(handle);
  }

  @Override
  String describe() {
    return "ModelPool";
  }

  private static native long nativeCreate(long runtime, long cpuBytes, double cpuFraction, long cudaBytes,
                                          double cudaFraction, long waitMs, long keepAliveMs,
                                          boolean memoryAdmission, long waitForMemoryMs);
  private static native void nativeAdd(long pool, String name, String path, String device, int strict,
                                       boolean pinned, boolean hasKeepAlive, long keepAliveMs);
  private static native boolean nativeContains(long pool, String name);
  private static native long nativeAcquire(long pool, String name, boolean hasKeepAlive, long keepAliveMs,
                                           boolean loadOnDemand);
  private static native void nativeRunWithRecovery(long pool, String name, boolean hasKeepAlive, long keepAliveMs,
                                                   boolean loadOnDemand, long runElements, Body<?> body);
  private static native void nativeLoad(long pool, String name);
  private static native void nativeUnload(long pool, String name);
  private static native void nativeRemove(long pool, String name);
  private static native void nativeReapNow(long pool);
  private static native long nativeBudget(long pool, String device);
  private static native long nativeUsed(long pool, String device);
  private static native Object[] nativeEvents(long pool);
  private static native long nativeSnapshot(long pool, String name);
  private static native int nativeSnapshotCount(long snapshot);
  private static native String[] nativeSnapshotText(long snapshot, int index);
  private static native int nativeSnapshotState(long snapshot, int index);
  private static native long[] nativeSnapshotValues(long snapshot, int index);
  private static native void nativeSnapshotDestroy(long snapshot);
  private static native void nativeDestroy(long pool);
}
