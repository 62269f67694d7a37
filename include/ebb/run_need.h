// ebb/run_need.h — how much transient memory a model's runs need, by input size.
//
// A RunNeed is learned from measurements: each is one run of the model, its
// input size (elements over all its inputs) and the transient memory it was
// seen to need (ModelPool measures a run that ran alone in the process: its
// RSS high-water mark over its start, or the shared arena's new peak over the
// bytes in use at its start, whichever is larger; on CUDA the peak of the
// session's own arena). Predict() answers for any size, conservatively, under
// one assumption only: a run never needs less memory for larger inputs.
//
//   * no measurement: no prediction (nullopt); such a run must run alone to
//     be measured;
//   * at or below the smallest size measured: that size's need;
//   * between two sizes measured: the larger of their two needs (an upper
//     bound for any need that grows with the input, whatever its shape);
//   * above the largest size measured: that size's need scaled in proportion
//     (exact for memory linear in the input, an upper bound when part of it is
//     fixed; LOW for memory that grows faster than the input, e.g. attention:
//     the pool's out-of-memory recovery then raises the prediction);
//   * and never below AtLeast() (below).
//
// AtLeast() is the other side: what a run of that size needs at least, under
// the same assumption plus one more beyond the sizes measured: that a need grows
// at least as fast as the line through the two largest sizes measured (exact for
// memory linear in the input, as a convolution's activations are; low, so still
// a lower bound, for memory that grows faster). ModelPool refuses a run only when
// this lower bound cannot fit, and runs it alone, to be measured, when only the
// prediction cannot: a single small measurement says little about a large input
// (a fixed overhead scaled in proportion).
//
// Record() keeps the largest need seen at each size, so a prediction only
// grows as measurements come in. At most kMaxPoints sizes are kept; beyond,
// the two closest sizes merge into the larger one with the larger need (still
// an upper bound below it).
//
// Thread safety: a plain value; callers synchronise (ModelPool holds it under
// its lock).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace ebb {

struct NeedPoint {
  int64_t input_elements = 0;  // elements over all inputs of the run
  int64_t bytes = 0;           // transient memory the run needed
  bool operator==(const NeedPoint&) const = default;
};

class RunNeed {
 public:
  static constexpr size_t kMaxPoints = 32;

  // The predicted transient need of a run of `input_elements` (values below 1
  // count as 1); nullopt before the first measurement.
  std::optional<int64_t> Predict(int64_t input_elements) const;
  // What a run of `input_elements` needs at least (0 when nothing says more).
  int64_t AtLeast(int64_t input_elements) const;
  // A run of `input_elements` was seen to need `bytes` (negative counts as 0).
  void Record(int64_t input_elements, int64_t bytes);
  // Whether a run of exactly this size has been measured.
  bool Measured(int64_t input_elements) const;
  bool empty() const { return points_.empty(); }
  // The measurements, by increasing size.
  const std::vector<NeedPoint>& points() const { return points_; }

 private:
  std::vector<NeedPoint> points_;  // sorted by input_elements, distinct
};

}  // namespace ebb
