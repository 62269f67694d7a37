package dev.ebb;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Admission by memory from Java (the C API's pool, ebb::ModelPool): the shared arena capped at
 * 320 MiB, where a 1024x1024 convnet run needs 128 MiB, so two fit at once, not four. A service
 * with a thread per request gets no false out-of-memory: four at once all succeed; a run that
 * could never fit fails at once, with the numbers, without running.
 */
class AdmissionTest {
  static final long CAP = 320 * TestModels.MIB;

  static long elements(int side) {
    return 3L * side * side;
  }

  static void runAt(ModelPool pool, int side, AtomicInteger bodies) {
    pool.runWithRecovery("conv", new AcquireOptions().runElements(elements(side)), session -> {
      bodies.incrementAndGet();
      try (Tensor x = Tensor.fromBuffer(TestModels.directFloats(3 * side * side, side), 1, 3, side, side);
           Outputs out = session.run(Map.of("x", x))) {
        return out.get(0).elementCount();
      }
    });
  }

  @Test
  void fourConcurrentRunsAllSucceedAndOneThatCannotFitFailsAtOnce() throws InterruptedException {
    try (Runtime runtime = Runtime.create("{\"cpu\": {\"arena_settings\": {\"max_bytes\": " + CAP + "}}}");
         ModelPool pool = new ModelPool(runtime, new PoolOptions().memoryAdmission(true, 0))) {
      pool.add("conv", TestModels.model("convnet"));
      AtomicInteger bodies = new AtomicInteger();
      // Two sizes measured alone, the smaller first: the line through them bounds a larger run's need.
      runAt(pool, 512, bodies);
      runAt(pool, 1024, bodies);
      List<Throwable> failures = new ArrayList<>();
      List<Thread> threads = new ArrayList<>();
      for (int i = 0; i < 4; ++i) {
        Thread t = new Thread(() -> {
          try {
            runAt(pool, 1024, bodies);
          } catch (RuntimeException e) {
            synchronized (failures) {
              failures.add(e);
            }
          }
        });
        t.start();
        threads.add(t);
      }
      for (Thread t : threads) t.join();
      assertTrue(failures.isEmpty(), () -> "failed: " + failures);
      assertEquals(6, bodies.get(), "no out-of-memory retry");
      ArenaStats arena = runtime.memory().arena("cpu:shared").orElseThrow();
      assertTrue(arena.peakInUse() <= CAP, "peak " + arena.peakInUse());

      long start = System.nanoTime();
      ResourceExhaustedException e = assertThrows(ResourceExhaustedException.class, () -> runAt(pool, 3072, bodies));
      assertTrue((System.nanoTime() - start) / 1_000_000 < 1000, "at once");
      assertTrue(e.getMessage().contains("a run of 28311552 input elements needs at least"), e.getMessage());
      assertTrue(e.getMessage().contains("cannot run even alone"), e.getMessage());
      assertEquals(6, bodies.get(), "its body never ran");
      runAt(pool, 1024, bodies);  // and the pool serves on
    }
  }
}
