package dev.ebb;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * dev.ebb on the bundled models: the signature, outputs equal to the C++ library's run bit for
 * bit, direct buffers read in place and heap arrays copied, the release at the end of an operation
 * (the shared arena back to its after-load value), the cache, bad input as an exception naming
 * the input, an exception class per status code, use after close, the ready-made operations with
 * progress and cancellation, strings, and the model pool with its leases.
 */
class ApiTest {
  static Runtime runtime;
  static Session convnet;

  @BeforeAll
  static void start() {
    runtime = Runtime.create();
    convnet = runtime.load(TestModels.model("convnet"));
  }

  @AfterAll
  static void stop() {
    convnet.close();
    runtime.close();
  }

  static long sharedReserved() {
    return TestModels.reserved(runtime, "cpu:shared");
  }

  @Test
  void versionsAndPolicy() {
    assertEquals(Runtime.abiVersion(), 1);
    assertTrue(Runtime.version().matches("\\d+\\.\\d+\\.\\d+"), Runtime.version());
    assertTrue(Runtime.ortVersion().startsWith("1.29"), Runtime.ortVersion());
    assertTrue(runtime.policyJson().contains("\"release\": \"idle\""), runtime.policyJson());
  }

  @Test
  void signature() {
    assertEquals("convnet", convnet.name());
    assertEquals("cpu", convnet.device());
    assertEquals("CPUExecutionProvider", convnet.provider());
    assertTrue(convnet.fallbackReason().isEmpty() || convnet.fallbackReason().contains("CUDA"), convnet.fallbackReason());
    assertTrue(convnet.sourcePath().endsWith("convnet/model.onnx"));
    TensorInfo x = convnet.inputs().get(0);
    assertEquals("x", x.name());
    assertEquals(DataType.FLOAT32, x.type());
    assertArrayEquals(new long[] {-1, 3, -1, -1}, x.shape());
    assertEquals("y", convnet.outputs().get(0).name());
    assertEquals("", convnet.metadata("no such key"));
  }

  @Test
  void outputsEqualTheCxxRun() throws Exception {
    try (Tensor x = TestModels.image(64, 48, 0); Outputs out = convnet.run(Map.of("x", x))) {
      assertEquals(List.of("y"), out.names());
      assertArrayEquals(new long[] {1, 3, 64, 48}, out.get("y").shape());
      assertArrayEquals(TestModels.cxxRun(TestModels.model("convnet"), "x:FP32:1x3x64x48:0"), TestModels.bytesOf(out));
    }
    try (Session mixed = runtime.load(TestModels.model("mixed"));
         Tensor a = Tensor.fromArray(TestModels.floats(12, 1), 3, 4);
         Tensor b = Tensor.fromArray(TestModels.longs(12, 2), 3, 4);
         Tensor c = Tensor.fromArray(TestModels.uint8s(12, 3), DataType.UINT8, 3, 4);
         Tensor flag = Tensor.fromArray(TestModels.bools(12, 4), 3, 4)) {
      Map<String, Tensor> in = new LinkedHashMap<>();
      in.put("a", a);
      in.put("b", b);
      in.put("c", c);
      in.put("flag", flag);
      try (Outputs out = mixed.run(in)) {
        assertEquals(List.of("sum", "b2", "nflag", "d"), out.names());
        byte[] cxx = TestModels.cxxRun(TestModels.model("mixed"), "a:FP32:3x4:1", "b:INT64:3x4:2", "c:UINT8:3x4:3",
                                       "flag:BOOL:3x4:4");
        assertArrayEquals(cxx, TestModels.bytesOf(out));
        assertEquals(2 * b.toLongArray()[5], out.get("b2").toLongArray()[5]);
        assertEquals(!flag.toBooleanArray()[0], out.get("nflag").toBooleanArray()[0]);
      }
      try (Outputs one = mixed.run(in, "d")) {
        assertEquals(List.of("d"), one.names());
        assertEquals(DataType.FLOAT64, one.get(0).type());
      }
    }
  }

  /** A direct buffer is read in place: what is written to it after the tensor is made is what runs. */
  @Test
  void directBuffersAreReadInPlaceHeapArraysAreCopied() {
    int n = 3 * 32 * 32;
    FloatBuffer buffer = TestModels.directFloats(n, 5);
    float[] array = TestModels.floats(n, 5);
    try (Tensor direct = Tensor.fromBuffer(buffer, 1, 3, 32, 32); Tensor copied = Tensor.fromArray(array, 1, 3, 32, 32)) {
      assertTrue(direct.isBorrowed());
      assertFalse(copied.isBorrowed());
      float[] before;
      try (Outputs out = convnet.run(Map.of("x", direct))) {
        before = out.get("y").toFloatArray();
      }
      buffer.put(0, 100f);
      array[0] = 100f;
      try (Outputs d = convnet.run(Map.of("x", direct)); Outputs c = convnet.run(Map.of("x", copied))) {
        assertFalse(java.util.Arrays.equals(before, d.get("y").toFloatArray()), "the buffer's change was not seen");
        assertArrayEquals(before, c.get("y").toFloatArray(), "the array was not copied");
      }
      // A view of the output's native memory equals the copy.
      try (Outputs out = convnet.run(Map.of("x", copied))) {
        FloatBuffer view = out.get("y").buffer().asFloatBuffer();
        assertEquals(before[7], view.get(7));
      }
    }
    // Another element count, a shape that does not fit.
    assertThrows(InvalidArgumentException.class,
                 () -> Tensor.fromBuffer(TestModels.directFloats(n - 1, 0), 1, 3, 32, 32));
    assertThrows(InvalidArgumentException.class, () -> Tensor.fromArray(new float[5], 2, 3));
    assertThrows(InvalidArgumentException.class, () -> Tensor.fromArray(new float[6], 2, -3));
    // Issue 32: shapes whose element count or byte size overflows were made from 0 or 16 bytes.
    assertThrows(InvalidArgumentException.class, () -> Tensor.fromArray(new float[0], 1L << 62, 4));
    assertThrows(InvalidArgumentException.class, () -> Tensor.fromArray(new float[4], (1L << 62) + 1, 4));
    assertThrows(InvalidArgumentException.class, () -> Tensor.fromArray(new float[0], 1L << 62));
  }

  /**
   * Issue 32, finding 1: a tile of 2^31 over an 8x8 frame wrapped the tile's byte size to 0 (a heap
   * overflow that corrupted the JVM's heap). The tile is clamped to the frame; one tiled frame.
   */
  @Test
  void aTileLargerThanTheFrameIsClampedToIt() {
    try (Session s = runtime.load(TestModels.model("convnet"));
         Tensor frame = Tensor.fromArray(TestModels.floats(3 * 8 * 8, 2), 1, 3, 8, 8);
         Outputs out = runtime.runTiled(s, List.of(frame), new TileOptions().tile(1L << 31).overlap(2))) {
      assertArrayEquals(new long[] {1, 3, 8, 8}, out.get(0).shape());
    }
    try (Session s = runtime.load(TestModels.model("convnet"));
         Tensor frame = Tensor.fromArray(TestModels.floats(3 * 8 * 8, 2), 1, 3, 8, 8)) {
      assertThrows(InvalidArgumentException.class,
                   () -> runtime.runTiled(s, List.of(frame), new TileOptions().tile(Long.MAX_VALUE).overlap(Long.MAX_VALUE)));
    }
  }

  /**
   * As ORT-Java does, a typed buffer that cannot be read in place is copied: a heap buffer
   * (FloatBuffer.wrap(array), here from a position past its start) and a direct one in the other byte
   * order run as the same values from an array do; a heap ByteBuffer (no element type) is refused.
   */
  @Test
  void heapAndForeignOrderBuffersAreCopied() {
    int n = 3 * 32 * 32;
    float[] array = TestModels.floats(n, 9);
    float[] padded = new float[n + 2];
    System.arraycopy(array, 0, padded, 2, n);
    FloatBuffer heap = FloatBuffer.wrap(padded);
    heap.position(2);
    ByteOrder other = ByteOrder.nativeOrder() == ByteOrder.BIG_ENDIAN ? ByteOrder.LITTLE_ENDIAN : ByteOrder.BIG_ENDIAN;
    FloatBuffer foreign = ByteBuffer.allocateDirect(4 * n).order(other).asFloatBuffer();
    foreign.put(array).flip();
    try (Tensor expected = Tensor.fromArray(array, 1, 3, 32, 32); Tensor fromHeap = Tensor.fromBuffer(heap, 1, 3, 32, 32);
         Tensor fromOther = Tensor.fromBuffer(foreign, 1, 3, 32, 32);
         Outputs e = convnet.run(Map.of("x", expected)); Outputs h = convnet.run(Map.of("x", fromHeap));
         Outputs o = convnet.run(Map.of("x", fromOther))) {
      assertArrayEquals(e.get("y").toFloatArray(), h.get("y").toFloatArray());
      assertArrayEquals(e.get("y").toFloatArray(), o.get("y").toFloatArray());
      padded[2] = 100f;  // a copy: what the array holds after the tensor was made does not run
      try (Outputs again = convnet.run(Map.of("x", fromHeap))) {
        assertArrayEquals(e.get("y").toFloatArray(), again.get("y").toFloatArray());
      }
    }
    assertEquals(2, heap.position(), "the caller's buffer moved");
    assertThrows(InvalidArgumentException.class,
                 () -> Tensor.fromBuffer(ByteBuffer.allocate(4 * n), DataType.FLOAT32, 1, 3, 32, 32));
  }

  /**
   * Issue 34: copies of one model (the same bytes at two paths) are one model in every call:
   * isSameModel, unload by either path, and load(p) / load(p, device("cpu")) on this CPU-only machine.
   */
  @Test
  void copiesOfOneModelAreOneModelInEveryCall() throws Exception {
    Path dir = Files.createTempDirectory("ebb-java-copies");
    Path p = dir.resolve("p.onnx"), q = dir.resolve("q.onnx");
    Files.copy(Path.of(TestModels.model("mixed")), p);
    Files.copy(Path.of(TestModels.model("mixed")), q);
    runtime.unload(TestModels.model("mixed"));
    long loads = runtime.loadCount();
    try (Session first = runtime.load(p.toString());
         Session onCpu = runtime.load(p.toString(), new LoadOptions().device("cpu"));
         Session copy = runtime.load(q.toString(), new LoadOptions().device("cpu"))) {
      if (!first.device().equals("cpu")) return;  // CUDA works here: auto is not the CPU
      assertEquals(loads + 1, runtime.loadCount(), "auto, cpu and a copy: one load");
      assertTrue(first.isSameModel(copy));
      assertTrue(onCpu.isSameModel(copy));
      assertEquals(1, runtime.unload(q.toString()), "unloaded by the copy's path");
      assertEquals(0, runtime.unload(p.toString()));
    } finally {
      Files.delete(p);
      Files.delete(q);
      Files.delete(dir);
    }
  }

  /** try-with-resources: the planned last run, or close(), gives the arena back to its after-load value. */
  @Test
  void releaseAtTheEndOfAnOperation() {
    runtime.trim();
    long floor = sharedReserved();
    try (Tensor x = TestModels.image(256, 256, 3)) {
      for (int planned : new int[] {3, 0}) {
        Operation kept;
        try (Operation op = runtime.operation(planned)) {
          kept = op;
          for (int i = 0; i < 3; ++i) {
            try (Outputs out = op.run(convnet, Map.of("x", x))) {
              assertEquals(3 * 256 * 256, out.get("y").elementCount());
            }
            if (i < 2 || planned == 0) assertTrue(sharedReserved() > floor + 4 * TestModels.MIB, "kept between runs");
          }
          assertEquals(3, op.runsDone());
          assertEquals(planned > 0, op.released());
          if (planned > 0) {
            assertEquals(floor, sharedReserved());
            assertThrows(FailedPreconditionException.class, () -> op.run(convnet, Map.of("x", x)));
          }
        }
        assertEquals(floor, sharedReserved(), "after the operation with planned=" + planned);
        assertThrows(IllegalStateException.class, kept::runsDone);
      }
      long releases = convnet.releaseCount();
      convnet.run(Map.of("x", x)).close();  // a plain run is a whole operation, released once runs pause
      // The default release ("idle"): both waited for, since an idle release armed by earlier runs of
      // this (cached) session may come just before this run and count first.
      long deadline = System.nanoTime() + 10_000_000_000L;
      while ((convnet.releaseCount() == releases || sharedReserved() != floor) && System.nanoTime() < deadline) {
        java.util.concurrent.locks.LockSupport.parkNanos(2_000_000);
      }
      assertTrue(convnet.releaseCount() > releases);
      assertEquals(floor, sharedReserved());
    }
  }

  @Test
  void theCacheGivesTheSameLoadedModel() {
    try (Session a = runtime.load(TestModels.model("tiny"))) {
      long loads = runtime.loadCount();
      try (Session b = runtime.load(TestModels.model("tiny"))) {
        assertTrue(a.isSameModel(b));
        assertEquals(loads, runtime.loadCount());
        assertTrue(runtime.unload(b));
        assertFalse(runtime.unload(b));
      }
      try (Session c = runtime.load(TestModels.model("tiny"))) {
        assertFalse(a.isSameModel(c));
        assertEquals(loads + 1, runtime.loadCount());
      }
      assertEquals(1, runtime.unload(TestModels.model("tiny")));
      try (Tensor x = Tensor.fromArray(TestModels.floats(64, 1), 1, 64); Outputs out = a.run(Map.of("x", x))) {
        assertEquals(64, out.get(0).elementCount());  // a session out of the cache still runs
      }
    }
  }

  @Test
  void clearEmptiesTheCacheAndItsSessionsStillRun() {
    try (Runtime own = Runtime.create("{\"cpu\": {\"arena\": \"none\"}}");
         Session s = own.load(TestModels.model("tiny"));
         Tensor x = Tensor.fromArray(TestModels.floats(64, 1), 1, 64)) {
      assertEquals(1, own.cachedCount());
      own.clear();
      assertEquals(0, own.cachedCount());
      try (Outputs out = s.run(Map.of("x", x))) {
        Tensor y = out.get(0);
        assertEquals(y.elementCount() * y.type().size(), y.byteSize());
      }
    }
  }

  @Test
  void loadFromBytes() throws Exception {
    byte[] bytes = Files.readAllBytes(Path.of(TestModels.model("tiny")));
    try (Session s = runtime.loadBytes(bytes, new LoadOptions().name("tiny_bytes").device("cpu"))) {
      assertEquals("tiny_bytes", s.name());
      assertEquals("", s.sourcePath());
    }
  }

  @Test
  void badInputIsAClearExceptionNamingTheInput() {
    try (Tensor ints = Tensor.fromArray(new long[3 * 8 * 8], 1, 3, 8, 8); Tensor x = TestModels.image(8, 8, 1);
         Tensor flat = Tensor.fromArray(new float[3 * 64], 3, 64)) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> convnet.run(Map.of("x", ints)));
      assertTrue(e.getMessage().contains("'x'"), e.getMessage());
      assertEquals(StatusCode.INVALID_ARGUMENT, e.code());
      e = assertThrows(InvalidArgumentException.class, () -> convnet.run(Map.of("x", flat)));
      assertTrue(e.getMessage().contains("'x'"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> convnet.run(Map.of("image", x)));
      assertTrue(e.getMessage().contains("image"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> convnet.run(Map.of()));
      assertTrue(e.getMessage().contains("x"), e.getMessage());
      e = assertThrows(InvalidArgumentException.class, () -> convnet.run(Map.of("x", x), "z"));
      assertTrue(e.getMessage().contains("'z'"), e.getMessage());
    }
  }

  @Test
  void anExceptionClassPerStatusCode() {
    assertThrows(NotFoundException.class, () -> runtime.load("/nonexistent/model.onnx"));
    assertThrows(InvalidArgumentException.class, () -> runtime.loadBytes(new byte[] {1, 2, 3}, new LoadOptions()));
    InvalidArgumentException bad = assertThrows(InvalidArgumentException.class,
                                                () -> Runtime.create("{\"cpu\": {\"arena_setings\": {}}}"));
    assertTrue(bad.getMessage().contains("arena_setings"), bad.getMessage());
    FailedPreconditionException twice = assertThrows(FailedPreconditionException.class, Runtime::create);
    assertTrue(twice.getMessage().contains("one Runtime per process"), twice.getMessage());
    assertThrows(InvalidArgumentException.class, () -> runtime.load(TestModels.model("tiny"), new LoadOptions().device("tpu")));
    assertThrows(NotFoundException.class, () -> Runtime.fromPolicyFile(Path.of("/nonexistent/policy.json")));
    for (StatusCode code : StatusCode.values()) {
      if (code == StatusCode.OK) continue;
      EbbException e = EbbException.of(code.value(), "m");
      assertEquals(code, e.code());
      assertEquals(code.name(), e.getClass().getSimpleName().replaceAll("([a-z])([A-Z])", "$1_$2")
                                    .replace("_Exception", "").replace("Exception", "").toUpperCase());
    }
  }

  @Test
  void useAfterCloseThrowsIllegalState() {
    Session s = runtime.load(TestModels.model("tiny"));
    Tensor x = Tensor.fromArray(TestModels.floats(64, 1), 1, 64);
    Outputs out = s.run(Map.of("x", x));
    Tensor y = out.take(0);
    out.close();
    s.close();
    s.close();  // idempotent
    x.close();
    assertThrows(IllegalStateException.class, () -> s.run(Map.of()));
    assertThrows(IllegalStateException.class, s::runCount);
    assertThrows(IllegalStateException.class, x::toFloatArray);
    assertEquals(64, y.toFloatArray().length);  // taken: the caller's until it closes it
    y.close();
    assertThrows(IllegalStateException.class, y::buffer);
    OperationControl control = new OperationControl();
    control.close();
    assertThrows(IllegalStateException.class, control::cancel);
    try (Session t = runtime.load(TestModels.model("tiny")); Tensor z = Tensor.fromArray(TestModels.floats(64, 1), 1, 64)) {
      Operation op = runtime.operation();
      op.close();
      assertThrows(IllegalStateException.class, () -> op.run(t, Map.of("x", z)));
    }
    Runtime closed = Runtime.create("{\"cpu\": {\"arena\": \"none\"}}");
    closed.close();
    assertThrows(IllegalStateException.class, () -> closed.load(TestModels.model("tiny")));
  }

  @Test
  void readyMadeOperationsWithProgressAndCancellation() {
    List<Tensor> frames = new ArrayList<>();
    for (int i = 0; i < 3; ++i) frames.add(TestModels.image(64, 64, i + 1));
    try (Session up = runtime.load(TestModels.model("waifu2x_scale2x"))) {
      runtime.trim();
      long floor = sharedReserved();
      List<Integer> seen = new ArrayList<>();
      try (OperationControl control = new OperationControl((done, total) -> seen.add(done) || true);
           Outputs perFrame = runtime.runPerFrame(convnet, frames, control);
           Outputs joint = runtime.runJoint(convnet, frames, null);
           Outputs piped = runtime.runPipeline(List.of(convnet, convnet), frames, null)) {
        assertEquals(List.of(1, 2, 3), seen);
        assertEquals(floor, sharedReserved());
        for (int i = 0; i < 3; ++i) {
          try (Outputs one = convnet.run(Map.of("x", frames.get(i)));
               Outputs twice = convnet.run(Map.of("x", one.get(0)))) {
            assertTrue(one.get(0).bitwiseEquals(perFrame.get(i)));
            assertTrue(twice.get(0).bitwiseEquals(piped.get(i)));
            assertEquals(3 * 64 * 64, joint.get(i).elementCount());
          }
        }
      }
      // Cancelled by the listener after two runs: CancelledException, memory back at once.
      try (OperationControl stop = new OperationControl((done, total) -> done < 2)) {
        assertThrows(CancelledException.class,
                     () -> runtime.runTiled(up, frames, new TileOptions().tile(48).overlap(8), stop));
        assertTrue(stop.isCancelled());
        assertEquals(floor, sharedReserved());
      }
      // Cancelled from another thread before the operation starts its first run.
      try (OperationControl control = new OperationControl()) {
        Thread t = new Thread(control::cancel);
        t.start();
        t.join();
        assertThrows(CancelledException.class, () -> runtime.runPerFrame(convnet, frames, control));
        try (Operation op = runtime.operation(0, control)) {
          assertThrows(CancelledException.class, () -> op.run(convnet, Map.of("x", frames.get(0))));
          assertTrue(op.ended());
        }
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
      // A listener that throws stops the operation; its exception is what the call throws.
      try (OperationControl control = new OperationControl((done, total) -> {
             throw new IllegalArgumentException("listener says stop");
           })) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                                                  () -> runtime.runPerFrame(convnet, frames, control));
        assertEquals("listener says stop", e.getMessage());
        assertEquals(floor, sharedReserved());
      }
      try (Outputs tiled = runtime.runTiled(up, frames.subList(0, 1), new TileOptions().tile(48).overlap(8))) {
        assertArrayEquals(new long[] {1, 3, 128, 128}, tiled.get(0).shape());
      }
      assertThrows(InvalidArgumentException.class, () -> runtime.runPipeline(List.of(), frames, null));
    } finally {
      frames.forEach(Tensor::close);
    }
  }

  @Test
  void strings() {
    try (Session s = runtime.load(TestModels.model("strings"));
         Tensor text = Tensor.fromStrings(new String[] {"banana", "kiwi", "apple", "cherry"}, 2, 2);
         Outputs out = s.run(Map.of("text", text))) {
      assertArrayEquals(new String[] {"banana", "kiwi", "apple", "cherry"}, out.get("echo").toStrings());
      assertArrayEquals(new long[] {1, -1, 0, 2}, out.get("id").toLongArray());
      assertEquals(DataType.BYTES, out.get("echo").type());
    }
  }

  @Test
  void modelPoolAndLeases() {
    ModelPool pool = new ModelPool(runtime, new PoolOptions().cpuBudget(256 * TestModels.MIB));
    try (Tensor x = Tensor.fromArray(TestModels.floats(64, 11), 1, 64)) {
      assertEquals(256 * TestModels.MIB, pool.budget("cpu"));
      pool.add("tiny", TestModels.model("tiny"));
      pool.add("conv", TestModels.model("convnet"), new ModelOptions().pinned(true).keepAliveMs(-1));
      assertTrue(pool.contains("tiny"));
      assertEquals(ModelStatus.State.UNLOADED, pool.status("tiny").state());
      assertThrows(UnavailableException.class, () -> pool.acquire("tiny", new AcquireOptions().loadOnDemand(false)));
      assertThrows(NotFoundException.class, () -> pool.acquire("ghost"));
      Session leased;
      try (Lease lease = pool.acquire("tiny"); Outputs out = lease.session().run(Map.of("x", x))) {
        leased = lease.session();
        assertEquals("tiny", lease.name());
        assertEquals(64, out.get(0).elementCount());
        ModelStatus st = pool.status("tiny");
        assertEquals("READY", st.stateName());
        assertEquals(1, st.inFlight());
        assertTrue(st.chargeBytes() > 0);
      }
      assertThrows(IllegalStateException.class, () -> leased.run(Map.of("x", x)));
      assertTrue(pool.used("cpu") > 0);
      long n = pool.runWithRecovery("tiny", s -> {
        try (Outputs out = s.run(Map.of("x", x))) {
          return out.get(0).elementCount();
        }
      });
      assertEquals(64, n);
      // The body's exception is what the call throws.
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                                                () -> pool.runWithRecovery("conv", s -> s.run(Map.of("x", x))));
      assertTrue(e.getMessage().contains("'x'"), e.getMessage());
      assertEquals(2, pool.snapshot().size());
      pool.unload("tiny");
      assertEquals(ModelStatus.State.UNLOADED, pool.status("tiny").state());
      pool.load("tiny");
      pool.reapNow();  // loaded by load(): kept until a request applies its keep-alive
      assertEquals(ModelStatus.State.READY, pool.status("tiny").state());
      pool.unload("tiny");
      List<PoolEvent> events = pool.events();
      assertTrue(events.stream().anyMatch(ev -> ev.kind() == PoolEvent.Kind.LOAD && ev.model().equals("tiny")), events.toString());
      assertTrue(events.stream().anyMatch(ev -> ev.kind() == PoolEvent.Kind.EVICT && ev.reason().equals("unload")), events.toString());
      assertTrue(pool.events().isEmpty());
      pool.remove("conv");
      assertThrows(NotFoundException.class, () -> pool.load("conv"));
      // A lease keeps its pool alive after the pool is closed.
      Lease lease = pool.acquire("tiny");
      pool.close();
      assertThrows(IllegalStateException.class, () -> pool.acquire("tiny"));
      try (Outputs out = lease.session().run(Map.of("x", x))) {
        assertEquals(64, out.get(0).elementCount());
      }
      lease.close();
    } finally {
      pool.close();  // idempotent
    }
  }

  @Test
  void memoryReadings() {
    MemoryReading m = runtime.memory();
    ArenaStats shared = m.arena("cpu:shared").orElseThrow();
    assertTrue(shared.limit() > 0);
    assertTrue(m.rssBytes() > 0 && m.peakRssBytes() >= m.rssBytes());
    assertTrue(m.json().contains("\"cpu:shared\""), m.json());
    assertNotEquals(0, m.arenas().size());
    assertSame(StatusCode.RESOURCE_EXHAUSTED, new ResourceExhaustedException("x").code());
  }
}
