package dev.ebb;

/** {@link StatusCode#CANCELLED}: The caller asked to stop (an OperationControl was cancelled, or its progress listener returned false). */
public final class CancelledException extends EbbException {
  private static final long serialVersionUID = 1L;

  public CancelledException(String message) {
    super(StatusCode.CANCELLED, message);
  }
}
