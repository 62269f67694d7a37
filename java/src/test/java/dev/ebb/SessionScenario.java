package dev.ebb;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The Java service scenario of issue 20: one JVM creates sessions for 50 models (copies of the
 * bundled convnet with distinct bytes, so 50 loaded models) and runs each once, under one policy;
 * after each session's run has released (under the default, once runs pause) it reads every
 * arena's reserved bytes (Runtime.memory()) and the process RSS (/proc/self/status). Shared by
 * SessionsTest (the assertions) and the benchmark.
 */
public final class SessionScenario {
  public static final int SESSIONS = 50;
  /** convnet on 96x96: ~2.4 MiB of activations per run. */
  public static final int SIDE = 96;

  /** What one policy did, one entry per session (index i: after the (i+1)-th session's run). */
  public static final class Figures {
    public final String policy;
    public final long[] reserved;  // sum of reserved bytes over every arena
    public final long[] rss;       // VmRSS
    public long rssBefore;         // before the first load
    public long reservedBefore;
    public long cap;               // the shared arena's limit (0 without one)
    public long peakReserved;      // the largest reading of `reserved`

    Figures(String policy) {
      this.policy = policy;
      this.reserved = new long[SESSIONS];
      this.rss = new long[SESSIONS];
    }

    /** Growth per session between the 10th and the 50th session, bytes. */
    public double reservedPerSession() {
      return (reserved[SESSIONS - 1] - reserved[9]) / (double) (SESSIONS - 10);
    }

    public double rssPerSession() {
      return (rss[SESSIONS - 1] - rss[9]) / (double) (SESSIONS - 10);
    }
  }

  private SessionScenario() {}

  /** The 50 copies, written into a fresh temporary folder (removed by {@link #removeCopies}). */
  public static List<String> writeCopies() throws IOException {
    Path dir = Files.createTempDirectory("ebb-java-sessions");
    return TestModels.copies(TestModels.model("convnet"), dir, SESSIONS);
  }

  public static void removeCopies(List<String> copies) throws IOException {
    Path dir = Path.of(copies.get(0)).getParent();
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  /** Runs the scenario under `policyJson` (null: ebb's defaults) with a runtime of its own. */
  public static Figures run(String policyJson, List<String> copies) {
    Figures f = new Figures(policyJson == null ? "default" : policyJson);
    List<Session> sessions = new ArrayList<>();
    Runtime runtime = policyJson == null ? Runtime.create() : Runtime.create(policyJson);
    try (Tensor x = Tensor.fromBuffer(TestModels.directFloats(3 * SIDE * SIDE, 1), 1, 3, SIDE, SIDE)) {
      System.gc();
      f.rssBefore = TestModels.rssBytes();
      MemoryReading start = runtime.memory();
      f.reservedBefore = start.totalReserved();
      f.cap = start.arena("cpu:shared").map(ArenaStats::limit).orElse(0L);
      for (int i = 0; i < SESSIONS; ++i) {
        Session s = runtime.load(copies.get(i));
        sessions.add(s);
        long releases = s.releaseCount();
        try (Outputs out = s.run(Map.of("x", x))) {
          if (out.get("y").elementCount() != 3L * SIDE * SIDE) throw new AssertionError("wrong output");
        }
        // The run's release: at its end with a per-session arena; under the default ("idle") once
        // runs pause, waited for (10 s at most) so that each reading is what the session leaves.
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (s.releaseCount() == releases && System.nanoTime() < deadline) {
          java.util.concurrent.locks.LockSupport.parkNanos(2_000_000);
        }
        f.reserved[i] = runtime.memory().totalReserved();
        f.rss[i] = TestModels.rssBytes();
        f.peakReserved = Math.max(f.peakReserved, f.reserved[i]);
      }
      if (runtime.cachedCount() != SESSIONS) throw new AssertionError(runtime.cachedCount() + " sessions cached");
    } finally {
      sessions.forEach(Session::close);  // before the runtime: nothing of it is left afterwards
      runtime.close();
    }
    return f;
  }
}
