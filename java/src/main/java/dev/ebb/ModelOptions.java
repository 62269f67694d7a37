package dev.ebb;

/**
 * How a model is registered in a {@link ModelPool} (ebb::ModelSpec): its load options, whether it
 * is pinned (never evicted), and its keep-alive (null: the pool's). The setters return this.
 */
public final class ModelOptions {
  LoadOptions load = new LoadOptions();
  boolean pinned = false;
  Long keepAliveMs = null;

  public ModelOptions load(LoadOptions load) {
    this.load = load;
    return this;
  }

  public ModelOptions pinned(boolean pinned) {
    this.pinned = pinned;
    return this;
  }

  public ModelOptions keepAliveMs(long ms) {
    this.keepAliveMs = ms;
    return this;
  }
}
