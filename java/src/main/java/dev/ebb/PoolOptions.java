package dev.ebb;

/**
 * Options of a {@link ModelPool} (ebb::PoolOptions), with its defaults: the CPU budget (0 bytes:
 * 75% of physical memory), the CUDA budget per device (0 bytes: 90% of the device), how long an
 * acquire waits for leases to come back (0: fail at once), and the default keep-alive (-1: never
 * unload; 0: unload after each lease), and admission by memory (off). A plain value; the setters
 * return this.
 */
public final class PoolOptions {
  long cpuBudgetBytes = 0;
  double cpuBudgetFraction = 0.75;
  long cudaBudgetBytes = 0;
  double cudaBudgetFraction = 0.9;
  long waitForCapacityMs = 0;
  long keepAliveMs = -1;
  boolean memoryAdmission = false;
  long waitForMemoryMs = 0;

  public PoolOptions cpuBudget(long bytes) {
    this.cpuBudgetBytes = bytes;
    return this;
  }

  public PoolOptions cpuBudgetFraction(double fraction) {
    this.cpuBudgetFraction = fraction;
    return this;
  }

  public PoolOptions cudaBudget(long bytes) {
    this.cudaBudgetBytes = bytes;
    return this;
  }

  public PoolOptions cudaBudgetFraction(double fraction) {
    this.cudaBudgetFraction = fraction;
    return this;
  }

  public PoolOptions waitForCapacityMs(long ms) {
    this.waitForCapacityMs = ms;
    return this;
  }

  public PoolOptions keepAliveMs(long ms) {
    this.keepAliveMs = ms;
    return this;
  }

  /**
   * Admission by memory (off by default, as in the C API): a {@link ModelPool#runWithRecovery} given
   * {@link AcquireOptions#runElements} reserves its model's predicted need before its body runs and
   * waits, in arrival order, up to {@code waitForMemoryMs} (0: a minute) for the runs in flight to
   * return theirs; a run predicted larger than the device allows even alone fails at once with
   * {@link ResourceExhaustedException}. A charge is then what a model holds loaded.
   */
  public PoolOptions memoryAdmission(boolean on, long waitForMemoryMs) {
    this.memoryAdmission = on;
    this.waitForMemoryMs = waitForMemoryMs;
    return this;
  }
}
