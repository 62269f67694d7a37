package dev.ebb;

/**
 * Options of a {@link ModelPool} (ebb::PoolOptions), with its defaults: the CPU budget (0 bytes:
 * 75% of physical memory), the CUDA budget per device (0 bytes: 90% of the device), how long an
 * acquire waits for leases to come back (0: fail at once), and the default keep-alive (-1: never
 * unload; 0: unload after each lease). A plain value; the setters return this.
 */
public final class PoolOptions {
  long cpuBudgetBytes = 0;
  double cpuBudgetFraction = 0.75;
  long cudaBudgetBytes = 0;
  double cudaBudgetFraction = 0.9;
  long waitForCapacityMs = 0;
  long keepAliveMs = -1;

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
}
