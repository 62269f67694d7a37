package dev.ebb;

/**
 * One request's options for {@link ModelPool#acquire} (ebb::AcquireOptions): its keep-alive (null:
 * the model's), and whether a model that is not loaded may be loaded on demand (default true).
 */
public final class AcquireOptions {
  Long keepAliveMs = null;
  boolean loadOnDemand = true;

  public AcquireOptions keepAliveMs(long ms) {
    this.keepAliveMs = ms;
    return this;
  }

  public AcquireOptions loadOnDemand(boolean loadOnDemand) {
    this.loadOnDemand = loadOnDemand;
    return this;
  }
}
