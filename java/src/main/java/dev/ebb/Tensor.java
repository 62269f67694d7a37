package dev.ebb;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.LongBuffer;
import java.nio.ShortBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A dense row-major tensor in native memory (the C API's ebb_tensor_t): a model input, or an
 * output of a run, which belongs to the caller.
 *
 * <p>Inputs: {@link #fromBuffer} reads a direct buffer in native byte order in place, without a
 * copy (the tensor keeps the buffer referenced; do not write to it while a run reads it); {@link
 * #fromArray} copies a heap array once into native memory. Outputs: {@link #toFloatArray()} and
 * the other {@code to*Array} methods copy; {@link #buffer()} is a read-only view of the native
 * memory, valid until the tensor is closed.
 *
 * <p>Thread safety: a tensor may be read (and used as an input) by several threads at once.
 * Closing it while a run reads it is safe: it is freed when that run ends. Use after close throws
 * {@link IllegalStateException}.
 *
 * <p>Close tensors (try-with-resources): that frees their native memory at once. A tensor left
 * unclosed is freed by a {@link java.lang.ref.Cleaner} some time after it becomes unreachable and a
 * garbage collection found it, a safety net only: the Java heap does not see native memory, so
 * collections may come late.
 */
public final class Tensor extends NativeObject {
  static {
    NativeLibrary.load();
  }

  private final DataType type;
  private final long[] shape;
  private final Buffer keep; // the caller's direct buffer a borrowed tensor reads

  Tensor(long handle, Buffer keep) {
    super(handle, Tensor::nativeDestroy); // an unclosed tensor is freed after it is collected
    this.type = DataType.of(nativeDtype(handle));
    this.shape = nativeShape(handle);
    this.keep = keep;
  }

  // --- Inputs ------------------------------------------------------------------------

  /**
   * A tensor over a direct buffer, read in place. The buffer's elements from its position to its
   * limit are the tensor's, in row-major order: there must be exactly as many as the shape has,
   * and the buffer must use the native byte order. A ByteBuffer gives the type explicitly; the
   * typed buffers imply theirs (FloatBuffer FLOAT32, DoubleBuffer FLOAT64, LongBuffer INT64,
   * IntBuffer INT32, ShortBuffer INT16). A typed buffer that cannot be read in place (a heap
   * buffer such as {@code FloatBuffer.wrap(array)}, or one in the other byte order) is copied once
   * into native memory, as ORT-Java does.
   *
   * @throws InvalidArgumentException a heap ByteBuffer or one in the other byte order (its type is
   *     not the buffer's: use fromArray), another element count, or memory not aligned for the type
   */
  public static Tensor fromBuffer(ByteBuffer data, DataType type, long... shape) {
    if (!data.isDirect()) throw new InvalidArgumentException("a heap ByteBuffer cannot be read in place; use fromArray");
    if (type.size() > 1 && data.order() != ByteOrder.nativeOrder()) {
      throw new InvalidArgumentException("the ByteBuffer must be in the native byte order (ByteOrder.nativeOrder())");
    }
    return borrow(type, shape, data, data.position(), data.remaining());
  }

  public static Tensor fromBuffer(FloatBuffer data, long... shape) {
    return typed(data, DataType.FLOAT32, data.order(), shape);
  }

  public static Tensor fromBuffer(DoubleBuffer data, long... shape) {
    return typed(data, DataType.FLOAT64, data.order(), shape);
  }

  public static Tensor fromBuffer(LongBuffer data, long... shape) {
    return typed(data, DataType.INT64, data.order(), shape);
  }

  public static Tensor fromBuffer(IntBuffer data, long... shape) {
    return typed(data, DataType.INT32, data.order(), shape);
  }

  public static Tensor fromBuffer(ShortBuffer data, long... shape) {
    return typed(data, DataType.INT16, data.order(), shape);
  }

  /** A FLOAT32 tensor holding a copy of `values`. */
  public static Tensor fromArray(float[] values, long... shape) {
    return copy(DataType.FLOAT32, shape, values, values.length);
  }

  public static Tensor fromArray(double[] values, long... shape) {
    return copy(DataType.FLOAT64, shape, values, values.length);
  }

  public static Tensor fromArray(long[] values, long... shape) {
    return copy(DataType.INT64, shape, values, values.length);
  }

  public static Tensor fromArray(int[] values, long... shape) {
    return copy(DataType.INT32, shape, values, values.length);
  }

  /** INT16, FLOAT16 or BFLOAT16 (16-bit patterns) or UINT16, holding a copy of `values`. */
  public static Tensor fromArray(short[] values, DataType type, long... shape) {
    if (type.size() != 2) throw new InvalidArgumentException("short[] holds 16-bit elements, not " + type);
    return copy(type, shape, values, values.length);
  }

  /** UINT8, INT8 or BOOL (0 or 1), holding a copy of `values`. */
  public static Tensor fromArray(byte[] values, DataType type, long... shape) {
    if (type.size() != 1) throw new InvalidArgumentException("byte[] holds 8-bit elements, not " + type);
    return copy(type, shape, values, values.length);
  }

  /** BOOL, holding a copy of `values`. */
  public static Tensor fromArray(boolean[] values, long... shape) {
    return copy(DataType.BOOL, shape, values, values.length);
  }

  /** A BYTES tensor: `values` in row-major order (UTF-8), copied. */
  public static Tensor fromStrings(String[] values, long... shape) {
    byte[][] bytes = new byte[values.length][];
    for (int i = 0; i < values.length; ++i) bytes[i] = values[i].getBytes(StandardCharsets.UTF_8);
    return fromBytes(bytes, shape);
  }

  /** A BYTES tensor of raw byte strings, copied. */
  public static Tensor fromBytes(byte[][] values, long... shape) {
    return new Tensor(nativeCreateStrings(shape.clone(), values), null);
  }

  private static Tensor typed(Buffer data, DataType type, ByteOrder order, long[] shape) {
    // As ORT-Java does: a heap buffer (FloatBuffer.wrap(array)) or one in the other byte order cannot
    // be read in place, so its elements are copied once into a direct buffer in the native order.
    if (!data.isDirect() || order != ByteOrder.nativeOrder()) data = directCopy(data, type);
    return borrow(type, shape, data, (long) data.position() * type.size(), (long) data.remaining() * type.size());
  }

  /** The elements of `data` from its position to its limit, in a new direct buffer in the native order. */
  private static Buffer directCopy(Buffer data, DataType type) {
    ByteBuffer bytes = ByteBuffer.allocateDirect(data.remaining() * type.size()).order(ByteOrder.nativeOrder());
    if (data instanceof FloatBuffer f) return bytes.asFloatBuffer().put(f.duplicate()).flip();
    if (data instanceof DoubleBuffer d) return bytes.asDoubleBuffer().put(d.duplicate()).flip();
    if (data instanceof LongBuffer l) return bytes.asLongBuffer().put(l.duplicate()).flip();
    if (data instanceof IntBuffer i) return bytes.asIntBuffer().put(i.duplicate()).flip();
    if (data instanceof ShortBuffer s) return bytes.asShortBuffer().put(s.duplicate()).flip();
    throw new IllegalArgumentException("no copy for " + data.getClass());
  }

  private static Tensor borrow(DataType type, long[] shape, Buffer data, long offset, long bytes) {
    return new Tensor(nativeBorrow(type.value(), shape.clone(), data, offset, bytes), data);
  }

  private static Tensor copy(DataType type, long[] shape, Object array, int length) {
    return new Tensor(nativeCreateCopy(type.value(), shape.clone(), array, (long) length * type.size()), null);
  }

  // --- What it holds -----------------------------------------------------------------------

  public DataType type() {
    return type;
  }

  /** A copy of the dims. */
  public long[] shape() {
    return shape.clone();
  }

  public long elementCount() {
    long n = 1;
    for (long d : shape) n *= d;
    return n;
  }

  /** Bytes of data (BYTES: their serialised form, a 4-byte length before each element). */
  public long byteSize() {
    try (Use tensor = use()) {
      return nativeByteSize(tensor.handle());
    }
  }

  /** Whether this tensor reads a caller's direct buffer in place. */
  public boolean isBorrowed() {
    return keep != null;
  }

  public float[] toFloatArray() {
    return (float[]) copyOut(DataType.FLOAT32, new float[count()]);
  }

  public double[] toDoubleArray() {
    return (double[]) copyOut(DataType.FLOAT64, new double[count()]);
  }

  public long[] toLongArray() {
    return (long[]) copyOut(DataType.INT64, new long[count()]);
  }

  public int[] toIntArray() {
    return (int[]) copyOut(DataType.INT32, new int[count()]);
  }

  /** BOOL elements. */
  public boolean[] toBooleanArray() {
    return (boolean[]) copyOut(DataType.BOOL, new boolean[count()]);
  }

  /** The raw bytes of a dense tensor (any type but BYTES), in native byte order. */
  public byte[] toByteArray() {
    if (type == DataType.BYTES) throw new InvalidArgumentException("a BYTES tensor: use toStrings()");
    try (Use tensor = use()) {
      byte[] out = new byte[Math.toIntExact(nativeByteSize(tensor.handle()))];
      nativeCopyOut(tensor.handle(), out);
      return out;
    }
  }

  /** The elements of a BYTES tensor, decoded as UTF-8. */
  public String[] toStrings() {
    byte[][] raw = toBytes();
    String[] out = new String[raw.length];
    for (int i = 0; i < raw.length; ++i) out[i] = new String(raw[i], StandardCharsets.UTF_8);
    return out;
  }

  /** The elements of a BYTES tensor. */
  public byte[][] toBytes() {
    if (type != DataType.BYTES) throw new InvalidArgumentException("a " + type + " tensor, not BYTES");
    try (Use tensor = use()) {
      return nativeStrings(tensor.handle());
    }
  }

  /**
   * A read-only view of the tensor's native memory in native byte order, without a copy. Valid
   * until this tensor is closed: reading it afterwards reads freed memory. Prefer the
   * {@code to*Array} methods unless the copy matters.
   */
  public ByteBuffer buffer() {
    try (Use tensor = use()) {
      return nativeBuffer(tensor.handle()).asReadOnlyBuffer().order(ByteOrder.nativeOrder());
    }
  }

  /** Whether type, shape and every byte match. */
  public boolean bitwiseEquals(Tensor other) {
    try (Use a = use(); Use b = other.use()) {
      return nativeEquals(a.handle(), b.handle());
    }
  }

  @Override
  public String toString() {
    return "Tensor(" + type.protocolName() + ", " + Arrays.toString(shape) + (isClosed() ? ", closed)" : ")");
  }

  private int count() {
    return Math.toIntExact(elementCount());
  }

  private Object copyOut(DataType want, Object array) {
    if (type != want) throw new InvalidArgumentException("the tensor is " + type + ", not " + want);
    try (Use tensor = use()) {
      nativeCopyOut(tensor.handle(), array);
      return array;
    }
  }

  @Override
  void free(long handle) {
    nativeDestroy(handle);
  }

  @Override
  String describe() {
    return "Tensor(" + type.protocolName() + ", " + Arrays.toString(shape) + ")";
  }

  private static native long nativeBorrow(int dtype, long[] shape, Buffer data, long offset, long bytes);
  private static native long nativeCreateCopy(int dtype, long[] shape, Object array, long bytes);
  private static native long nativeCreateStrings(long[] shape, byte[][] values);
  private static native int nativeDtype(long handle);
  private static native long[] nativeShape(long handle);
  private static native long nativeByteSize(long handle);
  private static native void nativeCopyOut(long handle, Object array);
  private static native byte[][] nativeStrings(long handle);
  private static native ByteBuffer nativeBuffer(long handle);
  private static native boolean nativeEquals(long a, long b);
  private static native void nativeDestroy(long handle);
}
