package dev.ebb;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.FloatBuffer;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * No leak over 10,000 runs: each builds its input (a heap array copied into native memory, or a
 * direct buffer read in place), runs convnet as a whole operation, copies its 12 KiB output out
 * and closes everything; a failed run every 10th. Native memory stays flat: the process RSS after
 * the runs is within 4 MiB of the RSS after 1,000 warm-up runs (a leaked output alone would be
 * 120 MB). The JVM runs with a fixed, pre-touched heap (tests/CMakeLists).
 */
class LeakTest {
  static final int RUNS = 10_000;

  @Test
  void tenThousandRunsLeaveNativeMemoryFlat() {
    // Each run releases at its end (operation_end), so the arena is at its floor between runs; under the
    // default (idle) it is given back once runs pause.
    try (Runtime runtime = Runtime.create("{\"release\": \"operation_end\"}");
         Session s = runtime.load(TestModels.model("convnet"));
         Tensor wrong = Tensor.fromArray(new long[3 * 32 * 32], 1, 3, 32, 32)) {
      float[] values = TestModels.floats(3 * 32 * 32, 1);
      FloatBuffer direct = TestModels.directFloats(3 * 32 * 32, 1);
      Runnable one = new Runnable() {
        int i = 0;

        @Override
        public void run() {
          ++i;
          if (i % 10 == 0) {
            try {
              s.run(Map.of("x", wrong)).close();
              throw new AssertionError("a wrong input ran");
            } catch (InvalidArgumentException expected) {
              return;
            }
          }
          try (Tensor x = i % 2 == 0 ? Tensor.fromArray(values, 1, 3, 32, 32) : Tensor.fromBuffer(direct, 1, 3, 32, 32);
               Outputs out = s.run(Map.of("x", x))) {
            if (out.get("y").toFloatArray().length != 3 * 32 * 32) throw new AssertionError("wrong output");
          }
        }
      };
      for (int i = 0; i < 1000; ++i) one.run();
      System.gc();
      long floor = TestModels.reserved(runtime, "cpu:shared");
      long before = TestModels.rssBytes();
      long runsBefore = s.runCount();
      long start = System.nanoTime();
      for (int i = 0; i < RUNS; ++i) one.run();
      double seconds = (System.nanoTime() - start) / 1e9;
      System.gc();
      long growth = TestModels.rssBytes() - before;
      System.out.printf("%d runs in %.1f s; RSS %+d KiB%n", RUNS, seconds, growth / 1024);
      assertTrue(s.runCount() - runsBefore >= RUNS * 9 / 10, "runs: " + (s.runCount() - runsBefore));
      assertTrue(growth < 4 * TestModels.MIB, "RSS grew by " + growth / 1024 + " KiB over " + RUNS + " runs");
      assertEquals(floor, TestModels.reserved(runtime, "cpu:shared"), "the shared arena is back to its floor");
    }
  }

  /**
   * Issue 32: unclosed tensors were never freed (+320 MiB per 20,000 tensors of 16 KiB across 5
   * garbage collections). A Cleaner frees a tensor that became unreachable unclosed: 20,000 such
   * tensors, with a collection every 1,000, leave native memory within 32 MiB of where it started.
   */
  @Test
  void unclosedTensorsAreFreedAfterTheyAreCollected() throws Exception {
    float[] values = TestModels.floats(4096, 5); // 16 KiB
    for (int i = 0; i < 2_000; ++i) Tensor.fromArray(values, 4096).close(); // warm the allocator
    System.gc();
    long before = TestModels.rssBytes();
    for (int i = 1; i <= 20_000; ++i) {
      Tensor.fromArray(values, 4096); // never closed
      if (i % 1_000 == 0) {
        System.gc();
        Thread.sleep(20); // the cleaner's thread frees what the collection found
      }
    }
    System.gc();
    Thread.sleep(200);
    long growth = TestModels.rssBytes() - before;
    System.out.printf("20,000 unclosed 16 KiB tensors: RSS %+d KiB%n", growth / 1024);
    assertTrue(growth < 32 * TestModels.MIB, "RSS grew by " + growth / 1024 + " KiB (320 MiB unfreed)");
  }
}
