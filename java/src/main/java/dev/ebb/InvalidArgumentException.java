package dev.ebb;

/** {@link StatusCode#INVALID_ARGUMENT}: The caller's input is wrong (shape, type, name, file, policy): the message names it. */
public final class InvalidArgumentException extends EbbException {
  private static final long serialVersionUID = 1L;

  public InvalidArgumentException(String message) {
    super(StatusCode.INVALID_ARGUMENT, message);
  }
}
