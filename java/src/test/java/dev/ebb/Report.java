package dev.ebb;

/** JSON text of the scenario's figures, for the test's log and the benchmark. */
public final class Report {
  private Report() {}

  public static String figures(SessionScenario.Figures f) {
    int last = SessionScenario.SESSIONS - 1;
    StringBuilder readings = new StringBuilder();
    for (int i = 9; i <= last; i += 10) {
      readings.append(readings.length() == 0 ? "" : ", ").append(String.format(
          "{\"sessions\": %d, \"reserved_bytes\": %d, \"rss_growth_bytes\": %d}", i + 1, f.reserved[i],
          f.rss[i] - f.rssBefore));
    }
    return String.format(
        "{\"policy\": %s, \"sessions\": %d, \"cap_bytes\": %d, \"peak_reserved_bytes\": %d, "
            + "\"reserved_per_session_bytes\": %.0f, \"rss_per_session_bytes\": %.0f, \"readings\": [%s]}",
        quote(f.policy), SessionScenario.SESSIONS, f.cap, f.peakReserved, f.reservedPerSession(), f.rssPerSession(),
        readings);
  }

  public static String quote(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }
}
