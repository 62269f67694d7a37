#include "classification.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ebb::server {
namespace {

// The elements of a numeric tensor as doubles (exact for every type but
// 64-bit integers beyond 2^53, whose order is then approximate), and their
// text as Triton writes it.
struct Scores {
  std::vector<double> values;
  std::vector<std::string> text;
};

template <typename T, typename Convert>
void Read(const Tensor& t, Convert convert, Scores* out) {
  for (T raw : t.values<T>()) {
    const auto v = convert(raw);
    out->values.push_back(static_cast<double>(v));
    out->text.push_back(std::to_string(v));
  }
}

template <typename T>
void ReadPlain(const Tensor& t, Scores* out) {
  Read<T>(t, [](T v) { return v; }, out);
}

bool ReadScores(const Tensor& t, Scores* out) {
  switch (t.type()) {
    case DataType::kUInt8: ReadPlain<uint8_t>(t, out); return true;
    case DataType::kUInt16: ReadPlain<uint16_t>(t, out); return true;
    case DataType::kUInt32: ReadPlain<uint32_t>(t, out); return true;
    case DataType::kUInt64: ReadPlain<uint64_t>(t, out); return true;
    case DataType::kInt8: ReadPlain<int8_t>(t, out); return true;
    case DataType::kInt16: ReadPlain<int16_t>(t, out); return true;
    case DataType::kInt32: ReadPlain<int32_t>(t, out); return true;
    case DataType::kInt64: ReadPlain<int64_t>(t, out); return true;
    case DataType::kFloat16: Read<uint16_t>(t, HalfToFloat, out); return true;
    case DataType::kBFloat16: Read<uint16_t>(t, BFloat16ToFloat, out); return true;
    case DataType::kFloat32: ReadPlain<float>(t, out); return true;
    case DataType::kFloat64: ReadPlain<double>(t, out); return true;
    case DataType::kBool:
    case DataType::kBytes: return false;
  }
  return false;
}

}  // namespace

Result<Tensor> Classify(const Tensor& scores, int64_t k, const std::vector<std::string>& labels,
                        const std::string& output_name) {
  if (k < 1) {
    return InvalidArgument("output '" + output_name + "': parameters.classification must be a positive integer, got " +
                           std::to_string(k));
  }
  Scores s;
  if (!ReadScores(scores, &s)) {
    return InvalidArgument("output '" + output_name + "': classification needs a numeric output, not " +
                           DataTypeName(scores.type()));
  }
  const Shape& shape = scores.shape();
  const size_t rows = shape.size() >= 2 ? static_cast<size_t>(shape[0]) : 1;
  const size_t classes = rows ? s.values.size() / rows : 0;
  const size_t top = std::min(static_cast<size_t>(k), classes);
  std::vector<std::string> result;
  result.reserve(rows * top);
  std::vector<size_t> order(classes);
  for (size_t r = 0; r < rows; ++r) {
    const double* row = s.values.data() + r * classes;
    std::iota(order.begin(), order.end(), 0);
    // NaN ranks last.
    std::stable_sort(order.begin(), order.end(), [row](size_t a, size_t b) {
      return row[a] > row[b] || (!std::isnan(row[a]) && std::isnan(row[b]));
    });
    for (size_t i = 0; i < top; ++i) {
      const size_t c = order[i];
      std::string entry = s.text[r * classes + c] + ":" + std::to_string(c);
      if (c < labels.size()) entry += ":" + labels[c];
      result.push_back(std::move(entry));
    }
  }
  const Shape out_shape = shape.size() >= 2 ? Shape{shape[0], static_cast<int64_t>(top)}
                                            : Shape{static_cast<int64_t>(top)};
  return Tensor::FromStrings(out_shape, result);
}

}  // namespace ebb::server
