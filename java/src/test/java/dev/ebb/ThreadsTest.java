package dev.ebb;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Eight Java threads run models at once: one shared session and a session each, inputs shared
 * between threads (direct buffers read in place) and made per call (heap arrays); every output
 * equals the one-thread run's bit for bit, and a session closed while others run is freed only
 * when they are done.
 */
class ThreadsTest {
  static final int THREADS = 8;
  static final int RUNS = 25;

  @Test
  void eightThreadsRunConcurrently() throws Exception {
    try (Runtime runtime = Runtime.create();
         Session shared = runtime.load(TestModels.model("convnet"));
         Session upscaler = runtime.load(TestModels.model("waifu2x_scale2x"));
         Tensor x = Tensor.fromBuffer(TestModels.directFloats(3 * 40 * 40, 3), 1, 3, 40, 40)) {
      Tensor expected;
      Tensor expectedUp;
      try (Outputs out = shared.run(Map.of("x", x)); Outputs up = upscaler.run(Map.of("x", x))) {
        expected = out.take(0);
        expectedUp = up.take(0);
      }
      ExecutorService pool = Executors.newFixedThreadPool(THREADS);
      AtomicInteger equal = new AtomicInteger();
      List<Future<?>> futures = new ArrayList<>();
      for (int t = 0; t < THREADS; ++t) {
        final int id = t;
        futures.add(pool.submit(() -> {
          for (int i = 0; i < RUNS; ++i) {
            Session s = id % 2 == 0 ? shared : upscaler;
            Tensor want = id % 2 == 0 ? expected : expectedUp;
            if (id % 4 < 2) {
              try (Outputs out = s.run(Map.of("x", x))) {
                if (out.get(0).bitwiseEquals(want)) equal.incrementAndGet();
              }
            } else {
              try (Tensor own = TestModels.image(40, 40, 3); Outputs out = s.run(Map.of("x", own))) {
                if (out.get(0).bitwiseEquals(want)) equal.incrementAndGet();
              }
            }
          }
          return null;
        }));
      }
      for (Future<?> f : futures) f.get();
      pool.shutdown();
      assertEquals(THREADS * RUNS, equal.get());
      assertEquals(0, shared.inFlight());
      expected.close();
      expectedUp.close();

      // Closing a session while threads run it: their runs finish, later calls see IllegalStateException.
      Session doomed = runtime.load(TestModels.model("convnet"));
      ExecutorService more = Executors.newFixedThreadPool(4);
      AtomicInteger ok = new AtomicInteger();
      AtomicInteger refused = new AtomicInteger();
      List<Future<?>> runs = new ArrayList<>();
      for (int t = 0; t < 4; ++t) {
        runs.add(more.submit(() -> {
          for (int i = 0; i < 20; ++i) {
            try {
              doomed.run(Map.of("x", x)).close();
              ok.incrementAndGet();
            } catch (IllegalStateException e) {
              refused.incrementAndGet();
            }
          }
          return null;
        }));
      }
      Thread.sleep(20);
      doomed.close();
      for (Future<?> f : runs) f.get();
      more.shutdown();
      assertEquals(80, ok.get() + refused.get());
      assertTrue(refused.get() > 0 || ok.get() == 80);
    }
  }

  /**
   * Issue 32, finding 3: the session a runWithRecovery body gets was used by another thread after
   * the body returned; with keepAliveMs 0 the lease's end unloaded the model under that run (SIGSEGV
   * in ORT, on the first of 20 rounds). Now the body's return waits for the runs it handed out, and
   * every use after it throws IllegalStateException.
   */
  @Test
  void aPoolBodysSessionCannotOutliveTheBody() throws Exception {
    try (Runtime runtime = Runtime.create();
         ModelPool pool = new ModelPool(runtime, new PoolOptions().keepAliveMs(0));
         Tensor x = Tensor.fromBuffer(TestModels.directFloats(3 * 64 * 64, 4), 1, 3, 64, 64)) {
      pool.add("conv", TestModels.model("convnet"));
      ExecutorService other = Executors.newSingleThreadExecutor();
      try {
        for (int round = 0; round < 20; ++round) {
          AtomicInteger runs = new AtomicInteger();
          List<Future<Throwable>> escaped = new ArrayList<>();
          pool.runWithRecovery("conv", session -> {
            escaped.add(other.submit(() -> {
              for (;;) {
                try {
                  session.run(Map.of("x", x)).close();
                  runs.incrementAndGet();
                } catch (Throwable t) {
                  return t;
                }
              }
            }));
            while (runs.get() == 0 && !escaped.get(0).isDone()) Thread.onSpinWait(); // it runs there now
            return null;
          });
          Throwable ended = escaped.get(0).get();
          assertTrue(ended instanceof IllegalStateException, "round " + round + ": " + ended);
        }
      } finally {
        other.shutdown();
      }
    }
  }
}
