// The memory timeline chart. See plot.h for the contract.
#include "plot.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

namespace ebb {
namespace {

// Canvas and plot area, in SVG user units (pixels).
constexpr double kWidth = 960;
constexpr double kHeight = 540;
constexpr double kPlotLeft = 84;
constexpr double kPlotRight = 932;
constexpr double kPlotTop = 84;
constexpr double kPlotBottom = 474;

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kSecondsFromMs = 10'000;  // time spans of at least this many ms are shown in s
constexpr int kTargetTicks = 6;
constexpr int kMaxTicks = 40;
constexpr size_t kMaxPointMarkers = 150;  // beyond this many samples, points would only add clutter

constexpr const char* kReleaseColor = "#B22222";
constexpr const char* kAxisColor = "#444444";
constexpr const char* kGridColor = "#E3E3E3";

struct Series {
  const char* name;
  const char* color;
  double width;
  const char* dash;  // stroke-dasharray, or nullptr for a solid line
  int64_t TimelineSample::*bytes;
};

// In legend and drawing order: the wide reserved line stays visible around the
// in-use line where they coincide; RSS is dashed so both show through it.
constexpr Series kSeries[] = {
    {"arena reserved", "#0072B2", 3.5, nullptr, &TimelineSample::reserved},
    {"arena in use", "#E69F00", 2, nullptr, &TimelineSample::in_use},
    {"RSS", "#009E73", 2, "7 4", &TimelineSample::rss},
};

// ---------------------------------------------------------------------------
// Text

// Length of the well-formed UTF-8 sequence at s[i] that XML allows, or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = byte(0);
  const size_t n = c < 0x80                 ? 1
                   : c >= 0xc2 && c <= 0xdf ? 2
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4
                                            : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(k) & 0xc0) != 0x80) return 0;
  }
  if (n == 3 && c == 0xe0 && byte(1) < 0xa0) return 0;                      // overlong
  if (n == 3 && c == 0xed && byte(1) >= 0xa0) return 0;                     // UTF-16 surrogate
  if (n == 3 && c == 0xef && byte(1) == 0xbf && byte(2) >= 0xbe) return 0;  // U+FFFE, U+FFFF
  if (n == 4 && c == 0xf0 && byte(1) < 0x90) return 0;                      // overlong
  if (n == 4 && c == 0xf4 && byte(1) >= 0x90) return 0;                     // above U+10FFFF
  return n;
}

// `text` as XML character data or attribute value: markup characters escaped,
// control characters dropped, invalid UTF-8 bytes replaced by '?'.
std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8Length(text, i);
    if (n == 0) {
      out += '?';
      ++i;
      continue;
    }
    const char c = text[i];
    if (n > 1) {
      out.append(text, i, n);
    } else if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '"') {
      out += "&quot;";
    } else if (c == '\'') {
      out += "&apos;";
    } else if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') {
      out += c;
    }
    i += n;
  }
  return out;
}

// `v` with `decimals` digits after the point; never "-0".
std::string Num(double v, int decimals) {
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v, std::chars_format::fixed, decimals);
  if (ec != std::errc()) return "0";
  std::string s(buffer, end);
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

std::string Px(double v) { return Num(v, 1); }

// ---------------------------------------------------------------------------
// Scales

// A linear axis over [lo, hi] with ticks every `step`, labelled with `decimals`.
struct Axis {
  double lo = 0;
  double hi = 1;
  double step = 0.2;
  int decimals = 1;
};

// An axis covering [lo, hi] with the 1, 2 or 5 times a power of ten step that
// gives closest to kTargetTicks intervals, its ends rounded out to whole steps.
Axis NiceAxis(double lo, double hi) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / kTargetTicks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / magnitude;
  const double step = (norm < 1.5 ? 1 : norm < 3.5 ? 2 : norm < 7.5 ? 5 : 10) * magnitude;
  if (!std::isfinite(step) || step <= 0) return Axis{};
  Axis axis;
  axis.lo = std::floor(lo / step + 1e-9) * step;
  axis.hi = std::ceil(hi / step - 1e-9) * step;
  axis.step = step;
  axis.decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  if (!std::isfinite(axis.lo) || !std::isfinite(axis.hi) || (axis.hi - axis.lo) / step > kMaxTicks) return Axis{};
  return axis;
}

std::vector<double> Ticks(const Axis& axis) {
  std::vector<double> ticks;
  for (int i = 0; i <= kMaxTicks; ++i) {
    const double v = axis.lo + i * axis.step;
    if (v > axis.hi + axis.step * 1e-6) break;
    ticks.push_back(v);
  }
  return ticks;
}

// Data-to-pixel mapping of the plot area. Time is in display units (ms or s).
struct Frame {
  Axis x;
  Axis y;
  double time_divisor = 1;  // ms per display unit
  const char* time_unit = "ms";

  double X(double t_ms) const {
    return kPlotLeft + (t_ms / time_divisor - x.lo) / (x.hi - x.lo) * (kPlotRight - kPlotLeft);
  }
  double Y(double mib) const { return kPlotBottom - (mib - y.lo) / (y.hi - y.lo) * (kPlotBottom - kPlotTop); }
};

double MiB(int64_t bytes) { return static_cast<double>(bytes) / kMiB; }

Frame MakeFrame(const std::vector<const TimelineSample*>& samples) {
  Frame frame;
  if (samples.empty()) {
    frame.x = NiceAxis(0, 1);
    frame.y = NiceAxis(0, 1);
    return frame;
  }
  double t_lo = samples.front()->t_ms, t_hi = t_lo, m_lo = 0, m_hi = 0;
  for (const TimelineSample* s : samples) {
    t_lo = std::min(t_lo, s->t_ms);
    t_hi = std::max(t_hi, s->t_ms);
    for (const Series& series : kSeries) {
      m_lo = std::min(m_lo, MiB(s->*series.bytes));
      m_hi = std::max(m_hi, MiB(s->*series.bytes));
    }
  }
  if (t_hi - t_lo >= kSecondsFromMs) {
    frame.time_divisor = 1000;
    frame.time_unit = "s";
  }
  double lo = t_lo / frame.time_divisor, hi = t_hi / frame.time_divisor;
  if (!(hi > lo)) {  // one moment: centre it
    lo -= 1;
    hi += 1;
  }
  frame.x = NiceAxis(lo, hi);
  // 5% headroom keeps the highest line off the top edge and its labels.
  frame.y = NiceAxis(m_lo, m_hi > m_lo ? m_hi + (m_hi - m_lo) * 0.05 : m_lo + 1);
  return frame;
}

// ---------------------------------------------------------------------------
// Drawing

std::string Text(double x, double y, const std::string& text, const std::string& attributes) {
  return "<text x=\"" + Px(x) + "\" y=\"" + Px(y) + "\"" + (attributes.empty() ? "" : " " + attributes) + ">" +
         Escape(text) + "</text>\n";
}

std::string Line(double x1, double y1, double x2, double y2, const std::string& attributes) {
  return "<line x1=\"" + Px(x1) + "\" y1=\"" + Px(y1) + "\" x2=\"" + Px(x2) + "\" y2=\"" + Px(y2) + "\" " + attributes +
         "/>\n";
}

std::string StrokeAttributes(const Series& series) {
  std::string s = "stroke=\"" + std::string(series.color) + "\" stroke-width=\"" + Num(series.width, 1) + "\"";
  if (series.dash) s += " stroke-dasharray=\"" + std::string(series.dash) + "\"";
  return s;
}

std::string Header(const std::string& title) {
  const std::string w = Num(kWidth, 0), h = Num(kHeight, 0);
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + w + "\" height=\"" + h +
                    "\" viewBox=\"0 0 " + w + " " + h + "\"";
  out += " font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\" fill=\"#222222\">\n";
  out += "<title>" + Escape(title) + "</title>\n";
  out += "<rect x=\"0\" y=\"0\" width=\"" + w + "\" height=\"" + h + "\" fill=\"#FFFFFF\"/>\n";
  return out + Text(kWidth / 2, 32, title, "text-anchor=\"middle\" font-size=\"18\" font-weight=\"bold\"");
}

std::string Legend(bool with_release) {
  std::string out = "<g class=\"legend\">\n";
  double x = kPlotLeft;
  const double y = 58;
  for (const Series& series : kSeries) {
    out += Line(x, y, x + 28, y, StrokeAttributes(series) + " fill=\"none\"");
    out += Text(x + 34, y + 4, series.name, "");
    x += 34 + 8.0 * std::string_view(series.name).size() + 26;
  }
  if (with_release) {
    out += Line(x + 14, y - 8, x + 14, y + 8,
                "class=\"legend-release\" stroke=\"" + std::string(kReleaseColor) +
                    "\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\"");
    out += Text(x + 24, y + 4, "release", "");
  }
  return out + "</g>\n";
}

std::string Axes(const Frame& frame) {
  std::string grid = "<g class=\"grid\" stroke=\"" + std::string(kGridColor) + "\" stroke-width=\"1\">\n";
  std::string labels = "<g class=\"ticks\" font-size=\"11\" fill=\"#444444\">\n";
  for (double v : Ticks(frame.y)) {
    const double y = frame.Y(v);
    grid += Line(kPlotLeft, y, kPlotRight, y, "");
    labels += Text(kPlotLeft - 8, y + 4, Num(v, frame.y.decimals), "text-anchor=\"end\"");
  }
  for (double v : Ticks(frame.x)) {
    const double x = frame.X(v * frame.time_divisor);
    grid += Line(x, kPlotTop, x, kPlotBottom, "");
    labels += Line(x, kPlotBottom, x, kPlotBottom + 5, "stroke=\"" + std::string(kAxisColor) + "\"");
    labels += Text(x, kPlotBottom + 19, Num(v, frame.x.decimals), "text-anchor=\"middle\"");
  }
  std::string out = grid + "</g>\n" + labels + "</g>\n";
  out += "<rect x=\"" + Px(kPlotLeft) + "\" y=\"" + Px(kPlotTop) + "\" width=\"" + Px(kPlotRight - kPlotLeft) +
         "\" height=\"" + Px(kPlotBottom - kPlotTop) + "\" fill=\"none\" stroke=\"" + kAxisColor + "\"/>\n";
  out += Text(kPlotLeft + (kPlotRight - kPlotLeft) / 2, kPlotBottom + 44, std::string("time (") + frame.time_unit + ")",
              "text-anchor=\"middle\" font-size=\"13\"");
  const double mid_y = kPlotTop + (kPlotBottom - kPlotTop) / 2;
  out += "<text transform=\"translate(24," + Px(mid_y) +
         ") rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">memory (MiB)</text>\n";
  return out;
}

std::string ReleaseMarkers(const Frame& frame, const std::vector<const TimelineSample*>& samples) {
  std::string out = "<g class=\"releases\" font-size=\"11\" fill=\"" + std::string(kReleaseColor) + "\">\n";
  for (const TimelineSample* s : samples) {
    if (!s->release) continue;
    const double x = frame.X(s->t_ms);
    out += Line(x, kPlotTop, x, kPlotBottom,
                "class=\"release\" stroke=\"" + std::string(kReleaseColor) +
                    "\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\"");
    // Written upwards along the line, ending just below the top edge, over a
    // white halo (the same text stroked) so lines crossing it stay legible. Left
    // of the line, unless that would run into the y tick labels.
    const double baseline = x - kPlotLeft < 16 ? x + 14 : x - 4;
    const std::string open =
        "<text transform=\"translate(" + Px(baseline) + "," + Px(kPlotTop + 6) + ") rotate(-90)\" text-anchor=\"end\"";
    const std::string label = Escape(s->label.empty() ? "release" : s->label) + "</text>\n";
    out += open + " fill=\"#FFFFFF\" stroke=\"#FFFFFF\" stroke-width=\"4\" stroke-linejoin=\"round\">" + label;
    out += open + ">" + label;
  }
  return out + "</g>\n";
}

std::string Polylines(const Frame& frame, const std::vector<const TimelineSample*>& samples) {
  std::string out = "<g class=\"series\" fill=\"none\" stroke-linejoin=\"round\" stroke-linecap=\"round\">\n";
  for (const Series& series : kSeries) {
    out += "<polyline " + StrokeAttributes(series) + " points=\"";
    for (size_t i = 0; i < samples.size(); ++i) {
      if (i) out += ' ';
      out += Px(frame.X(samples[i]->t_ms)) + "," + Px(frame.Y(MiB(samples[i]->*series.bytes)));
    }
    out += "\"/>\n";
  }
  return out + "</g>\n";
}

std::string Tooltip(const TimelineSample& s) {
  std::string text = s.label.empty() ? "" : s.label + ": ";
  text += Num(s.t_ms, 1) + " ms";
  for (const Series& series : kSeries) {
    text += ", " + std::string(series.name) + " " + Num(MiB(s.*series.bytes), 1) + " MiB";
  }
  return text;
}

// Dots at the samples, with a tooltip per sample; a lone sample shows only as these.
std::string Points(const Frame& frame, const std::vector<const TimelineSample*>& samples) {
  if (samples.size() > kMaxPointMarkers) return "";
  std::string out = "<g class=\"points\">\n";
  for (const TimelineSample* s : samples) {
    out += "<g><title>" + Escape(Tooltip(*s)) + "</title>";
    for (const Series& series : kSeries) {
      out += "<circle cx=\"" + Px(frame.X(s->t_ms)) + "\" cy=\"" + Px(frame.Y(MiB(s->*series.bytes))) +
             "\" r=\"3\" fill=\"" + series.color + "\"/>";
    }
    out += "</g>\n";
  }
  return out + "</g>\n";
}

std::string NoSamplesNote() {
  return Text(kPlotLeft + (kPlotRight - kPlotLeft) / 2, kPlotTop + (kPlotBottom - kPlotTop) / 2, "no samples",
              "text-anchor=\"middle\" font-size=\"16\" fill=\"#888888\"");
}

}  // namespace

std::string TimelineSvg(const std::vector<TimelineSample>& samples, const std::string& title) {
  std::vector<const TimelineSample*> drawn;
  bool any_release = false;
  for (const TimelineSample& s : samples) {
    if (!std::isfinite(s.t_ms)) continue;
    drawn.push_back(&s);
    any_release = any_release || s.release;
  }
  const Frame frame = MakeFrame(drawn);
  std::string svg = Header(title) + Legend(any_release) + Axes(frame);
  if (drawn.empty()) return svg + NoSamplesNote() + "</svg>\n";
  svg += ReleaseMarkers(frame, drawn) + Polylines(frame, drawn) + Points(frame, drawn);
  return svg + "</svg>\n";
}

}  // namespace ebb
