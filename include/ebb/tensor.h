// ebb/tensor.h — an owned, dense, row-major tensor on the host.
//
// Tensors are how data crosses ebb's public API: inputs are read in place
// (never copied) for the duration of a run, and outputs are returned as
// Tensors whose memory belongs to the caller, never to an ONNX Runtime arena.
// That is what lets a run give its arena memory back while the caller still
// holds the results.
//
// Thread safety: a Tensor is a plain value. Concurrent reads are fine;
// a Tensor must not be written while a run reads it.
// Ownership: move-only; Clone() makes a deep copy. A tensor made by Borrow()
// owns nothing: it is a view of memory its caller keeps alive (how the Python
// binding hands NumPy arrays to a run without copying them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ebb/status.h"

namespace ebb {

// Element types ebb moves between callers and ONNX Runtime. Names follow the
// KServe v2 protocol (FP32, INT64, ...).
enum class DataType {
  kBool,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
};

// Bytes per element.
size_t ElementSize(DataType type);
// Protocol name: "FP32", "INT64", "BOOL", ...
const char* DataTypeName(DataType type);
// Inverse of DataTypeName; nullopt for an unknown name (including "BYTES").
std::optional<DataType> ParseDataType(std::string_view name);

using Shape = std::vector<int64_t>;
// Product of the dimensions; 1 for a scalar. REQUIRES: all dims >= 0.
int64_t ElementCount(const Shape& shape);
// "[1,3,224,224]"
std::string ShapeToString(const Shape& shape);

namespace detail {
// Frees a tensor's bytes unless they are borrowed (Tensor::Borrow).
struct TensorDeleter {
  bool owned = true;
  void operator()(std::byte* p) const noexcept {
    if (owned) delete[] p;
  }
};
}  // namespace detail

class Tensor {
 public:
  Tensor() = default;
  // Allocates uninitialised storage for `shape` elements of `type`.
  Tensor(DataType type, Shape shape);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // Copies `values` into a new float tensor of `shape`.
  // REQUIRES: values.size() == ElementCount(shape).
  static Tensor FromFloats(Shape shape, std::span<const float> values);

  // A tensor over `data` (ElementCount(shape) elements of `type`), which stays
  // the caller's: nothing is copied or freed. REQUIRES: `data` outlives the
  // tensor, is aligned for `type`, and is not written while a run reads it (a
  // run only reads its inputs). Clone() of a borrowed tensor owns its copy.
  static Tensor Borrow(DataType type, Shape shape, std::byte* data);

  Tensor Clone() const;
  bool borrowed() const { return !data_.get_deleter().owned; }

  DataType type() const { return type_; }
  const Shape& shape() const { return shape_; }
  int64_t element_count() const { return ElementCount(shape_); }
  size_t byte_size() const { return size_; }

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }

  // Typed views. REQUIRES: sizeof(T) == ElementSize(type()).
  template <typename T>
  std::span<T> values() {
    return {reinterpret_cast<T*>(data_.get()), size_ / sizeof(T)};
  }
  template <typename T>
  std::span<const T> values() const {
    return {reinterpret_cast<const T*>(data_.get()), size_ / sizeof(T)};
  }

  // True when type, shape and every byte match.
  bool BitwiseEquals(const Tensor& other) const;

 private:
  DataType type_ = DataType::kFloat32;
  Shape shape_;
  size_t size_ = 0;
  std::unique_ptr<std::byte[], detail::TensorDeleter> data_;
};

// A tensor with the model input or output name it belongs to.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Item `n` of a batch [N,...] as a tensor [1,...]. REQUIRES: 0 <= n < N.
Tensor BatchItem(const Tensor& batch, int64_t n);
// Tensors [1,...] of one type and shape stacked into [N,...].
// Errors: kInvalidArgument when they differ or the list is empty.
Result<Tensor> StackBatch(const std::vector<Tensor>& items);


}  // namespace ebb
