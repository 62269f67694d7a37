package dev.ebb;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * A loaded model on one device (the C API's ebb_session_t over ebb::Session), from {@link
 * Runtime#load} or a pool's {@link Lease#session()}.
 *
 * <p>{@link #run} is one whole operation: when it ends, the arena memory it grew into is given
 * back while the model stays loaded. To run several times and release once, use {@link
 * Runtime#operation()} or a ready-made operation.
 *
 * <p>Thread safety: any number of threads may run one session at once. A session stays usable
 * after it left the runtime's cache and after its Runtime was closed. Closing it drops this handle
 * only (the cache keeps the model); use after close throws {@link IllegalStateException}.
 */
public final class Session extends NativeObject {
  static {
    NativeLibrary.load();
  }

  private final boolean owned;        // false: a lease's session, freed with the lease
  private final NativeObject parent;  // the lease a borrowed session belongs to (kept in use)
  private final String name;
  private final List<TensorInfo> inputs;
  private final List<TensorInfo> outputs;

  Session(long handle) {
    this(handle, true, null);
  }

  /** A borrowed session: freed by its owner, never by close(). `parent` (may be null) is held in use until close. */
  static Session borrowed(long handle, NativeObject parent) {
    return new Session(handle, false, parent);
  }

  private Session(long handle, boolean owned, NativeObject parent) {
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
    return text(0);
  }

  /** Where it REALLY runs: "cpu", "cuda:0". */
  public String device() {
    return text(1);
  }

  /** ONNX Runtime's provider: "CPUExecutionProvider", "CUDAExecutionProvider". */
  public String provider() {
    return text(2);
  }

  /** Why it runs elsewhere than asked ("" when it does not). */
  public String fallbackReason() {
    return text(3);
  }

  public List<TensorInfo> inputs() {
    return inputs;
  }

  public List<TensorInfo> outputs() {
    return outputs;
  }

  /** A value of the model's metadata_props ("" when absent). */
  public String metadata(String key) {
    long h = use();
    try {
      return nativeMetadata(h, key);
    } finally {
      done();
    }
  }

  /** Runs started so far. */
  public long runCount() {
    return counter(0);
  }

  /** Runs that carried a release. */
  public long releaseCount() {
    return counter(1);
  }

  /** Runs in flight right now. */
  public int inFlight() {
    return (int) counter(2);
  }

  /** Whether this handle and `other` hold the same loaded session (the cache gave it twice). */
  public boolean isSameModel(Session other) {
    long a = use();
    try {
      long b = other.use();
      try {
        return nativeSame(a, b);
      } finally {
        other.done();
      }
    } finally {
      done();
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
    Tensor[] tensors = new Tensor[n];
    long[] handles = new long[n];
    int i = 0;
    for (Map.Entry<String, Tensor> e : inputs.entrySet()) {
      names[i] = e.getKey();
      tensors[i] = e.getValue();
      if (tensors[i] == null) throw new InvalidArgumentException("input '" + names[i] + "' is null");
      ++i;
    }
    long h = use();
    int taken = 0;
    try {
      for (; taken < n; ++taken) handles[taken] = tensors[taken].use();
      return Outputs.fromNative(call.run(h, names, handles, outputNames));
    } finally {
      for (int k = 0; k < taken; ++k) tensors[k].done();
      done();
    }
  }

  @Override
  public String toString() {
    return "Session('" + name + "'" + (isClosed() ? ", closed)" : ")");
  }

  private String text(int which) {
    long h = use();
    try {
      return nativeText(h, which);
    } finally {
      done();
    }
  }

  private long counter(int which) {
    long h = use();
    try {
      return nativeCounter(h, which);
    } finally {
      done();
    }
  }

  @Override
  void free(long handle) {
    if (owned) nativeDestroy(handle);
    if (parent != null) parent.done();
  }

  @Override
  String describe() {
    return "Session '" + name + "'";
  }

  private static native String nativeName(long handle);
  private static native String nativeText(long handle, int which);
  private static native int nativeCount(long handle, boolean outputs);
  private static native String nativeIoName(long handle, boolean outputs, int index);
  private static native int nativeIoType(long handle, boolean outputs, int index);
  private static native long[] nativeIoShape(long handle, boolean outputs, int index);
  private static native String nativeMetadata(long handle, String key);
  private static native long nativeCounter(long handle, int which);
  private static native boolean nativeSame(long a, long b);
  private static native long nativeRun(long session, String[] names, long[] inputs, String[] outputNames);
  private static native void nativeDestroy(long handle);
}
