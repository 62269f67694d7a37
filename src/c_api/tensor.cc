// Tensors and tensor lists of the C API (include/ebb/c.h): ebb::Tensor behind
// a handle, and the conversions of run inputs and outputs.
#include <cstring>
#include <string_view>

#include "c_api.h"

namespace ebb::c_api {
namespace {

// The shape of a new tensor of `type`, its size checked (CheckedByteSize). Errors: a NULL shape with
// rank > 0, a negative dim, a count or byte size that overflows.
Result<Shape> ShapeOf(const char* function, DataType type, const int64_t* shape, size_t rank) {
  if (rank > 0 && !shape) return InvalidArgument(std::string(function) + ": shape is NULL with rank > 0");
  Shape s(shape, shape + rank);
  if (Result<int64_t> bytes = CheckedByteSize(type, s); !bytes.ok()) {
    return InvalidArgument(std::string(function) + ": " + bytes.status().message());
  }
  return s;
}

// The element type of a new dense (not BYTES) tensor.
Result<DataType> DenseType(const char* function, ebb_dtype_t dtype) {
  std::optional<DataType> t = ToDataType(dtype);
  if (!t) return InvalidArgument(std::string(function) + ": unknown dtype " + std::to_string(static_cast<int>(dtype)));
  if (*t == DataType::kBytes) {
    return InvalidArgument(std::string(function) + ": BYTES tensors are made by ebb_tensor_create_strings");
  }
  return *t;
}

// The bytes `shape` (checked by ShapeOf) takes of `type`, checked against the caller's count.
Status CheckByteSize(const char* function, DataType type, const Shape& shape, size_t byte_size) {
  const auto want = static_cast<size_t>(*CheckedByteSize(type, shape));
  if (byte_size == want) return Status::Ok();
  return InvalidArgument(std::string(function) + ": " + std::to_string(byte_size) + " bytes given, a " +
                         DataTypeName(type) + " tensor of shape " + ShapeToString(shape) + " takes " +
                         std::to_string(want));
}

ebb_status_t* Wrap(Tensor tensor, ebb_tensor_t** out) {
  *out = new ebb_tensor_t{std::move(tensor)};
  return nullptr;
}

// A dense tensor as a caller describes it: its type, its shape, and `byte_size` bytes at `data`
// (which may be null only when there are none), checked as every dense constructor checks them.
struct DenseSpec {
  DataType type = DataType::kFloat32;
  Shape shape;
};
ebb_status_t* CheckDense(const char* function, ebb_dtype_t dtype, const int64_t* shape, size_t rank, const void* data,
                         size_t byte_size, DenseSpec* spec) {
  Result<DataType> type = DenseType(function, dtype);
  if (!type.ok()) return ToC(type.status());
  Result<Shape> s = ShapeOf(function, *type, shape, rank);
  if (!s.ok()) return ToC(s.status());
  if (Status st = CheckByteSize(function, *type, *s, byte_size); !st.ok()) return ToC(st);
  if (byte_size > 0 && !data) return NullArgument(function, "data");
  *spec = {*type, std::move(*s)};
  return nullptr;
}

}  // namespace

Tensor View(const Tensor& tensor) {
  if (tensor.type() == DataType::kBytes) return tensor.Clone();
  return Tensor::Borrow(tensor.type(), tensor.shape(), const_cast<std::byte*>(tensor.data()));
}

Result<std::vector<NamedTensor>> Inputs(const char* function, const char* const* names,
                                        const ebb_tensor_t* const* tensors, size_t count) {
  std::vector<NamedTensor> inputs;
  if (count == 0) return inputs;
  if (!names) return InvalidArgument(std::string(function) + ": input_names is NULL");
  if (!tensors) return InvalidArgument(std::string(function) + ": inputs is NULL");
  inputs.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (!names[i]) return InvalidArgument(std::string(function) + ": input_names[" + std::to_string(i) + "] is NULL");
    if (!tensors[i]) {
      return InvalidArgument(std::string(function) + ": inputs[" + std::to_string(i) + "] (input '" +
                             Clip(names[i]) + "') is NULL");
    }
    inputs.push_back({names[i], View(tensors[i]->tensor)});
  }
  return inputs;
}

Result<std::vector<std::string>> Names(const char* function, const char* const* names, size_t count) {
  std::vector<std::string> out;
  if (count == 0) return out;
  if (!names) return InvalidArgument(std::string(function) + ": output_names is NULL");
  for (size_t i = 0; i < count; ++i) {
    if (!names[i]) return InvalidArgument(std::string(function) + ": output_names[" + std::to_string(i) + "] is NULL");
    out.emplace_back(names[i]);
  }
  return out;
}

Result<std::vector<Tensor>> Frames(const char* function, const ebb_tensor_t* const* frames, size_t count) {
  std::vector<Tensor> out;
  if (count > 0 && !frames) return InvalidArgument(std::string(function) + ": frames is NULL");
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (!frames[i]) return InvalidArgument(std::string(function) + ": frames[" + std::to_string(i) + "] is NULL");
    out.push_back(View(frames[i]->tensor));
  }
  return out;
}

std::unique_ptr<ebb_tensors_t> ToList(std::vector<NamedTensor> outputs) {
  auto list = std::make_unique<ebb_tensors_t>();
  list->names.reserve(outputs.size());
  list->tensors.reserve(outputs.size());
  for (NamedTensor& o : outputs) {
    list->names.push_back(std::move(o.name));
    list->tensors.push_back(std::make_unique<ebb_tensor_t>(ebb_tensor_t{std::move(o.tensor)}));
  }
  return list;
}

std::unique_ptr<ebb_tensors_t> ToList(std::vector<Tensor> results) {
  auto list = std::make_unique<ebb_tensors_t>();
  list->names.resize(results.size());
  list->tensors.reserve(results.size());
  for (Tensor& t : results) list->tensors.push_back(std::make_unique<ebb_tensor_t>(ebb_tensor_t{std::move(t)}));
  return list;
}

}  // namespace ebb::c_api

using namespace ebb;
using namespace ebb::c_api;

extern "C" {

ebb_status_t* ebb_tensor_create(ebb_dtype_t dtype, const int64_t* shape, size_t rank, ebb_tensor_t** out) {
  constexpr const char* kFn = "ebb_tensor_create";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    Result<DataType> type = DenseType(kFn, dtype);
    if (!type.ok()) return ToC(type.status());
    Result<Shape> s = ShapeOf(kFn, *type, shape, rank);
    if (!s.ok()) return ToC(s.status());
    Result<Tensor> t = Tensor::Allocate(*type, std::move(*s));
    if (!t.ok()) return ToC(t.status());
    return Wrap(std::move(t).value(), out);
  });
}

ebb_status_t* ebb_tensor_create_copy(ebb_dtype_t dtype, const int64_t* shape, size_t rank, const void* data,
                                     size_t byte_size, ebb_tensor_t** out) {
  constexpr const char* kFn = "ebb_tensor_create_copy";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    DenseSpec spec;
    if (ebb_status_t* st = CheckDense(kFn, dtype, shape, rank, data, byte_size, &spec)) return st;
    Result<Tensor> t = Tensor::Allocate(spec.type, std::move(spec.shape));
    if (!t.ok()) return ToC(t.status());
    if (byte_size > 0) std::memcpy(t->data(), data, byte_size);
    return Wrap(std::move(t).value(), out);
  });
}

ebb_status_t* ebb_tensor_borrow(ebb_dtype_t dtype, const int64_t* shape, size_t rank, void* data, size_t byte_size,
                                ebb_tensor_t** out) {
  constexpr const char* kFn = "ebb_tensor_borrow";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    DenseSpec spec;
    if (ebb_status_t* st = CheckDense(kFn, dtype, shape, rank, data, byte_size, &spec)) return st;
    const size_t align = ElementSize(spec.type);
    if (align > 1 && reinterpret_cast<uintptr_t>(data) % align != 0) {
      return Error(StatusCode::kInvalidArgument, std::string(kFn) + ": data is not aligned for " +
                                                     DataTypeName(spec.type) + " (" + std::to_string(align) + " bytes)");
    }
    return Wrap(Tensor::Borrow(spec.type, std::move(spec.shape), static_cast<std::byte*>(data)), out);
  });
}

ebb_status_t* ebb_tensor_create_strings(const int64_t* shape, size_t rank, const char* const* values,
                                        const size_t* lengths, size_t count, ebb_tensor_t** out) {
  constexpr const char* kFn = "ebb_tensor_create_strings";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    Result<Shape> s = ShapeOf(kFn, DataType::kBytes, shape, rank);
    if (!s.ok()) return ToC(s.status());
    if (static_cast<int64_t>(count) != ElementCount(*s)) {
      return Error(StatusCode::kInvalidArgument, std::string(kFn) + ": " + std::to_string(count) +
                                                     " values for shape " + ShapeToString(*s));
    }
    if (count > 0 && (!values || !lengths)) return NullArgument(kFn, !values ? "values" : "lengths");
    std::vector<std::string_view> views;
    views.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      if (!values[i] && lengths[i] > 0) {
        return Error(StatusCode::kInvalidArgument, std::string(kFn) + ": values[" + std::to_string(i) + "] is NULL");
      }
      if (lengths[i] >= (size_t{1} << 32)) {
        return Error(StatusCode::kInvalidArgument, std::string(kFn) + ": values[" + std::to_string(i) +
                                                       "] is 4 GiB or more");
      }
      views.emplace_back(values[i] ? values[i] : "", lengths[i]);
    }
    return Wrap(Tensor::FromStrings(std::move(*s), std::span<const std::string_view>(views)), out);
  });
}

void ebb_tensor_destroy(ebb_tensor_t* tensor) { delete tensor; }

ebb_dtype_t ebb_tensor_dtype(const ebb_tensor_t* tensor) {
  return tensor ? ToC(tensor->tensor.type()) : EBB_FLOAT32;
}

size_t ebb_tensor_rank(const ebb_tensor_t* tensor) { return tensor ? tensor->tensor.shape().size() : 0; }

const int64_t* ebb_tensor_shape(const ebb_tensor_t* tensor) {
  if (!tensor || tensor->tensor.shape().empty()) return nullptr;
  return tensor->tensor.shape().data();
}

int64_t ebb_tensor_element_count(const ebb_tensor_t* tensor) { return tensor ? tensor->tensor.element_count() : 0; }

size_t ebb_tensor_byte_size(const ebb_tensor_t* tensor) { return tensor ? tensor->tensor.byte_size() : 0; }

const void* ebb_tensor_data(const ebb_tensor_t* tensor) { return tensor ? tensor->tensor.data() : nullptr; }

void* ebb_tensor_mutable_data(ebb_tensor_t* tensor) { return tensor ? tensor->tensor.data() : nullptr; }

int ebb_tensor_borrowed(const ebb_tensor_t* tensor) { return tensor && tensor->tensor.borrowed() ? 1 : 0; }

ebb_status_t* ebb_tensor_string(const ebb_tensor_t* tensor, size_t index, const char** data, size_t* length) {
  constexpr const char* kFn = "ebb_tensor_string";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!tensor) return NullArgument(kFn, "tensor");
    if (!data || !length) return NullArgument(kFn, !data ? "data" : "length");
    if (tensor->tensor.type() != DataType::kBytes) {
      return Error(StatusCode::kInvalidArgument, std::string(kFn) + ": the tensor is " +
                                                     DataTypeName(tensor->tensor.type()) + ", not BYTES");
    }
    std::vector<std::string_view> values = tensor->tensor.strings();
    if (index >= values.size()) {
      return Error(StatusCode::kInvalidArgument, std::string(kFn) + ": index " + std::to_string(index) +
                                                     " out of range (" + std::to_string(values.size()) + " elements)");
    }
    *data = values[index].data();
    *length = values[index].size();
    return nullptr;
  });
}

int ebb_tensor_bitwise_equal(const ebb_tensor_t* a, const ebb_tensor_t* b) {
  return a && b && a->tensor.BitwiseEquals(b->tensor) ? 1 : 0;
}

size_t ebb_tensors_count(const ebb_tensors_t* list) { return list ? list->tensors.size() : 0; }

const char* ebb_tensors_name(const ebb_tensors_t* list, size_t index) {
  return list && index < list->names.size() ? list->names[index].c_str() : "";
}

const ebb_tensor_t* ebb_tensors_get(const ebb_tensors_t* list, size_t index) {
  return list && index < list->tensors.size() ? list->tensors[index].get() : nullptr;
}

const ebb_tensor_t* ebb_tensors_find(const ebb_tensors_t* list, const char* name) {
  if (!list || !name) return nullptr;
  for (size_t i = 0; i < list->names.size(); ++i) {
    if (list->names[i] == name && list->tensors[i]) return list->tensors[i].get();
  }
  return nullptr;
}

ebb_tensor_t* ebb_tensors_take(ebb_tensors_t* list, size_t index) {
  return list && index < list->tensors.size() ? list->tensors[index].release() : nullptr;
}

void ebb_tensors_destroy(ebb_tensors_t* list) { delete list; }

}  // extern "C"
