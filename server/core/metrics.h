// server/core/metrics.h — the server's metrics, in the Prometheus text format.
//
// A thin facade over prometheus-cpp (Debian's prometheus-cpp-dev): families
// are created on first use by name, series by label set, and Render() writes
// the registry plus the scrape-time gauges (AddCollector: memory readings,
// model states) with prometheus-cpp's TextSerializer.
//
// Thread safety: all methods may be called concurrently; the metric objects
// handed out are themselves thread-safe and live as long as the registry.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <string_view>
#include <vector>

namespace ebb::server {

using Counter = prometheus::Counter;
using Gauge = prometheus::Gauge;
using Histogram = prometheus::Histogram;
using Labels = std::vector<std::pair<std::string, std::string>>;  // label name -> value

class MetricsRegistry {
 public:
  using CollectFn = std::function<std::vector<std::pair<Labels, double>>()>;

  MetricsRegistry();

  // The series of family `name` with `labels`, created on first use.
  // REQUIRES: a name is always used with the same type; names and label
  // names follow Prometheus' rules. Counters' names end in _total.
  Counter& GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help, const std::vector<double>& buckets,
                          const Labels& labels = {});

  // The same, looked up and updated under the registry's lock, so that a
  // concurrent RemoveSeries cannot free the series in between. Series of
  // things that can be forgotten (a model) are updated only through these.
  // `name` and `help` are views (string literals at every call): an update of a series already
  // made allocates nothing but its key's growth, once per thread.
  void Increment(std::string_view name, std::string_view help, const Labels& labels, double by = 1);
  void Set(std::string_view name, std::string_view help, const Labels& labels, double value);
  void Observe(std::string_view name, std::string_view help, const std::vector<double>& buckets,
               const Labels& labels, double value);

  // Drops every series, of every family, that has label `label` = `value`
  // (a model that is forgotten: ModelMesh ids come and go, and each would
  // otherwise stay in /metrics for good). References handed out by GetX for
  // those series are invalid afterwards.
  void RemoveSeries(const std::string& label, const std::string& value);

  // A gauge family whose samples are read at scrape time.
  void AddCollector(const std::string& name, const std::string& help, CollectFn collect);

  // The text exposition format 0.0.4, families sorted by name.
  std::string Render() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex mu_;
  std::map<std::string, prometheus::Family<Counter>*> counters_;      // guarded by mu_
  std::map<std::string, prometheus::Family<Gauge>*> gauges_;          // guarded by mu_
  std::map<std::string, prometheus::Family<Histogram>*> histograms_;  // guarded by mu_
  // Every series made, by family name and labels: how to remove it. Guarded by mu_.
  std::map<std::pair<std::string, std::map<std::string, std::string>>, std::function<void()>> series_;
  // The hot path of Increment/Set/Observe: a series already made, by family name and labels in
  // one string (CacheKey), so that an update costs one hash lookup, not a family lookup, a label
  // map and prometheus-cpp's own label hashing. Emptied by RemoveSeries. Guarded by mu_.
  std::unordered_map<std::string, void*> cache_;
  template <typename T, typename Make>
  T& CachedLocked(std::string_view name, const Labels& labels, Make make);
  struct Collector {
    std::string name, help;
    CollectFn collect;
  };
  std::vector<Collector> collectors_;  // guarded by mu_
};

// Latency buckets in seconds, 1 ms to 60 s.
const std::vector<double>& LatencyBuckets();

}  // namespace ebb::server
