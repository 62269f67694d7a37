package dev.ebb;

import java.util.Map;

/**
 * Several runs as ONE operation, released once (the C API's ebb_operation_t, what Python's
 * {@code with runtime.operation()} block is):
 *
 * <pre>{@code
 * try (Operation op = runtime.operation(frames.size())) {   // planned: the last run releases
 *   for (Tensor frame : frames) {
 *     try (Outputs out = op.run(session, Map.of("x", frame))) { ... }
 *   }
 * }                                                        // unplanned: close() releases
 * }</pre>
 *
 * With a planned count the last run carries the release itself (as a planned C++ ebb::Operation's
 * does); without one no run releases and {@link #close()} gives the memory back
 * (ebb::Runtime::Trim). A failed run or a cancellation ends the operation and gives its memory
 * back at once; later runs throw {@link FailedPreconditionException}. Used by one thread at a time.
 */
public final class Operation extends NativeObject {
  static {
    NativeLibrary.load();
  }

  private final Use control; // a use of its control (null: none), given back when the operation is freed

  Operation(long runtime, int plannedRuns, OperationControl control) {
    this(runtime, plannedRuns, control != null ? control.use() : null);
  }

  private Operation(long runtime, int plannedRuns, Use control) {
    super(create(runtime, plannedRuns, control));
    this.control = control;
  }

  private static long create(long runtime, int plannedRuns, Use control) {
    if (control == null) return nativeCreate(runtime, plannedRuns, 0);
    try {
      return nativeCreate(runtime, plannedRuns, control.handle());
    } catch (RuntimeException e) {
      control.close();
      throw e;
    }
  }

  /**
   * One run: as {@link Session#run} (same inputs, outputs and exceptions), but the arena is kept
   * for the next run unless this is the planned last one.
   *
   * @throws FailedPreconditionException the operation has ended, or all planned runs are done
   * @throws CancelledException its control was cancelled (the memory goes back now)
   */
  public Outputs run(Session session, Map<String, Tensor> inputs, String... outputNames) {
    try (Use op = use()) {
      return session.runInputs(inputs, outputNames,
                               (s, names, handles, outs) -> nativeRun(op.handle(), s, names, handles, outs));
    }
  }

  /** Runs finished so far. */
  public int runsDone() {
    try (Use op = use()) {
      return nativeRunsDone(op.handle());
    }
  }

  /** Whether its memory has been given back. */
  public boolean released() {
    try (Use op = use()) {
      return nativeReleased(op.handle());
    }
  }

  /** Whether it has ended (a failure, a cancellation, close). */
  public boolean ended() {
    try (Use op = use()) {
      return nativeEnded(op.handle());
    }
  }

  /** Ends the operation now (the memory goes back unless a run already gave it); then closes it. */
  public void end() {
    try (Use op = use()) {
      nativeEnd(op.handle());
    }
  }

  /** Ends the operation if it is still open (see {@link #end()}), then frees it. */
  @Override
  public void close() {
    if (isClosed()) return;
    try {
      end();
    } finally {
      super.close();
    }
  }

  @Override
  void free(long handle) {
    nativeDestroy(handle);
    if (control != null) control.close();
  }

  @Override
  String describe() {
    return "Operation";
  }

  private static native long nativeCreate(long runtime, int plannedRuns, long control);
  private static native long nativeRun(long op, long session, String[] names, long[] inputs, String[] outputNames);
  private static native void nativeEnd(long op);
  private static native int nativeRunsDone(long op);
  private static native boolean nativeReleased(long op);
  private static native boolean nativeEnded(long op);
  private static native void nativeDestroy(long op);
}
