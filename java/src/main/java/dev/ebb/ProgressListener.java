package dev.ebb;

/** Progress of an operation, called on the thread running it after every run. */
@FunctionalInterface
public interface ProgressListener {
  /**
   * @param done runs finished
   * @param total runs planned (0 when not planned)
   * @return false to cancel: the operation stops before its next run with {@link CancelledException}
   */
  boolean onProgress(int done, int total);
}
