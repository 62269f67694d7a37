// Tests for the Prometheus metrics registry (server/metrics.h).
#include "metrics.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ebb::server {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(MetricsTest, FormatsValuesAsPrometheusDoes) {
  EXPECT_EQ("0", FormatMetricValue(0));
  EXPECT_EQ("1", FormatMetricValue(1));
  EXPECT_EQ("-3", FormatMetricValue(-3));
  EXPECT_EQ("1500000000", FormatMetricValue(1.5e9));
  EXPECT_EQ("999999999999999", FormatMetricValue(999999999999999.0));
  EXPECT_EQ("1e+15", FormatMetricValue(1e15));
  EXPECT_EQ("1.5e+20", FormatMetricValue(1.5e20));
  EXPECT_EQ("0.25", FormatMetricValue(0.25));
  EXPECT_EQ("0.001", FormatMetricValue(0.001));
  EXPECT_EQ("0.0001", FormatMetricValue(0.0001));
  EXPECT_EQ("1e-05", FormatMetricValue(0.00001));
  EXPECT_EQ("-2.5", FormatMetricValue(-2.5));
  EXPECT_EQ("123456.5", FormatMetricValue(123456.5));
  EXPECT_EQ("1.2345675e+06", FormatMetricValue(1234567.5));
  EXPECT_EQ("0.30000000000000004", FormatMetricValue(0.1 + 0.2));
  EXPECT_EQ("+Inf", FormatMetricValue(kInf));
  EXPECT_EQ("-Inf", FormatMetricValue(-kInf));
  EXPECT_EQ("NaN", FormatMetricValue(kNaN));
}

TEST(MetricsTest, RendersExactText) {
  MetricsRegistry registry;
  registry.GetCounter("ebb_requests_total", "Requests served.", {{"model", "upscale"}, {"code", "200"}}).Increment(3);
  registry.GetCounter("ebb_requests_total", "Requests served.", {{"model", "upscale"}, {"code", "500"}}).Increment();
  registry.GetGauge("ebb_inflight_requests", "Requests in flight.").Set(2);
  Histogram& latency =
      registry.GetHistogram("ebb_request_duration_seconds", "Request latency.", {0.1, 0.5, 1}, {{"model", "upscale"}});
  for (double v : {0.0625, 0.5, 0.75, 4.0}) latency.Observe(v);
  registry.AddCollector("ebb_memory_bytes", "Memory in use.", [] {
    return std::vector<std::pair<Labels, double>>{{{{"device", "cpu"}}, 1024}, {{{"device", "cuda:0"}}, 1.5e9}};
  });

  EXPECT_EQ(
      "# HELP ebb_inflight_requests Requests in flight.\n"
      "# TYPE ebb_inflight_requests gauge\n"
      "ebb_inflight_requests 2\n"
      "# HELP ebb_memory_bytes Memory in use.\n"
      "# TYPE ebb_memory_bytes gauge\n"
      "ebb_memory_bytes{device=\"cpu\"} 1024\n"
      "ebb_memory_bytes{device=\"cuda:0\"} 1500000000\n"
      "# HELP ebb_request_duration_seconds Request latency.\n"
      "# TYPE ebb_request_duration_seconds histogram\n"
      "ebb_request_duration_seconds_bucket{model=\"upscale\",le=\"0.1\"} 1\n"
      "ebb_request_duration_seconds_bucket{model=\"upscale\",le=\"0.5\"} 2\n"
      "ebb_request_duration_seconds_bucket{model=\"upscale\",le=\"1\"} 3\n"
      "ebb_request_duration_seconds_bucket{model=\"upscale\",le=\"+Inf\"} 4\n"
      "ebb_request_duration_seconds_sum{model=\"upscale\"} 5.3125\n"
      "ebb_request_duration_seconds_count{model=\"upscale\"} 4\n"
      "# HELP ebb_requests_total Requests served.\n"
      "# TYPE ebb_requests_total counter\n"
      "ebb_requests_total{model=\"upscale\",code=\"200\"} 3\n"
      "ebb_requests_total{model=\"upscale\",code=\"500\"} 1\n",
      registry.Render());
}

TEST(MetricsTest, EmptyRegistryRendersNothing) { EXPECT_EQ("", MetricsRegistry().Render()); }

TEST(MetricsTest, HistogramWithoutLabelsOrBuckets) {
  MetricsRegistry registry;
  Histogram& plain = registry.GetHistogram("plain_seconds", "h", {});
  plain.Observe(3);
  Histogram& trailing_inf = registry.GetHistogram("trailing_seconds", "h", {1, kInf});
  trailing_inf.Observe(kNaN);  // NaN counts into +Inf only, as in the Go client
  EXPECT_EQ(std::vector<double>{1}, trailing_inf.bounds());
  EXPECT_EQ(
      "# HELP plain_seconds h\n"
      "# TYPE plain_seconds histogram\n"
      "plain_seconds_bucket{le=\"+Inf\"} 1\n"
      "plain_seconds_sum 3\n"
      "plain_seconds_count 1\n"
      "# HELP trailing_seconds h\n"
      "# TYPE trailing_seconds histogram\n"
      "trailing_seconds_bucket{le=\"1\"} 0\n"
      "trailing_seconds_bucket{le=\"+Inf\"} 1\n"
      "trailing_seconds_sum NaN\n"
      "trailing_seconds_count 1\n",
      registry.Render());
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndInclusive) {
  Histogram histogram({1, 2, 4});
  for (double v : {-5.0, 1.0, 1.5, 2.0, 4.0, 4.5, kInf}) histogram.Observe(v);
  const Histogram::Snapshot snapshot = histogram.snapshot();
  EXPECT_EQ((std::vector<uint64_t>{2, 4, 5, 7}), snapshot.cumulative);
  EXPECT_EQ(7u, snapshot.count);
  EXPECT_EQ(kInf, snapshot.sum);
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry;
  registry.GetGauge("escaped", "Back\\slash \"quoted\"\nsecond line", {{"path", "a\\b\"c\nd"}, {"utf8", "h\xc3\xa9"}})
      .Set(-0.5);
  EXPECT_EQ(
      "# HELP escaped Back\\\\slash \"quoted\"\\nsecond line\n"
      "# TYPE escaped gauge\n"
      "escaped{path=\"a\\\\b\\\"c\\nd\",utf8=\"h\xc3\xa9\"} -0.5\n",
      registry.Render());
}

TEST(MetricsTest, SameLabelsReturnSameObject) {
  MetricsRegistry registry;
  Counter& a = registry.GetCounter("hits_total", "h", {{"x", "1"}, {"y", "2"}});
  Counter& reordered = registry.GetCounter("hits_total", "h", {{"y", "2"}, {"x", "1"}});
  Counter& other = registry.GetCounter("hits_total", "h", {{"x", "1"}, {"y", "3"}});
  Counter& unlabelled = registry.GetCounter("hits_total", "h");
  EXPECT_EQ(&a, &reordered);
  EXPECT_NE(&a, &other);
  EXPECT_NE(&a, &unlabelled);
  EXPECT_EQ(&unlabelled, &registry.GetCounter("hits_total", "h", {}));
  EXPECT_EQ(&registry.GetGauge("g", "h"), &registry.GetGauge("g", "h"));
  EXPECT_EQ(&registry.GetHistogram("h_seconds", "h", {1}), &registry.GetHistogram("h_seconds", "h", {1}));

  // Addresses stay put while many more series are created.
  for (int i = 0; i < 1000; ++i) registry.GetCounter("hits_total", "h", {{"x", std::to_string(i)}});
  a.Increment(2);
  EXPECT_EQ(&a, &registry.GetCounter("hits_total", "h", {{"x", "1"}, {"y", "2"}}));
  EXPECT_EQ(2, a.value());
  EXPECT_EQ(0, other.value());
  // Rendered in creation order, with the labels as first given.
  const std::string text = registry.Render();
  EXPECT_LT(text.find("hits_total{x=\"1\",y=\"2\"} 2\n"), text.find("hits_total{x=\"1\",y=\"3\"} 0\n"));
  EXPECT_LT(text.find("hits_total{x=\"1\",y=\"3\"} 0\n"), text.find("hits_total 0\n"));
  EXPECT_LT(text.find("hits_total 0\n"), text.find("hits_total{x=\"0\"} 0\n"));
}

// The value of the sample line that starts with `series` in `text` ("" if there is none).
std::string SampleValue(const std::string& text, const std::string& series) {
  const size_t start = text.find("\n" + series + " ");
  if (start == std::string::npos) return "";
  const size_t value = start + series.size() + 2;
  return text.substr(value, text.find('\n', value) - value);
}

TEST(MetricsTest, ConcurrentUpdatesAreExact) {
  constexpr int kThreads = 8;
  constexpr int kIterations = 10000;
  MetricsRegistry registry;
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) {
      const std::string text = registry.Render();
      EXPECT_TRUE(text.empty() || text.rfind("# HELP ", 0) == 0) << text;
      // Each histogram is a consistent snapshot: its +Inf bucket equals its count.
      const std::string inf = SampleValue(text, "work_seconds_bucket{le=\"+Inf\"}");
      EXPECT_EQ(inf, SampleValue(text, "work_seconds_count")) << text;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&registry, t] {
      Counter& counter = registry.GetCounter("work_total", "Work done.", {{"kind", "job"}});
      Gauge& gauge = registry.GetGauge("work_in_progress", "Work in progress.");
      Histogram& histogram = registry.GetHistogram("work_seconds", "Work latency.", LatencyBuckets());
      for (int i = 0; i < kIterations; ++i) {
        counter.Increment();
        gauge.Add(1);
        histogram.Observe(0.001 * (i % 100));
        registry.GetCounter("per_thread_total", "Per thread.", {{"thread", std::to_string(t)}}).Increment();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  done = true;
  scraper.join();

  EXPECT_EQ(kThreads * kIterations, registry.GetCounter("work_total", "Work done.", {{"kind", "job"}}).value());
  EXPECT_EQ(kThreads * kIterations, registry.GetGauge("work_in_progress", "Work in progress.").value());
  const Histogram::Snapshot snapshot =
      registry.GetHistogram("work_seconds", "Work latency.", LatencyBuckets()).snapshot();
  EXPECT_EQ(uint64_t{kThreads * kIterations}, snapshot.count);
  EXPECT_EQ(snapshot.count, snapshot.cumulative.back());
  EXPECT_EQ(uint64_t{kThreads * kIterations / 50}, snapshot.cumulative[0]);  // 0 and 0.001: 2 in every 100
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(kIterations,
              registry.GetCounter("per_thread_total", "Per thread.", {{"thread", std::to_string(t)}}).value());
  }
}

TEST(MetricsTest, CollectorsRunAtScrapeTime) {
  MetricsRegistry registry;
  double memory = 1;
  registry.AddCollector("memory_bytes", "Memory.", [&memory] {
    return std::vector<std::pair<Labels, double>>{{{}, memory}};
  });
  // A collector may use the registry: Render holds no lock while calling it.
  registry.AddCollector("reentrant", "Reads a counter.", [&registry] {
    return std::vector<std::pair<Labels, double>>{{{}, registry.GetCounter("seen_total", "Seen.").value()}};
  });
  registry.AddCollector("failing", "Throws.",
                        []() -> std::vector<std::pair<Labels, double>> { throw std::runtime_error("no"); });
  EXPECT_NE(std::string::npos, registry.Render().find("\nmemory_bytes 1\n"));
  memory = 2.5;
  registry.GetCounter("seen_total", "Seen.").Increment(7);
  const std::string text = registry.Render();
  EXPECT_NE(std::string::npos, text.find("\nmemory_bytes 2.5\n"));
  EXPECT_NE(std::string::npos, text.find("\nreentrant 7\n"));
  EXPECT_NE(std::string::npos, text.find("# TYPE failing gauge\n# HELP memory_bytes"));
}

TEST(MetricsTest, LatencyBucketsSpanMillisecondToMinute) {
  const std::vector<double> buckets = LatencyBuckets();
  ASSERT_GE(buckets.size(), 10u);
  EXPECT_EQ(0.001, buckets.front());
  EXPECT_EQ(60, buckets.back());
  for (size_t i = 1; i < buckets.size(); ++i) {
    EXPECT_GT(buckets[i], buckets[i - 1]);
    EXPECT_LE(buckets[i] / buckets[i - 1], 2.5 + 1e-9);
  }
}

// Rule breakers fail an assert; under NDEBUG they get a working object that is never rendered.
TEST(MetricsDeathTest, RejectsInvalidNames) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  MetricsRegistry registry;
  EXPECT_DEBUG_DEATH(registry.GetCounter("1bad_total", "h").Increment(), "invalid metric name");
  EXPECT_DEBUG_DEATH(registry.GetCounter("bad-name_total", "h").Increment(), "invalid metric name");
  EXPECT_DEBUG_DEATH(registry.GetGauge("g", "h", {{"bad-label", "v"}}).Set(1), "invalid metric name");
  EXPECT_DEBUG_DEATH(registry.GetGauge("g", "h", {{"__reserved", "v"}}).Set(1), "invalid metric name");
  EXPECT_DEBUG_DEATH(registry.GetGauge("g", "h", {{"a", "1"}, {"a", "2"}}).Set(1), "invalid metric name");
  EXPECT_DEBUG_DEATH(registry.GetHistogram("h_seconds", "h", {1}, {{"le", "1"}}).Observe(1), "invalid metric name");
  EXPECT_DEBUG_DEATH(Histogram({2, 1}), "strictly increasing");
  EXPECT_DEBUG_DEATH(Histogram({1, kNaN}), "strictly increasing");
  EXPECT_EQ("", registry.Render());

  Counter counter;
  EXPECT_DEBUG_DEATH(counter.Increment(-1), "must be >= 0");
  EXPECT_DEBUG_DEATH(counter.Increment(kNaN), "must be >= 0");
  EXPECT_EQ(0, counter.value());

  registry.GetGauge("taken", "h").Set(1);
  EXPECT_DEBUG_DEATH(registry.GetCounter("taken", "h").Increment(5), "another type");
  EXPECT_DEBUG_DEATH(registry.AddCollector("taken", "h", [] { return std::vector<std::pair<Labels, double>>{}; }),
                     "already in use");
  EXPECT_EQ("# HELP taken h\n# TYPE taken gauge\ntaken 1\n", registry.Render());
  // Colons are fine in metric names (recording rules use them), and so is a leading underscore in label names.
  registry.GetGauge("ns:taken", "h", {{"_x", "1"}}).Set(1);
  EXPECT_NE(std::string::npos, registry.Render().find("ns:taken{_x=\"1\"} 1\n"));
}

// ---- Validation by the real Prometheus parser ----------------------------------------------------------------------

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

// Runs `command` through the shell with `input` on stdin; returns its exit code and stdout+stderr.
CommandResult RunWithInput(const std::string& command, const std::string& input) {
  const std::string path = testing::TempDir() + "metrics_test_input_" + std::to_string(::getpid()) + ".txt";
  {
    std::ofstream file(path, std::ios::binary);
    file << input;
  }
  CommandResult result;
  FILE* pipe = ::popen((command + " < '" + path + "' 2>&1").c_str(), "r");
  if (pipe != nullptr) {
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
    const int status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::remove(path.c_str());
  return result;
}

bool HavePromtool() { return std::system("command -v promtool > /dev/null 2>&1") == 0; }

TEST(MetricsTest, PromtoolAcceptsRenderedText) {
  if (!HavePromtool()) GTEST_SKIP() << "promtool is not on PATH";
  MetricsRegistry registry;
  registry.GetCounter("ebb_requests_total", "Requests served.", {{"model", "upscale"}, {"code", "200"}}).Increment(3);
  registry.GetCounter("ebb_requests_total", "Requests served.", {{"model", "we\"ird\\na\nme"}, {"code", "500"}})
      .Increment(0.5);
  registry.GetCounter("ebb_errors_total", "Errors \"seen\",\nby kind \\ cause.").Increment();
  registry.GetGauge("ebb_inflight_requests", "Requests in flight.").Set(2);
  registry.GetGauge("ebb_temperature_celsius", "Odd values.", {{"which", "inf"}}).Set(kInf);
  registry.GetGauge("ebb_temperature_celsius", "Odd values.", {{"which", "-inf"}}).Set(-kInf);
  registry.GetGauge("ebb_temperature_celsius", "Odd values.", {{"which", "nan"}}).Set(kNaN);
  registry.GetGauge("ebb_temperature_celsius", "Odd values.", {{"which", "tiny"}}).Set(1e-300);
  registry.GetGauge("ebb_temperature_celsius", "Odd values.", {{"which", "huge"}}).Set(-1.5e300);
  Histogram& latency =
      registry.GetHistogram("ebb_request_duration_seconds", "Request latency.", LatencyBuckets(), {{"model", "a"}});
  for (double v : {0.0004, 0.003, 0.2, 7.0, 100.0}) latency.Observe(v);
  registry.GetHistogram("ebb_request_duration_seconds", "Request latency.", LatencyBuckets(), {{"model", "b"}});
  registry.GetHistogram("ebb_tiny_seconds", "Tiny buckets.", {1e-7, 0.00001, 0.0001}).Observe(5e-6);
  registry.AddCollector("ebb_memory_bytes", "Memory in use.", [] {
    return std::vector<std::pair<Labels, double>>{{{{"device", "cpu"}}, 1024}, {{{"device", "cuda:0"}}, 1.5e9}};
  });
  registry.AddCollector("ebb_empty_bytes", "A collector with nothing to say.",
                        [] { return std::vector<std::pair<Labels, double>>{}; });
  const std::string text = registry.Render();

  const CommandResult result = RunWithInput("promtool check metrics", text);
  EXPECT_EQ(0, result.exit_code) << result.output << "\n--- input ---\n" << text;
  EXPECT_EQ("", result.output) << "--- input ---\n" << text;

  // The check has teeth: a broken exposition is refused.
  const CommandResult broken = RunWithInput("promtool check metrics", "# TYPE x_total counter\nx_total{a=\"1} 1\n");
  EXPECT_NE(0, broken.exit_code) << broken.output;
}

}  // namespace
}  // namespace ebb::server
