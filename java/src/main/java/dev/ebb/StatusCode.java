package dev.ebb;

/** ebb's status codes (ebb::StatusCode, the C API's ebb_code_t), value for value. */
public enum StatusCode {
  OK("ok"),
  INVALID_ARGUMENT("invalid_argument"),
  NOT_FOUND("not_found"),
  RESOURCE_EXHAUSTED("resource_exhausted"),
  UNAVAILABLE("unavailable"),
  FAILED_PRECONDITION("failed_precondition"),
  CANCELLED("cancelled"),
  INTERNAL("internal");

  private final String text;

  StatusCode(String text) {
    this.text = text;
  }

  /** The C API's value (ebb_code_t). */
  public int value() {
    return ordinal();
  }

  /** ebb's short name, e.g. "resource_exhausted". */
  public String text() {
    return text;
  }

  static StatusCode of(int value) {
    StatusCode[] all = values();
    return value >= 0 && value < all.length ? all[value] : INTERNAL;
  }
}
