package dev.ebb;

import java.util.Collections;
import java.util.List;
import java.util.Optional;

/**
 * What memory looks like at one moment (ebb::MemoryReading): every arena ebb knows of, the
 * process's RSS and its peak, and the whole reading as JSON. A plain value.
 */
public final class MemoryReading {
  private final long rssBytes;
  private final long peakRssBytes;
  private final List<ArenaStats> arenas;
  private final String json;

  MemoryReading(long rssBytes, long peakRssBytes, List<ArenaStats> arenas, String json) {
    this.rssBytes = rssBytes;
    this.peakRssBytes = peakRssBytes;
    this.arenas = Collections.unmodifiableList(arenas);
    this.json = json;
  }

  public long rssBytes() {
    return rssBytes;
  }

  public long peakRssBytes() {
    return peakRssBytes;
  }

  public List<ArenaStats> arenas() {
    return arenas;
  }

  /** The arena called `name` ("cpu:shared"), if there is one. */
  public Optional<ArenaStats> arena(String name) {
    return arenas.stream().filter(a -> a.name().equals(name)).findFirst();
  }

  /** Sum of reserved bytes over every arena. */
  public long totalReserved() {
    return arenas.stream().mapToLong(ArenaStats::reserved).sum();
  }

  /** {"rss_bytes":..,"peak_rss_bytes":..,"arenas":[...],"gpus":[...]} */
  public String json() {
    return json;
  }
}
