package dev.ebb;

/**
 * One request's options for {@link ModelPool#acquire} (ebb::AcquireOptions): its keep-alive (null:
 * the model's), whether a model that is not loaded may be loaded on demand (default true), and a
 * run's input size for admission by memory.
 */
public final class AcquireOptions {
  Long keepAliveMs = null;
  boolean loadOnDemand = true;
  long runElements = -1;

  public AcquireOptions keepAliveMs(long ms) {
    this.keepAliveMs = ms;
    return this;
  }

  public AcquireOptions loadOnDemand(boolean loadOnDemand) {
    this.loadOnDemand = loadOnDemand;
    return this;
  }

  /**
   * The elements of the run's inputs, all together (for {@link ModelPool#runWithRecovery} with
   * admission by memory on, {@link PoolOptions#memoryAdmission}): its predicted need is reserved
   * before the body runs. Ignored by {@link ModelPool#acquire}.
   */
  public AcquireOptions runElements(long elements) {
    if (elements < 0) throw new IllegalArgumentException("runElements " + elements + " < 0");
    this.runElements = elements;
    return this;
  }
}
