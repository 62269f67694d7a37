package dev.ebb;

/** What a {@link ModelPool} did (ebb::PoolEvent): a load or an eviction. */
public final class PoolEvent {
  public enum Kind { LOAD, EVICT }

  private final Kind kind;
  private final String model;
  private final boolean onDemand;
  private final double loadMs;
  private final String reason;

  PoolEvent(int kind, String model, boolean onDemand, double loadMs, String reason) {
    this.kind = Kind.values()[kind];
    this.model = model;
    this.onDemand = onDemand;
    this.loadMs = loadMs;
    this.reason = reason;
  }

  public Kind kind() {
    return kind;
  }

  public String model() {
    return model;
  }

  /** Load: a request needed it. */
  public boolean onDemand() {
    return onDemand;
  }

  /** Load: how long it took. */
  public double loadMs() {
    return loadMs;
  }

  /** Evict: "budget", "keep_alive", "out_of_memory" or "unload"; "" for a load. */
  public String reason() {
    return reason;
  }

  @Override
  public String toString() {
    return "PoolEvent(" + kind + " " + model + (kind == Kind.EVICT ? ", " + reason : "") + ")";
  }
}
