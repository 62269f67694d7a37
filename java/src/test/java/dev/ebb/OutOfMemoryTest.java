package dev.ebb;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A real out-of-memory: the shared arena capped at 16 MiB, a run that needs ~128 MiB gives
 * ResourceExhaustedException with ebb's message; the session is dropped from the cache and the
 * next load works, within an operation too (its memory goes back at once).
 */
class OutOfMemoryTest {
  @Test
  void resourceExhaustedSessionDroppedNextLoadWorks() {
    try (Runtime runtime = Runtime.create("{\"cpu\": {\"arena_settings\": {\"max_bytes\": 16777216}}}");
         Tensor small = TestModels.image(32, 32, 1);
         Tensor big = Tensor.fromBuffer(TestModels.directFloats(3 * 1024 * 1024, 2), 1, 3, 1024, 1024)) {
      assertEquals(16 * TestModels.MIB, runtime.memory().arena("cpu:shared").orElseThrow().limit());
      try (Session s = runtime.load(TestModels.model("convnet"))) {
        try (Outputs out = s.run(Map.of("x", small))) {
          assertEquals(3 * 32 * 32, out.get(0).elementCount());
        }
        long loads = runtime.loadCount();
        ResourceExhaustedException e = assertThrows(ResourceExhaustedException.class, () -> s.run(Map.of("x", big)));
        assertEquals(StatusCode.RESOURCE_EXHAUSTED, e.code());
        assertTrue(e.getMessage().contains("shared CPU arena"), e.getMessage());
        assertEquals(0, runtime.cachedCount(), "the session that ran out of memory left the cache");
        try (Session fresh = runtime.load(TestModels.model("convnet"))) {
          assertFalse(fresh.isSameModel(s));
          assertEquals(loads + 1, runtime.loadCount());
          try (Outputs out = fresh.run(Map.of("x", small))) {
            assertEquals(3 * 32 * 32, out.get(0).elementCount());
          }
          assertTrue(TestModels.reserved(runtime, "cpu:shared") <= 16 * TestModels.MIB);
          try (Operation op = runtime.operation(2)) {
            op.run(fresh, Map.of("x", small)).close();
            assertThrows(ResourceExhaustedException.class, () -> op.run(fresh, Map.of("x", big)));
            assertTrue(op.ended() && op.released());
            assertTrue(TestModels.reserved(runtime, "cpu:shared") <= 64 * 1024);
          }
        }
      }
      try (Session again = runtime.load(TestModels.model("convnet")); Outputs out = again.run(Map.of("x", small))) {
        assertEquals(3 * 32 * 32, out.get(0).elementCount());
      }
    }
  }
}
