package dev.ebb;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * A loaded model on one device (the C API's ebb_session_t over ebb::Session), from {@link
 * Runtime#load} or a pool's {@link Lease#session()}.
 *
 * <p>{@link #run} is one whole operation: the arena memory it grew into is given back while the
 * model stays loaded, under the policy's release mode: by default ("idle") once no run has ended
 * for idle_release_ms, so runs made back to back keep it and a pause gives it back. To run
 * several times and release at the last run, use {@link Runtime#operation()} or a ready-made
 * operation.
 *
 * <p>Thread safety: any number of threads may run one session at once. A session stays usable
 * after it left the runtime's cache and after its Runtime was closed. Closing it drops this handle
 * only (the cache keeps the model); use after close throws {@link IllegalStateException}.
 */
public final class Session extends NativeObject {
  static {
    NativeLibrary.load();
  }

  private final boolean owned;  // false: a lease's session, freed with the lease
  private final Use parent;     // a use of the lease a borrowed session belongs to, given back when freed
  private final String name;
  private final List<TensorInfo> inputs;
  private final List<TensorInfo> outputs;

  Session(long handle) {
    this(handle, true, null);
  }

  /** A borrowed session: freed by its owner, never by close(). `parent` (may be null) is closed when this is freed. */
  static Session borrowed(long handle, Use parent) {
    return new Session(handle, false, parent);
  }

  private Session(long handle, boolean owned, Use parent) {
    super(handle);
    this.owned = owned;
    this.parent = parent;
    this.name = nativeName(handle);
    this.inputs = signature(handle, false);
    this.outputs = signature(handle, true);
  }

  private static List<TensorInfo> signature(long handle, boolean outputs) {
    int n = nativeCount(handle, outputs);
    List<TensorInfo> list = new ArrayList<>(n);
    for (int i = 0; i < n; ++i) {
      list.add(new TensorInfo(nativeIoName(handle, outputs, i), DataType.of(nativeIoType(handle, outputs, i)),
                              nativeIoShape(handle, outputs, i)));
    }
    return Collections.unmodifiableList(list);
  }

  /** The name it was loaded under (the model file's folder or stem unless given). */
  public String name() {
    return name;
  }

  /** The model file it came from ("" when loaded from bytes). */
  public String sourcePath() {
    try (Use session = use()) {
      return nativeSourcePath(session.handle());
    }
  }

  /** Where it REALLY runs: "cpu", "cuda:0". */
  public String device() {
    try (Use session = use()) {
      return nativeDevice(session.handle());
    }
  }

  /** ONNX Runtime's provider: "CPUExecutionProvider", "CUDAExecutionProvider". */
  public String provider() {
    try (Use session = use()) {
      return nativeProvider(session.handle());
    }
  }

  /** Why it runs elsewhere than asked ("" when it does not). */
  public String fallbackReason() {
    try (Use session = use()) {
      return nativeFallbackReason(session.handle());
    }
  }

  public List<TensorInfo> inputs() {
    return inputs;
  }

  public List<TensorInfo> outputs() {
    return outputs;
  }

  /** A value of the model's metadata_props ("" when absent). */
  public String metadata(String key) {
    try (Use session = use()) {
      return nativeMetadata(session.handle(), key);
    }
  }

  /** Runs started so far. */
  public long runCount() {
    try (Use session = use()) {
      return nativeRunCount(session.handle());
    }
  }

  /** Runs that carried a release. */
  public long releaseCount() {
    try (Use session = use()) {
      return nativeReleaseCount(session.handle());
    }
  }

  /** Runs in flight right now. */
  public int inFlight() {
    try (Use session = use()) {
      return nativeInFlight(session.handle());
    }
  }

  /** Whether this handle and `other` hold the same loaded session (the cache gave it twice). */
  public boolean isSameModel(Session other) {
    try (Use a = use(); Use b = other.use()) {
      return nativeSame(a.handle(), b.handle());
    }
  }

  /**
   * Runs the model once as one whole operation (ebb::Session::Run with ends_operation).
   *
   * @param inputs every model input once, by name; tensors from direct buffers are read in place
   * @param outputNames the outputs to compute; none: all, in model order
   * @return the outputs, owned by the caller (close them)
   * @throws InvalidArgumentException an unknown or missing input, a wrong type or shape, an
   *     unknown output (the message names it)
   * @throws ResourceExhaustedException memory ran out: the session left the cache, the next load
   *     builds it afresh
   */
  public Outputs run(Map<String, Tensor> inputs, String... outputNames) {
    return runInputs(inputs, outputNames, (session, names, handles, outs) -> nativeRun(session, names, handles, outs));
  }

  /** A native run over `inputs`: session handle, input names and handles, output names -> list handle. */
  interface RunCall {
    long run(long session, String[] names, long[] inputs, String[] outputNames);
  }

  /** Runs `call` with this session and every input tensor in use for its duration. */
  Outputs runInputs(Map<String, Tensor> inputs, String[] outputNames, RunCall call) {
    int n = inputs.size();
    String[] names = new String[n];
    List<Tensor> tensors = new ArrayList<>(n);
    for (Map.Entry<String, Tensor> e : inputs.entrySet()) {
      names[tensors.size()] = e.getKey();
      if (e.getValue() == null) throw new InvalidArgumentException("input '" + e.getKey() + "' is null");
      tensors.add(e.getValue());
    }
    try (Uses held = new Uses(n + 1)) {
      long session = held.add(this);
      return Outputs.fromNative(call.run(session, names, held.addAll(tensors), outputNames));
    }
  }

  @Override
  public String toString() {
    return "Session('" + name + "'" + (isClosed() ? ", closed)" : ")");
  }

  @Override
  void free(long handle) {
    if (owned) nativeDestroy(handle);
    if (parent != null) parent.close();
  }

  @Override
  String describe() {
    return "Session '" + name + "'";
  }

  private static native String nativeName(long handle);
  private static native String nativeSourcePath(long handle);
  private static native String nativeDevice(long handle);
  private static native String nativeProvider(long handle);
  private static native String nativeFallbackReason(long handle);
  private static native int nativeCount(long handle, boolean outputs);
  private static native String nativeIoName(long handle, boolean outputs, int index);
  private static native int nativeIoType(long handle, boolean outputs, int index);
  private static native long[] nativeIoShape(long handle, boolean outputs, int index);
  private static native String nativeMetadata(long handle, String key);
  private static native long nativeRunCount(long handle);
  private static native long nativeReleaseCount(long handle);
  private static native int nativeInFlight(long handle);
  private static native boolean nativeSame(long a, long b);
  private static native long nativeRun(long session, String[] names, long[] inputs, String[] outputNames);
  private static native void nativeDestroy(long handle);
}
