package dev.ebb;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;

/**
 * The outputs of one run (or the results of a ready-made operation, one per frame): named tensors
 * the caller owns, never an arena's memory. Closing the Outputs closes every tensor not taken out
 * with {@link #take}; use it in try-with-resources:
 *
 * <pre>{@code
 * try (Outputs out = session.run(Map.of("x", x))) {
 *   float[] y = out.get("y").toFloatArray();
 * }
 * }</pre>
 *
 * Not thread-safe: one thread at a time (the tensors themselves may be read by many).
 */
public final class Outputs implements AutoCloseable, Iterable<Tensor> {
  private final List<String> names;
  private final List<Tensor> tensors;

  private Outputs(List<String> names, List<Tensor> tensors) {
    this.names = names;
    this.tensors = tensors;
  }

  /** Takes every tensor out of the native list `list` and frees the list. */
  static Outputs fromNative(long list) {
    try {
      int n = nativeCount(list);
      List<String> names = new ArrayList<>(n);
      List<Tensor> tensors = new ArrayList<>(n);
      for (int i = 0; i < n; ++i) {
        names.add(nativeName(list, i));
        tensors.add(new Tensor(nativeTake(list, i), null));
      }
      return new Outputs(Collections.unmodifiableList(names), tensors);
    } finally {
      nativeDestroy(list);
    }
  }

  public int size() {
    return tensors.size();
  }

  /** The names, in the order asked for (model order by default); "" for per-frame results. */
  public List<String> names() {
    return names;
  }

  public Tensor get(int index) {
    Tensor t = tensors.get(index);
    if (t == null) throw new IllegalStateException("output " + index + " was taken");
    return t;
  }

  /** The output called `name`. @throws IllegalArgumentException when there is none */
  public Tensor get(String name) {
    int i = names.indexOf(name);
    if (i < 0) throw new IllegalArgumentException("no output '" + name + "' (outputs: " + names + ")");
    return get(i);
  }

  /** Moves a tensor out: the caller closes it; this Outputs no longer does. */
  public Tensor take(String name) {
    Tensor t = get(name);
    tensors.set(names.indexOf(name), null);
    return t;
  }

  public Tensor take(int index) {
    Tensor t = get(index);
    tensors.set(index, null);
    return t;
  }

  /** The tensors, in order (taken ones left out). */
  @Override
  public Iterator<Tensor> iterator() {
    List<Tensor> left = new ArrayList<>();
    for (Tensor t : tensors) if (t != null) left.add(t);
    return left.iterator();
  }

  @Override
  public void close() {
    for (Tensor t : tensors) if (t != null) t.close();
  }

  private static native int nativeCount(long list);
  private static native String nativeName(long list, int index);
  private static native long nativeTake(long list, int index);
  private static native void nativeDestroy(long list);
}
