package dev.ebb;

/**
 * Per-load options (ebb::LoadOptions): the device ("auto", "cpu", "cuda", "cuda:N"), whether a
 * device that cannot be used is an error rather than a fall back to CPU, and a name for logs,
 * errors and arena readings. A plain value; the setters return this.
 */
public final class LoadOptions {
  String device = "auto";
  Boolean strict = null; // null: the policy's strict_device
  String name = null;    // null: the file's folder or stem

  public LoadOptions device(String device) {
    this.device = device;
    return this;
  }

  public LoadOptions strict(boolean strict) {
    this.strict = strict;
    return this;
  }

  public LoadOptions name(String name) {
    this.name = name;
    return this;
  }

  int strictValue() {
    return strict == null ? -1 : strict ? 1 : 0;
  }
}
