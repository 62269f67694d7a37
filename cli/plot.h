// cli/plot.h — a memory timeline drawn as a standalone SVG chart.
//
// TimelineSvg turns a list of memory samples (arena reserved, arena in use and
// process RSS over time) into an SVG 1.1 document: one line per series, a
// legend, labelled axis ticks (memory in MiB, time in ms, or in s for spans of
// 10 s and more), a title, and a dashed vertical marker with its label at each
// sample flagged as a release. It is plain text generation with no library or
// font dependency; any SVG viewer or browser shows it.
//
// Thread safety: a pure function of its arguments; call it from any thread.
// Ownership: the returned string belongs to the caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ebb {

// One moment of the timeline. Byte counts are drawn in MiB.
struct TimelineSample {
  double t_ms = 0;       // time of the sample, in milliseconds
  int64_t reserved = 0;  // bytes the arenas hold from the OS or driver
  int64_t in_use = 0;    // bytes of the arenas handed out to live tensors
  int64_t rss = 0;       // resident set size of the process
  std::string label;     // e.g. "run 3/16", "release"; the marker's text, and the points' tooltip
  bool release = false;  // draw a vertical marker (labelled `label`, or "release" when empty) here
};

// An SVG line chart of `samples`, in the order given: x = time, y = MiB, three
// series (arena reserved, arena in use, RSS) with a legend, axis ticks with
// labels, `title` on top, and a vertical marker + label at every sample with
// release = true. Samples whose time is not finite are left out. Text is XML
// escaped; labels and title are taken as UTF-8 (invalid bytes become '?').
// With no samples the chart has axes and a "no samples" note but no lines.
// The document starts with "<svg" and ends with "</svg>\n".
std::string TimelineSvg(const std::vector<TimelineSample>& samples, const std::string& title);

}  // namespace ebb
