#include "ebb/tensor.h"

#include <array>
#include <cstring>
#include <utility>

namespace ebb {
namespace {

struct TypeInfo {
  DataType type;
  const char* name;
  size_t size;
};

constexpr std::array<TypeInfo, 13> kTypes = {{
    {DataType::kBool, "BOOL", 1},
    {DataType::kUInt8, "UINT8", 1},
    {DataType::kUInt16, "UINT16", 2},
    {DataType::kUInt32, "UINT32", 4},
    {DataType::kUInt64, "UINT64", 8},
    {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},
    {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},
    {DataType::kFloat16, "FP16", 2},
    {DataType::kBFloat16, "BF16", 2},
    {DataType::kFloat32, "FP32", 4},
    {DataType::kFloat64, "FP64", 8},
}};

const TypeInfo& Info(DataType type) { return kTypes[static_cast<size_t>(type)]; }

}  // namespace

size_t ElementSize(DataType type) { return Info(type).size; }
const char* DataTypeName(DataType type) { return Info(type).name; }

std::optional<DataType> ParseDataType(std::string_view name) {
  for (const TypeInfo& info : kTypes) {
    if (name == info.name) return info.type;
  }
  return std::nullopt;
}

int64_t ElementCount(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor::Tensor(DataType type, Shape shape)
    : type_(type),
      shape_(std::move(shape)),
      size_(static_cast<size_t>(ElementCount(shape_)) * ElementSize(type)),
      data_(new std::byte[size_]) {}  // default-initialised: uninitialised bytes

Tensor Tensor::Borrow(DataType type, Shape shape, std::byte* data) {
  Tensor t;
  t.type_ = type;
  t.shape_ = std::move(shape);
  t.size_ = static_cast<size_t>(ElementCount(t.shape_)) * ElementSize(type);
  t.data_ = std::unique_ptr<std::byte[], detail::TensorDeleter>(data, detail::TensorDeleter{false});
  return t;
}

Tensor Tensor::FromFloats(Shape shape, std::span<const float> values) {
  Tensor t(DataType::kFloat32, std::move(shape));
  std::memcpy(t.data(), values.data(), t.byte_size());
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t(type_, shape_);
  if (size_) std::memcpy(t.data(), data(), size_);
  return t;
}

bool Tensor::BitwiseEquals(const Tensor& other) const {
  return type_ == other.type_ && shape_ == other.shape_ && size_ == other.size_ &&
         (size_ == 0 || std::memcmp(data(), other.data(), size_) == 0);
}

Tensor BatchItem(const Tensor& batch, int64_t n) {
  Shape shape = batch.shape();
  const size_t item_bytes = batch.byte_size() / static_cast<size_t>(shape[0]);
  shape[0] = 1;
  Tensor item(batch.type(), shape);
  std::memcpy(item.data(), batch.data() + static_cast<size_t>(n) * item_bytes, item_bytes);
  return item;
}

Result<Tensor> StackBatch(const std::vector<Tensor>& items) {
  if (items.empty()) return InvalidArgument("nothing to stack into a batch");
  for (const Tensor& t : items) {
    if (t.type() != items[0].type() || t.shape() != items[0].shape() || t.shape().empty() || t.shape()[0] != 1) {
      return InvalidArgument("a batch needs items of one type and shape [1,...]; got " +
                             ShapeToString(items[0].shape()) + " and " + ShapeToString(t.shape()));
    }
  }
  Shape shape = items[0].shape();
  shape[0] = static_cast<int64_t>(items.size());
  Tensor batch(items[0].type(), shape);
  for (size_t i = 0; i < items.size(); ++i) {
    std::memcpy(batch.data() + i * items[i].byte_size(), items[i].data(), items[i].byte_size());
  }
  return batch;
}

}  // namespace ebb
