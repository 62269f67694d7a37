package dev.ebb;

/**
 * How {@link Runtime#runTiled} cuts images (ebb::TileOptions): tiles of `tile` pixels, each core
 * with `overlap` pixels of context, `scale` the output/input ratio (0: the model's metadata
 * ebb.scale, else measured on the first run), `tilesPerRun` tiles stacked into one run.
 */
public final class TileOptions {
  long tile = 128;
  long overlap = 8;
  long scale = 0;
  int tilesPerRun = 1;

  public TileOptions tile(long tile) {
    this.tile = tile;
    return this;
  }

  public TileOptions overlap(long overlap) {
    this.overlap = overlap;
    return this;
  }

  public TileOptions scale(long scale) {
    this.scale = scale;
    return this;
  }

  public TileOptions tilesPerRun(int tilesPerRun) {
    this.tilesPerRun = tilesPerRun;
    return this;
  }
}
