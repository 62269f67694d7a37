package dev.ebb;

/** Element types (ebb::DataType, the C API's ebb_dtype_t), value for value, with their KServe names. */
public enum DataType {
  BOOL("BOOL", 1),
  UINT8("UINT8", 1),
  UINT16("UINT16", 2),
  UINT32("UINT32", 4),
  UINT64("UINT64", 8),
  INT8("INT8", 1),
  INT16("INT16", 2),
  INT32("INT32", 4),
  INT64("INT64", 8),
  /** IEEE half, as 16-bit patterns (short). */
  FLOAT16("FP16", 2),
  /** bfloat16, as 16-bit patterns (short). */
  BFLOAT16("BF16", 2),
  FLOAT32("FP32", 4),
  FLOAT64("FP64", 8),
  /** ONNX strings: byte strings of any length (see {@link Tensor#fromStrings}). */
  BYTES("BYTES", 0);

  private final String protocolName;
  private final int size;

  DataType(String protocolName, int size) {
    this.protocolName = protocolName;
    this.size = size;
  }

  /** "FP32", "INT64", ... */
  public String protocolName() {
    return protocolName;
  }

  /** Bytes per element; 0 for BYTES. */
  public int size() {
    return size;
  }

  int value() {
    return ordinal();
  }

  static DataType of(int value) {
    DataType[] all = values();
    if (value < 0 || value >= all.length) throw new InternalException("unknown dtype " + value);
    return all[value];
  }
}
