package dev.ebb;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * What the Java tests and the benchmark share: model paths (system property ebb.models.dir),
 * inputs filled as tests/c/fill.h fills them (so the C++ reference run sees the same values),
 * the C++ reference run itself (tests/c/cxx_reference, property ebb.cxx.reference), RSS from
 * /proc/self/status, and copies of a model with distinct bytes (so each is its own session).
 */
public final class TestModels {
  public static final long MIB = 1L << 20;

  private TestModels() {}

  public static String model(String name) {
    return Paths.get(System.getProperty("ebb.models.dir", "models"), name, "model.onnx").toString();
  }

  /** k = ((i + seed) * 37) % 101 as k / 101 - 0.5, element i of tests/c/fill.h's FLOAT32 fill. */
  public static float[] floats(int count, int seed) {
    float[] v = new float[count];
    for (int i = 0; i < count; ++i) v[i] = (float) k(i, seed) / 101.0f - 0.5f;
    return v;
  }

  public static long[] longs(int count, int seed) {
    long[] v = new long[count];
    for (int i = 0; i < count; ++i) v[i] = k(i, seed) % 13 - 6;
    return v;
  }

  public static byte[] uint8s(int count, int seed) {
    byte[] v = new byte[count];
    for (int i = 0; i < count; ++i) v[i] = (byte) k(i, seed);
    return v;
  }

  public static boolean[] bools(int count, int seed) {
    boolean[] v = new boolean[count];
    for (int i = 0; i < count; ++i) v[i] = k(i, seed) % 3 == 0;
    return v;
  }

  private static long k(long i, int seed) {
    return ((i + seed) * 37) % 101;
  }

  /** A direct native-order FloatBuffer holding floats(count, seed). */
  public static FloatBuffer directFloats(int count, int seed) {
    FloatBuffer b = ByteBuffer.allocateDirect(count * 4).order(ByteOrder.nativeOrder()).asFloatBuffer();
    b.put(floats(count, seed)).flip();
    return b;
  }

  /** A float32 image [1,3,h,w] (a heap array, copied). */
  public static Tensor image(int h, int w, int seed) {
    return Tensor.fromArray(floats(3 * h * w, seed), 1, 3, h, w);
  }

  /**
   * Runs `model` through the C++ library (tests/c/cxx_reference) on inputs "name:TYPE:DIMS:SEED"
   * and returns its outputs' bytes, concatenated in model order.
   */
  public static byte[] cxxRun(String model, String... inputs) throws IOException, InterruptedException {
    Path out = Files.createTempFile("ebb-java-reference", ".bin");
    try {
      List<String> command = new ArrayList<>();
      command.add(System.getProperty("ebb.cxx.reference"));
      command.add(model);
      command.add(out.toString());
      command.addAll(Arrays.asList(inputs));
      Process p = new ProcessBuilder(command).inheritIO().start();
      if (p.waitFor() != 0) throw new IOException("cxx_reference failed: " + command);
      return Files.readAllBytes(out);
    } finally {
      Files.deleteIfExists(out);
    }
  }

  /** The bytes of every output, concatenated in order. */
  public static byte[] bytesOf(Outputs outputs) {
    List<byte[]> parts = new ArrayList<>();
    int total = 0;
    for (Tensor t : outputs) {
      byte[] b = t.toByteArray();
      parts.add(b);
      total += b.length;
    }
    byte[] all = new byte[total];
    int at = 0;
    for (byte[] b : parts) {
      System.arraycopy(b, 0, all, at, b.length);
      at += b.length;
    }
    return all;
  }

  /** VmRSS of this process, from /proc/self/status. */
  public static long rssBytes() {
    try {
      for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
        if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
      }
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
    throw new IllegalStateException("no VmRSS in /proc/self/status");
  }

  /** The reserved bytes of the arena called `name`, or 0 when there is none. */
  public static long reserved(Runtime runtime, String name) {
    return runtime.memory().arena(name).map(ArenaStats::reserved).orElse(0L);
  }

  /**
   * `count` copies of `source` in `dir`, each with another doc_string (ModelProto field 6
   * appended), so that each has its own content, hence its own session: copy_00.onnx, ...
   */
  public static List<String> copies(String source, Path dir, int count) throws IOException {
    byte[] model = Files.readAllBytes(Paths.get(source));
    List<String> paths = new ArrayList<>();
    for (int i = 0; i < count; ++i) {
      byte[] doc = String.format("ebb copy %02d", i).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
      byte[] bytes = Arrays.copyOf(model, model.length + 2 + doc.length);
      bytes[model.length] = 0x32;  // field 6, length-delimited
      bytes[model.length + 1] = (byte) doc.length;
      System.arraycopy(doc, 0, bytes, model.length + 2, doc.length);
      Path p = dir.resolve(String.format("copy_%02d.onnx", i));
      Files.write(p, bytes);
      paths.add(p.toString());
    }
    return paths;
  }
}
