// The response half of the KServe v2 codec (protocol.h): EncodeInferResponse, EncodeError and
// BinaryOutputs::Wants. The request half is protocol_decode.cc.
#include "protocol.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_data.h"
#include "protocol_internal.h"

namespace ebb::server {

// ---- Messages ----------------------------------------------------------------------------------

std::string Quote(std::string_view s) {
  // Printable ASCII without '"' or '\\' (names, versions, ids, as a rule) is its own JSON text.
  const auto plain = [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; };
  if (std::all_of(s.begin(), s.end(), plain)) {
    std::string quoted;
    quoted.reserve(s.size() + 2);
    quoted += '"';
    quoted += s;
    quoted += '"';
    return quoted;
  }
  using nlohmann::json;
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

// ---- Encoding ----------------------------------------------------------------------------------

template <typename T>
void AppendNumber(std::string* out, T value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out->append(buffer, static_cast<size_t>(result.ptr - buffer));
}

// The most characters one element of a "data" array takes: a double's shortest form (24), an
// int64 (20), "false".
constexpr size_t kMaxElementChars = 32;

// Shortest round-tripping form at `p`, its end returned; null for NaN/Inf; "-0.0" so that a JSON
// parser keeps the sign.
template <typename F>
char* WriteFloating(char* p, F value) {
  if (!std::isfinite(value)) return std::copy_n("null", 4, p);
  if (value == 0 && std::signbit(value)) return std::copy_n("-0.0", 4, p);
  return std::to_chars(p, p + kMaxElementChars, value).ptr;
}

// Shortest form that a double-precision JSON parser (ours, Python's, ...) reads back as exactly
// `value`. The shortest float form almost always is; where rounding it first to double and then to
// float lands elsewhere (e.g. 7.038531e-26), the exact double form is written instead.
char* WriteFloat32(char* p, float value) {
  if (!std::isfinite(value) || value == 0) return WriteFloating(p, value);
  char* end = std::to_chars(p, p + kMaxElementChars, value).ptr;
  double parsed = 0;
  FromCharsDouble(p, end, parsed);
  if (static_cast<float>(parsed) != value) end = std::to_chars(p, p + kMaxElementChars, static_cast<double>(value)).ptr;
  return end;
}

template <typename T>
char* WriteInteger(char* p, T value) {
  return std::to_chars(p, p + kMaxElementChars, value).ptr;
}

// The elements as a JSON array, written in place: blocks of up to 256 elements are written into
// room made at the string's end for their longest form, then the string is cut to what they took
// (a block's room, not the whole array's, is the most ever reserved beyond the text).
template <typename T, typename Write>
void AppendValues(std::string* out, const Tensor& tensor, Write write) {
  constexpr size_t kBlock = 256;
  const auto* values = reinterpret_cast<const T*>(tensor.data());
  const size_t count = tensor.byte_size() / sizeof(T);
  *out += '[';
  for (size_t i = 0; i < count;) {
    const size_t n = std::min(kBlock, count - i);
    const size_t at = out->size();
    out->resize(at + n * (kMaxElementChars + 1));
    char* p = out->data() + at;
    for (const size_t stop = i + n; i < stop; ++i) {
      if (i > 0) *p++ = ',';
      p = write(p, values[i]);
    }
    out->resize(static_cast<size_t>(p - out->data()));
  }
  *out += ']';
}

void AppendJsonData(std::string* out, const Tensor& t) {
  const auto integer = [](char* p, auto v) { return WriteInteger(p, v); };
  switch (t.type()) {
    case DataType::kBool:
      return AppendValues<uint8_t>(out, t, [](char* p, uint8_t v) {
        return v ? std::copy_n("true", 4, p) : std::copy_n("false", 5, p);
      });
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
          out, t, [](char* p, uint16_t v) { return WriteFloat32(p, static_cast<float>(HalfToDouble(v))); });
    case DataType::kBFloat16:
      return AppendValues<uint16_t>(
          out, t, [](char* p, uint16_t v) { return WriteFloat32(p, static_cast<float>(BrainToDouble(v))); });
    case DataType::kFloat32: return AppendValues<float>(out, t, WriteFloat32);
    case DataType::kFloat64: return AppendValues<double>(out, t, WriteFloating<double>);
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

// Appends one $response_output to `header`; a binary output's bytes go after the header (the caller's).
void AppendOutput(const NamedTensor& output, bool as_binary, std::string* header) {
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
    return;
  }
  *header += "\",\"data\":";
  AppendJsonData(header, output.tensor);
  *header += '}';
}
}  // namespace

bool BinaryOutputs::Wants(const std::string& name) const {
  if (binary.contains(name)) return true;
  return all && !json.contains(name);
}

EncodedResponse EncodeInferResponse(const InferResponse& response, const BinaryOutputs& binary_outputs) {
  const std::vector<NamedTensor>& outputs = response.outputs;
  // The JSON header in one buffer, sized once; the binary outputs' bytes are not copied at all:
  // `binary` views them where the run left them, and the transport sends them from there with
  // scatter/gather writes (a body string with them appended cost a copy of every byte and, above
  // glibc's mmap threshold, a page fault per 4 KiB).
  size_t text_bytes = 128;  // what the JSON header will take, roughly: one allocation, not a doubling series
  std::vector<bool> as_binary(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedTensor& output = outputs[i];
    as_binary[i] = binary_outputs.Wants(output.name);
    const size_t text = as_binary[i] ? 0 : 16 * static_cast<size_t>(output.tensor.element_count());
    text_bytes += 96 + output.name.size() + text;
  }
  EncodedResponse encoded;
  std::string& body = encoded.body;
  body.reserve(std::min<size_t>(text_bytes, size_t{64} << 20));
  body += "{\"model_name\":" + Quote(response.model_name);
  if (!response.model_version.empty()) body += ",\"model_version\":" + Quote(response.model_version);
  if (!response.id.empty()) body += ",\"id\":" + Quote(response.id);
  body += ",\"outputs\":[";
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i > 0) body += ',';
    AppendOutput(outputs[i], as_binary[i], &body);
  }
  body += "]}";
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!as_binary[i]) continue;
    encoded.header_length = body.size();
    const Tensor& t = outputs[i].tensor;
    if (t.byte_size() > 0) encoded.binary.emplace_back(reinterpret_cast<const char*>(t.data()), t.byte_size());
  }
  return encoded;
}

std::string EncodedResponse::Joined() const {
  size_t size = body.size();
  for (std::string_view piece : binary) size += piece.size();
  std::string whole;
  whole.reserve(size);
  whole += body;
  for (std::string_view piece : binary) whole += piece;
  return whole;
}

std::string EncodeError(std::string_view message) { return "{\"error\":" + Quote(message) + "}"; }

}  // namespace ebb::server
