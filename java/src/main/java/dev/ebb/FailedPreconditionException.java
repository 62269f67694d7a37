package dev.ebb;

/** {@link StatusCode#FAILED_PRECONDITION}: The object is not in a state that allows the call (a second shared-arena Runtime, an operation that has ended). */
public final class FailedPreconditionException extends EbbException {
  private static final long serialVersionUID = 1L;

  public FailedPreconditionException(String message) {
    super(StatusCode.FAILED_PRECONDITION, message);
  }
}
