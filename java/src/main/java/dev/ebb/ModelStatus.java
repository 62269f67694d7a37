package dev.ebb;

/** One model of a {@link ModelPool} (ebb::ModelStatus). Sizes in bytes. */
public final class ModelStatus {
  /** ebb::PoolState; its name() is not the protocol's: see {@link #stateName()}. */
  public enum State { UNLOADED, LOADING, READY }

  private final String name;
  private final State state;
  private final String device;
  private final String reason;
  private final long[] v; // charge, load, transient, in_flight, pinned, loads

  ModelStatus(String name, int state, String device, String reason, long[] values) {
    this.name = name;
    this.state = State.values()[state];
    this.device = device;
    this.reason = reason;
    this.v = values;
  }

  public String name() {
    return name;
  }

  public State state() {
    return state;
  }

  /** "UNAVAILABLE", "LOADING" or "READY", as the server reports it. */
  public String stateName() {
    return state == State.UNLOADED ? "UNAVAILABLE" : state.name();
  }

  /** Where it runs (or would). */
  public String device() {
    return device;
  }

  /** Why it is not loaded, when known. */
  public String reason() {
    return reason;
  }

  /** max(load + transient, file size); the file size before a first load. */
  public long chargeBytes() {
    return v[0];
  }

  public long loadBytes() {
    return v[1];
  }

  public long transientBytes() {
    return v[2];
  }

  public int inFlight() {
    return (int) v[3];
  }

  public boolean pinned() {
    return v[4] != 0;
  }

  public long loads() {
    return v[5];
  }

  @Override
  public String toString() {
    return "ModelStatus(" + name + ", " + stateName() + ", charge=" + chargeBytes() + ")";
  }
}
