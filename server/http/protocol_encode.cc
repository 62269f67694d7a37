// The response half of the KServe v2 codec (protocol.h): EncodeInferResponse, EncodeError and
// BinaryOutputs::Wants. The request half is protocol_decode.cc.
#include "protocol.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// fmt header-only, for its Dragonbox (shortest decimal digits of a float) alone; nothing else of
// fmt is used. fmt::detail is fmt's own namespace, not its documented API: Debian 12's fmt 9.1 is
// the version built against, and a test compares the writer below with std::to_chars.
#define FMT_HEADER_ONLY
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "json_data.h"
#include "protocol_internal.h"

namespace ebb::server {

// ---- Messages ----------------------------------------------------------------------------------

std::string Quote(std::string_view s) {
  std::string quoted;
  AppendQuoted(&quoted, s);
  return quoted;
}

void AppendQuoted(std::string* out, std::string_view s) {
  // Printable ASCII without '"' or '\\' (names, versions, ids, as a rule) is its own JSON text.
  const auto plain = [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; };
  if (std::all_of(s.begin(), s.end(), plain)) {
    out->reserve(out->size() + s.size() + 2);
    *out += '"';
    *out += s;
    *out += '"';
    return;
  }
  using nlohmann::json;
  *out += json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
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

// The n digits of `value` (< 10^n, 1 <= n <= 10) at p[0..n), most significant first. Writes 8 bytes
// from p (more than n when n < 8): what follows the digits is scratch, which the caller overwrites
// or cuts (every element has kMaxElementChars of room). The eight digits of value % 10^8 come from
// four pairs (three divisions by constants, no loop), and the last n of them are copied at once.
void WriteDigits(char* p, uint32_t value, int n) {
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354"
      "555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";
  if (n > 8) {  // a tenth or ninth digit first (rare: floats have at most 9 significant digits)
    const uint32_t high = value / 100000000;
    value %= 100000000;
    if (n == 10) {
      std::memcpy(p, kPairs + 2 * high, 2);
    } else {
      p[0] = static_cast<char>('0' + high);
    }
    p += n - 8;
    n = 8;
  }
  char eight[16];  // value's last 8 digits, then room for the 8-byte copy below to read
  const uint32_t high = value / 10000, low = value % 10000;
  std::memcpy(eight, kPairs + 2 * (high / 100), 2);
  std::memcpy(eight + 2, kPairs + 2 * (high % 100), 2);
  std::memcpy(eight + 4, kPairs + 2 * (low / 100), 2);
  std::memcpy(eight + 6, kPairs + 2 * (low % 100), 2);
  std::memcpy(p, eight + 8 - n, 8);
}

// 10^0 .. 10^9: every power of ten a uint32_t holds.
constexpr uint32_t kPowersOf10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};

// The decimal digits of value >= 1: floor(log10(2^bits)) by 1233/4096 (log10 2), one less where
// value is below that power of ten.
int DigitCount(uint32_t value) {
  const int guess = (std::bit_width(value) * 1233) >> 12;
  return guess + 1 - (value < kPowersOf10[guess]);
}

// std::to_chars(p, end, value) for a finite, non-zero float, in the same characters: the shortest
// digits that read back as `value` (Dragonbox, from fmt), written in the shorter of fixed and
// scientific form (fixed on a tie), an integral fixed form with its exact digits. Returns the end;
// *reads_back is true where a double-precision reader, rounding its double to float, is known to get
// `value` back (false: not known; WriteFloat32 reads the text to find out).
char* WriteShortestFloat32(char* p, float value, bool* reads_back) {
  const float magnitude = std::fabs(value);
  const auto decimal = fmt::detail::dragonbox::to_decimal(magnitude);  // magnitude = digits x 10^e
  const uint32_t digits = decimal.significand;
  const int e = decimal.exponent;
  const int n = DigitCount(digits);
  if (value < 0) *p++ = '-';
  const int scientific_length = n + (n > 1) + 4;  // d[.ddd]e+XX: a float's exponent has two digits
  const int fixed_length = e >= 0 ? n + e : (n + e > 0 ? n + 1 : 2 - e);
  if (fixed_length <= scientific_length && e >= 0) {
    // An integer below 10^14: its exact digits (123456792, not 123456790), which every reader reads exactly.
    *reads_back = true;
    return std::to_chars(p, p + 16, static_cast<uint64_t>(magnitude)).ptr;
  }
  // Digits x 10^e as one IEEE operation on two exact doubles (Clinger): what a double reader gets.
  if (e >= -22 && e <= 22) {
    const double power = fast_float::binary_format<double>::exact_power_of_ten(std::abs(e));  // 10^|e|, exact
    const double read = e < 0 ? digits / power : digits * power;
    *reads_back = static_cast<float>(read) == magnitude;
  } else {
    *reads_back = false;  // unknown: the caller reads the text back
  }
  if (fixed_length <= scientific_length) {
    if (n + e > 0) {  // ddd.ddd: the integer part's digits, '.', the fraction's
      const uint32_t scale = kPowersOf10[-e];  // -e < n <= 9
      WriteDigits(p, digits / scale, n + e);
      p[n + e] = '.';
      WriteDigits(p + n + e + 1, digits % scale, -e);
      return p + n + 1;
    }
    // 0.000ddd: at most 3 zeros after the point (2 - e <= n + (n > 1) + 4: this form is the shorter
    // one), so the 16 written (each element has kMaxElementChars of room) are more than enough; the
    // digits overwrite the last of them.
    std::memcpy(p, "0.0000000000000000", 18);
    WriteDigits(p + 2 - e - n, digits, n);
    return p + 2 - e;
  }
  WriteDigits(p + (n > 1), digits, n);  // d.ddde+XX
  if (n > 1) {
    p[0] = p[1];
    p[1] = '.';
  }
  p += n + (n > 1);
  const int exponent = e + n - 1;
  *p++ = 'e';
  *p++ = exponent < 0 ? '-' : '+';
  WriteDigits(p, static_cast<uint32_t>(std::abs(exponent)), 2);
  return p + 2;
}

// Shortest form that a double-precision JSON parser (ours, Python's, ...) reads back as exactly
// `value`. The shortest float form almost always is; where rounding it first to double and then to
// float lands elsewhere (e.g. 7.038531e-26), the exact double form is written instead.
[[gnu::noinline]] char* WriteNonZeroFloat32(char* p, float value) {
  if (!std::isfinite(value) || value == 0) return WriteFloating(p, value);
  bool reads_back = false;
  char* end = WriteShortestFloat32(p, value, &reads_back);
  if (reads_back) [[likely]] return end;
  double parsed = 0;
  FromCharsDouble(p, end, parsed);
  if (static_cast<float>(parsed) != value) end = std::to_chars(p, p + kMaxElementChars, static_cast<double>(value)).ptr;
  return end;
}

// +0 is written here, where the element loop inlines it (many outputs are mostly zeros: ReLU).
inline char* WriteFloat32(char* p, float value) {
  if (value == 0 && !std::signbit(value)) {
    *p = '0';
    return p + 1;
  }
  return WriteNonZeroFloat32(p, value);
}

template <typename T>
char* WriteInteger(char* p, T value) {
  return std::to_chars(p, p + kMaxElementChars, value).ptr;
}

// The elements as a JSON array: blocks of up to 256 elements are written into a buffer on the
// stack, room for their longest forms, and appended as long as they came out (the string grows
// by what the text takes, never by the room, and no room is zero-filled).
template <typename T, typename Write>
void AppendValues(std::string* out, const Tensor& tensor, Write write) {
  constexpr size_t kBlock = 256;
  char block[kBlock * (kMaxElementChars + 1)];
  const auto* values = reinterpret_cast<const T*>(tensor.data());
  const size_t count = tensor.byte_size() / sizeof(T);
  *out += '[';
  for (size_t i = 0; i < count;) {
    char* p = block;
    for (const size_t stop = i + std::min(kBlock, count - i); i < stop; ++i) {
      if (i > 0) *p++ = ',';
      p = write(p, values[i]);
    }
    out->append(block, static_cast<size_t>(p - block));
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
    case DataType::kFloat32: return AppendValues<float>(out, t, [](char* p, float v) { return WriteFloat32(p, v); });
    case DataType::kFloat64: return AppendValues<double>(out, t, WriteFloating<double>);
    case DataType::kBytes: {
      // JSON strings; bytes that are not UTF-8 become U+FFFD (binary data keeps them).
      *out += '[';
      bool first = true;
      for (std::string_view v : t.strings()) {
        if (!first) *out += ',';
        first = false;
        AppendQuoted(out, v);
      }
      *out += ']';
      return;
    }
  }
}

// Appends one $response_output to `header`; a binary output's bytes go after the header (the caller's).
void AppendOutput(const NamedTensor& output, bool as_binary, std::string* header) {
  *header += "{\"name\":";
  AppendQuoted(header, output.name);
  *header += ",\"shape\":[";
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

int64_t ReplyTextBytes(const NamedTensor& output, const BinaryOutputs& binary) {
  if (binary.Wants(output.name)) return 0;
  const Tensor& tensor = output.tensor;
  const int64_t text = 16 * tensor.element_count();
  return tensor.type() == DataType::kBytes ? text + static_cast<int64_t>(tensor.byte_size()) : text;
}

EncodedResponse EncodeInferResponse(const InferResponse& response, const BinaryOutputs& binary_outputs) {
  const std::vector<NamedTensor>& outputs = response.outputs;
  // The JSON header in one buffer, sized once; the binary outputs' bytes are not copied at all:
  // `binary` views them where the run left them, and the transport sends them from there with
  // scatter/gather writes (a body string with them appended cost a copy of every byte and, above
  // glibc's mmap threshold, a page fault per 4 KiB).
  size_t text_bytes = 128;  // what the JSON header will take, roughly: one allocation, not a doubling series
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedTensor& output = outputs[i];
    text_bytes += 96 + output.name.size() + static_cast<size_t>(ReplyTextBytes(output, binary_outputs));
  }
  EncodedResponse encoded;
  std::string& body = encoded.body;
  body.reserve(std::min<size_t>(text_bytes, size_t{64} << 20));
  body += "{\"model_name\":";
  AppendQuoted(&body, response.model_name);
  if (!response.model_version.empty()) {
    body += ",\"model_version\":";
    AppendQuoted(&body, response.model_version);
  }
  if (!response.id.empty()) {
    body += ",\"id\":";
    AppendQuoted(&body, response.id);
  }
  body += ",\"outputs\":[";
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i > 0) body += ',';
    AppendOutput(outputs[i], binary_outputs.Wants(outputs[i].name), &body);
  }
  body += "]}";
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!binary_outputs.Wants(outputs[i].name)) continue;
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
