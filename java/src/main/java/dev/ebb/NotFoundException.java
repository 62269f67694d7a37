package dev.ebb;

/** {@link StatusCode#NOT_FOUND}: A model, file or tensor name does not exist. */
public final class NotFoundException extends EbbException {
  private static final long serialVersionUID = 1L;

  public NotFoundException(String message) {
    super(StatusCode.NOT_FOUND, message);
  }
}
