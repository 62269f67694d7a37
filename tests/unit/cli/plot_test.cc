// The memory timeline SVG: well-formed XML, one polyline per series, release
// markers exactly where asked, escaping, and degenerate inputs.
#include "plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ebb {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':'; }

// True when `text` at `at` starts a predefined or numeric XML entity.
bool IsEntity(const std::string& text, size_t at) {
  for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}) {
    if (text.compare(at, std::string(e).size(), e) == 0) return true;
  }
  return text.compare(at, 2, "&#") == 0 && text.find(';', at) != std::string::npos;
}

// A small XML well-formedness check, enough for what TimelineSvg writes:
// elements nest and close by name, there is one root, attributes are quoted,
// and every '&' starts an entity. Returns "" when well-formed, else the problem.
std::string XmlProblem(const std::string& xml) {
  std::vector<std::string> open;
  int roots = 0;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] == '&' && !IsEntity(xml, i)) return "bare & at " + std::to_string(i);
    if (xml[i] == '>') return "bare > in text at " + std::to_string(i);
    if (xml[i] != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(xml[i]))) return "text outside the root";
      ++i;
      continue;
    }
    if (xml.compare(i, 2, "</") == 0) {
      size_t end = i + 2;
      while (end < xml.size() && IsNameChar(xml[end])) ++end;
      const std::string name = xml.substr(i + 2, end - i - 2);
      if (open.empty() || open.back() != name) return "unexpected </" + name + ">";
      if (end >= xml.size() || xml[end] != '>') return "bad end tag </" + name;
      open.pop_back();
      i = end + 1;
      continue;
    }
    size_t at = i + 1;
    while (at < xml.size() && IsNameChar(xml[at])) ++at;
    const std::string name = xml.substr(i + 1, at - i - 1);
    if (name.empty()) return "bare < at " + std::to_string(i);
    if (open.empty() && ++roots > 1) return "second root <" + name + ">";
    for (;;) {  // attributes
      while (at < xml.size() && std::isspace(static_cast<unsigned char>(xml[at]))) ++at;
      if (at >= xml.size()) return "unterminated <" + name;
      if (xml.compare(at, 2, "/>") == 0) {
        at += 2;
        break;
      }
      if (xml[at] == '>') {
        open.push_back(name);
        ++at;
        break;
      }
      const size_t attr = at;
      while (at < xml.size() && IsNameChar(xml[at])) ++at;
      if (at == attr || at + 1 >= xml.size() || xml[at] != '=' || (xml[at + 1] != '"' && xml[at + 1] != '\'')) {
        return "bad attribute in <" + name + "> at " + std::to_string(attr);
      }
      const char quote = xml[at + 1];
      const size_t close = xml.find(quote, at + 2);
      if (close == std::string::npos) return "unterminated attribute in <" + name + ">";
      for (size_t k = at + 2; k < close; ++k) {
        if (xml[k] == '<' || (xml[k] == '&' && !IsEntity(xml, k))) return "bad character in attribute of <" + name;
      }
      at = close + 1;
    }
    i = at;
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return roots == 1 ? "" : "no root element";
}

void ExpectValidSvg(const std::string& svg) {
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u) << svg.substr(0, 40);
  EXPECT_EQ(svg.substr(svg.find_last_not_of('\n') - 5, 6), "</svg>");
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("version=\"1.1\""), std::string::npos);
  EXPECT_EQ(XmlProblem(svg), "");
  // No NaN or infinity ever reaches a coordinate.
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

std::vector<TimelineSample> Runs(int n, double step_ms = 25) {
  std::vector<TimelineSample> samples;
  for (int i = 0; i < n; ++i) {
    samples.push_back({i * step_ms, (100 + 10 * i) * kMiB, (40 + 5 * (i % 3)) * kMiB, (180 + 10 * i) * kMiB,
                       "run " + std::to_string(i + 1) + "/" + std::to_string(n)});
  }
  return samples;
}

// The points="..." lists of the polylines, in order.
std::vector<std::string> PolylinePoints(const std::string& svg) {
  std::vector<std::string> points;
  for (size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) {
    const size_t begin = svg.find("points=\"", at) + 8;
    points.push_back(svg.substr(begin, svg.find('"', begin) - begin));
  }
  return points;
}

TEST(TimelineSvgTest, IsWellFormedSvgWithThreeSeries) {
  const std::string svg = TimelineSvg(Runs(16), "convnet");
  ExpectValidSvg(svg);
  EXPECT_EQ(Count(svg, "<polyline"), 3u);
  for (const std::string& points : PolylinePoints(svg)) EXPECT_EQ(Count(points, ","), 16u) << points;
  for (const char* legend : {">arena reserved</text>", ">arena in use</text>", ">RSS</text>"}) {
    EXPECT_EQ(Count(svg, legend), 1u) << legend;
  }
  EXPECT_NE(svg.find(">convnet</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>convnet</title>"), std::string::npos);
}

TEST(TimelineSvgTest, AxesAreLabelledInMiBAndMs) {
  const std::string svg = TimelineSvg(Runs(16), "t");  // up to 330 MiB over 375 ms
  EXPECT_NE(svg.find(">memory (MiB)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">time (ms)</text>"), std::string::npos);
  for (const char* tick : {">0</text>", ">100</text>", ">200</text>", ">300</text>"}) {
    EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  }
}

TEST(TimelineSvgTest, LongTimelinesAreInSeconds) {
  const std::string svg = TimelineSvg(Runs(40, 1000), "t");  // 39 s
  ExpectValidSvg(svg);
  EXPECT_NE(svg.find(">time (s)</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">time (ms)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">40</text>"), std::string::npos);
}

TEST(TimelineSvgTest, TitleAndLabelsAreEscaped) {
  std::vector<TimelineSample> samples = Runs(3);
  samples[1].release = true;
  samples[1].label = "free <all> & \"more\"";
  const std::string svg = TimelineSvg(samples, "a & b <c> 'd'");
  ExpectValidSvg(svg);
  EXPECT_NE(svg.find("a &amp; b &lt;c&gt; &apos;d&apos;"), std::string::npos);
  EXPECT_NE(svg.find("free &lt;all&gt; &amp; &quot;more&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("<c>"), std::string::npos);
  EXPECT_EQ(svg.find("<all>"), std::string::npos);
}

TEST(TimelineSvgTest, BadBytesInTextStayWellFormed) {
  std::vector<TimelineSample> samples = Runs(2);
  samples[0].label = std::string("ctl\x01\x1f, bad \xff\xc0 utf8, good \xc3\xa9");
  samples[0].release = true;
  const std::string svg = TimelineSvg(samples, std::string("t\x02itle \xe2\x82 end"));
  ExpectValidSvg(svg);
  EXPECT_NE(svg.find("ctl, bad ?? utf8, good \xc3\xa9"), std::string::npos);
  EXPECT_NE(svg.find(">title ?? end</text>"), std::string::npos);
}

TEST(TimelineSvgTest, ReleaseMarkerExactlyAtReleaseSamples) {
  std::vector<TimelineSample> samples = Runs(10);
  std::string svg = TimelineSvg(samples, "none");
  EXPECT_EQ(Count(svg, "class=\"release\""), 0u);
  EXPECT_EQ(Count(svg, "class=\"legend-release\""), 0u);

  samples[4].release = true;
  samples[4].label = "shrink";
  svg = TimelineSvg(samples, "one");
  ExpectValidSvg(svg);
  EXPECT_EQ(Count(svg, "class=\"release\""), 1u);
  EXPECT_EQ(Count(svg, "class=\"legend-release\""), 1u);
  EXPECT_NE(svg.find(">shrink</text>"), std::string::npos);

  samples[7].release = true;  // no label: called "release"
  samples[7].label.clear();
  samples[9].release = true;
  samples[9].label = "end";
  svg = TimelineSvg(samples, "three");
  ExpectValidSvg(svg);
  EXPECT_EQ(Count(svg, "class=\"release\""), 3u);
  EXPECT_NE(svg.find(">end</text>"), std::string::npos);
  // The legend's entry and the unlabelled marker (drawn over its halo).
  EXPECT_EQ(Count(svg, ">release</text>"), 3u);
}

TEST(TimelineSvgTest, NoSamplesIsAnEmptyChart) {
  const std::string svg = TimelineSvg({}, "empty");
  ExpectValidSvg(svg);
  EXPECT_EQ(Count(svg, "<polyline"), 0u);
  EXPECT_EQ(Count(svg, "class=\"release\""), 0u);
  EXPECT_NE(svg.find(">no samples</text>"), std::string::npos);
}

TEST(TimelineSvgTest, OneSampleShowsAsPoints) {
  const std::string svg = TimelineSvg({{5, 3 * kMiB, kMiB, 50 * kMiB, "only", true}}, "one");
  ExpectValidSvg(svg);
  EXPECT_EQ(Count(svg, "<polyline"), 3u);
  EXPECT_EQ(Count(svg, "<circle"), 3u);
  EXPECT_EQ(Count(svg, "class=\"release\""), 1u);
}

TEST(TimelineSvgTest, FlatAndZeroDataDoNotDivideByZero) {
  std::vector<TimelineSample> samples(4);  // all at t = 0 with 0 bytes
  ExpectValidSvg(TimelineSvg(samples, "zeros"));
  for (TimelineSample& s : samples) s.t_ms = 12.5;
  samples[2].release = true;
  ExpectValidSvg(TimelineSvg(samples, "one moment"));
}

TEST(TimelineSvgTest, NonFiniteTimesAreLeftOut) {
  std::vector<TimelineSample> samples = Runs(4);
  samples[1].t_ms = std::numeric_limits<double>::quiet_NaN();
  samples[2].t_ms = std::numeric_limits<double>::infinity();
  samples[2].release = true;
  const std::string svg = TimelineSvg(samples, "t");
  ExpectValidSvg(svg);
  for (const std::string& points : PolylinePoints(svg)) EXPECT_EQ(Count(points, ","), 2u) << points;
  EXPECT_EQ(Count(svg, "class=\"release\""), 0u);

  std::vector<TimelineSample> none_finite = {{std::nan(""), kMiB, kMiB, kMiB, "", true}};
  const std::string empty = TimelineSvg(none_finite, "t");
  ExpectValidSvg(empty);
  EXPECT_EQ(Count(empty, "<polyline"), 0u);
}

TEST(TimelineSvgTest, ExtremeValuesStayFinite) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  ExpectValidSvg(TimelineSvg({{0, max, max, max, ""}, {1e6, 0, 0, 0, ""}}, "huge memory"));
  ExpectValidSvg(TimelineSvg({{-5, -kMiB, 0, kMiB, ""}, {5, kMiB, 0, 2 * kMiB, ""}}, "negative"));
  ExpectValidSvg(TimelineSvg({{-1e300, 0, 0, 0, ""}, {1e300, kMiB, kMiB, kMiB, ""}}, "huge time"));
  ExpectValidSvg(TimelineSvg({{0, 0, 0, 0, ""}, {1e-300, 1, 1, 1, ""}}, "tiny time"));
}

TEST(TimelineSvgTest, ManySamplesDropThePointMarkers) {
  const std::string svg = TimelineSvg(Runs(1000, 1), "dense");
  ExpectValidSvg(svg);
  EXPECT_EQ(Count(svg, "<circle"), 0u);
  for (const std::string& points : PolylinePoints(svg)) EXPECT_EQ(Count(points, ","), 1000u);
}

}  // namespace
}  // namespace ebb
