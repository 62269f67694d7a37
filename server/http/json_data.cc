// The "data" array reader (see json_data.h). Written by hand, on purpose: the generic JSON readers
// Debian ships either build a tree (nlohmann-json: ~90 bytes per body byte) or convert numbers
// inexactly or slowly (RapidJSON's default and full-precision modes), and simdjson needs ~5x the
// body in index buffers; a flat loop over one array with std::from_chars is exact and the fastest
// of them (`ebb bench json`). The rest of the request is read by RapidJSON (protocol_decode.cc).
#include "json_data.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

namespace ebb::server {
namespace {

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

// ---- Tokens ------------------------------------------------------------------------------------

// One element of a "data" array, as written.
struct Token {
  enum class Kind { kNumber, kTrue, kFalse, kNull, kString, kObject };
  Kind kind = Kind::kNull;
  std::string_view text;  // the number or string as written (quotes included); empty for an object
  double value = 0;       // a number's value, correctly rounded, when value_ok
  bool value_ok = false;  // false: beyond the double range (1e400, 1e-400)

  // A number without fraction or exponent.
  bool integral() const { return text.find_first_of(".eE") == std::string_view::npos; }
};

// A number token as a double, correctly rounded; false unless it is a finite number. A magnitude
// beyond the double range (1e400) is refused; one below it (1e-400) rounds to zero.
bool NumberOutOfRange(const Token& t, double* out);

inline bool NumberToDouble(const Token& t, double* out) {
  if (t.value_ok) [[likely]] {
    *out = t.value;
    return true;
  }
  return NumberOutOfRange(t, out);
}

bool NumberOutOfRange(const Token& t, double* out) {
  // strtod tells overflow (HUGE_VAL) from underflow (zero or subnormal).
  const std::string copy(t.text);
  *out = std::strtod(copy.c_str(), nullptr);
  return std::isfinite(*out);
}

// ---- Element decoders --------------------------------------------------------------------------
// One per datatype: Decode(token, &element) is false when the token is the wrong JSON type or out
// of range, and Requirement() says what an element must be. To add a datatype, add its decoder and
// its case in DecodeJsonData.

template <typename T>
std::string IntegerRange() {
  return "an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
         std::to_string(std::numeric_limits<T>::max()) + "]";
}

struct BoolDecoder {
  using Element = uint8_t;
  static bool Decode(const Token& t, uint8_t* out) {
    if (t.kind != Token::Kind::kTrue && t.kind != Token::Kind::kFalse) return false;
    *out = t.kind == Token::Kind::kTrue ? 1 : 0;
    return true;
  }
  static std::string Requirement() { return "true or false"; }
};

// Integer JSON numbers within T's range; an integral float (2.0, 1e3) when |value| <= 2^53.
template <typename T>
struct IntegerDecoder {
  using Element = T;
  static bool Decode(const Token& t, T* out) {
    if (t.kind != Token::Kind::kNumber) return false;
    const char* first = t.text.data();
    const char* last = first + t.text.size();
    if (t.integral()) {
      using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
      Wide wide = 0;
      if (std::is_unsigned_v<T> && *first == '-') {  // only -0 is in range
        if (t.text.find_first_not_of("-0") != std::string_view::npos) return false;
        *out = 0;
        return true;
      }
      const auto [ptr, ec] = std::from_chars(first, last, wide);
      if (ec != std::errc() || ptr != last || !std::in_range<T>(wide)) return false;
      *out = static_cast<T>(wide);
      return true;
    }
    double d = 0;
    if (!NumberToDouble(t, &d) || !(std::fabs(d) <= kMaxExactIntegerInDouble) || d != std::trunc(d)) return false;
    const auto whole = static_cast<int64_t>(d);
    if (!std::in_range<T>(whole)) return false;
    *out = static_cast<T>(whole);
    return true;
  }
  static std::string Requirement() { return IntegerRange<T>(); }
};

// Any JSON number, or null for NaN.
inline bool TokenToDouble(const Token& t, double* out) {
  if (t.kind == Token::Kind::kNull) {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  return t.kind == Token::Kind::kNumber && NumberToDouble(t, out);
}

// Floating decoders also take a number already read (FromDouble): the scanner's fast path for
// plain decimals hands them the value without a Token.
struct Float64Decoder {
  using Element = double;
  static bool Decode(const Token& t, double* out) { return TokenToDouble(t, out); }
  static bool FromDouble(double d, double* out) {
    *out = d;
    return true;
  }
  static std::string Requirement() { return "a number or null"; }
};

struct Float32Decoder {
  using Element = float;
  static bool Decode(const Token& t, float* out) {
    double d = 0;
    return TokenToDouble(t, &d) && FromDouble(d, out);
  }
  static bool FromDouble(double d, float* out) {
    // Magnitudes from the midpoint between FLT_MAX and 2^128 upwards round to infinity.
    if (std::fabs(d) >= 0x1.ffffffp127) return false;
    *out = static_cast<float>(d);
    return true;
  }
  // The scanner's plain decimals (at most 19 digits, no exponent) are below 10^19: within range.
  static void FromPlainDecimal(double d, float* out) { *out = static_cast<float>(d); }
  static std::string Requirement() { return "a number within FP32 range or null"; }
};

template <const SmallFloatFormat& kFormat>
bool SmallFloatFromDouble(double d, uint16_t* out) {
  *out = ToSmallFloat(d, kFormat);
  return std::isnan(d) || (*out & 0x7fff) != InfinityBits(kFormat);
}

template <const SmallFloatFormat& kFormat>
bool DecodeSmallFloat(const Token& t, uint16_t* out) {
  double d = 0;
  return TokenToDouble(t, &d) && SmallFloatFromDouble<kFormat>(d, out);
}

struct HalfDecoder {
  using Element = uint16_t;
  static bool Decode(const Token& t, uint16_t* out) { return DecodeSmallFloat<kHalf>(t, out); }
  static bool FromDouble(double d, uint16_t* out) { return SmallFloatFromDouble<kHalf>(d, out); }
  static std::string Requirement() { return "a number within FP16 range (|x| <= 65504) or null"; }
};

struct BrainDecoder {
  using Element = uint16_t;
  static bool Decode(const Token& t, uint16_t* out) { return DecodeSmallFloat<kBrain>(t, out); }
  static bool FromDouble(double d, uint16_t* out) { return SmallFloatFromDouble<kBrain>(d, out); }
  static std::string Requirement() { return "a number within BF16 range or null"; }
};

// BYTES: a JSON string, its escapes resolved (\u0000 gives an embedded NUL; a lone surrogate, which
// UTF-8 cannot hold, is refused). Appended to `out` in the KServe form: a 4-byte little-endian
// length, then the bytes. The decoded string is never longer than its text, so memory stays
// bounded by the body.
struct StringDecoder {
  static bool Decode(const Token& t, std::string* out);
  static std::string Requirement() { return "a string"; }
};

unsigned HexValue(char c) {
  if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<unsigned>(c - 'A' + 10);
  return 16;
}

// The four hex digits at p[0..3] as a code unit; false when they are not hex.
bool Hex4(const char* p, unsigned* unit) {
  *unit = 0;
  for (int i = 0; i < 4; ++i) {
    const unsigned v = HexValue(p[i]);
    if (v > 15) return false;
    *unit = *unit << 4 | v;
  }
  return true;
}

void AppendUtf8(unsigned cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | cp >> 6);
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | cp >> 12);
    *out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | cp >> 18);
    *out += static_cast<char>(0x80 | (cp >> 12 & 0x3f));
    *out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

bool StringDecoder::Decode(const Token& t, std::string* out) {
  if (t.kind != Token::Kind::kString) return false;
  const std::string_view body = t.text.substr(1, t.text.size() - 2);  // the scanner checked the quotes
  const size_t length_at = out->size();
  out->append(4, '\0');
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\') {
      *out += body[i];
      continue;
    }
    const char e = body[++i];  // the scanner saw a character after every backslash
    switch (e) {
      case '"': *out += '"'; break;
      case '\\': *out += '\\'; break;
      case '/': *out += '/'; break;
      case 'b': *out += '\b'; break;
      case 'f': *out += '\f'; break;
      case 'n': *out += '\n'; break;
      case 'r': *out += '\r'; break;
      case 't': *out += '\t'; break;
      case 'u': {
        unsigned unit = 0;
        if (body.size() - i < 5 || !Hex4(body.data() + i + 1, &unit)) return false;
        i += 4;
        unsigned cp = unit;
        if (unit >= 0xd800 && unit < 0xdc00) {  // a high surrogate needs its low one
          unsigned low = 0;
          if (body.size() - i < 7 || body[i + 1] != '\\' || body[i + 2] != 'u' || !Hex4(body.data() + i + 3, &low) ||
              low < 0xdc00 || low >= 0xe000) {
            return false;
          }
          i += 6;
          cp = 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00);
        } else if (unit >= 0xdc00 && unit < 0xe000) {
          return false;
        }
        AppendUtf8(cp, out);
        break;
      }
      default: return false;
    }
  }
  const size_t length = out->size() - length_at - 4;
  if (length > 0xffffffffu) return false;
  for (int b = 0; b < 4; ++b) (*out)[length_at + b] = static_cast<char>(length >> (8 * b) & 0xff);
  return true;
}

// ---- Sinks: where elements go --------------------------------------------------------------------

// Fixed-size elements into a preallocated buffer of `capacity`; elements beyond it are only
// counted (the count mismatch is the error then).
template <typename Decoder>
struct FixedSink {
  using Element = typename Decoder::Element;
  Element* out = nullptr;
  int64_t capacity = 0;
  int64_t count = 0;

  bool Put(const Token& t) {
    if (count < capacity && !Decoder::Decode(t, &out[count])) return false;
    ++count;
    return true;
  }

  // Whether the scanner may hand over plain decimals as values (floating datatypes).
  static constexpr bool kTakesDoubles = requires(Element* e) { Decoder::FromDouble(0.0, e); };
  bool PutDouble(double d)
    requires kTakesDoubles
  {
    if (count < capacity && !Decoder::FromDouble(d, &out[count])) return false;
    ++count;
    return true;
  }
  // A plain decimal (PlainDecimal's): a datatype whose range holds every one of them
  // (FromPlainDecimal) takes it without a range check.
  bool PutPlainDecimal(double d)
    requires kTakesDoubles
  {
    if constexpr (requires(Element* e) { Decoder::FromPlainDecimal(0.0, e); }) {
      if (count < capacity) Decoder::FromPlainDecimal(d, &out[count]);
      ++count;
      return true;
    } else {
      return PutDouble(d);
    }
  }
};

// BYTES elements appended to one serialisation.
struct StringSink {
  std::string out;
  int64_t count = 0;

  bool Put(const Token& t) {
    if (!StringDecoder::Decode(t, &out)) return false;
    ++count;
    return true;
  }
};

// For SkipJsonData: takes everything.
struct SkipSink {
  int64_t count = 0;
  bool Put(const Token&) {
    ++count;
    return true;
  }
};

// ---- The scanner -------------------------------------------------------------------------------

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Scanner {
 public:
  Scanner(std::string_view text, std::string_view label, size_t body_offset)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), label_(label), body_offset_(body_offset) {}

  // Reads the array at text[0] ('[') element by element into `sink`; objects are elements only
  // when `objects_are_elements` (skipping), else they stop the scan as a bad element.
  // On success *close is the offset of the outermost ']'.
  template <typename Sink>
  Status Scan(Sink& sink, bool objects_are_elements, size_t* close);

  // Where the element that sink.Put() refused starts.
  const char* bad_element() const { return bad_; }

 private:
  Status SyntaxError(const char* what) const {
    return InvalidArgument(std::string(label_) + ": 'data' is not valid JSON: " + what + " at byte " +
                           std::to_string(body_offset_ + static_cast<size_t>(p_ - begin_)) + " of the body");
  }
  void SkipSpace() {
    const char* p = p_;
    while (p < end_ && IsSpace(*p)) ++p;
    p_ = p;
  }
  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0) return false;
    p_ += word.size();
    return true;
  }
  // These return false after recording a syntax error in error_ (no Status on the hot path).
  bool Fail(const char* what) {
    error_ = SyntaxError(what);
    return false;
  }
  [[gnu::always_inline]] inline const char* Digits(const char* q, uint64_t* digits) const;
  [[gnu::always_inline]] inline bool PlainDecimal(double* value);
  bool Number(Token* t);
  bool String(Token* t);
  bool SkipObject();
  bool Element(Token* t, bool objects_are_elements);

  const char* begin_;
  const char* p_;
  const char* end_;
  const char* bad_ = nullptr;
  Status error_;
  std::string_view label_;
  size_t body_offset_;
};

// The digits that start at q, summed into *digits (wrapping past 19 digits: the caller then does
// not use it); returns their end. Eight bytes at a time where eight can be read: fast_float's SWAR
// helpers test and convert a chunk, and the same test's mask counts the digits that lead a chunk
// that is not all digits (those are converted as the chunk's last ones, '0's shifted in before them).
const char* Scanner::Digits(const char* q, uint64_t* digits) const {
  static constexpr uint64_t kPow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
  while (end_ - q >= 8) {
    const uint64_t chunk = fast_float::read_u64(q);  // as if little-endian: q[0] is the low byte
    const uint64_t others = ((chunk + 0x4646464646464646) | (chunk - 0x3030303030303030)) & 0x8080808080808080;
    if (others == 0) {
      *digits = *digits * 100000000 + fast_float::parse_eight_digits_unrolled(chunk);
      q += 8;
      continue;
    }
    const int n = std::countr_zero(others) / 8;  // a borrow or carry only runs past the first other byte
    if (n > 0) {
      const int shift = 8 * (8 - n);
      *digits = *digits * kPow10[n] +
                fast_float::parse_eight_digits_unrolled(chunk << shift | 0x3030303030303030 >> (64 - shift));
    }
    return q + n;
  }
  for (; q < end_ && IsDigit(*q); ++q) *digits = *digits * 10 + static_cast<unsigned>(*q - '0');
  return q;
}

// The hot loop's fast path: a plain decimal -?(0|[1-9][0-9]*)(.[0-9]+)? not followed by an exponent,
// of at most 19 digits, read as one integer M with k fraction digits. The digits are checked and
// summed in one pass (Digits). M <= 2^53 (k <= 19 < 22): M / 10^k is one IEEE division of two exact
// doubles, the correctly rounded value (Clinger's fast path). A larger M goes to fast_float's own
// next step with M and -k. Either way the value is bit for bit what std::from_chars (and fast_float
// from the text) reads, in the default rounding mode. Anything else (exponents, more than 19 digits,
// and every malformed number) returns false with nothing read, for Number.
bool Scanner::PlainDecimal(double* value) {
  const bool negative = *p_ == '-';
  const char* q = p_ + negative;
  if (q >= end_ || !IsDigit(*q)) return false;
  uint64_t digits = 0;  // the digits as one integer (wraps past 19 digits; then unused)
  const char* const first_digit = q;
  if (*q == '0') {
    if (++q < end_ && IsDigit(*q)) return false;  // "01" is Number's to refuse
  } else {
    q = Digits(q, &digits);  // every digit: no digit follows
  }
  int64_t count = q - first_digit;
  int64_t fraction = 0;
  if (q < end_ && *q == '.') {
    const char* const fraction_start = q + 1;
    q = Digits(fraction_start, &digits);
    fraction = q - fraction_start;
    if (fraction == 0) return false;  // "1." is Number's to refuse
    count += fraction;
  }
  if (q < end_ && (*q | 0x20) == 'e') return false;  // an exponent ('E' | 0x20 is 'e')
  if (count > 19) return false;
  if (digits <= (uint64_t{1} << 53)) [[likely]] {
    const double magnitude =
        static_cast<double>(digits) / fast_float::binary_format<double>::exact_power_of_ten(fraction);
    *value = negative ? -magnitude : magnitude;
  } else {
    // More digits than a double holds exactly (a double's shortest form has up to 17): what
    // fast_float does next with the same digits and exponent, its Eisel-Lemire step, unless that
    // asks for the long way round (rare), which fast_float takes from the start.
    const fast_float::adjusted_mantissa am =
        fast_float::compute_float<fast_float::binary_format<double>>(-fraction, digits);
    if (am.power2 < 0) return false;
    fast_float::to_float(negative, am, *value);
  }
  p_ = q;
  return true;
}

// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?: PlainDecimal, else FromCharsDouble, which finds the
// end and the value at once. What it accepts beyond JSON's grammar ("-inf", "01", "1.", "1.e5") is
// refused by looking at the integer part first; it stops before an exponent without digits, which
// then fails as a missing ','.
bool Scanner::Number(Token* t) {
  const char* const start = p_;
  t->kind = Token::Kind::kNumber;
  if (PlainDecimal(&t->value)) {
    t->value_ok = true;
    t->text = std::string_view(start, static_cast<size_t>(p_ - start));
    return true;
  }
  const char* q = start + (*start == '-');
  if (q >= end_ || !IsDigit(*q)) return Fail("a number needs digits");
  if (*q == '0') {
    if (++q < end_ && IsDigit(*q)) return Fail("a number has a leading zero");
  } else {
    while (q < end_ && IsDigit(*q)) ++q;
  }
  if (q < end_ && *q == '.' && !(q + 1 < end_ && IsDigit(q[1]))) {
    p_ = q + 1;
    return Fail("a number needs digits after '.'");
  }
  const auto [ptr, ec] = FromCharsDouble(start, end_, t->value);
  p_ = ptr;
  t->text = std::string_view(start, static_cast<size_t>(ptr - start));
  t->value_ok = ec == std::errc();
  return true;
}

// A string's extent: escapes are stepped over, not decoded (a datatype of strings decodes them).
bool Scanner::String(Token* t) {
  const char* start = p_++;
  while (p_ < end_ && *p_ != '"') {
    if (static_cast<unsigned char>(*p_) < 0x20) return Fail("a control character in a string");
    if (*p_ == '\\' && end_ - p_ < 2) break;
    p_ += *p_ == '\\' ? 2 : 1;
  }
  if (p_ >= end_) return Fail("a string is not closed");
  ++p_;
  t->kind = Token::Kind::kString;
  t->text = std::string_view(start, static_cast<size_t>(p_ - start));
  return true;
}

// Steps over an object by its brackets and strings, up to kMaxDataDepth deep.
bool Scanner::SkipObject() {
  int depth = 0;
  while (p_ < end_) {
    const char c = *p_;
    if (c == '"') {
      Token ignored;
      if (!String(&ignored)) return false;
      continue;
    }
    ++p_;
    if (c == '{' || c == '[') {
      if (++depth > kMaxDataDepth) return Fail("nested too deep");
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return true;
    }
  }
  return Fail("an object is not closed");
}

bool Scanner::Element(Token* t, bool objects_are_elements) {
  if (*p_ == '-' || IsDigit(*p_)) [[likely]] return Number(t);
  switch (*p_) {
    case '"': return String(t);
    case 't':
      if (!Literal("true")) return Fail("unexpected character");
      t->kind = Token::Kind::kTrue;
      return true;
    case 'f':
      if (!Literal("false")) return Fail("unexpected character");
      t->kind = Token::Kind::kFalse;
      return true;
    case 'n':
      if (!Literal("null")) return Fail("unexpected character");
      t->kind = Token::Kind::kNull;
      return true;
    case '{':
      t->kind = Token::Kind::kObject;
      t->text = {};
      return !objects_are_elements || SkipObject();
    default:
      return Fail("unexpected character");
  }
}

template <typename Sink>
Status Scanner::Scan(Sink& sink, bool objects_are_elements, size_t* close) {
  ++p_;  // the '[' at text[0]
  int depth = 1;
  bool want_element = true;  // after '[' or ','
  bool just_opened = true;   // after '[': ']' may follow at once
  while (true) {
    SkipSpace();
    if (p_ >= end_) return SyntaxError("the array is not closed");
    const char c = *p_;
    if (want_element && c == '[') {
      if (++depth > kMaxDataDepth) {
        return InvalidArgument(std::string(label_) + ": 'data' is nested more than " + std::to_string(kMaxDataDepth) +
                               " levels deep");
      }
      ++p_;
      just_opened = true;
      continue;
    }
    if (c == ']' && (!want_element || just_opened)) {
      if (--depth == 0) {
        *close = static_cast<size_t>(p_ - begin_);
        return Status::Ok();
      }
      ++p_;
      want_element = just_opened = false;
      continue;
    }
    if (!want_element) {
      if (c != ',') return SyntaxError("expected ',' or ']'");
      ++p_;
      want_element = true;
      just_opened = false;
      continue;
    }
    const char* start = p_;
    if constexpr (requires { requires Sink::kTakesDoubles; }) {
      double value = 0;
      if ((c == '-' || IsDigit(c)) && PlainDecimal(&value)) [[likely]] {
        // The usual form, plain decimals joined by bare commas, is read in this inner loop; at
        // anything else (a space, ']', a number PlainDecimal leaves) the loop above takes over.
        want_element = just_opened = false;
        while (true) {
          if (!sink.PutPlainDecimal(value)) {
            bad_ = start;
            return InvalidArgument("bad element");  // the caller words the message
          }
          if (end_ - p_ < 2 || *p_ != ',') break;
          start = ++p_;  // past the ','; what PlainDecimal leaves (a space, a '[') the loop above reads
          if (!PlainDecimal(&value)) {
            want_element = true;
            break;
          }
        }
        continue;
      }
    }
    Token token;
    if (!Element(&token, objects_are_elements)) return error_;
    // An object that was not stepped over cannot be scanned past: it is a bad element for every
    // datatype, wherever it is.
    if ((token.kind == Token::Kind::kObject && !objects_are_elements) || !sink.Put(token)) {
      bad_ = start;
      return InvalidArgument("bad element");  // the caller words the message
    }
    want_element = just_opened = false;
  }
}

// Elements the shape needs but that `text` cannot hold: each takes at least one character and
// all but the last one more for its comma.
bool CannotHold(std::string_view text, int64_t count) {
  return count > 0 && static_cast<uint64_t>(count - 1) > text.size() / 2;
}

template <typename Decoder>
Result<Tensor> Decode(std::string_view text, DataSpec& spec, size_t* end) {
  Scanner scanner(text, spec.label, spec.body_offset);
  FixedSink<Decoder> sink;
  Tensor tensor;
  const Shape* shape = &spec.shape;  // for messages: the spec's, or the tensor's once it moved there
  if (!CannotHold(text, spec.count)) {
    tensor = Tensor::Reusable(spec.type, std::move(spec.shape));  // warm if a request before left it
    shape = &tensor.shape();
    sink.out = reinterpret_cast<typename Decoder::Element*>(tensor.data());
    sink.capacity = spec.count;
  }
  Status st = scanner.Scan(sink, /*objects_are_elements=*/false, end);
  if (!st.ok() && scanner.bad_element() != nullptr) {
    const std::string_view at(scanner.bad_element(), static_cast<size_t>(text.data() + text.size() - scanner.bad_element()));
    return InvalidArgument(std::string(spec.label) + ": element " + std::to_string(sink.count) + " is " +
                           JsonExcerpt(at) + ", but " + DataTypeName(spec.type) + " needs " + Decoder::Requirement());
  }
  if (!st.ok()) return st;
  if (sink.count != spec.count) {
    return InvalidArgument(std::string(spec.label) + ": 'data' has " + std::to_string(sink.count) +
                           " elements but shape " + ShapeToString(*shape) + " needs " + std::to_string(spec.count));
  }
  return tensor;
}

// BYTES: the strings go into one serialisation, which becomes the tensor's buffer.
Result<Tensor> DecodeStrings(std::string_view text, DataSpec& spec, size_t* end) {
  Scanner scanner(text, spec.label, spec.body_offset);
  StringSink sink;
  Status st = scanner.Scan(sink, /*objects_are_elements=*/false, end);
  if (!st.ok() && scanner.bad_element() != nullptr) {
    const std::string_view at(scanner.bad_element(), static_cast<size_t>(text.data() + text.size() - scanner.bad_element()));
    return InvalidArgument(std::string(spec.label) + ": element " + std::to_string(sink.count) + " is " +
                           JsonExcerpt(at) + ", but BYTES needs " + StringDecoder::Requirement() +
                           " (with valid escapes)");
  }
  if (!st.ok()) return st;
  if (sink.count != spec.count) {
    return InvalidArgument(std::string(spec.label) + ": 'data' has " + std::to_string(sink.count) +
                           " elements but shape " + ShapeToString(spec.shape) + " needs " + std::to_string(spec.count));
  }
  return Tensor::FromSerializedBytes(std::move(spec.shape), sink.out);
}

}  // namespace

Result<Tensor> DecodeJsonData(std::string_view text, DataSpec spec, size_t* end) {
  switch (spec.type) {
    case DataType::kBool: return Decode<BoolDecoder>(text, spec, end);
    case DataType::kUInt8: return Decode<IntegerDecoder<uint8_t>>(text, spec, end);
    case DataType::kUInt16: return Decode<IntegerDecoder<uint16_t>>(text, spec, end);
    case DataType::kUInt32: return Decode<IntegerDecoder<uint32_t>>(text, spec, end);
    case DataType::kUInt64: return Decode<IntegerDecoder<uint64_t>>(text, spec, end);
    case DataType::kInt8: return Decode<IntegerDecoder<int8_t>>(text, spec, end);
    case DataType::kInt16: return Decode<IntegerDecoder<int16_t>>(text, spec, end);
    case DataType::kInt32: return Decode<IntegerDecoder<int32_t>>(text, spec, end);
    case DataType::kInt64: return Decode<IntegerDecoder<int64_t>>(text, spec, end);
    case DataType::kFloat16: return Decode<HalfDecoder>(text, spec, end);
    case DataType::kBFloat16: return Decode<BrainDecoder>(text, spec, end);
    case DataType::kFloat32: return Decode<Float32Decoder>(text, spec, end);
    case DataType::kFloat64: return Decode<Float64Decoder>(text, spec, end);
    case DataType::kBytes: return DecodeStrings(text, spec, end);
  }
  return Internal("unhandled data type");
}

Status SkipJsonData(std::string_view text, std::string_view label, size_t body_offset, size_t* end) {
  Scanner scanner(text, label, body_offset);
  SkipSink sink;
  return scanner.Scan(sink, /*objects_are_elements=*/true, end);
}

std::string JsonExcerpt(std::string_view text, size_t max) {
  std::string out;
  int depth = 0;
  bool in_string = false;
  size_t i = 0;
  for (; i < text.size() && out.size() < max; ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
        if (depth == 0) return out;
      }
      continue;
    }
    if (IsSpace(c)) continue;
    if (c == ',' || c == ']' || c == '}') {
      if (depth == 0) return out;  // the end of a scalar
      if (c != ',' && --depth == 0) return out + c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == '"') {
      in_string = true;
    }
    out += c;
  }
  if (i < text.size()) out += "...";
  return out;
}

double HalfToDouble(uint16_t bits) { return FromSmallFloat(bits, kHalf); }
double BrainToDouble(uint16_t bits) { return FromSmallFloat(bits, kBrain); }

}  // namespace ebb::server
