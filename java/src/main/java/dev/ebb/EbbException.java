package dev.ebb;

/**
 * An error from ebb: its {@link StatusCode} and message. One subclass per code, so a caller
 * catches exactly what it handles ({@link ResourceExhaustedException} to shed load, say); all of
 * them are unchecked. The message is ebb's own (it names the model, input or file).
 */
public class EbbException extends RuntimeException {
  private static final long serialVersionUID = 1L;
  private final StatusCode code;

  EbbException(StatusCode code, String message) {
    super(message);
    this.code = code;
  }

  public StatusCode code() {
    return code;
  }

  /** The exception of `code` (called by the JNI code, and by bindings of callbacks). */
  static EbbException of(int code, String message) {
    switch (StatusCode.of(code)) {
      case INVALID_ARGUMENT: return new InvalidArgumentException(message);
      case NOT_FOUND: return new NotFoundException(message);
      case RESOURCE_EXHAUSTED: return new ResourceExhaustedException(message);
      case UNAVAILABLE: return new UnavailableException(message);
      case FAILED_PRECONDITION: return new FailedPreconditionException(message);
      case CANCELLED: return new CancelledException(message);
      default: return new InternalException(message);
    }
  }
}
