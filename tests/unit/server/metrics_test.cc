// Tests for the metrics facade over prometheus-cpp (server/metrics.h).
#include "core/metrics.h"

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

bool Contains(const std::string& text, const std::string& line) { return text.find(line) != std::string::npos; }

TEST(MetricsTest, RendersFamiliesSortedWithTheirSeries) {
  MetricsRegistry registry;
  registry.GetGauge("ebb_b_bytes", "B.").Set(42);
  registry.GetCounter("ebb_a_total", "A.", {{"model", "m"}}).Increment(3);
  Histogram& h = registry.GetHistogram("ebb_c_seconds", "C.", {0.1, 1}, {{"model", "m"}});
  for (double v : {0.05, 0.5, 5.0}) h.Observe(v);
  const std::string text = registry.Render();
  EXPECT_TRUE(Contains(text, "# TYPE ebb_a_total counter\nebb_a_total{model=\"m\"} 3\n")) << text;
  EXPECT_TRUE(Contains(text, "ebb_b_bytes 42\n")) << text;
  EXPECT_TRUE(Contains(text, "ebb_c_seconds_bucket{model=\"m\",le=\"0.1\"} 1\n")) << text;
  EXPECT_TRUE(Contains(text, "ebb_c_seconds_bucket{model=\"m\",le=\"1\"} 2\n")) << text;
  EXPECT_TRUE(Contains(text, "ebb_c_seconds_bucket{model=\"m\",le=\"+Inf\"} 3\n")) << text;
  EXPECT_TRUE(Contains(text, "ebb_c_seconds_count{model=\"m\"} 3\n")) << text;
  EXPECT_LT(text.find("ebb_a_total"), text.find("ebb_b_bytes"));
  EXPECT_LT(text.find("ebb_b_bytes"), text.find("ebb_c_seconds"));
}

TEST(MetricsTest, SameNameAndLabelsGiveTheSameSeries) {
  MetricsRegistry registry;
  Counter& a = registry.GetCounter("ebb_x_total", "X.", {{"model", "a"}});
  EXPECT_EQ(&a, &registry.GetCounter("ebb_x_total", "X.", {{"model", "a"}}));
  EXPECT_NE(&a, &registry.GetCounter("ebb_x_total", "X.", {{"model", "b"}}));
  for (int i = 0; i < 1000; ++i) registry.GetCounter("ebb_x_total", "X.", {{"model", std::to_string(i)}});
  EXPECT_EQ(&a, &registry.GetCounter("ebb_x_total", "X.", {{"model", "a"}})) << "addresses are stable";
}

// A forgotten model's series go from every family, counters, gauges and histograms alike; the
// others stay, and a series made again afterwards starts from zero.
TEST(MetricsTest, RemoveSeriesDropsEverySeriesWithThatLabelValue) {
  MetricsRegistry registry;
  for (const char* model : {"gone", "kept"}) {
    registry.Increment("ebb_r_total", "R.", {{"model", model}, {"code", "ok"}}, 2);
    registry.Set("ebb_s_bytes", "S.", {{"model", model}}, 7);
    registry.Observe("ebb_t_seconds", "T.", {0.1, 1}, {{"model", model}}, 0.5);
  }
  registry.Increment("ebb_u_total", "U.", {});
  registry.RemoveSeries("model", "gone");
  const std::string text = registry.Render();
  EXPECT_FALSE(Contains(text, "\"gone\"")) << text;
  EXPECT_TRUE(Contains(text, "ebb_r_total{code=\"ok\",model=\"kept\"} 2\n")) << text;
  EXPECT_TRUE(Contains(text, "ebb_s_bytes{model=\"kept\"} 7\n")) << text;
  EXPECT_TRUE(Contains(text, "ebb_t_seconds_count{model=\"kept\"} 1\n")) << text;
  EXPECT_TRUE(Contains(text, "ebb_u_total 1\n")) << text;
  registry.Increment("ebb_r_total", "R.", {{"model", "gone"}, {"code", "ok"}});
  EXPECT_TRUE(Contains(registry.Render(), "ebb_r_total{code=\"ok\",model=\"gone\"} 1\n"));
}

TEST(MetricsTest, EscapesLabelValues) {
  MetricsRegistry registry;
  registry.GetCounter("ebb_y_total", "Y.", {{"model", "we\"ird\\na\nme"}}).Increment();
  EXPECT_TRUE(Contains(registry.Render(), R"(model="we\"ird\\na\nme")")) << registry.Render();
}

TEST(MetricsTest, ConcurrentUpdatesAreExact) {
  MetricsRegistry registry;
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  std::thread scraper([&] {
    while (!stop) (void)registry.Render();
  });
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        registry.GetCounter("ebb_z_total", "Z.").Increment();
        registry.GetHistogram("ebb_z_seconds", "Z.", LatencyBuckets()).Observe(0.01);
      }
    });
  }
  for (auto& t : threads) t.join();
  stop = true;
  scraper.join();
  EXPECT_EQ(registry.GetCounter("ebb_z_total", "Z.").Value(), 80000);
  EXPECT_TRUE(Contains(registry.Render(), "ebb_z_seconds_count 80000\n"));
}

TEST(MetricsTest, CollectorsRunAtScrapeTimeAndMayUseTheRegistry) {
  MetricsRegistry registry;
  int calls = 0;
  registry.AddCollector("ebb_memory_bytes", "Memory.", [&] {
    ++calls;
    registry.GetCounter("ebb_scrapes_total", "Scrapes.").Increment();
    return std::vector<std::pair<Labels, double>>{{{{"device", "cpu"}}, 1024.0 * calls}};
  });
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(Contains(registry.Render(), "ebb_memory_bytes{device=\"cpu\"} 1024\n"));
  EXPECT_TRUE(Contains(registry.Render(), "ebb_memory_bytes{device=\"cpu\"} 2048\n"));
  EXPECT_EQ(calls, 2);
}

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
