package dev.ebb;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The Java service scenario (issue 20, the origin document's): one JVM, sessions for 50 models,
 * each run once. With ebb's default policy every session allocates from the one shared capped
 * arena, and its reserved bytes stay under the cap and do not grow with the number of sessions
 * (beyond each model's small initializers that ORT keeps there: 204 bytes for convnet);
 * with per-session arenas (policy cpu.arena: per_session, what ONNX Runtime's Java API gives)
 * they grow linearly, and so does RSS. Both measured in this test from Runtime.memory() and
 * /proc/self/status. (The JVM runs with a fixed, pre-touched heap: tests/CMakeLists.)
 */
class SessionsTest {
  @Test
  void sharedArenaStaysFlatPerSessionArenasGrowLinearly() throws Exception {
    List<String> copies = SessionScenario.writeCopies();
    try {
      SessionScenario.Figures shared = SessionScenario.run(null, copies);
      SessionScenario.Figures own = SessionScenario.run("{\"cpu\": {\"arena\": \"per_session\"}}", copies);
      System.out.println(Report.figures(shared));
      System.out.println(Report.figures(own));
      int last = SessionScenario.SESSIONS - 1;
      // Shared: under the cap at every reading, and flat: no run leaves activations behind, so
      // all a session adds is its own small initializers ORT keeps in the arena (204 bytes for
      // convnet: its biases), never the ~2.4 MiB a run grows into.
      assertTrue(shared.cap > 0 && shared.peakReserved <= shared.cap, "peak " + shared.peakReserved + " cap " + shared.cap);
      assertTrue(shared.reservedPerSession() <= 1024, "shared arena grew per session: " + Report.figures(shared));
      assertTrue(shared.reserved[last] <= 64 * 1024, "shared arena after 50 sessions: " + Report.figures(shared));
      // Per session: every session keeps an arena region after its run; growth is linear, at least
      // 1 MiB a session, and the 50th reading is about five times the 10th.
      assertTrue(own.reservedPerSession() >= TestModels.MIB, Report.figures(own));
      double ratio = (double) own.reserved[last] / own.reserved[9];
      assertTrue(ratio > 4.0 && ratio < 6.0, "per-session reserved 50/10 = " + ratio);
      for (int i = 10; i < SessionScenario.SESSIONS; ++i) {
        assertTrue(own.reserved[i] > own.reserved[i - 1], "per-session reserved did not grow at session " + (i + 1));
      }
      assertTrue(own.reservedPerSession() > 1000 * Math.max(1.0, shared.reservedPerSession()));
      // RSS follows: per-session arenas cost RSS that the shared arena does not (the pages of a
      // region a run touched stay resident).
      assertTrue(own.rssPerSession() > 4 * shared.rssPerSession() && own.rssPerSession() - shared.rssPerSession() > 512 * 1024,
                 "RSS per session: shared " + shared.rssPerSession() + ", per-session " + own.rssPerSession());
    } finally {
      SessionScenario.removeCopies(copies);
    }
  }
}
