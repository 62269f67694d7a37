package dev.ebb;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Loads the native libraries once per JVM: libonnxruntime.so.1, libebb.so.1 (the C API) and
 * libebb_jni.so, in that order, so each finds the ones before it already loaded.
 *
 * <p>From the folder named by the system property {@code ebb.library.dir} when it is set (a build
 * tree, an installed share/java folder); otherwise from the jar itself, which carries them under
 * {@code /dev/ebb/native/<os>-<arch>/} and lists them, in load order, in {@code libraries.txt}: they
 * are copied into a temporary folder (removed when the JVM exits), as ONNX Runtime's own Java
 * binding does.
 */
final class NativeLibrary {
  private static final String RESOURCES = "/dev/ebb/native/" + platform() + "/";
  private static boolean loaded = false;

  private NativeLibrary() {}

  static synchronized void load() {
    if (loaded) return;
    try {
      List<String> names = libraries();
      String dir = System.getProperty("ebb.library.dir");
      Path from = dir != null ? Paths.get(dir) : extract(names);
      for (String name : names) System.load(from.resolve(name).toAbsolutePath().toString());
    } catch (IOException e) {
      throw new UnsatisfiedLinkError("ebb: cannot load its native libraries: " + e);
    }
    loaded = true;
  }

  private static String platform() {
    String os = System.getProperty("os.name").toLowerCase().startsWith("linux") ? "linux" : System.getProperty("os.name");
    String arch = System.getProperty("os.arch");
    return os + "-" + (arch.equals("amd64") ? "x86_64" : arch);
  }

  private static List<String> libraries() throws IOException {
    try (InputStream in = NativeLibrary.class.getResourceAsStream(RESOURCES + "libraries.txt")) {
      if (in == null) throw new IOException("this jar has no native libraries for " + platform());
      List<String> names = new ArrayList<>();
      for (String line : new String(in.readAllBytes(), StandardCharsets.UTF_8).split("\n")) {
        if (!line.isBlank()) names.add(line.trim());
      }
      return names;
    }
  }

  private static Path extract(List<String> names) throws IOException {
    Path dir = Files.createTempDirectory("ebb-native-");
    dir.toFile().deleteOnExit();
    for (String name : names) {
      Path target = dir.resolve(name);
      try (InputStream in = NativeLibrary.class.getResourceAsStream(RESOURCES + name)) {
        if (in == null) throw new IOException("the jar lists " + name + " but does not carry it");
        Files.copy(in, target, StandardCopyOption.REPLACE_EXISTING);
      }
      target.toFile().deleteOnExit();
    }
    return dir;
  }
}
