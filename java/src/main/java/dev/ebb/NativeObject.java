package dev.ebb;

import java.lang.ref.Cleaner;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongConsumer;

/**
 * A Java object that owns one native handle of ebb's C API.
 *
 * <p>The handle is freed once: when {@link #close()} has been called and no call that uses it is
 * still running. Every native call holds a use of it ({@link #use()}) while it runs,
 *
 * <pre>{@code
 * try (Use session = use()) {
 *   return nativeDevice(session.handle());
 * }
 * }</pre>
 *
 * so closing an object while another thread runs with it never frees memory under that run; the
 * last user frees it. After close, {@link #use()} throws {@link IllegalStateException}.
 *
 * <p>Objects made with a collected-free function (tensors) have a safety net: one that becomes
 * unreachable without having been closed is closed by a {@link Cleaner} after a garbage
 * collection. close() stays the documented way (a collection may come late, or never).
 */
abstract class NativeObject implements AutoCloseable {
  private static final Cleaner CLEANER = Cleaner.create();

  /**
   * One use of a handle, from {@link #use()}: the handle stays valid until {@link #close()} gives
   * the use back. Close it once per {@link #use()} (try-with-resources), or hand it to what holds
   * the handle for longer (a borrowed session holds its lease) and close it when that is freed.
   */
  interface Use extends AutoCloseable {
    long handle();

    @Override
    void close();
  }

  /** Uses of several objects for one call (a run's inputs), given back together by close(). */
  static final class Uses implements AutoCloseable {
    private final Use[] held;
    private int count;

    Uses(int capacity) {
      held = new Use[capacity];
    }

    /** A use of `o` for as long as this is open; its handle. */
    long add(NativeObject o) {
      Use use = o.use();
      held[count++] = use;
      return use.handle();
    }

    /** add() of each of `objects`, in order; their handles. */
    long[] addAll(List<? extends NativeObject> objects) {
      long[] handles = new long[objects.size()];
      for (int i = 0; i < handles.length; ++i) handles[i] = add(objects.get(i));
      return handles;
    }

    /** Gives back every use taken, the last first. */
    @Override
    public void close() {
      while (count > 0) held[--count].close();
    }
  }

  /**
   * The handle and its uses, apart from the object that owns them, so that the cleaner can free
   * them once that object is unreachable (this must never reference it). {@link #run} is the
   * owner's close. It is also the {@link Use} that every use() returns (one object for all uses:
   * a call allocates nothing), whose {@link #close()} gives one use back.
   */
  private static final class Handle implements Runnable, Use {
    final long handle;
    final AtomicInteger uses = new AtomicInteger(1); // 1: the owner's, dropped by close
    final AtomicBoolean closed = new AtomicBoolean(false);
    LongConsumer free; // set in the constructor, before any use

    Handle(long handle) {
      this.handle = handle;
    }

    @Override
    public void run() {
      if (closed.compareAndSet(false, true)) close();
    }

    @Override
    public long handle() {
      return handle;
    }

    /** Gives one use back: the last frees the handle. */
    @Override
    public void close() {
      if (uses.decrementAndGet() == 0) {
        free.accept(handle);
        synchronized (this) {
          notifyAll(); // closeAndWait
        }
      }
    }
  }

  private final Handle state;
  private final Cleaner.Cleanable cleanable; // null: no safety net

  NativeObject(long handle) {
    this(handle, null);
  }

  /**
   * With `collectedFree` (which must do what {@link #free} does and must not reach this object: a
   * static method), the handle is also freed once this object became unreachable unclosed.
   */
  NativeObject(long handle, LongConsumer collectedFree) {
    if (handle == 0) throw new IllegalArgumentException("a NULL native handle");
    this.state = new Handle(handle);
    if (collectedFree != null) {
      state.free = collectedFree;
      this.cleanable = CLEANER.register(this, state);
    } else {
      state.free = this::free;
      this.cleanable = null;
    }
  }

  /** A use of the handle, for one native call or held longer; close it once (see {@link Use}). */
  final Use use() {
    if (state.closed.get()) throw new IllegalStateException(describe() + " is closed");
    for (;;) {
      int u = state.uses.get();
      if (u == 0) throw new IllegalStateException(describe() + " is closed");
      if (state.uses.compareAndSet(u, u + 1)) return state;
    }
  }

  /** Whether close() was called. */
  public final boolean isClosed() {
    return state.closed.get();
  }

  /** Frees the native handle (once its calls in flight, if any, have ended). Idempotent. */
  @Override
  public void close() {
    if (cleanable != null) {
      cleanable.clean(); // runs state.run() at most once
    } else {
      state.run();
    }
  }

  /**
   * Closes, then waits until every call in flight with the handle (on any thread) has ended and it
   * was freed: for a handle that something else frees right after (a pool body's session).
   */
  final void closeAndWait() {
    close();
    boolean interrupted = false;
    synchronized (state) {
      while (state.uses.get() != 0) {
        try {
          state.wait();
        } catch (InterruptedException e) {
          interrupted = true; // never return while the handle is in use
        }
      }
    }
    if (interrupted) Thread.currentThread().interrupt();
  }

  /** Frees the handle; called exactly once. */
  abstract void free(long handle);

  /** "Session 'convnet'", for messages. */
  abstract String describe();
}
