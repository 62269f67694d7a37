package dev.ebb;

/**
 * A model held for one piece of work ({@link ModelPool#acquire}): while it is open the model is
 * not evicted. Closing it gives the model back (its keep-alive applies from then; 0 unloads it
 * now). Its {@link #session()} is the lease's: closed with it.
 *
 * <pre>{@code
 * try (Lease lease = pool.acquire("det");
 *      Outputs out = lease.session().run(Map.of("x", x))) { ... }
 * }</pre>
 *
 * A lease keeps its pool alive. Thread safety: its session may be run from several threads;
 * close it once they are done (closing while they run is safe: the model comes back when the
 * last run ends).
 */
public final class Lease extends NativeObject {
  private final String name;
  private final Session session;
  private final Use pool; // a use of the pool, given back when the lease is freed: its event queue outlives the lease

  /** `pool`: a use of the pool the lease came from, which the lease now holds. */
  Lease(long handle, Use pool) {
    super(handle);
    this.pool = pool;
    this.name = nativeName(handle);
    this.session = Session.borrowed(nativeSession(handle), use()); // the session holds the lease
  }

  /** The model's session; valid until the lease is closed. */
  public Session session() {
    if (isClosed()) throw new IllegalStateException(describe() + " is closed");
    return session;
  }

  public String name() {
    return name;
  }

  @Override
  public void close() {
    if (isClosed()) return;
    session.close();
    super.close();
  }

  @Override
  void free(long handle) {
    nativeDestroy(handle);
    pool.close();
  }

  @Override
  String describe() {
    return "Lease of '" + name + "'";
  }

  private static native String nativeName(long handle);
  private static native long nativeSession(long handle);
  private static native void nativeDestroy(long handle);
}
