// server/http/json_data.h — the JSON "data" array of one KServe v2 input, read straight into a tensor.
//
// The hot path of a JSON inference request: the request reader (protocol_decode.cc) hands the raw
// text of an input's "data" value here, and this reads it in one pass into the tensor's typed
// buffer. No JSON tree is built, nothing is recursive, and nothing is allocated beyond the tensor
// itself, whose size is bounded by the text (a shape that asks for more elements than the text
// could hold is answered with the element count the text really has, without allocating).
//
// Grammar: an array, nested to any depth up to kMaxDataDepth, of elements. Nesting is flattened in
// row-major order; only the total element count is checked against the shape. Elements are JSON
// numbers, true, false, null, strings or objects; which of them a datatype accepts, and how they
// convert, is decided by that datatype's element decoder (json_data.cc, "Element decoders": one
// entry per datatype, the one place to add a datatype). Numbers read as std::from_chars reads
// them (correctly rounded): a plain decimal of up to 19 digits converted as its digits are checked,
// by the steps fast_float takes (json_data.cc, PlainDecimal), anything else by FromCharsDouble
// (fast_float), so conversions are exact as stated in server/http/protocol.h.
//
// Errors are kInvalidArgument Statuses naming the input (`label`): a bad element quotes at most 40
// characters of its text (copied, never re-serialised); JSON syntax errors inside the array give
// their byte offset in the body.
//
// Thread safety: pure functions. Ownership: the returned tensor owns its data; `text` is only read.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fast_float/fast_float.h>

#include "ebb/status.h"
#include "ebb/tensor.h"

namespace ebb::server {

// std::from_chars(first, last, value) for a double, the same result and end in every case, by
// fast_float (Debian's libfast-float-dev, the library libstdc++'s own from_chars is built on), inlined
// here: 15% fewer cycles a number than the library call on this hot loop. fast_float 3.9 answers a
// number beyond double's range with infinity or zero; std::from_chars answers result_out_of_range
// and leaves `value` alone, which is what this returns too.
inline std::from_chars_result FromCharsDouble(const char* first, const char* last, double& value) {
  double parsed = 0;
  const fast_float::from_chars_result r = fast_float::from_chars(first, last, parsed);
  if (r.ec != std::errc()) return {r.ptr, r.ec};
  const char* p = first + (first < last && *first == '-');
  const bool written_digits = p < r.ptr && static_cast<unsigned>(*p - '0') <= 9;  // not "inf" or "nan"
  if (written_digits && (std::isinf(parsed) || parsed == 0)) {
    // Infinity from digits overflowed; zero underflowed unless every digit before the exponent is 0.
    bool out_of_range = std::isinf(parsed);
    for (; !out_of_range && p < r.ptr && *p != 'e' && *p != 'E'; ++p) out_of_range = *p >= '1' && *p <= '9';
    if (out_of_range) return {r.ptr, std::errc::result_out_of_range};
  }
  value = parsed;
  return {r.ptr, std::errc()};
}

// Deepest nesting of a "data" array (counted from the array itself); a tensor needs its rank.
inline constexpr int kMaxDataDepth = 64;

// What a "data" array must decode to, for the reader and its messages.
struct DataSpec {
  std::string_view label;  // "input \"x\"", prefixes every message
  DataType type = DataType::kFloat32;
  Shape shape;             // the tensor's shape
  int64_t count = 0;       // elements the shape needs (overflow already checked)
  size_t body_offset = 0;  // offset of `text` in the request body, for syntax error positions
};

// Reads the array that starts at text[0] ('[') into a tensor of spec.type and spec.shape.
// On success *end is the offset in `text` of the array's closing ']'; anything after it is not read.
// `spec` is taken by value: its shape moves into the tensor.
[[nodiscard]] Result<Tensor> DecodeJsonData(std::string_view text, DataSpec spec, size_t* end);

// Finds the end of the array that starts at text[0] ('[') without decoding it (for a "data" that
// comes before the "datatype" or "shape" it needs): *end is the offset of its closing ']'.
// Checks brackets, strings and depth only; DecodeJsonData checks the rest when it reads the text.
[[nodiscard]] Status SkipJsonData(std::string_view text, std::string_view label, size_t body_offset, size_t* end);

// At most `max` characters of the JSON value that starts at `text`, whitespace outside strings
// dropped, "..." appended when cut: a bounded, non-recursive quote of untrusted input for messages.
[[nodiscard]] std::string JsonExcerpt(std::string_view text, size_t max = 40);

// Exact value of an IEEE binary16 / bfloat16 bit pattern (for the encoder).
[[nodiscard]] double HalfToDouble(uint16_t bits);
[[nodiscard]] double BrainToDouble(uint16_t bits);

}  // namespace ebb::server
