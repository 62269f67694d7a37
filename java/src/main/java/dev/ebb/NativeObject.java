package dev.ebb;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A Java object that owns one native handle of ebb's C API.
 *
 * <p>The handle is freed once: when {@link #close()} has been called and no call that uses it is
 * still running. Every native call takes a use ({@link #use()}) and gives it back ({@link #done()}),
 * so closing an object while another thread runs with it never frees memory under that run; the
 * last user frees it. After close, {@link #use()} throws {@link IllegalStateException}.
 */
abstract class NativeObject implements AutoCloseable {
  private final long handle;
  private final AtomicInteger uses = new AtomicInteger(1); // 1: the owner's, dropped by close()
  private final AtomicBoolean closed = new AtomicBoolean(false);

  NativeObject(long handle) {
    if (handle == 0) throw new IllegalArgumentException("a NULL native handle");
    this.handle = handle;
  }

  /** The handle for one native call; pair with {@link #done()} in a finally block. */
  final long use() {
    if (closed.get()) throw new IllegalStateException(describe() + " is closed");
    for (;;) {
      int u = uses.get();
      if (u == 0) throw new IllegalStateException(describe() + " is closed");
      if (uses.compareAndSet(u, u + 1)) return handle;
    }
  }

  final void done() {
    if (uses.decrementAndGet() == 0) free(handle);
  }

  /** Whether close() was called. */
  public final boolean isClosed() {
    return closed.get();
  }

  /** Frees the native handle (once its calls in flight, if any, have ended). Idempotent. */
  @Override
  public void close() {
    if (closed.compareAndSet(false, true)) done();
  }

  /** Frees the handle; called exactly once. */
  abstract void free(long handle);

  /** "Session 'convnet'", for messages. */
  abstract String describe();
}
