package dev.ebb;

/** {@link StatusCode#RESOURCE_EXHAUSTED}: Memory ran out (the arena's cap, the device, the pool's budget). A session that ran out of memory is dropped from the runtime's cache; the next load builds it afresh. */
public final class ResourceExhaustedException extends EbbException {
  private static final long serialVersionUID = 1L;

  public ResourceExhaustedException(String message) {
    super(StatusCode.RESOURCE_EXHAUSTED, message);
  }
}
