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
// KServe v2 protocol (FP32, INT64, ...). kBytes is the protocol's BYTES (ONNX
// string tensors): variable-length byte strings, see "BYTES tensors" below.
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
  kBytes,
};

// Bytes per element; 0 for kBytes, whose elements vary in length.
size_t ElementSize(DataType type);
// Protocol name: "FP32", "INT64", "BOOL", "BYTES", ...
const char* DataTypeName(DataType type);
// Inverse of DataTypeName; nullopt for an unknown name.
std::optional<DataType> ParseDataType(std::string_view name);

// The value of an FP16 (IEEE half) or BF16 element, given its bits.
float HalfToFloat(uint16_t bits);
float BFloat16ToFloat(uint16_t bits);

using Shape = std::vector<int64_t>;
// Product of the dimensions; 1 for a scalar. REQUIRES: all dims >= 0. Never
// wraps: a product past INT64_MAX saturates there (only a shape that
// CheckedByteSize refuses has one).
int64_t ElementCount(const Shape& shape);

// The one check of a tensor's size, made before anything is allocated for a
// shape that came from outside (the C API, Java, images, tiling, decoders):
// the bytes `shape` takes of `type` (kBytes: its 4-byte length prefixes, the
// least its serialisation takes). Checked arithmetic on the product of the
// non-zero dims (a zero dim makes the tensor empty, but the product of the
// others must still fit, so that no stride or partial product can wrap).
// Errors: kInvalidArgument, naming the shape, for a negative dim or a count
// or byte size past INT64_MAX.
Result<int64_t> CheckedByteSize(DataType type, const Shape& shape);
// "[1,3,224,224]"
std::string ShapeToString(const Shape& shape);

class Tensor;

namespace detail {
// Output buffers of the run boundary (src/base/output_buffers.cc): a run that does not end its operation
// writes its outputs into buffers that the tensors give back here when freed, so that the next run
// of the operation writes into memory already touched instead of paying a page fault per 4 KiB page
// of a fresh mmap (plain ORT writes into its warm arena). The server decodes a request's large
// inputs into them too, for the same reason (its requests between two releases are one operation).
// Buffers of 128 KiB and more are kept, a few and at most 256 MiB; every release frees them all, and
// a buffer taken before a release is freed, not kept, when its tensor goes. The public faces are
// Tensor::Reusable and ReusableBufferScope (below). Thread-safe.
struct OutputBuffers {
  // A buffer of `bytes` (a kept one of that size, else a new one); *epoch = the releases seen.
  static std::byte* Take(size_t bytes, uint64_t* epoch);
  // Keeps `data` for the next Take when no release came since it was taken, else frees it.
  static void Give(std::byte* data, size_t bytes, uint64_t epoch) noexcept;
  // Frees every kept buffer (at a release, an unload).
  static void Drop() noexcept;
  static size_t kept_bytes();
};

// Frees a tensor's bytes unless they are borrowed (Tensor::Borrow); an output buffer of the run
// boundary goes back to OutputBuffers.
struct TensorDeleter {
  bool owned = true;
  size_t output_buffer_bytes = 0;  // non-zero: from OutputBuffers::Take
  uint64_t epoch = 0;
  void operator()(std::byte* p) const noexcept {
    if (!owned) return;
    if (output_buffer_bytes) {
      OutputBuffers::Give(p, output_buffer_bytes, epoch);
    } else {
      delete[] p;
    }
  }
};
}  // namespace detail

// BYTES tensors: the buffer holds the elements in row-major order, each as a
// 4-byte little-endian length followed by that many bytes — the KServe binary
// form of BYTES data (the binary tensor data extension, gRPC
// raw_input_contents), so that wire data is checked once and copied as is.
// byte_size() is the size of that serialisation. Build them with FromStrings or
// FromSerializedBytes (which checks the form); read them with strings().
class Tensor {
 public:
  Tensor() = default;
  // Allocates uninitialised storage for `shape` elements of `type` (for
  // kBytes: `shape` elements that are empty strings). REQUIRES: a shape
  // CheckedByteSize accepts; one it refuses throws std::bad_array_new_length
  // (never a wrapped, too small buffer). Shapes from outside go through
  // Allocate instead.
  Tensor(DataType type, Shape shape);

  // The constructor above, as a Result: kInvalidArgument for a shape
  // CheckedByteSize refuses, kResourceExhausted when the bytes cannot be
  // allocated (std::bad_alloc).
  static Result<Tensor> Allocate(DataType type, Shape shape);

  // As the constructor, but its storage is a REUSABLE buffer: one that a
  // tensor of the same byte size gave back since the last release, else a new
  // one; given back in turn when this tensor goes. Between two releases the
  // run boundary writes a run's outputs into such buffers, so that the next
  // run of the operation writes into memory already touched instead of paying
  // a page fault per 4 KiB of a fresh mapping; a caller whose next run reads
  // a large tensor it fills (the server decoding a request's inputs) takes one
  // the same way. Buffers of 128 KiB and more are kept, a few and at most 256
  // MiB in all; every release frees them, and one taken before a release is
  // freed, not kept, when its tensor goes. Work that takes them and may end
  // without a run holds a ReusableBufferScope. REQUIRES: as the constructor;
  // type != kBytes. Thread-safe.
  static Tensor Reusable(DataType type, Shape shape);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // Copies `values` into a new float tensor of `shape`.
  // REQUIRES: values.size() == ElementCount(shape).
  static Tensor FromFloats(Shape shape, std::span<const float> values);

  // A tensor over `data` (ElementCount(shape) elements of `type`), which stays
  // the caller's: nothing is copied or freed. REQUIRES: a shape CheckedByteSize
  // accepts (else std::bad_array_new_length), `data` outlives the
  // tensor, is aligned for `type`, and is not written while a run reads it (a
  // run only reads its inputs). Clone() of a borrowed tensor owns its copy.
  static Tensor Borrow(DataType type, Shape shape, std::byte* data);
  // A BYTES tensor of `shape` holding `values` in row-major order.
  // REQUIRES: values.size() == ElementCount(shape); each value < 4 GiB.
  static Tensor FromStrings(Shape shape, std::span<const std::string_view> values);
  static Tensor FromStrings(Shape shape, const std::vector<std::string>& values);
  // A BYTES tensor of `shape` from its serialisation (see above).
  // Errors: kInvalidArgument when `serialized` does not hold exactly
  // ElementCount(shape) elements (a length running past the end, bytes left over).
  static Result<Tensor> FromSerializedBytes(Shape shape, std::string_view serialized);

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

  // The elements of a BYTES tensor, as views into its buffer (valid while the
  // tensor lives and is not written). REQUIRES: type() == DataType::kBytes.
  std::vector<std::string_view> strings() const;

  // True when type, shape and every byte match.
  bool BitwiseEquals(const Tensor& other) const;

 private:
  Tensor(DataType type, Shape shape, size_t byte_size);

  DataType type_ = DataType::kFloat32;
  Shape shape_;
  size_t size_ = 0;
  std::unique_ptr<std::byte[], detail::TensorDeleter> data_;
};

// Work that takes reusable buffers (Tensor::Reusable) and may end without
// reaching a run, so without the release that would free them (a server
// request refused after its inputs were decoded): when the scope ends, every
// kept buffer is freed (and those its tensors give back later are not kept),
// unless Keep() said the work reached its run, whose release frees them, or,
// when its operation goes on (an open sequence of requests), whose next run
// reuses them. Forgetting Keep() costs only warm buffers, never memory held.
// Hold it from before the buffers are taken until after their tensors went.
// Thread safety: one scope per piece of work; the buffers are the process's.
class ReusableBufferScope {
 public:
  ReusableBufferScope() = default;
  ~ReusableBufferScope();
  ReusableBufferScope(const ReusableBufferScope&) = delete;
  ReusableBufferScope& operator=(const ReusableBufferScope&) = delete;

  // The work reached its run: what it took is left to that run's operation.
  void Keep() { keep_ = true; }

 private:
  bool keep_ = false;
};

// The elements of the BYTES serialisation `serialized` (see Tensor), as views
// into it. Errors: kInvalidArgument when it does not hold exactly `count`
// elements.
Result<std::vector<std::string_view>> SplitSerializedBytes(std::string_view serialized, int64_t count);

// A tensor with the model input or output name it belongs to.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Item `n` of a batch [N,...] as a tensor [1,...] (BYTES too). REQUIRES: 0 <= n < N.
Tensor BatchItem(const Tensor& batch, int64_t n);
// Tensors [1,...] of one type and shape stacked into [N,...].
// Errors: kInvalidArgument when they differ or the list is empty.
Result<Tensor> StackBatch(const std::vector<Tensor>& items);


}  // namespace ebb
