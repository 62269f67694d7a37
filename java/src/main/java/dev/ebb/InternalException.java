package dev.ebb;

/** {@link StatusCode#INTERNAL}: ONNX Runtime or ebb failed in an unexpected way. */
public final class InternalException extends EbbException {
  private static final long serialVersionUID = 1L;

  public InternalException(String message) {
    super(StatusCode.INTERNAL, message);
  }
}
