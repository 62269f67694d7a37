package dev.ebb;

import java.util.Map;

/**
 * Benchmark support for {@code make java-bench}, not API and not in the jar (it is compiled with the
 * tests; its native half is libebb_jni_bench.so, built beside the jar, whose path the system property
 * {@code ebb.bench.library} gives). The C baseline of {@link Operation#run} and {@link Session#run}:
 * the same C API calls the binding makes, on the same operation, session and inputs, timed in C in
 * this process with no Java between runs.
 */
public final class Bench {
  static {
    NativeLibrary.load();
    String library = System.getProperty("ebb.bench.library");
    if (library == null) {
      throw new UnsatisfiedLinkError("dev.ebb.Bench: no -Debb.bench.library (libebb_jni_bench.so, built with "
                                     + "EBB_BUILD_BENCHMARKS=ON; make java-bench sets it)");
    }
    System.load(library);
  }

  private Bench() {}

  /**
   * Runs `session` `iterations` times from C: inside `operation` (ebb_operation_run) when it is not
   * null, else each run one whole operation (ebb_session_run); returns {wall seconds per run, the
   * calling thread's CPU seconds per run}.
   */
  public static double[][] timeCRuns(Operation operation, Session session, Map<String, Tensor> inputs,
                                     int iterations) {
    double[][][] out = new double[1][][];
    try (NativeObject.Use op = operation != null ? operation.use() : null) {
      session.runInputs(inputs, new String[0], (s, names, handles, outs) -> {
        out[0] = nativeTimeRuns(op != null ? op.handle() : 0, s, names, handles, iterations);
        return 0;
      }).close();
    }
    return out[0];
  }

  private static native double[][] nativeTimeRuns(long operation, long session, String[] names, long[] inputs,
                                                  int iterations);
}
