package dev.ebb;

import java.util.Map;

/**
 * Benchmark support for {@code make java-bench}, not API: the C++ baseline, {@link
 * Session#run}'s C++ counterpart (ebb::Session::Run called from C++, through the C API's
 * ebb_bench_time_runs), timed in C++ in this process on the same session and inputs.
 */
public final class Bench {
  static {
    NativeLibrary.load();
  }

  private Bench() {}

  /**
   * Runs `session` `iterations` times from C++ with ends_operation as given; returns {wall
   * seconds per run, the calling thread's CPU seconds per run}.
   */
  public static double[][] timeCxxRuns(Session session, Map<String, Tensor> inputs, int iterations,
                                       boolean endsOperation) {
    double[][][] out = new double[1][][];
    session.runInputs(inputs, new String[0], (s, names, handles, outs) -> {
      out[0] = nativeTimeRuns(s, names, handles, iterations, endsOperation);
      return 0;
    }).close();
    return out[0];
  }

  private static native double[][] nativeTimeRuns(long session, String[] names, long[] inputs, int iterations,
                                                  boolean endsOperation);
}
