#include "ebb/run_need.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ebb {
namespace {

int64_t AtLeastOne(int64_t elements) { return std::max<int64_t>(elements, 1); }

// bytes * to / from, rounded up, saturating at the largest int64 (long double: 64 bits of
// mantissa, exact for any byte count a machine holds).
int64_t Scaled(int64_t bytes, int64_t to, int64_t from) {
  const long double scaled = std::ceil(static_cast<long double>(bytes) * to / from);
  if (scaled >= static_cast<long double>(std::numeric_limits<int64_t>::max())) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(scaled);
}

auto BySize(int64_t elements) {
  return [elements](const NeedPoint& p) { return p.input_elements >= elements; };
}

}  // namespace

std::optional<int64_t> RunNeed::Predict(int64_t input_elements) const {
  if (points_.empty()) return std::nullopt;
  const int64_t x = AtLeastOne(input_elements);
  const NeedPoint& last = points_.back();
  int64_t upper_bound = 0;
  if (x >= last.input_elements) {
    upper_bound = Scaled(last.bytes, x, last.input_elements);
  } else {
    auto upper = std::find_if(points_.begin(), points_.end(), BySize(x));
    upper_bound = upper == points_.begin() || upper->input_elements == x ? upper->bytes
                                                                          : std::max(upper->bytes, std::prev(upper)->bytes);
  }
  // Never below the lower bound: measurements that are not monotone (noise), or a line that rises
  // faster than the proportion (a larger need per element at the larger size), raise it.
  return std::max(upper_bound, AtLeast(x));
}

int64_t RunNeed::AtLeast(int64_t input_elements) const {
  const int64_t x = AtLeastOne(input_elements);
  int64_t bound = 0;
  for (const NeedPoint& p : points_) {
    if (p.input_elements <= x) bound = std::max(bound, p.bytes);  // never less for a larger input
  }
  if (points_.size() < 2 || x <= points_.back().input_elements) return bound;
  // Beyond the largest size: along the line through the two largest, when it rises.
  const NeedPoint& last = points_.back();
  const NeedPoint& before = points_[points_.size() - 2];
  if (last.bytes <= before.bytes) return bound;
  const long double slope = static_cast<long double>(last.bytes - before.bytes) /
                            static_cast<long double>(last.input_elements - before.input_elements);
  const long double line = static_cast<long double>(last.bytes) + slope * static_cast<long double>(x - last.input_elements);
  if (line >= static_cast<long double>(std::numeric_limits<int64_t>::max())) return std::numeric_limits<int64_t>::max();
  return std::max(bound, static_cast<int64_t>(line));
}

bool RunNeed::Measured(int64_t input_elements) const {
  const int64_t x = AtLeastOne(input_elements);
  auto it = std::find_if(points_.begin(), points_.end(), BySize(x));
  return it != points_.end() && it->input_elements == x;
}

void RunNeed::Record(int64_t input_elements, int64_t bytes) {
  const NeedPoint point{AtLeastOne(input_elements), std::max<int64_t>(bytes, 0)};
  auto it = std::find_if(points_.begin(), points_.end(), BySize(point.input_elements));
  if (it != points_.end() && it->input_elements == point.input_elements) {
    it->bytes = std::max(it->bytes, point.bytes);
    return;
  }
  points_.insert(it, point);
  if (points_.size() <= kMaxPoints) return;
  // Merge the two sizes closest to each other (by ratio) into the larger one, with the larger need.
  size_t best = 0;
  double best_ratio = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i + 1 < points_.size(); ++i) {
    const double ratio = static_cast<double>(points_[i + 1].input_elements) / static_cast<double>(points_[i].input_elements);
    if (ratio < best_ratio) {
      best_ratio = ratio;
      best = i;
    }
  }
  points_[best + 1].bytes = std::max(points_[best + 1].bytes, points_[best].bytes);
  points_.erase(points_.begin() + static_cast<std::ptrdiff_t>(best));
}

}  // namespace ebb
