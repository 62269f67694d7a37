#include "metrics.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <variant>

namespace ebb::server {

struct MetricsRegistry::Series {
  Labels labels;  // as given by the call that created the series
  std::variant<std::unique_ptr<Counter>, std::unique_ptr<Gauge>, std::unique_ptr<Histogram>> metric;
};

struct MetricsRegistry::Family {
  Type type = Type::kGauge;
  std::string help;
  std::vector<double> buckets;                  // histograms only; normalized as Histogram keeps them
  CollectFn collect;                            // collectors only (type kGauge); set once, at creation
  std::vector<std::unique_ptr<Series>> series;  // in creation order
  std::map<Labels, Series*> by_labels;          // keyed by the labels sorted by name
};

namespace {

bool IsValidName(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) return false;
  }
  return true;
}

bool IsValidMetricName(const std::string& name) { return IsValidName(name, /*allow_colon=*/true); }

bool IsValidLabelName(const std::string& name) {
  return IsValidName(name, /*allow_colon=*/false) && name.compare(0, 2, "__") != 0;
}

Labels SortedByName(Labels labels) {
  std::sort(labels.begin(), labels.end());
  return labels;
}

// Label names valid and distinct; "le" is reserved for histogram buckets.
bool AreValidLabels(const Labels& labels, bool histogram) {
  for (const auto& [label, value] : labels) {
    if (!IsValidLabelName(label) || (histogram && label == "le")) return false;
  }
  const Labels sorted = SortedByName(labels);
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i - 1].first == sorted[i].first) return false;
  }
  return true;
}

// Bounds as Histogram keeps them: sorted, distinct, without NaN or a trailing +Inf.
std::vector<double> NormalizeBounds(std::vector<double> bounds) {
  if (!bounds.empty() && bounds.back() == INFINITY) bounds.pop_back();
  const bool valid = std::none_of(bounds.begin(), bounds.end(), [](double b) { return std::isnan(b); }) &&
                     std::adjacent_find(bounds.begin(), bounds.end(), std::greater_equal<>()) == bounds.end();
  if (valid) return bounds;
  assert(false && "histogram bounds must be strictly increasing and not NaN");
  std::erase_if(bounds, [](double b) { return std::isnan(b); });
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  if (!bounds.empty() && bounds.back() == INFINITY) bounds.pop_back();
  return bounds;
}

void AppendEscaped(const std::string& text, bool quote, std::string* out) {
  for (const char c : text) {
    if (c == '\\') {
      *out += "\\\\";
    } else if (c == '\n') {
      *out += "\\n";
    } else if (quote && c == '"') {
      *out += "\\\"";
    } else {
      *out += c;
    }
  }
}

void AppendHeader(const std::string& name, const std::string& help, const char* type, std::string* out) {
  *out += "# HELP " + name + " ";
  AppendEscaped(help, /*quote=*/false, out);
  *out += "\n# TYPE " + name + " " + type + "\n";
}

// One sample line: name+suffix, then the labels (and `le`, when not empty) in braces unless there are none.
void AppendSample(const std::string& name, const char* suffix, const Labels& labels, const std::string& le,
                  const std::string& value, std::string* out) {
  *out += name;
  *out += suffix;
  if (!labels.empty() || !le.empty()) {
    *out += '{';
    bool first = true;
    for (const auto& [label, label_value] : labels) {
      if (!first) *out += ',';
      first = false;
      *out += label + "=\"";
      AppendEscaped(label_value, /*quote=*/true, out);
      *out += '"';
    }
    if (!le.empty()) *out += std::string(first ? "" : ",") + "le=\"" + le + "\"";
    *out += '}';
  }
  *out += ' ' + value + '\n';
}

void AppendHistogram(const std::string& name, const Labels& labels, const Histogram& histogram, std::string* out) {
  const Histogram::Snapshot snapshot = histogram.snapshot();
  const std::vector<double>& bounds = histogram.bounds();
  for (size_t i = 0; i < bounds.size(); ++i) {
    AppendSample(name, "_bucket", labels, FormatMetricValue(bounds[i]), std::to_string(snapshot.cumulative[i]), out);
  }
  AppendSample(name, "_bucket", labels, "+Inf", std::to_string(snapshot.count), out);
  AppendSample(name, "_sum", labels, "", FormatMetricValue(snapshot.sum), out);
  AppendSample(name, "_count", labels, "", std::to_string(snapshot.count), out);
}

}  // namespace

// ---- Counter, Gauge, Histogram -----------------------------------------------------------------------------------

void Counter::Increment(double by) {
  if (!(by >= 0)) {
    assert(false && "Counter::Increment: the increment must be >= 0");
    return;
  }
  value_.fetch_add(by, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(NormalizeBounds(std::move(bounds))), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  // First bucket with v <= bound; NaN compares false with every bound and lands in +Inf, as in the Go client.
  const size_t bucket =
      std::isnan(v) ? bounds_.size() : std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[bucket];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot snapshot;
  std::lock_guard<std::mutex> lock(mu_);
  snapshot.cumulative.reserve(counts_.size());
  uint64_t total = 0;
  for (const uint64_t n : counts_) {
    total += n;
    snapshot.cumulative.push_back(total);
  }
  snapshot.sum = sum_;
  snapshot.count = count_;
  return snapshot;
}

// ---- MetricsRegistry ---------------------------------------------------------------------------------------------

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

template <typename T>
T& MetricsRegistry::Detached(std::unique_ptr<T> metric) {
  T& result = *metric;
  detached_.push_back(std::shared_ptr<T>(std::move(metric)));
  return result;
}

MetricsRegistry::Series* MetricsRegistry::FindOrCreate(Type type, const std::string& name, const std::string& help,
                                                       const Labels& labels, const std::vector<double>* buckets) {
  if (!IsValidMetricName(name) || !AreValidLabels(labels, type == Type::kHistogram)) {
    assert(false && "invalid metric name or label names");
    return nullptr;
  }
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second = std::make_unique<Family>();
    it->second->type = type;
    it->second->help = help;
    if (buckets != nullptr) it->second->buckets = NormalizeBounds(*buckets);
  }
  Family& family = *it->second;
  if (family.type != type || family.collect) {
    assert(false && "metric name reused with another type");
    return nullptr;
  }
  assert(family.help == help && "metric name reused with another help");
  assert((buckets == nullptr || NormalizeBounds(*buckets) == family.buckets) &&
         "histogram name reused with other buckets");

  Labels key = SortedByName(labels);
  if (auto found = family.by_labels.find(key); found != family.by_labels.end()) return found->second;
  auto series = std::make_unique<Series>();
  series->labels = labels;
  switch (type) {
    case Type::kCounter:
      series->metric = std::make_unique<Counter>();
      break;
    case Type::kGauge:
      series->metric = std::make_unique<Gauge>();
      break;
    case Type::kHistogram:
      series->metric = std::make_unique<Histogram>(family.buckets);
      break;
  }
  Series* result = series.get();
  family.series.push_back(std::move(series));
  family.by_labels.emplace(std::move(key), result);
  return result;
}

Counter& MetricsRegistry::GetCounter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Series* series = FindOrCreate(Type::kCounter, name, help, labels, nullptr);
  if (series == nullptr) return Detached(std::make_unique<Counter>());
  return *std::get<std::unique_ptr<Counter>>(series->metric);
}

Gauge& MetricsRegistry::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Series* series = FindOrCreate(Type::kGauge, name, help, labels, nullptr);
  if (series == nullptr) return Detached(std::make_unique<Gauge>());
  return *std::get<std::unique_ptr<Gauge>>(series->metric);
}

Histogram& MetricsRegistry::GetHistogram(const std::string& name, const std::string& help,
                                         const std::vector<double>& buckets, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Series* series = FindOrCreate(Type::kHistogram, name, help, labels, &buckets);
  if (series == nullptr) return Detached(std::make_unique<Histogram>(buckets));
  return *std::get<std::unique_ptr<Histogram>>(series->metric);
}

void MetricsRegistry::AddCollector(const std::string& name, const std::string& help, CollectFn collect) {
  if (!IsValidMetricName(name) || !collect) {
    assert(false && "invalid collector name or empty callback");
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = families_.try_emplace(name);
  if (!inserted) {
    assert(false && "collector name already in use");
    return;
  }
  it->second = std::make_unique<Family>();
  it->second->type = Type::kGauge;
  it->second->help = help;
  it->second->collect = std::move(collect);
}

void MetricsRegistry::AppendFamily(const std::string& name, const Family& family, std::string* out) {
  static constexpr const char* kTypeNames[] = {"counter", "gauge", "histogram"};
  AppendHeader(name, family.help, kTypeNames[static_cast<int>(family.type)], out);
  for (const auto& series : family.series) {
    if (const auto* counter = std::get_if<std::unique_ptr<Counter>>(&series->metric)) {
      AppendSample(name, "", series->labels, "", FormatMetricValue((*counter)->value()), out);
    } else if (const auto* gauge = std::get_if<std::unique_ptr<Gauge>>(&series->metric)) {
      AppendSample(name, "", series->labels, "", FormatMetricValue((*gauge)->value()), out);
    } else if (const auto* histogram = std::get_if<std::unique_ptr<Histogram>>(&series->metric)) {
      AppendHistogram(name, series->labels, **histogram, out);
    }
  }
}

void MetricsRegistry::AppendCollected(const std::string& name, const Family& family, std::string* out) {
  std::vector<std::pair<Labels, double>> samples;
  try {
    samples = family.collect();
  } catch (...) {
    samples.clear();  // a failing collector costs its own samples only
  }
  AppendHeader(name, family.help, "gauge", out);
  std::set<Labels> seen;
  for (const auto& [labels, value] : samples) {
    if (!AreValidLabels(labels, /*histogram=*/false) || !seen.insert(SortedByName(labels)).second) {
      assert(false && "collector returned invalid or duplicate labels");
      continue;
    }
    AppendSample(name, "", labels, "", FormatMetricValue(value), out);
  }
}

std::string MetricsRegistry::Render() const {
  // Plain families are rendered under the lock; collectors are called after it is released, so that they may use
  // the registry. Families are never removed and a family's name, help and callback never change once created.
  struct Part {
    const std::string* name;
    const Family* family;
    std::string text;
  };
  std::vector<Part> parts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    parts.reserve(families_.size());
    for (const auto& [name, family] : families_) {
      Part part{&name, family.get(), {}};
      if (!family->collect) AppendFamily(name, *family, &part.text);
      parts.push_back(std::move(part));
    }
  }
  std::string out;
  for (const Part& part : parts) {
    if (part.family->collect) {
      AppendCollected(*part.name, *part.family, &out);
    } else {
      out += part.text;
    }
  }
  return out;
}

// ---- Free functions ----------------------------------------------------------------------------------------------

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60};
}

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::trunc(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  // Shortest round-tripping digits; then Go's %g rule for shortest output: exponent form when the decimal exponent
  // is < -4 or >= 6 (to_chars writes the exponent as Go does, with a sign and at least two digits).
  char buffer[64];
  const auto scientific = std::to_chars(buffer, buffer + sizeof(buffer), v, std::chars_format::scientific);
  const std::string text(buffer, scientific.ptr);
  const int exponent = std::atoi(text.c_str() + text.find('e') + 1);
  if (exponent < -4 || exponent >= 6) return text;
  const auto fixed = std::to_chars(buffer, buffer + sizeof(buffer), v, std::chars_format::fixed);
  return std::string(buffer, fixed.ptr);
}

}  // namespace ebb::server
