package dev.ebb;

/** One BFC arena as ONNX Runtime reports it (ebb::ArenaStats). Sizes in bytes. */
public final class ArenaStats {
  private final String name;
  private final long[] v; // reserved, in_use, peak_in_use, limit, regions, extensions, shrinks, allocations

  ArenaStats(String name, long[] values) {
    this.name = name;
    this.v = values;
  }

  /** "cpu:shared", "cpu:&lt;model&gt;", "gpu:N:&lt;model&gt;". */
  public String name() {
    return name;
  }

  /** Bytes held from the OS (ORT: TotalAllocated). */
  public long reserved() {
    return v[0];
  }

  public long inUse() {
    return v[1];
  }

  public long peakInUse() {
    return v[2];
  }

  /** The arena's cap. */
  public long limit() {
    return v[3];
  }

  public long regions() {
    return v[4];
  }

  public long extensions() {
    return v[5];
  }

  public long shrinks() {
    return v[6];
  }

  public long allocations() {
    return v[7];
  }

  @Override
  public String toString() {
    return "ArenaStats(" + name + ", reserved=" + reserved() + ", limit=" + limit() + ")";
  }
}
