#include "protocol.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <span>
#include <utility>

#include <nlohmann/json.hpp>

namespace ebb::server {
namespace {

using nlohmann::json;

static_assert(std::endian::native == std::endian::little,
              "binary tensor data is little-endian and is copied as is");

// Deepest nesting of a "data" array; real tensors need no more than their rank.
constexpr int kMaxDataDepth = 64;
// Integral JSON floats are accepted for integer types only up to this magnitude, where every
// integer is exact in a double.
constexpr double kMaxExactIntegerInDouble = 9007199254740992.0;  // 2^53

// ---- 16-bit floats -----------------------------------------------------------------------------

struct SmallFloatFormat {
  int exponent_bits;
  int mantissa_bits;
};
constexpr SmallFloatFormat kHalf{5, 10};
constexpr SmallFloatFormat kBrain{8, 7};

uint16_t InfinityBits(SmallFloatFormat f) {
  return static_cast<uint16_t>(((1 << f.exponent_bits) - 1) << f.mantissa_bits);
}

// Rounds `value` to nearest-even in format `f`; overflow gives infinity.
uint16_t ToSmallFloat(double value, SmallFloatFormat f) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const int sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isnan(value)) return static_cast<uint16_t>(sign | InfinityBits(f) | (1 << (f.mantissa_bits - 1)));
  const double magnitude = std::fabs(value);
  if (std::isinf(magnitude)) return static_cast<uint16_t>(sign | InfinityBits(f));
  if (magnitude == 0) return static_cast<uint16_t>(sign);
  int exponent = 0;
  std::frexp(magnitude, &exponent);
  int e = exponent - 1;  // magnitude is in [2^e, 2^(e+1))
  if (e < 1 - bias) {
    // Subnormal: a fixed step of 2^(1-bias-mantissa_bits). Rounding up to 2^mantissa_bits
    // yields exactly the smallest normal's bit pattern.
    const double steps = std::nearbyint(std::ldexp(magnitude, f.mantissa_bits - (1 - bias)));
    return static_cast<uint16_t>(sign | static_cast<int>(steps));
  }
  double mantissa = std::nearbyint(std::ldexp(magnitude, f.mantissa_bits - e));  // [2^mb, 2^(mb+1)]
  if (mantissa == std::ldexp(1.0, f.mantissa_bits + 1)) {
    mantissa /= 2;
    ++e;
  }
  if (e > bias) return static_cast<uint16_t>(sign | InfinityBits(f));
  const int fraction = static_cast<int>(mantissa) - (1 << f.mantissa_bits);
  return static_cast<uint16_t>(sign | ((e + bias) << f.mantissa_bits) | fraction);
}

// Exact value of the 16-bit float `bits` in format `f`.
double FromSmallFloat(uint16_t bits, SmallFloatFormat f) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const int exponent_field = (bits >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int fraction = bits & ((1 << f.mantissa_bits) - 1);
  double magnitude;
  if (exponent_field == (1 << f.exponent_bits) - 1) {
    magnitude = fraction ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exponent_field == 0) {
    magnitude = std::ldexp(fraction, 1 - bias - f.mantissa_bits);
  } else {
    magnitude = std::ldexp(fraction + (1 << f.mantissa_bits), exponent_field - bias - f.mantissa_bits);
  }
  return (bits & 0x8000) ? -magnitude : magnitude;
}

// ---- JSON scalar -> element ------------------------------------------------------------------
// nlohmann's get_ptr<number_integer_t*> also answers for unsigned numbers (reading the wrong union
// member), so these accessors test the exact value type.

const int64_t* AsSigned(const json& v) {
  return v.type() == json::value_t::number_integer ? v.get_ptr<const json::number_integer_t*>() : nullptr;
}
const uint64_t* AsUnsigned(const json& v) { return v.get_ptr<const json::number_unsigned_t*>(); }
const double* AsFloat(const json& v) { return v.get_ptr<const json::number_float_t*>(); }

// Each decoder returns false when the value has the wrong JSON type or is out of range.

template <typename T>
bool DecodeInteger(const json& v, T* out) {
  if (const uint64_t* u = AsUnsigned(v)) {
    if (!std::in_range<T>(*u)) return false;
    *out = static_cast<T>(*u);
    return true;
  }
  if (const int64_t* i = AsSigned(v)) {
    if (!std::in_range<T>(*i)) return false;
    *out = static_cast<T>(*i);
    return true;
  }
  const double* d = AsFloat(v);
  if (d == nullptr || !(std::fabs(*d) <= kMaxExactIntegerInDouble) || *d != std::trunc(*d)) return false;
  const auto whole = static_cast<int64_t>(*d);
  if (!std::in_range<T>(whole)) return false;
  *out = static_cast<T>(whole);
  return true;
}

bool DecodeBool(const json& v, uint8_t* out) {
  const auto* b = v.get_ptr<const json::boolean_t*>();
  if (b == nullptr) return false;
  *out = *b ? 1 : 0;
  return true;
}

// Any JSON number, or null for NaN.
bool DecodeFloat64(const json& v, double* out) {
  if (v.is_null()) {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (const double* d = AsFloat(v)) {
    *out = *d;
    return std::isfinite(*d);
  }
  if (const int64_t* i = AsSigned(v)) {
    *out = static_cast<double>(*i);
    return true;
  }
  if (const uint64_t* u = AsUnsigned(v)) {
    *out = static_cast<double>(*u);
    return true;
  }
  return false;
}

bool DecodeFloat32(const json& v, float* out) {
  double d = 0;
  // Magnitudes from the midpoint between FLT_MAX and 2^128 upwards round to infinity.
  if (!DecodeFloat64(v, &d) || std::fabs(d) >= 0x1.ffffffp127) return false;
  *out = static_cast<float>(d);
  return true;
}

bool DecodeSmallFloat(const json& v, SmallFloatFormat f, uint16_t* out) {
  double d = 0;
  if (!DecodeFloat64(v, &d)) return false;
  *out = ToSmallFloat(d, f);
  return std::isnan(d) || (*out & 0x7fff) != InfinityBits(f);
}

bool DecodeHalf(const json& v, uint16_t* out) { return DecodeSmallFloat(v, kHalf, out); }
bool DecodeBrain(const json& v, uint16_t* out) { return DecodeSmallFloat(v, kBrain, out); }

// ---- Messages ----------------------------------------------------------------------------------

std::string Quote(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

// A JSON value for an error message, cut short when long.
std::string Excerpt(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMax = 40;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

template <typename T>
std::string IntegerRange() {
  return "an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
         std::to_string(std::numeric_limits<T>::max()) + "]";
}

// What a JSON element of `type` must be.
std::string Requirement(DataType type) {
  switch (type) {
    case DataType::kBool: return "true or false";
    case DataType::kUInt8: return IntegerRange<uint8_t>();
    case DataType::kUInt16: return IntegerRange<uint16_t>();
    case DataType::kUInt32: return IntegerRange<uint32_t>();
    case DataType::kUInt64: return IntegerRange<uint64_t>();
    case DataType::kInt8: return IntegerRange<int8_t>();
    case DataType::kInt16: return IntegerRange<int16_t>();
    case DataType::kInt32: return IntegerRange<int32_t>();
    case DataType::kInt64: return IntegerRange<int64_t>();
    case DataType::kFloat16: return "a number within FP16 range (|x| <= 65504) or null";
    case DataType::kBFloat16: return "a number within BF16 range or null";
    case DataType::kFloat32: return "a number within FP32 range or null";
    case DataType::kFloat64: return "a number or null";
    case DataType::kBytes: return "a string";
  }
  return "a valid value";
}

// Where a JSON tensor is being decoded, for error messages.
struct DecodeSite {
  const std::string& label;  // "input 'x'"
  DataType type;
};

Status ElementError(const DecodeSite& site, int64_t index, const json& value) {
  return InvalidArgument(site.label + ": element " + std::to_string(index) + " is " + Excerpt(value) + ", but " +
                         DataTypeName(site.type) + " needs " + Requirement(site.type));
}

// ---- JSON "data" -> tensor ---------------------------------------------------------------------

// Counts the scalars under the array `node`; false when nested deeper than kMaxDataDepth.
bool CountLeaves(const json& node, int depth, int64_t* count) {
  if (depth > kMaxDataDepth) return false;
  for (const json& child : node) {
    if (!child.is_array()) {
      ++*count;
    } else if (!CountLeaves(child, depth + 1, count)) {
      return false;
    }
  }
  return true;
}

// Decodes the scalars under `node` into out[*next...] in row-major order.
// REQUIRES: CountLeaves() succeeded and matched the size of `out`.
template <typename T, typename Decode>
Status FillLeaves(const json& node, Decode decode, T* out, int64_t* next, const DecodeSite& site) {
  for (const json& child : node) {
    if (child.is_array()) {
      EBB_RETURN_IF_ERROR(FillLeaves(child, decode, out, next, site));
    } else if (decode(child, &out[*next])) {
      ++*next;
    } else {
      return ElementError(site, *next, child);
    }
  }
  return Status::Ok();
}

template <typename T, typename Decode>
Status Fill(const json& data, Decode decode, Tensor* tensor, const DecodeSite& site) {
  int64_t next = 0;
  return FillLeaves(data, decode, reinterpret_cast<T*>(tensor->data()), &next, site);
}

Status DecodeJsonData(const json& data, const DecodeSite& site, Tensor* t) {
  switch (t->type()) {
    case DataType::kBool: return Fill<uint8_t>(data, DecodeBool, t, site);
    case DataType::kUInt8: return Fill<uint8_t>(data, DecodeInteger<uint8_t>, t, site);
    case DataType::kUInt16: return Fill<uint16_t>(data, DecodeInteger<uint16_t>, t, site);
    case DataType::kUInt32: return Fill<uint32_t>(data, DecodeInteger<uint32_t>, t, site);
    case DataType::kUInt64: return Fill<uint64_t>(data, DecodeInteger<uint64_t>, t, site);
    case DataType::kInt8: return Fill<int8_t>(data, DecodeInteger<int8_t>, t, site);
    case DataType::kInt16: return Fill<int16_t>(data, DecodeInteger<int16_t>, t, site);
    case DataType::kInt32: return Fill<int32_t>(data, DecodeInteger<int32_t>, t, site);
    case DataType::kInt64: return Fill<int64_t>(data, DecodeInteger<int64_t>, t, site);
    case DataType::kFloat16: return Fill<uint16_t>(data, DecodeHalf, t, site);
    case DataType::kBFloat16: return Fill<uint16_t>(data, DecodeBrain, t, site);
    case DataType::kFloat32: return Fill<float>(data, DecodeFloat32, t, site);
    case DataType::kFloat64: return Fill<double>(data, DecodeFloat64, t, site);
    case DataType::kBytes: break;  // refused by ParseDatatype
  }
  return Internal("unhandled data type");
}

// ---- Request fields ----------------------------------------------------------------------------

// The string member `key` of `object`; `where` prefixes the error.
Result<std::string> RequiredString(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) return InvalidArgument(where + ": missing '" + key + "'");
  const auto* s = it->get_ptr<const json::string_t*>();
  if (s == nullptr) return InvalidArgument(where + ": '" + key + "' must be a string, got " + Excerpt(*it));
  return *s;
}

// The "parameters" member of `object`: nullptr when absent, an error when not an object.
Result<const json*> Parameters(const json& object, const std::string& where) {
  const auto it = object.find("parameters");
  if (it == object.end()) return static_cast<const json*>(nullptr);
  if (!it->is_object()) return InvalidArgument(where + ": 'parameters' must be an object");
  return &*it;
}

Result<DataType> ParseDatatype(const json& input, const std::string& label) {
  Result<std::string> name = RequiredString(input, "datatype", label);
  if (!name.ok()) return name.status();
  if (*name == "BYTES") return InvalidArgument(label + ": BYTES tensors are not supported");
  const std::optional<DataType> type = ParseDataType(*name);
  if (!type) return InvalidArgument(label + ": unknown datatype " + Quote(*name));
  return *type;
}

Result<Shape> ParseShape(const json& input, const std::string& label) {
  const auto it = input.find("shape");
  if (it == input.end()) return InvalidArgument(label + ": missing 'shape'");
  if (!it->is_array()) return InvalidArgument(label + ": 'shape' must be an array of integers");
  Shape shape;
  shape.reserve(it->size());
  for (const json& dim : *it) {
    if (const int64_t* i = AsSigned(dim); i != nullptr && *i < 0) {
      return InvalidArgument(label + ": negative dimension " + std::to_string(*i) + " in 'shape'");
    }
    if (!dim.is_number_integer()) {
      return InvalidArgument(label + ": 'shape' must be an array of non-negative integers, got " + Excerpt(dim));
    }
    int64_t value = 0;
    if (!DecodeInteger(dim, &value)) return InvalidArgument(label + ": dimension " + Excerpt(dim) + " is too large");
    shape.push_back(value);
  }
  return shape;
}

// Element count of `shape`, refusing shapes whose byte size would overflow int64 (checked on
// the product of the non-zero dims, so ElementCount() can never overflow either).
Result<int64_t> CheckedElementCount(const Shape& shape, DataType type, const std::string& label,
                                    const ParseOptions& options) {
  const int64_t limit = std::numeric_limits<int64_t>::max() / static_cast<int64_t>(ElementSize(type));
  int64_t product = 1;
  bool has_zero = false;
  for (const int64_t dim : shape) {
    if (dim == 0) {
      has_zero = true;
    } else if (product > limit / dim) {
      return InvalidArgument(label + ": shape " + ShapeToString(shape) + " is too large");
    } else {
      product *= dim;
    }
  }
  const int64_t count = has_zero ? 0 : product;
  if (count > options.max_input_elements) {
    return InvalidArgument(label + ": shape " + ShapeToString(shape) + " has " + std::to_string(count) +
                           " elements, more than the limit of " + std::to_string(options.max_input_elements));
  }
  return count;
}

// parameters.binary_data_size of an input; nullopt when not given.
Result<std::optional<int64_t>> ParseBinaryDataSize(const json& input, const std::string& label) {
  Result<const json*> params = Parameters(input, label);
  if (!params.ok()) return params.status();
  if (*params == nullptr) return std::optional<int64_t>();
  const auto it = (*params)->find("binary_data_size");
  if (it == (*params)->end()) return std::optional<int64_t>();
  int64_t size = 0;
  if (!DecodeInteger(*it, &size) || size < 0) {
    return InvalidArgument(label + ": parameters.binary_data_size must be a non-negative integer, got " +
                           Excerpt(*it));
  }
  return std::optional<int64_t>(size);
}

// Everything about one input except its data.
struct InputSpec {
  std::string name;
  std::string label;  // "input 'name'", for messages
  DataType type = DataType::kFloat32;
  Shape shape;
  int64_t count = 0;
  std::optional<int64_t> binary_size;
  const json* data = nullptr;  // the "data" member, when present
};

Status ParseInputSpec(const json& input, size_t index, const ParseOptions& options, InputSpec* spec) {
  const std::string where = "inputs[" + std::to_string(index) + "]";
  if (!input.is_object()) return InvalidArgument(where + " must be an object");
  Result<std::string> name = RequiredString(input, "name", where);
  if (!name.ok()) return name.status();
  spec->name = std::move(*name);
  spec->label = "input " + Quote(spec->name);
  Result<DataType> type = ParseDatatype(input, spec->label);
  if (!type.ok()) return type.status();
  spec->type = *type;
  Result<Shape> shape = ParseShape(input, spec->label);
  if (!shape.ok()) return shape.status();
  spec->shape = std::move(*shape);
  Result<int64_t> count = CheckedElementCount(spec->shape, spec->type, spec->label, options);
  if (!count.ok()) return count.status();
  spec->count = *count;
  Result<std::optional<int64_t>> binary_size = ParseBinaryDataSize(input, spec->label);
  if (!binary_size.ok()) return binary_size.status();
  spec->binary_size = *binary_size;
  const auto data = input.find("data");
  spec->data = data == input.end() ? nullptr : &*data;
  if (spec->data != nullptr && spec->binary_size) {
    return InvalidArgument(spec->label + ": has both 'data' and parameters.binary_data_size");
  }
  if (spec->data == nullptr && !spec->binary_size) {
    return InvalidArgument(spec->label + ": has neither 'data' nor parameters.binary_data_size");
  }
  return Status::Ok();
}

Result<Tensor> DecodeJsonTensor(const InputSpec& spec) {
  if (!spec.data->is_array()) return InvalidArgument(spec.label + ": 'data' must be an array");
  int64_t leaves = 0;
  if (!CountLeaves(*spec.data, 1, &leaves)) {
    return InvalidArgument(spec.label + ": 'data' is nested more than " + std::to_string(kMaxDataDepth) +
                           " levels deep");
  }
  if (leaves != spec.count) {
    return InvalidArgument(spec.label + ": 'data' has " + std::to_string(leaves) + " elements but shape " +
                           ShapeToString(spec.shape) + " needs " + std::to_string(spec.count));
  }
  Tensor tensor(spec.type, spec.shape);
  EBB_RETURN_IF_ERROR(DecodeJsonData(*spec.data, DecodeSite{spec.label, spec.type}, &tensor));
  return tensor;
}

// The part of the body after the JSON header, consumed input by input.
struct BinarySection {
  std::string_view rest;
  bool header_length_given = false;
};

Result<Tensor> TakeBinaryTensor(const InputSpec& spec, BinarySection* binary) {
  const int64_t expected = spec.count * static_cast<int64_t>(ElementSize(spec.type));
  if (*spec.binary_size != expected) {
    return InvalidArgument(spec.label + ": parameters.binary_data_size is " + std::to_string(*spec.binary_size) +
                           " but shape " + ShapeToString(spec.shape) + " of " + DataTypeName(spec.type) + " needs " +
                           std::to_string(expected) + " bytes");
  }
  const auto size = static_cast<size_t>(expected);
  if (size > binary->rest.size()) {
    return InvalidArgument(spec.label + ": binary data needs " + std::to_string(size) + " bytes but only " +
                           std::to_string(binary->rest.size()) + " remain in the body" +
                           (binary->header_length_given ? "" : " (no Inference-Header-Content-Length was given)"));
  }
  Tensor tensor(spec.type, spec.shape);
  if (size > 0) std::memcpy(tensor.data(), binary->rest.data(), size);
  binary->rest.remove_prefix(size);
  if (spec.type == DataType::kBool) {
    const std::span<const uint8_t> bytes = tensor.values<uint8_t>();
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] > 1) {
        return InvalidArgument(spec.label + ": BOOL element " + std::to_string(i) + " is byte " +
                               std::to_string(bytes[i]) + "; binary BOOL data must be 0 or 1");
      }
    }
  }
  return tensor;
}

Status ParseInputs(const json& root, const ParseOptions& options, BinarySection* binary, InferRequest* request) {
  const auto it = root.find("inputs");
  if (it == root.end()) return InvalidArgument("request has no 'inputs'");
  if (!it->is_array()) return InvalidArgument("'inputs' must be an array");
  std::set<std::string> seen;
  for (size_t i = 0; i < it->size(); ++i) {
    InputSpec spec;
    EBB_RETURN_IF_ERROR(ParseInputSpec((*it)[i], i, options, &spec));
    if (!seen.insert(spec.name).second) return InvalidArgument("duplicate input name " + Quote(spec.name));
    Result<Tensor> tensor = spec.data != nullptr ? DecodeJsonTensor(spec) : TakeBinaryTensor(spec, binary);
    if (!tensor.ok()) return tensor.status();
    request->inputs.push_back(NamedTensor{std::move(spec.name), std::move(*tensor)});
  }
  return Status::Ok();
}

Status ParseOneOutput(const json& output, size_t index, RestInferRequest* rest) {
  InferRequest* request = &rest->request;
  const std::string where = "outputs[" + std::to_string(index) + "]";
  if (!output.is_object()) return InvalidArgument(where + " must be an object");
  Result<std::string> name = RequiredString(output, "name", where);
  if (!name.ok()) return name.status();
  const std::string label = "output " + Quote(*name);
  if (std::find(request->outputs.begin(), request->outputs.end(), *name) != request->outputs.end()) {
    return InvalidArgument(label + " is requested twice");
  }
  request->outputs.push_back(*name);
  Result<const json*> params = Parameters(output, label);
  if (!params.ok()) return params.status();
  if (*params == nullptr) return Status::Ok();
  if (const auto k = (*params)->find("classification"); k != (*params)->end()) {
    int64_t count = 0;
    if (!DecodeInteger(*k, &count) || count < 0) {
      return InvalidArgument(label + ": parameters.classification must be a non-negative integer, got " + Excerpt(*k));
    }
    if (count > 0) request->classification[*name] = count;  // 0: not requested (as Triton's clients send it)
  }
  const auto it = (*params)->find("binary_data");
  if (it == (*params)->end()) return Status::Ok();
  const auto* binary = it->get_ptr<const json::boolean_t*>();
  if (binary == nullptr) {
    return InvalidArgument(label + ": parameters.binary_data must be true or false, got " + Excerpt(*it));
  }
  (*binary ? rest->binary.binary : rest->binary.json).insert(*name);
  return Status::Ok();
}

Status ParseOutputs(const json& root, RestInferRequest* request) {
  const auto it = root.find("outputs");
  if (it == root.end()) return Status::Ok();
  if (!it->is_array()) return InvalidArgument("'outputs' must be an array");
  for (size_t i = 0; i < it->size(); ++i) EBB_RETURN_IF_ERROR(ParseOneOutput((*it)[i], i, request));
  return Status::Ok();
}

// "id" and the request-level parameters ebb understands.
Status ParseRequestFields(const json& root, RestInferRequest* rest) {
  InferRequest* request = &rest->request;
  if (const auto id = root.find("id"); id != root.end()) {
    const auto* s = id->get_ptr<const json::string_t*>();
    if (s == nullptr) return InvalidArgument("'id' must be a string, got " + Excerpt(*id));
    request->id = *s;
  }
  Result<const json*> params = Parameters(root, "request");
  if (!params.ok()) return params.status();
  if (*params == nullptr) return Status::Ok();
  if (const auto it = (*params)->find("binary_data_output"); it != (*params)->end()) {
    const auto* b = it->get_ptr<const json::boolean_t*>();
    if (b == nullptr) return InvalidArgument("parameters.binary_data_output must be true or false");
    rest->binary.all = *b;
  }
  if (const auto it = (*params)->find("keep_alive"); it != (*params)->end()) {
    int64_t ms = 0;
    if (!DecodeInteger(*it, &ms)) return InvalidArgument("parameters.keep_alive must be an integer (milliseconds)");
    request->keep_alive_ms = ms;
  }
  return Status::Ok();
}

// ---- Encoding ----------------------------------------------------------------------------------

template <typename T>
void AppendNumber(std::string* out, T value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out->append(buffer, result.ptr);
}

// Shortest round-tripping form; null for NaN/Inf; "-0.0" so that a JSON parser keeps the sign.
template <typename F>
void AppendFloating(std::string* out, F value) {
  if (!std::isfinite(value)) {
    *out += "null";
  } else if (value == 0 && std::signbit(value)) {
    *out += "-0.0";
  } else {
    AppendNumber(out, value);
  }
}

// Shortest form that a double-precision JSON parser (ours, Python's, ...) reads back as exactly
// `value`. The shortest float form almost always is; where rounding it first to double and then to
// float lands elsewhere (e.g. 7.038531e-26), the exact double form is written instead.
void AppendFloat32(std::string* out, float value) {
  if (!std::isfinite(value) || value == 0) return AppendFloating(out, value);
  char buffer[32];
  char* end = std::to_chars(buffer, buffer + sizeof(buffer), value).ptr;
  double parsed = 0;
  std::from_chars(buffer, end, parsed);
  if (static_cast<float>(parsed) != value) {
    end = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<double>(value)).ptr;
  }
  out->append(buffer, end);
}

template <typename T, typename Append>
void AppendValues(std::string* out, const Tensor& tensor, Append append) {
  const auto* values = reinterpret_cast<const T*>(tensor.data());
  const size_t count = tensor.byte_size() / sizeof(T);
  *out += '[';
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) *out += ',';
    append(out, values[i]);
  }
  *out += ']';
}

void AppendJsonData(std::string* out, const Tensor& t) {
  const auto integer = [](std::string* o, auto v) { AppendNumber(o, v); };
  switch (t.type()) {
    case DataType::kBool:
      return AppendValues<uint8_t>(out, t, [](std::string* o, uint8_t v) { *o += v ? "true" : "false"; });
    case DataType::kUInt8: return AppendValues<uint8_t>(out, t, integer);
    case DataType::kUInt16: return AppendValues<uint16_t>(out, t, integer);
    case DataType::kUInt32: return AppendValues<uint32_t>(out, t, integer);
    case DataType::kUInt64: return AppendValues<uint64_t>(out, t, integer);
    case DataType::kInt8: return AppendValues<int8_t>(out, t, integer);
    case DataType::kInt16: return AppendValues<int16_t>(out, t, integer);
    case DataType::kInt32: return AppendValues<int32_t>(out, t, integer);
    case DataType::kInt64: return AppendValues<int64_t>(out, t, integer);
    case DataType::kFloat16:
      return AppendValues<uint16_t>(
          out, t, [](std::string* o, uint16_t v) { AppendFloat32(o, static_cast<float>(FromSmallFloat(v, kHalf))); });
    case DataType::kBFloat16:
      return AppendValues<uint16_t>(
          out, t, [](std::string* o, uint16_t v) { AppendFloat32(o, static_cast<float>(FromSmallFloat(v, kBrain))); });
    case DataType::kFloat32: return AppendValues<float>(out, t, AppendFloat32);
    case DataType::kFloat64: return AppendValues<double>(out, t, AppendFloating<double>);
    case DataType::kBytes: {
      // JSON strings; bytes that are not UTF-8 become U+FFFD (binary data keeps them).
      *out += '[';
      bool first = true;
      for (std::string_view v : t.strings()) {
        if (!first) *out += ',';
        first = false;
        *out += Quote(v);
      }
      *out += ']';
      return;
    }
  }
}

// Appends one $response_output to `header`, and its bytes to `binary` when `as_binary`.
void AppendOutput(const NamedTensor& output, bool as_binary, std::string* header, std::string* binary) {
  *header += "{\"name\":" + Quote(output.name) + ",\"shape\":[";
  const Shape& shape = output.tensor.shape();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) *header += ',';
    AppendNumber(header, shape[i]);
  }
  *header += "],\"datatype\":\"";
  *header += DataTypeName(output.tensor.type());
  if (as_binary) {
    *header += "\",\"parameters\":{\"binary_data_size\":";
    AppendNumber(header, output.tensor.byte_size());
    *header += "}}";
    binary->append(reinterpret_cast<const char*>(output.tensor.data()), output.tensor.byte_size());
    return;
  }
  *header += "\",\"data\":";
  AppendJsonData(header, output.tensor);
  *header += '}';
}

}  // namespace

Result<size_t> ParseHeaderContentLength(std::string_view value) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  while (!value.empty() && is_space(value.front())) value.remove_prefix(1);
  while (!value.empty() && is_space(value.back())) value.remove_suffix(1);
  size_t length = 0;
  const char* const last = value.data() + value.size();
  if (value.empty() || std::from_chars(value.data(), last, length) != std::from_chars_result{last, std::errc()}) {
    return InvalidArgument(std::string(kInferenceHeaderContentLength) + " must be a non-negative integer, got " +
                           Quote(value));
  }
  return length;
}

Result<RestInferRequest> ParseInferRequest(std::string_view body, std::optional<size_t> header_length,
                                       const ParseOptions& options) {
  if (header_length && *header_length > body.size()) {
    return InvalidArgument(std::string(kInferenceHeaderContentLength) + " is " + std::to_string(*header_length) +
                           " but the body has only " + std::to_string(body.size()) + " bytes");
  }
  const std::string_view header = body.substr(0, header_length.value_or(body.size()));
  const json root = json::parse(header.begin(), header.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return InvalidArgument(header_length ? "the request's JSON header (the first " + std::to_string(*header_length) +
                                               " bytes of the body) is not valid JSON"
                                         : std::string("the request body is not valid JSON"));
  }
  if (!root.is_object()) return InvalidArgument("the request must be a JSON object");
  RestInferRequest request;
  EBB_RETURN_IF_ERROR(ParseRequestFields(root, &request));
  BinarySection binary{body.substr(header.size()), header_length.has_value()};
  EBB_RETURN_IF_ERROR(ParseInputs(root, options, &binary, &request.request));
  if (!binary.rest.empty()) {
    return InvalidArgument("the body has " + std::to_string(binary.rest.size()) +
                           " trailing bytes after the JSON header and the binary tensor data of the inputs");
  }
  EBB_RETURN_IF_ERROR(ParseOutputs(root, &request));
  return request;
}

bool BinaryOutputs::Wants(const std::string& name) const {
  if (binary.contains(name)) return true;
  return all && !json.contains(name);
}

EncodedResponse EncodeInferResponse(const InferResponse& response, const BinaryOutputs& binary_outputs) {
  const std::vector<NamedTensor>& outputs = response.outputs;
  std::string header = "{\"model_name\":" + Quote(response.model_name);
  if (!response.model_version.empty()) header += ",\"model_version\":" + Quote(response.model_version);
  if (!response.id.empty()) header += ",\"id\":" + Quote(response.id);
  header += ",\"outputs\":[";
  std::string binary;
  bool any_binary = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i > 0) header += ',';
    const bool as_binary = binary_outputs.Wants(outputs[i].name);
    any_binary = any_binary || as_binary;
    AppendOutput(outputs[i], as_binary, &header, &binary);
  }
  header += "]}";
  EncodedResponse encoded;
  if (any_binary) encoded.header_length = header.size();
  encoded.body = std::move(header);
  encoded.body += binary;
  return encoded;
}

std::string EncodeError(std::string_view message) { return "{\"error\":" + Quote(message) + "}"; }

}  // namespace ebb::server
