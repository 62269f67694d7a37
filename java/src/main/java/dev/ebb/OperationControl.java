package dev.ebb;

/**
 * Progress and cancellation for operations (the C API's ebb_control_t: the C++ on_progress hook
 * and stop token). Pass it to {@link Runtime#operation(int, OperationControl)} or a ready-made
 * operation; {@link #cancel()} may then be called from any thread, and the operation stops before
 * its next run with {@link CancelledException}, giving its memory back at once. Once cancelled it
 * stays cancelled. An exception thrown by the listener stops the operation too, and is rethrown
 * by the call that ran it.
 */
public final class OperationControl extends NativeObject {
  static {
    NativeLibrary.load();
  }

  public OperationControl() {
    this(null);
  }

  /** `listener` (may be null) is called after every run, on the thread running the operation. */
  public OperationControl(ProgressListener listener) {
    super(nativeCreate(listener));
  }

  /** Asks the operations using this control to stop before their next run. Thread-safe. */
  public void cancel() {
    try (Use control = use()) {
      nativeCancel(control.handle());
    }
  }

  public boolean isCancelled() {
    try (Use control = use()) {
      return nativeCancelled(control.handle());
    }
  }

  @Override
  void free(long handle) {
    nativeDestroy(handle);
  }

  @Override
  String describe() {
    return "OperationControl";
  }

  private static native long nativeCreate(ProgressListener listener);
  private static native void nativeCancel(long handle);
  private static native boolean nativeCancelled(long handle);
  private static native void nativeDestroy(long handle);
}
