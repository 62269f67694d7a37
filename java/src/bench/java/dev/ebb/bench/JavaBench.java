package dev.ebb.bench;

import dev.ebb.Bench;
import dev.ebb.Operation;
import dev.ebb.Outputs;
import dev.ebb.Report;
import dev.ebb.Runtime;
import dev.ebb.Session;
import dev.ebb.SessionScenario;
import dev.ebb.Tensor;
import dev.ebb.TestModels;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Supplier;

/**
 * What the Java binding costs over the C++ library, measured in one JVM ({@code make java-bench};
 * in the style of {@code ebb bench} and python/bench/bench_python.py). Prints one JSON object with
 * a "goals" object.
 *
 * <p>call_overhead: convnet on a 256x256 input (a direct FloatBuffer, read in place). Java
 * {@code op.run} inside one operation against the same run called from C (ebb_operation_run in
 * the same open operation, on the same session and input: the C API's functions are the C++
 * library's calls behind a handle), timed in C in this process (dev.ebb.Bench, bench-only), one
 * run per sample, the three modes interleaved with the order rotated every round so that drift on
 * a shared machine hits all of them. The C baseline is timed twice ("cpp_again"): that A/A ratio is
 * the noise to read the A/B ratio against. Goal: the wall-time ratio of the medians <= 1.05. Also
 * Java session.run (a whole operation: it releases) against ebb_session_run from C. One intra-op
 * thread, as the Python benchmark: steadier timings on a shared machine.
 *
 * <p>sessions_50: the Java service scenario (dev.ebb.SessionScenario), under ebb's default policy
 * and under per-session arenas: reserved arena bytes and RSS growth after 10..50 sessions.
 */
public final class JavaBench {
  private JavaBench() {}

  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

  /** The calling thread's CPU time (as the C baseline measures it: the JVM's JIT and GC threads are not counted). */
  private static double threadCpuSeconds() {
    return THREADS.getCurrentThreadCpuTime() / 1e9;
  }

  /** {wall seconds, thread CPU seconds} of one sample. */
  private static double[] timed(Runnable r) {
    double cpu = threadCpuSeconds();
    long wall = System.nanoTime();
    r.run();
    return new double[] {(System.nanoTime() - wall) / 1e9, threadCpuSeconds() - cpu};
  }

  private static double median(List<Double> v) {
    double[] a = v.stream().mapToDouble(Double::doubleValue).toArray();
    Arrays.sort(a);
    return a.length % 2 == 1 ? a[a.length / 2] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2;
  }

  /** Each mode once per round, the order rotated every round; {mode: [wall...], mode_cpu: [cpu...]}. */
  private static Map<String, List<Double>> interleave(Map<String, Supplier<double[]>> modes, int rounds) {
    List<String> names = new ArrayList<>(modes.keySet());
    Map<String, List<Double>> samples = new LinkedHashMap<>();
    for (String m : names) {
      samples.put(m, new ArrayList<>());
      samples.put(m + "_cpu", new ArrayList<>());
    }
    for (int r = 0; r < rounds; ++r) {
      for (int k = 0; k < names.size(); ++k) {
        String m = names.get((k + r) % names.size());
        double[] t = modes.get(m).get();
        samples.get(m).add(t[0]);
        samples.get(m + "_cpu").add(t[1]);
      }
    }
    return samples;
  }

  /** Medians (ms), subject/base ratios, and the A/A ratio (again/base). */
  private static String compare(Map<String, List<Double>> s, String subject, String base, String again,
                                double[] ratioOut) {
    StringBuilder medians = new StringBuilder();
    for (String m : new String[] {subject, base, again}) {
      medians.append(medians.length() == 0 ? "" : ", ").append(String.format(Locale.ROOT,
          "\"%s\": {\"wall_ms\": %.4f, \"cpu_ms\": %.4f}", m, median(s.get(m)) * 1e3, median(s.get(m + "_cpu")) * 1e3));
    }
    double wall = median(s.get(subject)) / median(s.get(base));
    double cpu = median(s.get(subject + "_cpu")) / median(s.get(base + "_cpu"));
    double aaWall = median(s.get(again)) / median(s.get(base));
    double aaCpu = median(s.get(again + "_cpu")) / median(s.get(base + "_cpu"));
    ratioOut[0] = wall;
    ratioOut[1] = cpu;
    return String.format(Locale.ROOT,
        "{\"medians\": {%s}, \"ratio_wall\": %.4f, \"ratio_cpu\": %.4f, \"a_a_ratio_wall\": %.4f, \"a_a_ratio_cpu\": %.4f}",
        medians, wall, cpu, aaWall, aaCpu);
  }

  /** One run from C: in `op` when it is not null, else one whole operation. */
  private static double[] baseline(Operation op, Session s, Map<String, Tensor> in) {
    double[][] t = Bench.timeCRuns(op, s, in, 1);
    return new double[] {t[0][0], t[1][0]};
  }

  public static void main(String[] args) throws Exception {
    int iterations = args.length > 0 ? Integer.parseInt(args[0]) : 300;
    double[] mid = new double[2];
    double[] whole = new double[2];
    String overhead;
    try (Runtime runtime = Runtime.create("{\"intra_op_threads\": 1}");
         Session s = runtime.load(TestModels.model("convnet"));
         Tensor x = Tensor.fromBuffer(TestModels.directFloats(3 * 256 * 256, 1), 1, 3, 256, 256)) {
      Map<String, Tensor> in = Map.of("x", x);
      String midJson;
      try (Operation op = runtime.operation()) {
        Map<String, Supplier<double[]>> modes = new LinkedHashMap<>();
        Outputs[] last = new Outputs[1];
        modes.put("java", () -> {
          double[] t = timed(() -> last[0] = op.run(s, in));
          last[0].close();  // outside the timing, as the C loop frees its outputs outside its own
          return t;
        });
        modes.put("cpp", () -> baseline(op, s, in));
        modes.put("cpp_again", () -> baseline(op, s, in));
        interleave(modes, 20);  // warm-up: JIT, arena grown to its size
        midJson = compare(interleave(modes, iterations), "java", "cpp", "cpp_again", mid);
      }
      Map<String, Supplier<double[]>> modes = new LinkedHashMap<>();
      modes.put("java", () -> {
        Outputs[] out = new Outputs[1];
        double[] t = timed(() -> out[0] = s.run(in));
        out[0].close();
        return t;
      });
      modes.put("cpp", () -> baseline(null, s, in));
      modes.put("cpp_again", () -> baseline(null, s, in));
      interleave(modes, 5);
      String wholeJson = compare(interleave(modes, Math.max(20, iterations / 3)), "java", "cpp", "cpp_again", whole);
      overhead = String.format(Locale.ROOT,
          "{\"model\": \"convnet\", \"input_shape\": [1, 3, 256, 256], \"input\": \"direct FloatBuffer\", "
              + "\"iterations\": %d, \"baseline\": \"the same C API run called from C in this JVM (ebb_operation_run, "
              + "ebb_session_run; dev.ebb.Bench), interleaved\", \"mid_operation\": %s, \"whole_operation\": %s}",
          iterations, midJson, wholeJson);
    }

    List<String> copies = SessionScenario.writeCopies();
    SessionScenario.Figures shared;
    SessionScenario.Figures own;
    try {
      shared = SessionScenario.run(null, copies);
      own = SessionScenario.run("{\"cpu\": {\"arena\": \"per_session\"}}", copies);
    } finally {
      SessionScenario.removeCopies(copies);
    }
    int last = SessionScenario.SESSIONS - 1;
    boolean underCap = shared.cap > 0 && shared.peakReserved <= shared.cap;
    // What a session adds to the shared arena is the load-time memory ORT allocates there for that
    // model (204 bytes for convnet), never a run's (~2.4 MiB here): at most 1 KiB a session.
    boolean flat = shared.reservedPerSession() <= 1024;
    double ratio = (double) own.reserved[last] / Math.max(1, own.reserved[9]);
    boolean linear = own.reservedPerSession() >= TestModels.MIB && ratio > 4.0 && ratio < 6.0;

    System.out.println(String.format(Locale.ROOT,
        "{\n  \"benchmark\": \"java\",\n  \"java\": %s,\n  \"ebb\": %s,\n  \"ort\": %s,\n  \"policy\": {\"intra_op_threads\": 1},"
            + "\n  \"load_average_1min\": %.2f,\n  \"cpus\": %d,\n  \"call_overhead\": %s,"
            + "\n  \"sessions_50\": {\"default\": %s,\n                  \"per_session\": %s,"
            + "\n                  \"per_session_reserved_50_over_10\": %.2f},"
            // The goals in the form every `ebb bench` command prints (cli/bench_goals.h).
            + "\n  \"goals\": {"
            + "\n    \"call_overhead_wall_ratio_le_1_05\": {\"value\": %.4f, \"limit\": 1.05, \"op\": \"<=\", \"met\": %b,"
            + " \"unit\": \"Java median / C baseline median, wall\"},"
            + "\n    \"shared_arena_under_cap\": {\"value\": %d, \"limit\": %d, \"op\": \"<=\", \"met\": %b,"
            + " \"unit\": \"peak reserved bytes of the shared arena / its cap\"},"
            + "\n    \"shared_arena_growth_le_1_KiB_per_session\": {\"value\": %.0f, \"limit\": 1024, \"op\": \"<=\","
            + " \"met\": %b, \"unit\": \"bytes of the shared arena a session\"},"
            + "\n    \"per_session_arenas_grow_linearly\": {\"value\": %b, \"limit\": true, \"op\": \"==\", \"met\": %b,"
            + " \"note\": \"per-session arenas: >= 1 MiB a session and 50 sessions 4-6x 10 (%.2f)\"}\n  }\n}",
        Report.quote(System.getProperty("java.version")), Report.quote(Runtime.version()),
        Report.quote(Runtime.ortVersion()), ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage(),
        java.lang.Runtime.getRuntime().availableProcessors(), overhead, Report.figures(shared), Report.figures(own),
        ratio, mid[0], mid[0] <= 1.05, shared.peakReserved, shared.cap, underCap, shared.reservedPerSession(), flat,
        linear, linear, ratio));
  }
}
