#include "tensor_codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>

namespace ebb::server {
namespace {

static_assert(std::endian::native == std::endian::little, "raw tensor data is little-endian and is copied as is");

using Input = inference::ModelInferRequest::InferInputTensor;
using Contents = inference::InferTensorContents;

// The typed list that holds `type`, for messages.
const char* ContentsField(DataType type) {
  switch (type) {
    case DataType::kBool: return "bool_contents";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32: return "int_contents";
    case DataType::kInt64: return "int64_contents";
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32: return "uint_contents";
    case DataType::kUInt64: return "uint64_contents";
    case DataType::kFloat32: return "fp32_contents";
    case DataType::kFloat64: return "fp64_contents";
    case DataType::kBytes: return "bytes_contents";
    case DataType::kFloat16:
    case DataType::kBFloat16: return nullptr;
  }
  return nullptr;
}

// How many elements each typed list holds.
int TotalTypedElements(const Contents& c) {
  return c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() + c.uint_contents_size() +
         c.uint64_contents_size() + c.fp32_contents_size() + c.fp64_contents_size() + c.bytes_contents_size();
}

// Copies typed values into a tensor of T, refusing values out of T's range.
template <typename T, typename List>
Status CopyTyped(const List& values, const std::string& label, Tensor* t) {
  T* out = reinterpret_cast<T*>(t->data());
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (!std::in_range<T>(v)) {
        return InvalidArgument(label + ": element " + std::to_string(i) + " is " + std::to_string(v) + ", out of the " +
                               DataTypeName(t->type()) + " range");
      }
    }
    out[i] = static_cast<T>(v);
  }
  return Status::Ok();
}

template <typename List>
int Count(const List& values) {
  return values.size();
}

Status FillTyped(const Contents& c, const std::string& label, Tensor* t) {
  switch (t->type()) {
    case DataType::kBool: {
      uint8_t* out = reinterpret_cast<uint8_t*>(t->data());
      for (int i = 0; i < c.bool_contents_size(); ++i) out[i] = c.bool_contents(i) ? 1 : 0;
      return Status::Ok();
    }
    case DataType::kInt8: return CopyTyped<int8_t>(c.int_contents(), label, t);
    case DataType::kInt16: return CopyTyped<int16_t>(c.int_contents(), label, t);
    case DataType::kInt32: return CopyTyped<int32_t>(c.int_contents(), label, t);
    case DataType::kInt64: return CopyTyped<int64_t>(c.int64_contents(), label, t);
    case DataType::kUInt8: return CopyTyped<uint8_t>(c.uint_contents(), label, t);
    case DataType::kUInt16: return CopyTyped<uint16_t>(c.uint_contents(), label, t);
    case DataType::kUInt32: return CopyTyped<uint32_t>(c.uint_contents(), label, t);
    case DataType::kUInt64: return CopyTyped<uint64_t>(c.uint64_contents(), label, t);
    case DataType::kFloat32: return CopyTyped<float>(c.fp32_contents(), label, t);
    case DataType::kFloat64: return CopyTyped<double>(c.fp64_contents(), label, t);
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kBytes: break;
  }
  return Internal("unhandled typed contents");
}

// The element count of the list for `type`.
int TypedCount(const Contents& c, DataType type) {
  switch (type) {
    case DataType::kBool: return Count(c.bool_contents());
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32: return Count(c.int_contents());
    case DataType::kInt64: return Count(c.int64_contents());
    case DataType::kUInt8:
    case DataType::kUInt16:
    case DataType::kUInt32: return Count(c.uint_contents());
    case DataType::kUInt64: return Count(c.uint64_contents());
    case DataType::kFloat32: return Count(c.fp32_contents());
    case DataType::kFloat64: return Count(c.fp64_contents());
    case DataType::kBytes: return Count(c.bytes_contents());
    case DataType::kFloat16:
    case DataType::kBFloat16: return 0;
  }
  return 0;
}

Result<Tensor> DecodeTyped(const Input& input, DataType type, const Shape& shape, int64_t count,
                           const std::string& label) {
  const char* field = ContentsField(type);
  if (field == nullptr) {
    return InvalidArgument(label + ": " + DataTypeName(type) + " has no typed contents; send it in raw_input_contents");
  }
  const Contents& c = input.contents();
  const int given = TypedCount(c, type);
  if (given != TotalTypedElements(c)) {
    return InvalidArgument(label + ": " + DataTypeName(type) + " data goes in contents." + field);
  }
  if (given != count) {
    return InvalidArgument(label + ": contents." + field + " has " + std::to_string(given) + " elements but shape " +
                           ShapeToString(shape) + " needs " + std::to_string(count));
  }
  if (type == DataType::kBytes) {
    std::vector<std::string_view> values(c.bytes_contents().begin(), c.bytes_contents().end());
    return Tensor::FromStrings(shape, values);
  }
  Tensor t(type, shape);
  EBB_RETURN_IF_ERROR(FillTyped(c, label, &t));
  return t;
}

Result<Tensor> DecodeRaw(const std::string& raw, DataType type, const Shape& shape, int64_t count,
                         const std::string& label, bool borrow) {
  if (type == DataType::kBytes) {
    Result<Tensor> t = Tensor::FromSerializedBytes(shape, raw);
    if (!t.ok()) return InvalidArgument(label + ": raw_input_contents: " + t.status().message());
    return t;
  }
  const auto expected = static_cast<uint64_t>(count) * ElementSize(type);
  if (raw.size() != expected) {
    return InvalidArgument(label + ": raw_input_contents has " + std::to_string(raw.size()) + " bytes but shape " +
                           ShapeToString(shape) + " of " + DataTypeName(type) + " needs " + std::to_string(expected));
  }
  Tensor t;
  if (borrow && reinterpret_cast<uintptr_t>(raw.data()) % ElementSize(type) == 0) {
    t = Tensor::Borrow(type, shape, reinterpret_cast<std::byte*>(const_cast<char*>(raw.data())));  // no copy
  } else {
    t = Tensor::Reusable(type, shape);  // warm when a request before left it (ebb/tensor.h)
    if (!raw.empty()) std::memcpy(t.data(), raw.data(), raw.size());
  }
  if (type == DataType::kBool) {
    for (size_t i = 0; i < raw.size(); ++i) {
      if (static_cast<uint8_t>(raw[i]) > 1) {
        return InvalidArgument(label + ": BOOL element " + std::to_string(i) + " is byte " +
                               std::to_string(static_cast<uint8_t>(raw[i])) + "; raw BOOL data must be 0 or 1");
      }
    }
  }
  return t;
}

// The shape and element count of an input, checked before anything is allocated.
Status CheckShape(const Input& input, DataType type, const std::string& label, int64_t max_elements, Shape* shape,
                  int64_t* count) {
  const int64_t size = type == DataType::kBytes ? 4 : static_cast<int64_t>(ElementSize(type));
  const int64_t limit = std::numeric_limits<int64_t>::max() / size;
  int64_t product = 1;
  bool zero = false;
  for (int64_t dim : input.shape()) {
    if (dim < 0) return InvalidArgument(label + ": negative dimension " + std::to_string(dim) + " in 'shape'");
    shape->push_back(dim);
    if (dim == 0) {
      zero = true;
    } else if (product > limit / dim) {
      return InvalidArgument(label + ": shape " + ShapeToString(*shape) + " is too large");
    } else {
      product *= dim;
    }
  }
  *count = zero ? 0 : product;
  if (*count > max_elements) {
    return InvalidArgument(label + ": shape " + ShapeToString(*shape) + " has " + std::to_string(*count) +
                           " elements, more than the limit of " + std::to_string(max_elements));
  }
  return Status::Ok();
}

// The requested outputs; a name asked for twice is refused. A hash set, linear in the number of
// outputs: a search per output was quadratic (200,000 names in 2.4 MB took 92 s of one core).
Status DecodeOutputs(const inference::ModelInferRequest& request, InferRequest* out) {
  std::unordered_set<std::string_view> seen;
  seen.reserve(static_cast<size_t>(request.outputs_size()));
  for (const auto& output : request.outputs()) {
    const std::string label = "output '" + Clip(output.name()) + "'";
    if (!seen.insert(output.name()).second) return InvalidArgument(label + " is requested twice");
    out->outputs.push_back(output.name());
    const auto k = output.parameters().find("classification");
    if (k == output.parameters().end()) continue;
    int64_t count = 0;
    if (k->second.has_int64_param()) {
      count = k->second.int64_param();
    } else if (k->second.has_uint64_param() && k->second.uint64_param() <= uint64_t{std::numeric_limits<int64_t>::max()}) {
      count = static_cast<int64_t>(k->second.uint64_param());
    } else {
      return InvalidArgument(label + ": parameters.classification must be an int64_param");
    }
    if (count < 0) return InvalidArgument(label + ": parameters.classification must not be negative");
    if (count > 0) out->classification[output.name()] = count;
  }
  return Status::Ok();
}

// parameters.keep_alive: an int64_param (or a uint64_param that fits), in the range every front end checks.
Status DecodeKeepAlive(const inference::InferParameter& p, InferRequest* out) {
  std::optional<int64_t> ms;
  std::string as_sent;
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kInt64Param:
      ms = p.int64_param();
      as_sent = std::to_string(p.int64_param());
      break;
    case inference::InferParameter::kUint64Param:
      if (std::in_range<int64_t>(p.uint64_param())) ms = static_cast<int64_t>(p.uint64_param());
      as_sent = std::to_string(p.uint64_param());
      break;
    case inference::InferParameter::kBoolParam: as_sent = "a bool_param"; break;
    case inference::InferParameter::kStringParam: as_sent = "a string_param"; break;
    case inference::InferParameter::kDoubleParam: as_sent = "a double_param"; break;
    case inference::InferParameter::PARAMETER_CHOICE_NOT_SET: as_sent = "no value"; break;
  }
  Result<int64_t> checked = CheckKeepAlive(ms, as_sent);
  if (!checked.ok()) return checked.status();
  out->keep_alive_ms = *checked;
  return Status::Ok();
}

// parameters.sequence_id (int64_param, uint64_param or string_param, as tritonclient's gRPC
// client sends it), sequence_start and sequence_end (bool_param): sequences.h. The messages are Triton's.
Status DecodeSequence(const google::protobuf::Map<std::string, inference::InferParameter>& params, InferRequest* out) {
  std::optional<SequenceId> id;
  if (const auto it = params.find("sequence_id"); it != params.end()) {
    const inference::InferParameter& p = it->second;
    switch (p.parameter_choice_case()) {
      case inference::InferParameter::kInt64Param:
        if (p.int64_param() < 0) {
          return InvalidArgument("parameters.sequence_id must not be negative, got " + std::to_string(p.int64_param()));
        }
        id = static_cast<uint64_t>(p.int64_param());
        break;
      case inference::InferParameter::kUint64Param: id = p.uint64_param(); break;
      case inference::InferParameter::kStringParam: id = p.string_param(); break;
      default:
        return InvalidArgument("invalid value type for 'sequence_id' parameter, expected int64_param or string_param.");
    }
  }
  bool flags[2] = {false, false};
  const char* names[2] = {"sequence_start", "sequence_end"};
  for (int k = 0; k < 2; ++k) {
    const auto it = params.find(names[k]);
    if (it == params.end()) continue;
    if (it->second.parameter_choice_case() != inference::InferParameter::kBoolParam) {
      return InvalidArgument(std::string("invalid value type for '") + names[k] + "' parameter, expected bool_param.");
    }
    flags[k] = it->second.bool_param();
  }
  Result<SequenceControl> control = MakeSequenceControl(std::move(id), flags[0], flags[1]);
  if (!control.ok()) return control.status();
  out->sequence = std::move(control).value();
  return Status::Ok();
}

}  // namespace

Result<InferRequest> DecodeModelInferRequest(const inference::ModelInferRequest& request, int64_t max_input_elements,
                                             bool borrow_raw) {
  InferRequest out;
  out.id = request.id();
  if (const auto it = request.parameters().find("keep_alive"); it != request.parameters().end()) {
    EBB_RETURN_IF_ERROR(DecodeKeepAlive(it->second, &out));
  }
  EBB_RETURN_IF_ERROR(DecodeSequence(request.parameters(), &out));
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return InvalidArgument("raw_input_contents has " + std::to_string(request.raw_input_contents_size()) +
                           " entries for " + std::to_string(request.inputs_size()) + " inputs (one per input, in order)");
  }
  std::unordered_set<std::string_view> seen;
  seen.reserve(static_cast<size_t>(request.inputs_size()));
  for (int i = 0; i < request.inputs_size(); ++i) {
    const Input& input = request.inputs(i);
    const std::string label = "input '" + Clip(input.name()) + "'";
    if (!seen.insert(input.name()).second) return InvalidArgument("duplicate " + label);
    const std::optional<DataType> type = ParseDataType(input.datatype());
    if (!type) return InvalidArgument(label + ": unknown datatype '" + input.datatype() + "'");
    Shape shape;
    int64_t count = 0;
    EBB_RETURN_IF_ERROR(CheckShape(input, *type, label, max_input_elements, &shape, &count));
    if (raw && input.has_contents() && TotalTypedElements(input.contents()) > 0) {
      return InvalidArgument(label + ": has contents although the request uses raw_input_contents");
    }
    Result<Tensor> tensor = raw ? DecodeRaw(request.raw_input_contents(i), *type, shape, count, label, borrow_raw)
                                : DecodeTyped(input, *type, shape, count, label);
    if (!tensor.ok()) return tensor.status();
    out.inputs.push_back({input.name(), std::move(tensor).value()});
  }
  EBB_RETURN_IF_ERROR(DecodeOutputs(request, &out));
  return out;
}

Result<const inference::ModelInferRequest*> ParseModelInferRequest(google::protobuf::io::ZeroCopyInputStream* wire,
                                                                   google::protobuf::Arena* arena) {
  auto* request = google::protobuf::Arena::CreateMessage<inference::ModelInferRequest>(arena);
  if (!request->ParseFromZeroCopyStream(wire)) {
    return InvalidArgument("the ModelInferRequest is not a valid protobuf message (or a string field is not UTF-8)");
  }
  return request;
}

size_t EncodedInferResponse::size() const {
  size_t n = head.size();
  for (const Raw& r : raw) n += r.prefix.size() + r.data.size();
  return n;
}

EncodedInferResponse EncodeModelInferResponse(const InferResponse& response) {
  using google::protobuf::internal::WireFormatLite;
  EncodedInferResponse out;
  inference::ModelInferResponse head;
  head.set_model_name(response.model_name);
  head.set_model_version(response.model_version);
  head.set_id(response.id);
  for (const NamedTensor& output : response.outputs) {
    auto* tensor = head.add_outputs();
    tensor->set_name(output.name);
    tensor->set_datatype(DataTypeName(output.tensor.type()));
    for (int64_t d : output.tensor.shape()) tensor->add_shape(d);
    EncodedInferResponse::Raw raw;
    {
      google::protobuf::io::StringOutputStream stream(&raw.prefix);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.WriteTag(WireFormatLite::MakeTag(inference::ModelInferResponse::kRawOutputContentsFieldNumber,
                                             WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
      coded.WriteVarint64(output.tensor.byte_size());
    }
    raw.data = std::string_view(reinterpret_cast<const char*>(output.tensor.data()), output.tensor.byte_size());
    out.raw.push_back(std::move(raw));
  }
  head.SerializeToString(&out.head);
  return out;
}

}  // namespace ebb::server
