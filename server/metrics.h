// server/metrics.h — a small Prometheus metrics registry: counters, gauges, histograms and scrape-time collectors,
// rendered in the Prometheus text exposition format 0.0.4.
//
// A metric family is a name with a help text and a type; a family holds one series per distinct label set. Families
// are created on first use. Asking again for the same (name, labels) returns the same object; labels are matched as
// a set (order does not matter for identity), but a series is rendered with its labels in the order of the call that
// created it. Families are rendered sorted by name, the series of a family in creation order.
//
// Names must match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* without a leading "__", a label
// name may appear once per label set, and histograms may not use the label "le". A name is always used with the same
// type, help and (for histograms) buckets. Breaking any of these rules is a programming error: it fails an assert;
// with NDEBUG the call returns a working object that is never rendered (or, for a help or bucket mismatch, the
// family keeps what it was created with), so the exposition stays valid. The registry does not check that names of
// different families do not clash in the output (a gauge "x_count" next to a histogram "x"), nor that counter names
// end in "_total"; that is the caller's job. Label values are written as given and should be UTF-8.
//
// Thread safety: everything here may be called from any thread. Counter and Gauge are lock-free atomics; Histogram
// takes a per-object mutex; the registry takes its own mutex to create families and to render. Render may run
// concurrently with updates and sees each histogram as a consistent snapshot (its +Inf bucket equals its count).
// Collector callbacks are called by Render without any registry lock held (they may use the registry), possibly
// from several threads at once when Render is called concurrently.
//
// Ownership: the registry owns every metric it hands out; references stay valid, at the same address, until the
// registry is destroyed. Nothing here throws; an exception thrown by a collector callback is caught and that
// collector's samples are left out of that scrape.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ebb::server {

// Label name -> value, in rendering order.
using Labels = std::vector<std::pair<std::string, std::string>>;

// A monotonically increasing value, e.g. requests served.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // REQUIRES: by >= 0 (a negative or NaN increment fails an assert and is ignored under NDEBUG).
  void Increment(double by = 1);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down, e.g. requests in flight.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double d) { value_.fetch_add(d, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Observations counted into buckets with upper bounds `bounds` (an observation v falls into the first bucket with
// v <= bound; NaN and values above every bound only into +Inf), plus their sum and count.
class Histogram {
 public:
  struct Snapshot {
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf; cumulative.back() == count
    double sum = 0;
    uint64_t count = 0;
  };

  // REQUIRES: `bounds` strictly increasing and not NaN; a trailing +Inf is dropped (the +Inf bucket is implicit).
  explicit Histogram(std::vector<double> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(double v);
  Snapshot snapshot() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; bounds_.size() + 1 entries. Guarded by mu_.
  double sum_ = 0;                // Guarded by mu_.
  uint64_t count_ = 0;            // Guarded by mu_.
};

class MetricsRegistry {
 public:
  using CollectFn = std::function<std::vector<std::pair<Labels, double>>()>;

  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter& GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help, const std::vector<double>& buckets,
                          const Labels& labels = {});

  // A gauge family whose samples are produced at scrape time by `collect` (e.g. memory in use). REQUIRES: `name`
  // is not used by any other family or collector; the returned label sets are valid and distinct.
  void AddCollector(const std::string& name, const std::string& help, CollectFn collect);

  // Every family in the text exposition format 0.0.4: "# HELP name help" (help with \\ and newline escaped),
  // "# TYPE name counter|gauge|histogram", then `name{l1="v1",l2="v2"} value` per series (label values with \\, \"
  // and newline escaped; no braces without labels). A histogram series is written as cumulative name_bucket lines
  // with le="<bound>" and le="+Inf", then name_sum and name_count. Values as FormatMetricValue writes them.
  std::string Render() const;

 private:
  struct Family;
  struct Series;
  enum class Type { kCounter, kGauge, kHistogram };

  // The series of family `name` with `labels`, created if new; nullptr if the call breaks a rule (see top).
  // REQUIRES: mu_ held.
  Series* FindOrCreate(Type type, const std::string& name, const std::string& help, const Labels& labels,
                       const std::vector<double>* buckets);
  template <typename T>
  T& Detached(std::unique_ptr<T> metric);  // REQUIRES: mu_ held.
  static void AppendFamily(const std::string& name, const Family& family, std::string* out);
  static void AppendCollected(const std::string& name, const Family& family, std::string* out);

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Family>> families_;  // Sorted by name; never shrinks. Guarded by mu_.
  std::vector<std::shared_ptr<void>> detached_;              // Rule breakers' objects, never rendered. Guarded by mu_.
};

// Default latency buckets in seconds: 0.001 .. 60, in roughly x2.5 steps.
std::vector<double> LatencyBuckets();

// `v` as Prometheus writes sample values: integers (|v| < 1e15) without exponent, otherwise the shortest
// round-tripping form (Go's %g style, e.g. 0.25, 1e-05, 1.5e+20); "+Inf", "-Inf", "NaN". Exposed for tests.
std::string FormatMetricValue(double v);

}  // namespace ebb::server
