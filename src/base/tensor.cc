#include "ebb/tensor.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

namespace ebb {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;  // of a literal: also null-terminated (DataTypeName)
  size_t size;
};

constexpr std::array<TypeInfo, 14> kTypes = {{
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
    {DataType::kBytes, "BYTES", 0},
}};

const TypeInfo& Info(DataType type) { return kTypes[static_cast<size_t>(type)]; }

constexpr size_t kLengthPrefix = 4;  // BYTES: little-endian uint32 before each element

void PutLength(std::byte* at, uint32_t n) {
  for (size_t i = 0; i < kLengthPrefix; ++i) at[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
}

uint32_t GetLength(const char* at) {
  uint32_t n = 0;
  for (size_t i = 0; i < kLengthPrefix; ++i) n |= static_cast<uint32_t>(static_cast<unsigned char>(at[i])) << (8 * i);
  return n;
}

// Bytes of a serialisation holding `values`.
template <typename Strings>
size_t SerializedSize(const Strings& values) {
  size_t size = 0;
  for (const auto& v : values) size += kLengthPrefix + v.size();
  return size;
}

template <typename Strings>
void Serialize(const Strings& values, std::byte* out) {
  for (const auto& v : values) {
    PutLength(out, static_cast<uint32_t>(v.size()));
    if (!v.empty()) std::memcpy(out + kLengthPrefix, v.data(), v.size());
    out += kLengthPrefix + v.size();
  }
}

}  // namespace

size_t ElementSize(DataType type) { return Info(type).size; }
const char* DataTypeName(DataType type) { return Info(type).name.data(); }

// A type name (at most 8 characters) as one integer, its first character in the low byte: every
// request names a type, and one integer compare per type is cheaper than a string compare.
constexpr uint64_t NameKey(std::string_view name) {
  uint64_t key = 0;
  for (size_t i = 0; i < name.size(); ++i) key |= uint64_t{static_cast<uint8_t>(name[i])} << (8 * i);
  return key;
}

constexpr std::array<uint64_t, kTypes.size()> kTypeKeys = [] {
  std::array<uint64_t, kTypes.size()> keys{};
  for (size_t i = 0; i < kTypes.size(); ++i) keys[i] = NameKey(kTypes[i].name);
  return keys;
}();

std::optional<DataType> ParseDataType(std::string_view name) {
  if (name.empty() || name.size() > 8) return std::nullopt;  // no name is longer; "" matches no key
  const uint64_t key = NameKey(name);
  for (size_t i = 0; i < kTypes.size(); ++i) {
    // The lengths too: a NUL adds nothing to a key ("FP32\0" has FP32's).
    if (key == kTypeKeys[i] && name.size() == kTypes[i].name.size()) return kTypes[i].type;
  }
  return std::nullopt;
}

float HalfToFloat(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int fraction = bits & 0x3ff;
  float magnitude;
  if (exponent == 0x1f) {
    magnitude = fraction ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(fraction), -24);  // subnormal
  } else {
    magnitude = std::ldexp(static_cast<float>(fraction + 0x400), exponent - 25);
  }
  return (bits & 0x8000) ? -magnitude : magnitude;
}

float BFloat16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

int64_t ElementCount(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d == 0) return 0;
    if (__builtin_mul_overflow(n, d, &n)) n = std::numeric_limits<int64_t>::max();
  }
  return n;
}

Result<int64_t> CheckedByteSize(DataType type, const Shape& shape) {
  const int64_t unit = type == DataType::kBytes ? static_cast<int64_t>(kLengthPrefix) : static_cast<int64_t>(ElementSize(type));
  int64_t product = unit;  // of the non-zero dims, times the element size
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t d = shape[i];
    if (d < 0) {
      return InvalidArgument("dim " + std::to_string(i) + " of shape " + ShapeToString(shape) + " is negative");
    }
    if (d == 0) {
      empty = true;
    } else if (__builtin_mul_overflow(product, d, &product)) {
      return InvalidArgument("a " + std::string(DataTypeName(type)) + " tensor of shape " + ShapeToString(shape) +
                             " is too large: its byte size overflows 64 bits");
    }
  }
  return empty ? 0 : product;
}

namespace {

// The byte size of a shape the caller REQUIRES to be valid: the constructors' own check, so that a
// shape past the limits throws as new[] of an impossible size does, and never wraps to a small buffer.
size_t RequiredByteSize(DataType type, const Shape& shape) {
  Result<int64_t> bytes = CheckedByteSize(type, shape);
  if (!bytes.ok()) throw std::bad_array_new_length();
  return static_cast<size_t>(*bytes);
}

}  // namespace

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
      size_(RequiredByteSize(type, shape_)),
      data_(new std::byte[size_]) {  // default-initialised: uninitialised bytes
  if (type == DataType::kBytes && size_) std::memset(data_.get(), 0, size_);  // every element empty
}

Result<Tensor> Tensor::Allocate(DataType type, Shape shape) {
  Result<int64_t> bytes = CheckedByteSize(type, shape);
  if (!bytes.ok()) return bytes.status();
  try {
    return Tensor(type, std::move(shape));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory for a " + std::string(DataTypeName(type)) + " tensor of " +
                             std::to_string(*bytes) + " bytes");
  }
}

Tensor::Tensor(DataType type, Shape shape, size_t byte_size)
    : type_(type), shape_(std::move(shape)), size_(byte_size), data_(new std::byte[size_]) {}

Tensor Tensor::Reusable(DataType type, Shape shape) {
  Tensor t;
  t.type_ = type;
  t.shape_ = std::move(shape);
  t.size_ = RequiredByteSize(type, t.shape_);
  uint64_t epoch = 0;
  std::byte* data = detail::OutputBuffers::Take(t.size_, &epoch);
  t.data_ = std::unique_ptr<std::byte[], detail::TensorDeleter>(data, detail::TensorDeleter{true, t.size_, epoch});
  return t;
}

Tensor Tensor::Borrow(DataType type, Shape shape, std::byte* data) {
  Tensor t;
  t.type_ = type;
  t.shape_ = std::move(shape);
  t.size_ = RequiredByteSize(type, t.shape_);
  t.data_ = std::unique_ptr<std::byte[], detail::TensorDeleter>(data, detail::TensorDeleter{false});
  return t;
}

Tensor Tensor::FromStrings(Shape shape, std::span<const std::string_view> values) {
  Tensor t(DataType::kBytes, std::move(shape), SerializedSize(values));
  Serialize(values, t.data());
  return t;
}

Tensor Tensor::FromStrings(Shape shape, const std::vector<std::string>& values) {
  Tensor t(DataType::kBytes, std::move(shape), SerializedSize(values));
  Serialize(values, t.data());
  return t;
}

Result<Tensor> Tensor::FromSerializedBytes(Shape shape, std::string_view serialized) {
  Result<std::vector<std::string_view>> elements = SplitSerializedBytes(serialized, ElementCount(shape));
  if (!elements.ok()) return elements.status();
  Tensor t(DataType::kBytes, std::move(shape), serialized.size());
  if (!serialized.empty()) std::memcpy(t.data(), serialized.data(), serialized.size());
  return t;
}

std::vector<std::string_view> Tensor::strings() const {
  const std::string_view all(reinterpret_cast<const char*>(data()), size_);
  Result<std::vector<std::string_view>> elements = SplitSerializedBytes(all, element_count());
  return elements.ok() ? std::move(elements).value() : std::vector<std::string_view>();
}

Result<std::vector<std::string_view>> SplitSerializedBytes(std::string_view serialized, int64_t count) {
  std::vector<std::string_view> elements;
  elements.reserve(static_cast<size_t>(std::min<int64_t>(count, static_cast<int64_t>(serialized.size() / kLengthPrefix))));
  size_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (serialized.size() - at < kLengthPrefix) {
      return InvalidArgument("BYTES data ends before element " + std::to_string(i) + " of " + std::to_string(count) +
                             " (each element is a 4-byte little-endian length, then that many bytes)");
    }
    const size_t length = GetLength(serialized.data() + at);
    at += kLengthPrefix;
    if (serialized.size() - at < length) {
      return InvalidArgument("BYTES element " + std::to_string(i) + " claims " + std::to_string(length) +
                             " bytes but only " + std::to_string(serialized.size() - at) + " remain");
    }
    elements.push_back(serialized.substr(at, length));
    at += length;
  }
  if (at != serialized.size()) {
    return InvalidArgument("BYTES data has " + std::to_string(serialized.size() - at) + " bytes after its " +
                           std::to_string(count) + " elements");
  }
  return elements;
}

Tensor Tensor::FromFloats(Shape shape, std::span<const float> values) {
  Tensor t(DataType::kFloat32, std::move(shape));
  // No copy of nothing: an empty span's data() may be null, and memcpy's never may (UBSan, an OCR
  // page without text: confidence [0]).
  if (t.byte_size() > 0) std::memcpy(t.data(), values.data(), t.byte_size());
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t(type_, shape_, size_);
  if (size_) std::memcpy(t.data(), data(), size_);
  return t;
}

bool Tensor::BitwiseEquals(const Tensor& other) const {
  return type_ == other.type_ && shape_ == other.shape_ && size_ == other.size_ &&
         (size_ == 0 || std::memcmp(data(), other.data(), size_) == 0);
}

Tensor BatchItem(const Tensor& batch, int64_t n) {
  Shape shape = batch.shape();
  if (batch.type() == DataType::kBytes) {
    const std::vector<std::string_view> all = batch.strings();
    const size_t per_item = all.size() / static_cast<size_t>(shape[0]);
    shape[0] = 1;
    return Tensor::FromStrings(shape, std::span(all).subspan(static_cast<size_t>(n) * per_item, per_item));
  }
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
  if (items[0].type() == DataType::kBytes) {
    std::vector<std::string_view> all;
    for (const Tensor& t : items) {
      for (std::string_view v : t.strings()) all.push_back(v);
    }
    return Tensor::FromStrings(shape, all);
  }
  Tensor batch(items[0].type(), shape);
  for (size_t i = 0; i < items.size(); ++i) {
    std::memcpy(batch.data() + i * items[i].byte_size(), items[i].data(), items[i].byte_size());
  }
  return batch;
}

}  // namespace ebb
