package dev.ebb;

import java.util.Arrays;

/** A model input or output as the model declares it: name, type and shape (-1 marks a dynamic dim). */
public final class TensorInfo {
  private final String name;
  private final DataType type;
  private final long[] shape;

  TensorInfo(String name, DataType type, long[] shape) {
    this.name = name;
    this.type = type;
    this.shape = shape;
  }

  public String name() {
    return name;
  }

  public DataType type() {
    return type;
  }

  /** A copy of the dims; -1 marks a dynamic one. */
  public long[] shape() {
    return shape.clone();
  }

  @Override
  public String toString() {
    return "TensorInfo(" + name + ", " + type.protocolName() + ", " + Arrays.toString(shape) + ")";
  }
}
