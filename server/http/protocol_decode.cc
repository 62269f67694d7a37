// The request half of the KServe v2 codec (protocol.h): ParseInferRequest and
// ParseHeaderContentLength. The response half is protocol_encode.cc.
#include "protocol.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <span>
#include <utility>

#include <nlohmann/json.hpp>
#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include "ebb/model_config.h"
#include "json_data.h"
#include "protocol_internal.h"

namespace ebb::server {
namespace {

using nlohmann::json;

// Integral JSON floats are accepted for integer types only up to this magnitude, where every
// integer is exact in a double.
constexpr double kMaxExactIntegerInDouble = 9007199254740992.0;  // 2^53

// ---- JSON values of the request's small fields -------------------------------------------------
// Everything but tensor data ("id", "parameters", "outputs", and an input's "name", "datatype",
// "shape", "parameters") is small: the reader below keeps each as the text span it covers, and
// these helpers read a span into a tree of at most kMaxFieldBytes of text.

// A JSON value for an error message, cut short when long. Arrays and objects are named, never
// serialised.
std::string Excerpt(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMax = 40;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

// nlohmann's get_ptr<number_integer_t*> also answers for unsigned numbers (reading the wrong union
// member), so these accessors test the exact value type.
const int64_t* AsSigned(const json& v) {
  return v.type() == json::value_t::number_integer ? v.get_ptr<const json::number_integer_t*>() : nullptr;
}
const uint64_t* AsUnsigned(const json& v) { return v.get_ptr<const json::number_unsigned_t*>(); }

// An integer JSON number within T's range, or an integral float with |value| <= 2^53.
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
  const double* d = v.get_ptr<const json::number_float_t*>();
  if (d == nullptr || !(std::fabs(*d) <= kMaxExactIntegerInDouble) || *d != std::trunc(*d)) return false;
  const auto whole = static_cast<int64_t>(*d);
  if (!std::in_range<T>(whole)) return false;
  *out = static_cast<T>(whole);
  return true;
}

// The text of a member's value: the span runs from just after its key (so ':' and spaces lead).
std::string_view ValueText(std::string_view span) {
  const size_t first = span.find_first_not_of(" \t\r\n:");
  return first == std::string_view::npos ? std::string_view() : span.substr(first);
}

// The tree of the value in `span`; nullopt (no error) when the member was absent. An error
// names `field` of `owner` ("input \"x\": 'shape'"); the message is built only then.
Result<std::optional<json>> ReadField(const std::optional<std::string_view>& span, std::string_view owner,
                                      std::string_view field) {
  if (!span) return std::optional<json>();
  const std::string_view text = ValueText(*span);
  auto what = [&] { return (owner.empty() ? std::string() : std::string(owner) + ": ") + "'" + std::string(field) + "'"; };
  if (text.size() > kMaxFieldBytes) {
    return InvalidArgument(what() + " is longer than the limit of " + std::to_string(kMaxFieldBytes) + " bytes");
  }
  // The reader has checked the syntax and the depth already; what nlohmann refuses more is a
  // number beyond the double range.
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return InvalidArgument(what() + " holds a number beyond the range of a double");
  return std::optional<json>(std::move(value));
}

// The plain forms of an input's fields, read without building a tree: they come with every
// input of every request, and a tree cost ~3,000 instructions a field. Anything else (escapes,
// a sign, a fraction, an overlong field) is nullopt and takes ReadField's way, with its checks
// and messages. The reader has checked the syntax and the encoding already.
std::optional<std::string_view> PlainString(const std::optional<std::string_view>& span) {
  if (!span) return std::nullopt;
  const std::string_view text = ValueText(*span);
  if (text.size() < 2 || text.size() > kMaxFieldBytes || text.front() != '"' || text.back() != '"') return std::nullopt;
  const std::string_view inner = text.substr(1, text.size() - 2);
  if (inner.find('\\') != std::string_view::npos) return std::nullopt;
  return inner;
}

std::optional<Shape> PlainShape(const std::optional<std::string_view>& span) {
  if (!span) return std::nullopt;
  const std::string_view text = ValueText(*span);
  if (text.size() < 2 || text.size() > kMaxFieldBytes || text.front() != '[') return std::nullopt;
  Shape shape;
  shape.reserve(4);  // one allocation for the usual ranks, not one per doubling
  const char* p = text.data() + 1;
  const char* const end = text.data() + text.size();
  auto skip_space = [&] {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) ++p;
  };
  skip_space();
  if (p < end && *p == ']') return ++p == end ? std::optional<Shape>(shape) : std::nullopt;
  for (;;) {
    if (p == end || *p < '0' || *p > '9') return std::nullopt;
    int64_t d = 0;
    const auto [next, ec] = std::from_chars(p, end, d);
    if (ec != std::errc()) return std::nullopt;
    p = next;
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return std::nullopt;
    shape.push_back(d);
    skip_space();
    if (p < end && *p == ',') {
      ++p;
      skip_space();
      continue;
    }
    if (p < end && *p == ']' && p + 1 == end) return shape;
    return std::nullopt;
  }
}

// The string `key` of an object; `where` prefixes the error.
Result<std::string> RequiredString(const std::optional<json>& value, const char* key, const std::string& where) {
  if (!value) return InvalidArgument(where + ": missing '" + key + "'");
  const auto* s = value->get_ptr<const json::string_t*>();
  if (s == nullptr) return InvalidArgument(where + ": '" + key + "' must be a string, got " + Excerpt(*value));
  return *s;
}

// The string member `key` of `object` (a tree); `where` prefixes the error.
Result<std::string> RequiredString(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  return RequiredString(it == object.end() ? std::nullopt : std::optional<json>(*it), key, where);
}

// The "parameters" member of `object` (a tree): nullptr when absent, an error when not an object.
Result<const json*> Parameters(const json& object, const std::string& where) {
  const auto it = object.find("parameters");
  if (it == object.end()) return static_cast<const json*>(nullptr);
  if (!it->is_object()) return InvalidArgument(where + ": 'parameters' must be an object");
  return &*it;
}

// The value of a "parameters" member: nullptr when absent, an error when not an object.
Result<const json*> Parameters(const std::optional<json>& value, const std::string& where) {
  if (!value) return static_cast<const json*>(nullptr);
  if (!value->is_object()) return InvalidArgument(where + ": 'parameters' must be an object");
  return &*value;
}

Result<DataType> ParseDatatype(const std::optional<json>& value, const std::string& label) {
  Result<std::string> name = RequiredString(value, "datatype", label);
  if (!name.ok()) return name.status();
  const std::optional<DataType> type = ParseDataType(*name);
  if (!type) return InvalidArgument(label + ": unknown datatype " + Quote(*name));
  return *type;
}

Result<Shape> ParseShape(const std::optional<json>& value, const std::string& label) {
  if (!value) return InvalidArgument(label + ": missing 'shape'");
  if (!value->is_array()) return InvalidArgument(label + ": 'shape' must be an array of integers");
  Shape shape;
  shape.reserve(value->size());
  for (const json& dim : *value) {
    if (const int64_t* i = AsSigned(dim); i != nullptr && *i < 0) {
      return InvalidArgument(label + ": negative dimension " + std::to_string(*i) + " in 'shape'");
    }
    if (!dim.is_number_integer()) {
      return InvalidArgument(label + ": 'shape' must be an array of non-negative integers, got " + Excerpt(dim));
    }
    int64_t d = 0;
    if (!DecodeInteger(dim, &d)) return InvalidArgument(label + ": dimension " + Excerpt(dim) + " is too large");
    shape.push_back(d);
  }
  return shape;
}

// Element count of `shape`, refusing shapes whose byte size would overflow int64 (checked on
// the product of the non-zero dims, so ElementCount() can never overflow either). A BYTES element
// takes at least its 4-byte length.
Result<int64_t> CheckedElementCount(const Shape& shape, DataType type, const std::string& label,
                                    const ParseOptions& options) {
  const int64_t unit = type == DataType::kBytes ? 4 : static_cast<int64_t>(ElementSize(type));
  const int64_t limit = std::numeric_limits<int64_t>::max() / unit;
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
Result<std::optional<int64_t>> ParseBinaryDataSize(const std::optional<json>& value, const std::string& label) {
  Result<const json*> params = Parameters(value, label);
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

// ---- Inputs ------------------------------------------------------------------------------------

// The part of the body after the JSON header, consumed input by input.
struct BinarySection {
  std::string_view rest;
  bool header_length_given = false;
  bool borrow = false;  // ParseOptions::borrow_binary
};

// The input's bytes from the binary section. Fixed-size types need exactly count x element size;
// BYTES take exactly `binary_size` bytes, which must hold `count` length-prefixed elements.
Result<Tensor> TakeBinaryTensor(const std::string& label, DataType type, const Shape& shape, int64_t count,
                                int64_t binary_size, BinarySection* binary) {
  const bool is_bytes = type == DataType::kBytes;
  const int64_t expected = is_bytes ? binary_size : count * static_cast<int64_t>(ElementSize(type));
  if (binary_size != expected) {
    return InvalidArgument(label + ": parameters.binary_data_size is " + std::to_string(binary_size) + " but shape " +
                           ShapeToString(shape) + " of " + DataTypeName(type) + " needs " + std::to_string(expected) +
                           " bytes");
  }
  const auto size = static_cast<size_t>(expected);
  if (size > binary->rest.size()) {
    return InvalidArgument(label + ": binary data needs " + std::to_string(size) + " bytes but only " +
                           std::to_string(binary->rest.size()) + " remain in the body" +
                           (binary->header_length_given ? "" : " (no Inference-Header-Content-Length was given)"));
  }
  if (is_bytes) {
    Result<Tensor> tensor = Tensor::FromSerializedBytes(shape, binary->rest.substr(0, size));
    if (!tensor.ok()) return InvalidArgument(label + ": " + tensor.status().message());
    binary->rest.remove_prefix(size);
    return tensor;
  }
  const char* const bytes_at = binary->rest.data();
  Tensor tensor;
  if (binary->borrow && reinterpret_cast<uintptr_t>(bytes_at) % ElementSize(type) == 0) {
    // Used where it lies, no copy: the caller keeps the body (ParseOptions::borrow_binary).
    tensor = Tensor::Borrow(type, shape, reinterpret_cast<std::byte*>(const_cast<char*>(bytes_at)));
  } else {
    // A large input's bytes go into a buffer kept from an earlier request (Tensor::Reusable): a
    // fresh one would fault in every page of it on the copy.
    tensor = Tensor::Reusable(type, shape);
    if (size > 0) std::memcpy(tensor.data(), bytes_at, size);
  }
  binary->rest.remove_prefix(size);
  if (type == DataType::kBool) {
    const std::span<const uint8_t> bytes = tensor.values<uint8_t>();
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] > 1) {
        return InvalidArgument(label + ": BOOL element " + std::to_string(i) + " is byte " + std::to_string(bytes[i]) +
                               "; binary BOOL data must be 0 or 1");
      }
    }
  }
  return tensor;
}

// One $request_input while it is read: the spans of its members, then what they say.
class InputReader {
 public:
  enum Member { kName, kDatatype, kShape, kParameters, kData, kMembers, kOther = kMembers };
  static Member Classify(std::string_view key) {
    static constexpr std::string_view kKeys[kMembers] = {"name", "datatype", "shape", "parameters", "data"};
    for (int m = 0; m < kMembers; ++m) {
      if (key == kKeys[m]) return static_cast<Member>(m);
    }
    return kOther;
  }

  explicit InputReader(size_t index) {
    char where[32] = "inputs[";
    char* end = std::to_chars(where + 7, where + sizeof(where) - 1, index).ptr;
    *end++ = ']';
    where_.assign(where, end);
  }

  // Whether `member` was seen before (a duplicate key).
  bool Seen(Member member) const { return member != kOther && spans_[member].has_value(); }
  void SetSpan(Member member, std::string_view span) { spans_[member] = span; }
  const std::string& where() const { return where_; }
  // The label of this input for messages: "input \"x\"" once the name is known.
  const std::string& label() const { return resolved_ ? label_ : where_; }

  // Whether "data" can be decoded as it is read: name, datatype and shape came before it.
  bool CanDecodeData() const { return Seen(kName) && Seen(kDatatype) && Seen(kShape); }

  // Reads name, datatype and shape (once), and checks the element count.
  Status Resolve(const ParseOptions& options) {
    if (resolved_) return Status::Ok();
    if (std::optional<std::string_view> plain = PlainString(spans_[kName])) {
      name_.assign(plain->data(), plain->size());
    } else {
      Result<std::optional<json>> name_value = ReadField(spans_[kName], where_, "name");
      if (!name_value.ok()) return name_value.status();
      Result<std::string> name = RequiredString(*name_value, "name", where_);
      if (!name.ok()) return name.status();
      name_ = std::move(*name);
    }
    label_.assign("input ");
    AppendQuoted(&label_, name_);
    std::optional<DataType> plain_type;
    if (std::optional<std::string_view> plain = PlainString(spans_[kDatatype])) plain_type = ParseDataType(*plain);
    if (plain_type) {
      type_ = *plain_type;
    } else {
      Result<std::optional<json>> type_value = ReadField(spans_[kDatatype], label_, "datatype");
      if (!type_value.ok()) return type_value.status();
      Result<DataType> type = ParseDatatype(*type_value, label_);
      if (!type.ok()) return type.status();
      type_ = *type;
    }
    if (std::optional<Shape> plain = PlainShape(spans_[kShape])) {
      shape_ = std::move(*plain);
    } else {
      Result<std::optional<json>> shape_value = ReadField(spans_[kShape], label_, "shape");
      if (!shape_value.ok()) return shape_value.status();
      Result<Shape> shape = ParseShape(*shape_value, label_);
      if (!shape.ok()) return shape.status();
      shape_ = std::move(*shape);
    }
    Result<int64_t> count = CheckedElementCount(shape_, type_, label_, options);
    if (!count.ok()) return count.status();
    count_ = *count;
    resolved_ = true;
    return Status::Ok();
  }

  // Decodes "data" from `array` (its text from the '['); *end is the offset of its ']'.
  // REQUIRES: Resolve() succeeded.
  Status DecodeData(std::string_view array, size_t body_offset, size_t* end) {
    // The shape moves into the spec (and from there into the tensor's copy): nothing reads shape_
    // once the data is decoded.
    Result<Tensor> tensor = DecodeJsonData(array, DataSpec{label_, type_, std::move(shape_), count_, body_offset}, end);
    if (!tensor.ok()) return tensor.status();
    tensor_ = std::move(*tensor);
    decoded_ = true;
    return Status::Ok();
  }

  // At the end of the input object: the checks that need every member, a "data" that came before
  // its datatype or shape, or the binary data. `header` is the JSON text the spans point into.
  Result<NamedTensor> Finish(std::string_view header, const ParseOptions& options, BinarySection* binary) {
    EBB_RETURN_IF_ERROR(Resolve(options));
    Result<std::optional<json>> params = ReadField(spans_[kParameters], label_, "parameters");
    if (!params.ok()) return params.status();
    Result<std::optional<int64_t>> binary_size = ParseBinaryDataSize(*params, label_);
    if (!binary_size.ok()) return binary_size.status();
    const bool has_data = Seen(kData);
    if (has_data && *binary_size) {
      return InvalidArgument(label_ + ": has both 'data' and parameters.binary_data_size");
    }
    if (!has_data && !*binary_size) {
      return InvalidArgument(label_ + ": has neither 'data' nor parameters.binary_data_size");
    }
    if (*binary_size) {
      Result<Tensor> tensor = TakeBinaryTensor(label_, type_, shape_, count_, **binary_size, binary);
      if (!tensor.ok()) return tensor.status();
      tensor_ = std::move(*tensor);
    } else if (!decoded_) {
      const std::string_view array = ValueText(*spans_[kData]);
      if (array.empty() || array.front() != '[') return InvalidArgument(label_ + ": 'data' must be an array");
      size_t end = 0;
      EBB_RETURN_IF_ERROR(DecodeData(array, static_cast<size_t>(array.data() - header.data()), &end));
    }
    return NamedTensor{std::move(name_), std::move(tensor_)};
  }

 private:
  std::string where_;  // "inputs[3]"
  std::optional<std::string_view> spans_[kMembers];
  bool resolved_ = false;
  std::string name_;
  std::string label_;  // "input \"x\""
  DataType type_ = DataType::kFloat32;
  Shape shape_;
  int64_t count_ = 0;
  bool decoded_ = false;
  Tensor tensor_;
};

// ---- The request reader ------------------------------------------------------------------------

// A RapidJSON in-situ stream over a copy of the JSON header followed by kPadding NUL bytes
// (MakeCopy): RapidJSON decodes strings into the copy where they stand, behind the read position. In
// situ, RapidJSON 1.1 needs no stack of its own, whose first use does arithmetic on a null pointer
// (UBSan; fixed after 1.1). Offsets (Tell) are the same in the copy and in the header, so the reader
// slices the untouched header. The request reader moves the stream past a "data" array it read
// itself. At the end of the text Peek() and Take() read the padding's NULs, where RapidJSON stops
// (as at a NUL inside the text, which ReadRequest refuses); only a string's UTF-8 check takes (and
// copies) bytes without looking first, at most three after its lead byte, so four NULs of padding
// keep every read and write inside the copy without a bounds check per character.
class HeaderStream {
 public:
  using Ch = char;
  static constexpr size_t kPadding = 4;
  static std::string MakeCopy(std::string_view header) {
    std::string copy;
    copy.reserve(header.size() + kPadding);
    copy.append(header);
    copy.append(kPadding, '\0');
    return copy;
  }
  // `copy` is MakeCopy's.
  explicit HeaderStream(std::string* copy)
      : begin_(copy->data()), p_(begin_), end_(begin_ + copy->size() - kPadding) {}
  Ch Peek() const { return *p_; }
  Ch Take() { return *p_++; }
  // At most the header's size (after a UTF-8 check that ran into the padding, more by up to three).
  size_t Tell() const { return static_cast<size_t>(std::min(p_, end_) - begin_); }
  void Seek(size_t offset) { p_ = begin_ + offset; }
  Ch* PutBegin() { return dst_ = p_; }
  void Put(Ch c) { *dst_++ = c; }  // behind the read position, or in the padding
  void Flush() {}
  size_t PutEnd(Ch* begin) { return static_cast<size_t>(dst_ - begin); }

 private:
  char* begin_;
  char* p_;
  char* end_;
  char* dst_ = nullptr;
};

// The members of the request object ebb reads, as spans of the header.
struct RequestFields {
  std::optional<std::string_view> id, parameters, outputs;
  bool has_inputs = false;
};

// RapidJSON SAX handler for a whole inference request. It tracks where it is (the request object
// at depth 1, the "inputs" array at depth 2, one input object at depth 3), keeps the spans of the
// small members, refuses nesting deeper than kMaxJsonDepth, and reads each input's "data" array
// itself (DecodeJsonData), moving the stream to the array's ']' so that RapidJSON sees "[]".
// Numbers reach it as text (kParseNumbersAsStringsFlag); only spans are kept of them.
class RequestReader : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, RequestReader> {
 public:
  RequestReader(std::string_view header, HeaderStream* stream, const ParseOptions& options, BinarySection* binary,
                InferRequest* request)
      : header_(header), stream_(*stream), options_(options), binary_(*binary), request_(*request) {}

  const RequestFields& fields() const { return fields_; }
  const Status& status() const { return status_; }

  bool StartObject() { return Open(/*array=*/false); }
  bool StartArray() {
    const bool data = depth_ == 3 && input_ && input_member_ == InputReader::kData;
    return Open(/*array=*/true) && (!data || ReadData());
  }
  bool EndObject(rapidjson::SizeType) { return Close(); }
  bool EndArray(rapidjson::SizeType) { return Close(); }
  bool Key(const char* key, rapidjson::SizeType length, bool) {
    const std::string_view name(key, length);
    if (depth_ == 1) {
      member_start_ = stream_.Tell();
      return RootKey(name);
    }
    if (depth_ == 3 && input_) {
      input_member_ = InputReader::Classify(name);
      if (input_->Seen(input_member_)) return Fail(input_->label() + ": '" + std::string(name) + "' is given twice");
      input_start_ = stream_.Tell();
    }
    return true;
  }
  bool Null() { return Scalar(); }
  bool Bool(bool) { return Scalar(); }
  bool String(const char*, rapidjson::SizeType, bool) { return Scalar(); }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return Scalar(); }

 private:
  enum class RootMember { kNone, kId, kParameters, kInputs, kOutputs, kOther };

  bool Fail(const std::string& message) { return Fail(InvalidArgument(message)); }
  bool Fail(Status status) {
    status_ = std::move(status);
    return false;
  }

  // A value begins at the current depth: check what the request allows there.
  bool BeginValue(bool container, bool array) {
    if (depth_ == 0 && !(container && !array)) return Fail("the request must be a JSON object");
    if (depth_ == 1 && root_member_ == RootMember::kInputs && !array) return Fail("'inputs' must be an array");
    if (depth_ == 2 && root_member_ == RootMember::kInputs) {
      if (!container || array) return Fail("inputs[" + std::to_string(input_count_) + "] must be an object");
      input_.emplace(input_count_++);
      input_member_ = InputReader::kOther;
    }
    return true;
  }

  // A value ended, and depth_ is back to that of its member.
  bool EndValue() {
    if (depth_ == 1) {
      const std::string_view span = header_.substr(member_start_, stream_.Tell() - member_start_);
      switch (root_member_) {
        case RootMember::kId: fields_.id = span; break;
        case RootMember::kParameters: fields_.parameters = span; break;
        case RootMember::kOutputs: fields_.outputs = span; break;
        default: break;
      }
      root_member_ = RootMember::kNone;
    } else if (depth_ == 3 && input_ && input_member_ != InputReader::kOther) {
      input_->SetSpan(input_member_, header_.substr(input_start_, stream_.Tell() - input_start_));
      input_member_ = InputReader::kOther;
    } else if (depth_ == 2 && input_) {
      return FinishInput();
    }
    return true;
  }

  bool Open(bool array) {
    if (!BeginValue(/*container=*/true, array)) return false;
    if (++depth_ > kMaxJsonDepth) {
      return Fail("the request is nested more than " + std::to_string(kMaxJsonDepth) + " levels deep outside 'data'");
    }
    return true;
  }
  bool Close() {
    --depth_;
    return EndValue();
  }
  bool Scalar() { return BeginValue(/*container=*/false, /*array=*/false) && EndValue(); }

  bool RootKey(std::string_view key) {
    root_member_ = key == "id"           ? RootMember::kId
                   : key == "parameters" ? RootMember::kParameters
                   : key == "inputs"     ? RootMember::kInputs
                   : key == "outputs"    ? RootMember::kOutputs
                                         : RootMember::kOther;
    const bool twice = (root_member_ == RootMember::kId && fields_.id) ||
                       (root_member_ == RootMember::kParameters && fields_.parameters) ||
                       (root_member_ == RootMember::kOutputs && fields_.outputs) ||
                       (root_member_ == RootMember::kInputs && fields_.has_inputs);
    if (twice) return Fail("'" + std::string(key) + "' is given twice");
    fields_.has_inputs |= root_member_ == RootMember::kInputs;
    return true;
  }

  // The stream is just past the '[' of an input's "data": read the array here (or only find its
  // end when its datatype or shape is not known yet), then leave the stream at its ']'.
  bool ReadData() {
    const size_t open = stream_.Tell() - 1;
    const std::string_view array = header_.substr(open);
    size_t close = 0;
    Status st;
    if (input_->CanDecodeData()) {
      st = input_->Resolve(options_);
      if (st.ok()) st = input_->DecodeData(array, open, &close);
    } else {
      st = SkipJsonData(array, input_->where(), open, &close);
    }
    if (!st.ok()) return Fail(std::move(st));
    stream_.Seek(open + close);
    return true;
  }

  bool FinishInput() {
    Result<NamedTensor> tensor = input_->Finish(header_, options_, &binary_);
    input_.reset();
    if (!tensor.ok()) return Fail(tensor.status());
    if (Duplicate(tensor->name)) return Fail("duplicate input name " + Quote(tensor->name));
    request_.inputs.push_back(std::move(tensor).value());
    return true;
  }

  // Whether an input before had this name: a look at the few read so far, or at the set of names
  // once there are many (a request of thousands of inputs must not take quadratic time).
  bool Duplicate(const std::string& name) {
    constexpr size_t kLookedAt = 8;
    if (request_.inputs.size() < kLookedAt) {
      for (const NamedTensor& input : request_.inputs) {
        if (input.name == name) return true;
      }
      return false;
    }
    if (names_.empty()) {
      for (const NamedTensor& input : request_.inputs) names_.insert(input.name);
    }
    return !names_.insert(name).second;
  }

  std::string_view header_;
  HeaderStream& stream_;
  const ParseOptions& options_;
  BinarySection& binary_;
  InferRequest& request_;
  Status status_;

  int depth_ = 0;  // containers open
  size_t member_start_ = 0;  // offset just after the latest key of the request object
  RootMember root_member_ = RootMember::kNone;
  RequestFields fields_;
  size_t input_count_ = 0;
  std::optional<InputReader> input_;  // the input object open at depth 3
  InputReader::Member input_member_ = InputReader::kOther;
  size_t input_start_ = 0;
  std::set<std::string> names_;  // the inputs' names, once there are kLookedAt of them (Duplicate)
};

// Reads the JSON header: inputs decoded into `request`, the other members' spans into `fields`.
Status ReadRequest(std::string_view header, std::optional<size_t> header_length, const ParseOptions& options,
                   BinarySection* binary, InferRequest* request, RequestFields* fields) {
  std::string copy = HeaderStream::MakeCopy(header);
  HeaderStream stream(&copy);
  RequestReader handler(header, &stream, options, binary, request);
  rapidjson::Reader reader;
  constexpr unsigned kFlags =
      rapidjson::kParseInsituFlag | rapidjson::kParseValidateEncodingFlag | rapidjson::kParseNumbersAsStringsFlag;
  const rapidjson::ParseResult result = reader.Parse<kFlags>(stream, handler);
  if (result.Code() == rapidjson::kParseErrorTermination && !handler.status().ok()) return handler.status();
  auto what = [&] {  // for an error only
    return header_length ? "the request's JSON header (the first " + std::to_string(*header_length) +
                               " bytes of the body)"
                         : std::string("the request body");
  };
  if (result.IsError()) {
    return InvalidArgument(what() + " is not valid JSON: " + rapidjson::GetParseError_En(result.Code()) +
                           " (at byte " + std::to_string(std::min(result.Offset(), header.size())) + ")");
  }
  if (stream.Tell() != header.size()) {  // RapidJSON stops at a NUL byte as at the end
    return InvalidArgument(what() + " is not valid JSON: a NUL byte at byte " + std::to_string(stream.Tell()));
  }
  if (!handler.fields().has_inputs) return InvalidArgument("request has no 'inputs'");
  *fields = handler.fields();
  return Status::Ok();
}

// ---- Outputs and request fields ------------------------------------------------------------------

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

Status ParseOutputs(const RequestFields& fields, RestInferRequest* request) {
  Result<std::optional<json>> outputs = ReadField(fields.outputs, "", "outputs");
  if (!outputs.ok()) return outputs.status();
  if (!*outputs) return Status::Ok();
  if (!(*outputs)->is_array()) return InvalidArgument("'outputs' must be an array");
  for (size_t i = 0; i < (*outputs)->size(); ++i) EBB_RETURN_IF_ERROR(ParseOneOutput((**outputs)[i], i, request));
  return Status::Ok();
}

// parameters.sequence_id (an unsigned integer or a string, as tritonclient's HTTP client sends
// it), sequence_start and sequence_end (true or false): sequences.h.
Status ParseSequence(const json& params, InferRequest* request) {
  std::optional<SequenceId> id;
  if (const auto it = params.find("sequence_id"); it != params.end()) {
    uint64_t n = 0;
    if (const auto* text = it->get_ptr<const json::string_t*>()) {
      id = *text;
    } else if (DecodeInteger(*it, &n)) {
      id = n;
    } else {
      return InvalidArgument("parameters.sequence_id must be a non-negative integer or a string, got " + Excerpt(*it));
    }
  }
  bool flags[2] = {false, false};
  const char* names[2] = {"sequence_start", "sequence_end"};
  for (int k = 0; k < 2; ++k) {
    const auto it = params.find(names[k]);
    if (it == params.end()) continue;
    const auto* b = it->get_ptr<const json::boolean_t*>();
    if (b == nullptr) return InvalidArgument(std::string("parameters.") + names[k] + " must be true or false, got " + Excerpt(*it));
    flags[k] = *b;
  }
  Result<SequenceControl> control = MakeSequenceControl(std::move(id), flags[0], flags[1]);
  if (!control.ok()) return control.status();
  request->sequence = std::move(control).value();
  return Status::Ok();
}

// "id" and the request-level parameters ebb understands.
Status ParseRequestFields(const RequestFields& fields, RestInferRequest* rest) {
  InferRequest* request = &rest->request;
  Result<std::optional<json>> id = ReadField(fields.id, "", "id");
  if (!id.ok()) return id.status();
  if (*id) {
    const auto* s = (*id)->get_ptr<const json::string_t*>();
    if (s == nullptr) return InvalidArgument("'id' must be a string, got " + Excerpt(**id));
    request->id = *s;
  }
  Result<std::optional<json>> params_value = ReadField(fields.parameters, "", "parameters");
  if (!params_value.ok()) return params_value.status();
  Result<const json*> params = Parameters(*params_value, "request");
  if (!params.ok()) return params.status();
  if (*params == nullptr) return Status::Ok();
  if (const auto it = (*params)->find("binary_data_output"); it != (*params)->end()) {
    const auto* b = it->get_ptr<const json::boolean_t*>();
    if (b == nullptr) return InvalidArgument("parameters.binary_data_output must be true or false");
    rest->binary.all = *b;
  }
  if (const auto it = (*params)->find("keep_alive"); it != (*params)->end()) {
    int64_t ms = 0;
    Result<int64_t> checked = CheckKeepAlive(DecodeInteger(*it, &ms) ? std::optional(ms) : std::nullopt, Excerpt(*it));
    if (!checked.ok()) return checked.status();
    request->keep_alive_ms = *checked;
  }
  return ParseSequence(**params, request);
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
  RestInferRequest request;
  BinarySection binary{body.substr(header.size()), header_length.has_value(), options.borrow_binary};
  RequestFields fields;
  EBB_RETURN_IF_ERROR(ReadRequest(header, header_length, options, &binary, &request.request, &fields));
  EBB_RETURN_IF_ERROR(ParseRequestFields(fields, &request));
  if (!binary.rest.empty()) {
    return InvalidArgument("the body has " + std::to_string(binary.rest.size()) +
                           " trailing bytes after the JSON header and the binary tensor data of the inputs");
  }
  EBB_RETURN_IF_ERROR(ParseOutputs(fields, &request));
  return request;
}

}  // namespace ebb::server
