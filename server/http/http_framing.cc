#include "http_framing.h"

#include <zlib.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <cctype>
#include <cstring>

#include "ebb/tensor.h"
#include "protocol.h"

namespace ebb::server {
namespace {

namespace http = boost::beast::http;
using boost::beast::error_code;

constexpr size_t kMaxChunkLine = 4096;         // a chunk-size line, or the whole trailer
constexpr size_t kMaxLeadingEmptyLines = 8;    // RFC 9112 section 2.2: ignore at least one
constexpr size_t kInflateStep = 16u << 10;     // decompressed bytes per inflate() call
// A body of known length is stored in one buffer (RequestFramer::body_tail), laid out so that its
// byte at Inference-Header-Content-Length (where KServe's binary tensor data starts) is aligned
// to kBodyAlign, and from kBodyGranule on sized in whole granules, so that bodies of one model's
// requests, whose JSON headers differ by a few bytes, take the same kept buffer (Tensor::Reusable).
constexpr size_t kBodyAlign = 64;
constexpr size_t kBodyGranule = 64u << 10;
constexpr std::string_view kAlignedAtField = "Inference-Header-Content-Length";
// Room for the header fields a client sends as a rule (Host, User-Agent, Accept, Content-Type,
// Content-Length, Connection, ...), made once instead of as they come.
constexpr size_t kUsualFields = 12;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The comma-separated members of a field value, trimmed; empty members dropped.
std::vector<std::string_view> ListMembers(std::string_view value) {
  std::vector<std::string_view> members;
  while (!value.empty()) {
    const size_t comma = value.find(',');
    std::string_view member = TrimOws(value.substr(0, comma));
    if (!member.empty()) members.push_back(member);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return members;
}

// For messages: untrusted text cut short and without control characters.
std::string Shown(std::string_view s, size_t max = 40) {
  std::string out;
  for (char c : s.substr(0, max)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

bool IsImplementedMethod(http::verb verb) {
  switch (verb) {
    case http::verb::get:
    case http::verb::head:
    case http::verb::post:
    case http::verb::put:
    case http::verb::delete_:
    case http::verb::options:
    case http::verb::trace:
    case http::verb::patch: return true;
    default: return false;
  }
}

// "HTTP/d.d" at the end of a request line whose syntax is otherwise right: the version, else "".
std::string_view WellFormedVersion(std::string_view line) {
  const size_t space = line.rfind(' ');
  if (space == std::string_view::npos || line.find(' ') == space) return {};
  std::string_view v = line.substr(space + 1);
  const bool ok = v.size() == 8 && v.substr(0, 5) == "HTTP/" && std::isdigit(static_cast<unsigned char>(v[5])) &&
                  v[6] == '.' && std::isdigit(static_cast<unsigned char>(v[7]));
  return ok ? v : std::string_view{};
}

}  // namespace

class RequestFramer::Parser : public http::basic_parser<true> {
 public:
  Parser(const FramingLimits& limits, Reserve reserve, FramerRoom* room)
      : limits_(Clamped(limits)), reserve_(std::move(reserve)), room_(room) {
    body_limit(limits_.max_body_bytes);
    if (room_) {
      target_.swap(room_->target);
      headers_.swap(room_->fields);
    }
    if (headers_.capacity() < kUsualFields) headers_.reserve(kUsualFields);
  }
  ~Parser() override {
    if (inflating_) inflateEnd(&zstream_);
    if (room_ && KeptBytes() <= FramerRoom::kMaxKeptBytes) {
      room_->target.swap(target_);
      room_->fields.swap(headers_);
    }
    if (room_ && fixed_.byte_size() > 0 && fixed_.byte_size() <= FramerRoom::kMaxKeptBytes) {
      room_->body = std::move(fixed_);
    }
  }

  size_t Feed(std::string_view data) {
    size_t skipped = 0;
    if (!started_) {
      while (data.size() >= 2 && data.substr(0, 2) == "\r\n" && empty_lines_ < kMaxLeadingEmptyLines) {
        data.remove_prefix(2);
        skipped += 2;
        ++empty_lines_;
      }
      if (data.empty() || data == "\r") return skipped;
      started_ = true;
    }
    const bool had_header = is_header_done();
    // Beast consumes the request line and each complete field as they come, and its header limit
    // applies to what it has not consumed yet: the limit here is what is left of the whole.
    if (!had_header) header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes - header_bytes_));
    error_code ec;
    const size_t used = put(boost::asio::buffer(data.data(), data.size()), ec);
    if (!had_header) {
      header_bytes_ += used;
      // Beast unfolds obs-folds (a field is consumed whole, with its continuation lines).
      if (HasObsFold(data.substr(0, used))) {
        Fail(400, "obsolete line folding (a header line that starts with whitespace) is not allowed (RFC 9112 section 5.2)");
        return skipped + used;
      }
    }
    if (ec == http::error::need_more) {
      // Beast waits for CRLF CRLF before it looks at more fields: a bare LF would wait for the deadline.
      if (!is_header_done() && BareLf(data.substr(used), header_scanned_ > used ? header_scanned_ - used : 0)) {
        Fail(400, "header lines must end with CRLF");
      }
      header_scanned_ = data.size() - used;
      if (is_header_done() && data.size() - used >= kMaxChunkLine) {
        Fail(400, "a chunk-size line or the trailer is longer than " + std::to_string(kMaxChunkLine) + " bytes");
      }
    } else if (ec) {
      if (framer_state_ != State::kFailed) Translate(ec, data);
    } else if (is_done()) {
      framer_state_ = State::kComplete;
    } else if (is_header_done()) {
      eager(true);  // from here on, each Feed takes all the body bytes it is given
    }
    if (framer_state_ == State::kHeader && is_header_done()) framer_state_ = is_done() ? State::kComplete : State::kBody;
    return skipped + used;
  }

  void EndOfInput() {
    if (framer_state_ == State::kHeader && started_) Fail(400, "the connection closed before the request header was complete");
    if (framer_state_ == State::kBody) Fail(400, "the connection closed before the request body was complete");
  }

  State framer_state_ = State::kHeader;
  bool started_ = false;
  FramingError error_;
  std::string method_;
  std::string target_;
  int http_version_ = 11;
  // The first fields_ are this request's header fields; those after, strings a request before left
  // (FramerRoom), never shown.
  std::vector<std::pair<std::string, std::string>> headers_;
  size_t fields_ = 0;
  bool expects_continue_ = false;
  std::string body_;  // a body of unknown length (chunked) or compressed
  // A body of known length: its bytes at fixed_.data() + fixed_start_, fixed_size_ of fixed_length_.
  Tensor fixed_;
  size_t fixed_start_ = 0, fixed_size_ = 0, fixed_length_ = 0;
  bool in_fixed_ = false;
  size_t reserved_ = 0;
  size_t copied_ = 0;

  std::string_view Body() const {
    if (!in_fixed_) return body_;
    return {reinterpret_cast<const char*>(fixed_.data()) + fixed_start_, fixed_size_};
  }
  // Where the rest of a body of known length goes: empty otherwise, or when complete.
  std::span<char> FixedTail() {
    if (!in_fixed_) return {};
    return {reinterpret_cast<char*>(fixed_.data()) + fixed_start_ + fixed_size_, fixed_length_ - fixed_size_};
  }

 private:
  void Fail(int status, std::string message) {
    if (framer_state_ == State::kFailed) return;
    framer_state_ = State::kFailed;
    error_ = {status, std::move(message)};
  }
  // Fails and tells Beast to stop.
  void Fail(int status, std::string message, error_code& ec) {
    Fail(status, std::move(message));
    ec = http::error::bad_value;
  }

  // A LF not preceded by CR in `header` from `from` on.
  static bool BareLf(std::string_view header, size_t from) {
    for (size_t at = header.find('\n', from); at != std::string_view::npos; at = header.find('\n', at + 1)) {
      if (at == 0 || header[at - 1] != '\r') return true;
    }
    return false;
  }

  static FramingLimits Clamped(FramingLimits limits) {
    limits.max_header_bytes = std::min<size_t>(limits.max_header_bytes, UINT32_MAX);  // Beast's limit is 32-bit
    return limits;
  }

  // An obs-fold (CRLF followed by SP or HTAB) in header bytes Beast consumed.
  static bool HasObsFold(std::string_view header) {
    for (size_t at = header.find("\r\n"); at != std::string_view::npos && at + 2 < header.size();
         at = header.find("\r\n", at + 2)) {
      if (header[at + 2] == ' ' || header[at + 2] == '\t') return true;
    }
    return false;
  }

  // A Beast error as a status and a message.
  void Translate(const error_code& ec, std::string_view data) {
    const size_t eol = data.find('\n');
    std::string_view line = data.substr(0, eol);
    if (ec == http::error::header_limit) {
      if (method_.empty() && (eol == std::string_view::npos || eol >= limits_.max_header_bytes)) {
        return Fail(414, "the request line is longer than the limit of " + std::to_string(limits_.max_header_bytes) +
                             " bytes (--max-header-bytes; the target alone may have " +
                             std::to_string(limits_.max_uri_bytes) + ", --max-uri-bytes)");
      }
      return Fail(431, "the request header is larger than the limit of " + std::to_string(limits_.max_header_bytes) +
                           " bytes (--max-header-bytes)");
    }
    if (ec == http::error::body_limit) return BodyTooLarge("");
    if (ec == http::error::bad_version) {
      if (line.empty() || line.back() != '\r') return Fail(400, "the request line must end with CRLF");
      line.remove_suffix(1);
      const std::string_view version = WellFormedVersion(line);
      if (!version.empty()) {
        return Fail(505, "HTTP version " + std::string(version.substr(5)) +
                             " is not supported (this server speaks HTTP/1.1 and HTTP/1.0)");
      }
      return Fail(400, "malformed request line '" + Shown(line) + "' (expected: METHOD /path HTTP/1.1)");
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (ec == http::error::bad_method || ec == http::error::bad_target) {
      return Fail(400, "malformed request line '" + Shown(line) + "' (expected: METHOD /path HTTP/1.1)");
    }
    if (ec == http::error::bad_content_length) {
      if (saw_transfer_encoding_) return Fail(400, "Content-Length together with Transfer-Encoding is not allowed (RFC 9112 section 6.3)");
      return Fail(400, "invalid Content-Length (it must be decimal digits)");
    }
    if (ec == http::error::multiple_content_length) return Fail(400, "two Content-Length headers with different values");
    if (ec == http::error::bad_transfer_encoding) {
      if (saw_content_length_) return Fail(400, "Transfer-Encoding together with Content-Length is not allowed (RFC 9112 section 6.3)");
      return Fail(400, "more than one Transfer-Encoding header");
    }
    if (ec == http::error::bad_chunk) {
      return Fail(400, "malformed chunk (a chunk starts with its size in hexadecimal digits and CRLF, and ends with CRLF)");
    }
    if (ec == http::error::bad_chunk_extension) return Fail(400, "malformed chunk extension");
    if (ec == http::error::bad_field) {
      return Fail(400, "malformed header field (a field name is a token followed directly by ':')");
    }
    if (ec == http::error::bad_value || ec == http::error::bad_line_ending) {
      if (BareLf(data.substr(0, data.find("\r\n\r\n")), 0)) return Fail(400, "header lines must end with CRLF");
    }
    if (ec == http::error::bad_value) return Fail(400, "a header field value contains a control character");
    if (ec == http::error::bad_line_ending) return Fail(400, "header lines must end with CRLF");
    if (ec == http::error::bad_obs_fold) {
      return Fail(400, "obsolete line folding (a header line that starts with whitespace) is not allowed (RFC 9112 section 5.2)");
    }
    Fail(400, "malformed request (" + ec.message() + ")");
  }

  void BodyTooLarge(const char* after) {
    Fail(413, std::string("request body is larger than the limit of ") + std::to_string(limits_.max_body_bytes) +
                  " bytes" + after + " (--max-body-bytes)");
  }

  void on_request_impl(http::verb verb, boost::beast::string_view method, boost::beast::string_view target, int version,
                       error_code& ec) override {
    const std::string_view m(method.data(), method.size());
    if (verb == http::verb::connect) return Fail(501, "CONNECT is not implemented (this server is not a proxy)", ec);
    if (!IsImplementedMethod(verb)) return Fail(501, "method '" + Shown(m) + "' is not implemented", ec);
    if (target.size() > limits_.max_uri_bytes) {
      return Fail(414, "the request target is longer than the limit of " + std::to_string(limits_.max_uri_bytes) +
                           " bytes (--max-uri-bytes)", ec);
    }
    method_ = m;
    target_.assign(target.data(), target.size());  // into the room a request before left, as a rule
    http_version_ = version;
  }

  void on_response_impl(int, boost::beast::string_view, int, error_code&) override {}

  void on_field_impl(http::field field, boost::beast::string_view name, boost::beast::string_view value, error_code& ec) override {
    if (is_header_done()) return;  // a trailer field: read and dropped
    const std::string_view v(value.data(), value.size());
    if (field == http::field::content_length) saw_content_length_ = true;
    if (field == http::field::host) ++hosts_;
    if (field == http::field::transfer_encoding) {
      saw_transfer_encoding_ = true;
      if (http_version_ < 11) return Fail(400, "Transfer-Encoding is not allowed in an HTTP/1.0 request (RFC 9112 section 6.1)", ec);
      const std::vector<std::string_view> codings = ListMembers(v);
      if (codings.size() != 1 || !EqualsIgnoreCase(codings.back(), "chunked")) {
        if (!codings.empty() && EqualsIgnoreCase(codings.back(), "chunked")) {
          return Fail(501, "Transfer-Encoding '" + Shown(v) + "' is not supported (only chunked)", ec);
        }
        return Fail(400, "Transfer-Encoding '" + Shown(v) + "' does not end with chunked, so the body length "
                         "cannot be determined (RFC 9112 section 6.3)", ec);
      }
    }
    if (field == http::field::content_encoding) content_encoding_.push_back(std::string(TrimOws(v)));
    if (field == http::field::unknown && EqualsIgnoreCase({name.data(), name.size()}, kAlignedAtField)) {
      // A hint for the body's layout only: whoever reads the body checks the field itself.
      if (Result<size_t> at = ParseHeaderContentLength({v.data(), v.size()}); at.ok()) aligned_at_ = *at;
    }
    if (field == http::field::expect) {
      if (!EqualsIgnoreCase(TrimOws(v), "100-continue")) return Fail(417, "unsupported expectation '" + Shown(v) + "'", ec);
      expects_continue_ = true;
    }
    if (fields_ < headers_.size()) {  // a string a request before left: its capacity is kept
      headers_[fields_].first.assign(name.data(), name.size());
      headers_[fields_].second.assign(v);
    } else {
      headers_.emplace_back(std::string(name.data(), name.size()), std::string(v));
    }
    ++fields_;
  }

  void on_header_impl(error_code& ec) override {
    CheckHeader(ec);
    // The body's buffer is ready when the header ends, so that the transport can read even its
    // first bytes into it (Beast calls on_body_init_impl only when body bytes come).
    if (!ec) PrepareFixedBody(content_length());
  }

  void CheckHeader(error_code& ec) {
    if (http_version_ >= 11 && hosts_ != 1) {
      return Fail(400, "an HTTP/1.1 request needs exactly one Host header (RFC 9112 section 3.2); it has " +
                           std::to_string(hosts_), ec);
    }
    std::vector<std::string_view> codings;
    for (const std::string& value : content_encoding_) {
      for (std::string_view c : ListMembers(value)) codings.push_back(c);
    }
    codings.erase(std::remove_if(codings.begin(), codings.end(),
                                 [](std::string_view c) { return EqualsIgnoreCase(c, "identity"); }),
                  codings.end());
    if (codings.empty()) return;
    const bool known = EqualsIgnoreCase(codings[0], "gzip") || EqualsIgnoreCase(codings[0], "x-gzip") ||
                       EqualsIgnoreCase(codings[0], "deflate");
    if (codings.size() > 1 || !known) {
      std::string all;
      for (std::string_view c : codings) all += (all.empty() ? "" : ", ") + Shown(c);
      return Fail(415, "Content-Encoding '" + all + "' is not supported (gzip, deflate or identity)", ec);
    }
    // 15 + 32: a zlib or a gzip header, detected (clients send either for "deflate").
    if (inflateInit2(&zstream_, 15 + 32) != Z_OK) return Fail(500, "cannot start zlib", ec);
    inflating_ = true;
  }

  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}

  // For a body of known length and no content coding: its one buffer.
  void PrepareFixedBody(const boost::optional<std::uint64_t>& content_length) {
    if (!content_length || inflating_ || *content_length == 0 || in_fixed_) return;
    // The body's one buffer (Beast has refused a length over the body limit already). A kept one
    // (Tensor::Reusable) when an earlier body of this size gave it back: its pages are mapped.
    const auto length = static_cast<size_t>(*content_length);
    size_t capacity = length + kBodyAlign;
    if (capacity >= kBodyGranule) capacity = (capacity + kBodyGranule - 1) / kBodyGranule * kBodyGranule;
    if (room_ && room_->body.byte_size() >= capacity) {
      fixed_ = std::move(room_->body);  // a small body's buffer the request before left (FramerRoom)
    } else {
      fixed_ = Tensor::Reusable(DataType::kUInt8, {static_cast<int64_t>(capacity)});
    }
    const size_t aligned_at = aligned_at_ <= length ? aligned_at_ : 0;
    const auto base = reinterpret_cast<uintptr_t>(fixed_.data()) + aligned_at;
    fixed_start_ = (kBodyAlign - base % kBodyAlign) % kBodyAlign;
    fixed_length_ = length;
    in_fixed_ = true;
  }

  std::size_t on_body_impl(boost::beast::string_view body, error_code& ec) override {
    Append({body.data(), body.size()}, ec);
    return body.size();
  }

  void on_chunk_header_impl(std::uint64_t, boost::beast::string_view, error_code&) override {}

  std::size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view body, error_code& ec) override {
    Append({body.data(), body.size()}, ec);
    return body.size();
  }

  void on_finish_impl(error_code& ec) override {
    if (inflating_ && compressed_bytes_ > 0 && !stream_ended_) {
      Fail(400, "the compressed request body ends before its end", ec);
    }
  }

  // Asks the budget for `n` more bytes of body.
  bool Grow(size_t n, error_code& ec) {
    if (reserve_ && !reserve_(n)) {
      Fail(503, "server busy: the request bodies being received are over the server's budget "
                "(--max-body-bytes-in-flight); retry later", ec);
      return false;
    }
    reserved_ += n;
    return true;
  }

  void Append(std::string_view bytes, error_code& ec) {
    if (in_fixed_) {
      if (!Grow(bytes.size(), ec)) return;
      const std::span<char> tail = FixedTail();
      // Bytes read straight into the tail (RequestFramer::body_tail) are in place already.
      if (bytes.data() != tail.data()) {
        std::memcpy(tail.data(), bytes.data(), bytes.size());  // Beast passes at most the length
        copied_ += bytes.size();
      }
      fixed_size_ += bytes.size();
      return;
    }
    if (!inflating_) {
      if (Grow(bytes.size(), ec)) {
        body_.append(bytes);
        copied_ += bytes.size();
      }
      return;
    }
    compressed_bytes_ += bytes.size();
    zstream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zstream_.avail_in = static_cast<uInt>(bytes.size());
    char out[kInflateStep];
    bool full = false;
    while (zstream_.avail_in > 0 || full) {
      if (stream_ended_) {
        if (inflateReset(&zstream_) != Z_OK) return Fail(500, "cannot restart zlib", ec);
        stream_ended_ = false;  // another gzip member follows (RFC 1952 §2.2)
      }
      zstream_.next_out = reinterpret_cast<Bytef*>(out);
      zstream_.avail_out = sizeof out;
      const int rc = inflate(&zstream_, Z_NO_FLUSH);
      const size_t produced = sizeof out - zstream_.avail_out;
      full = zstream_.avail_out == 0;
      if (rc != Z_OK && rc != Z_STREAM_END && !(rc == Z_BUF_ERROR && zstream_.avail_in == 0)) {
        return Fail(400, std::string("the compressed request body is corrupt (zlib: ") +
                             (zstream_.msg ? std::string(zstream_.msg) : "error " + std::to_string(rc)) + ")", ec);
      }
      if (produced > 0) {
        if (body_.size() + produced > limits_.max_body_bytes) {
          BodyTooLarge(" after decompression");
          ec = http::error::bad_value;
          return;
        }
        if (!Grow(produced, ec)) return;
        body_.append(out, produced);
        copied_ += produced;
      }
      if (rc == Z_STREAM_END) stream_ended_ = true;
      if (rc == Z_BUF_ERROR) break;
    }
  }

  const FramingLimits limits_;
  const Reserve reserve_;
  size_t empty_lines_ = 0;
  size_t header_bytes_ = 0;    // of the request line and fields, consumed so far
  size_t header_scanned_ = 0;  // of the unconsumed header, checked for bare LF
  int hosts_ = 0;
  bool saw_content_length_ = false;
  bool saw_transfer_encoding_ = false;
  std::vector<std::string> content_encoding_;
  z_stream zstream_{};
  bool inflating_ = false;
  bool stream_ended_ = false;
  size_t compressed_bytes_ = 0;
  size_t aligned_at_ = 0;  // Inference-Header-Content-Length, when sent
  FramerRoom* const room_;  // the connection's, or null

  // The bytes the target's and fields' strings hold (what giving them back would keep).
  size_t KeptBytes() const {
    size_t bytes = target_.capacity();
    for (const auto& [name, value] : headers_) bytes += name.capacity() + value.capacity();
    return bytes;
  }

  friend class RequestFramer;
};

RequestFramer::RequestFramer(const FramingLimits& limits, Reserve reserve, FramerRoom* room)
    : parser_(std::make_unique<Parser>(limits, std::move(reserve), room)) {}
RequestFramer::~RequestFramer() = default;

size_t RequestFramer::Feed(std::string_view data) { return parser_->Feed(data); }
void RequestFramer::EndOfInput() { parser_->EndOfInput(); }
RequestFramer::State RequestFramer::state() const { return parser_->framer_state_; }
bool RequestFramer::started() const { return parser_->started_; }
const FramingError& RequestFramer::error() const { return parser_->error_; }
std::string_view RequestFramer::method() const { return parser_->method_; }
std::string_view RequestFramer::target() const { return parser_->target_; }
int RequestFramer::version() const { return parser_->http_version_; }
std::span<const std::pair<std::string, std::string>> RequestFramer::headers() const {
  return {parser_->headers_.data(), parser_->fields_};
}
bool RequestFramer::keep_alive() const { return parser_->keep_alive(); }
bool RequestFramer::expects_continue() const { return parser_->expects_continue_ && parser_->framer_state_ == State::kBody; }
std::optional<uint64_t> RequestFramer::body_bytes_left() const {
  const boost::optional<std::uint64_t> left = parser_->content_length_remaining();
  if (!left || parser_->chunked()) return std::nullopt;
  return *left;
}
std::string_view RequestFramer::body() const { return parser_->Body(); }
std::span<char> RequestFramer::body_tail() {
  return parser_->framer_state_ == State::kBody ? parser_->FixedTail() : std::span<char>();
}
size_t RequestFramer::reserved_bytes() const { return parser_->reserved_; }
size_t RequestFramer::copied_bytes() const { return parser_->copied_; }

}  // namespace ebb::server
