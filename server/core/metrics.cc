#include "metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <charconv>
#include <sstream>

namespace ebb::server {
namespace {

prometheus::Labels ToMap(const Labels& labels) { return {labels.begin(), labels.end()}; }

// prometheus-cpp 1.0.1 writes HELP text as given, without the escapes the
// text format requires (\\ and \n), so they are applied here.
std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

template <typename T, typename Builder>
prometheus::Family<T>& FamilyOf(std::map<std::string, prometheus::Family<T>*>& families, Builder builder,
                                const std::string& name, const std::string& help, prometheus::Registry& registry) {
  auto& family = families[name];
  if (!family) family = &builder.Name(name).Help(EscapeHelp(help)).Register(registry);
  return *family;
}

// The series of `family` with `labels`, created on first use and remembered in `series` (how to
// remove it). REQUIRES: the registry's lock held.
template <typename T, typename... Args>
T& SeriesOf(prometheus::Family<T>& family, const std::string& name, const Labels& labels,
            std::map<std::pair<std::string, prometheus::Labels>, std::function<void()>>& series, Args&&... args) {
  prometheus::Labels map = ToMap(labels);
  T& metric = family.Add(map, std::forward<Args>(args)...);
  if (!labels.empty()) series.try_emplace({name, std::move(map)}, [&family, &metric] { family.Remove(&metric); });
  return metric;
}

// A family name and labels as one string, each label's name and value preceded by its length so
// that no two label sets share a key whatever bytes a value holds (a model's name comes from the
// client under ModelMesh). The labels' order is kept: a series reached in two orders is found
// twice, then updated as one (prometheus-cpp's Add finds it).
// Written into `key` (cleared first), whose capacity a caller keeps from one update to the next.
void CacheKey(std::string_view name, const Labels& labels, std::string* key) {
  key->assign(name);
  char digits[24];
  auto append_sized = [&](const std::string& text) {
    const auto end = std::to_chars(digits, digits + sizeof(digits), text.size()).ptr;
    key->append(digits, end);
    *key += ':';
    *key += text;
  };
  for (const auto& [k, v] : labels) {
    *key += '\0';
    append_sized(k);
    append_sized(v);
  }
}

}  // namespace

template <typename T, typename Make>
T& MetricsRegistry::CachedLocked(std::string_view name, const Labels& labels, Make make) {
  thread_local std::string key;  // its capacity stays: a lookup of a known series allocates nothing
  CacheKey(name, labels, &key);
  if (const auto it = cache_.find(key); it != cache_.end()) return *static_cast<T*>(it->second);
  T& metric = make();
  cache_.emplace(key, &metric);
  return metric;
}

MetricsRegistry::MetricsRegistry() : registry_(std::make_shared<prometheus::Registry>()) {}

Counter& MetricsRegistry::GetCounter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  return SeriesOf(FamilyOf(counters_, prometheus::BuildCounter(), name, help, *registry_), name, labels, series_);
}

Gauge& MetricsRegistry::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  return SeriesOf(FamilyOf(gauges_, prometheus::BuildGauge(), name, help, *registry_), name, labels, series_);
}

Histogram& MetricsRegistry::GetHistogram(const std::string& name, const std::string& help,
                                         const std::vector<double>& buckets, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  return SeriesOf(FamilyOf(histograms_, prometheus::BuildHistogram(), name, help, *registry_), name, labels, series_,
                  prometheus::Histogram::BucketBoundaries(buckets));
}

void MetricsRegistry::Increment(std::string_view name, std::string_view help, const Labels& labels, double by) {
  std::lock_guard<std::mutex> lock(mu_);
  CachedLocked<Counter>(name, labels, [&]() -> Counter& {
    const std::string n(name);
    return SeriesOf(FamilyOf(counters_, prometheus::BuildCounter(), n, std::string(help), *registry_), n, labels,
                    series_);
  }).Increment(by);
}

void MetricsRegistry::Set(std::string_view name, std::string_view help, const Labels& labels, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  CachedLocked<Gauge>(name, labels, [&]() -> Gauge& {
    const std::string n(name);
    return SeriesOf(FamilyOf(gauges_, prometheus::BuildGauge(), n, std::string(help), *registry_), n, labels,
                    series_);
  }).Set(value);
}

void MetricsRegistry::Observe(std::string_view name, std::string_view help, const std::vector<double>& buckets,
                              const Labels& labels, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  CachedLocked<Histogram>(name, labels, [&]() -> Histogram& {
    const std::string n(name);
    return SeriesOf(FamilyOf(histograms_, prometheus::BuildHistogram(), n, std::string(help), *registry_), n,
                    labels, series_, prometheus::Histogram::BucketBoundaries(buckets));
  }).Observe(value);
}

void MetricsRegistry::RemoveSeries(const std::string& label, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  cache_.clear();  // rare (a model forgotten): the series still there are found again on their next update
  std::erase_if(series_, [&](const auto& entry) {
    const prometheus::Labels& labels = entry.first.second;
    const auto it = labels.find(label);
    if (it == labels.end() || it->second != value) return false;
    entry.second();  // Family::Remove
    return true;
  });
}

void MetricsRegistry::AddCollector(const std::string& name, const std::string& help, CollectFn collect) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back({name, EscapeHelp(help), std::move(collect)});
}

std::string MetricsRegistry::Render() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<Collector> collectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    collectors = collectors_;
  }
  // Collectors run outside the lock: they may use the registry themselves.
  for (const Collector& c : collectors) {
    prometheus::MetricFamily family{c.name, c.help, prometheus::MetricType::Gauge, {}};
    for (const auto& [labels, value] : c.collect()) {
      prometheus::ClientMetric metric;
      for (const auto& [k, v] : labels) metric.label.push_back({k, v});
      metric.gauge.value = value;
      family.metric.push_back(std::move(metric));
    }
    families.push_back(std::move(family));
  }
  std::sort(families.begin(), families.end(),
            [](const prometheus::MetricFamily& a, const prometheus::MetricFamily& b) { return a.name < b.name; });
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> buckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                              0.25,  0.5,    1,     2.5,  5,     10,   25, 60};
  return buckets;
}

}  // namespace ebb::server
