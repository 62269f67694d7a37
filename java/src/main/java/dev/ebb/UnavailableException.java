package dev.ebb;

/** {@link StatusCode#UNAVAILABLE}: A device or provider cannot be used right now, or a model is not loaded and may not be loaded on demand. */
public final class UnavailableException extends EbbException {
  private static final long serialVersionUID = 1L;

  public UnavailableException(String message) {
    super(StatusCode.UNAVAILABLE, message);
  }
}
