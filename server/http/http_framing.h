// server/http/http_framing.h — HTTP/1.1 request framing (RFC 9112) for the transport.
//
// A RequestFramer turns the bytes of one connection into one request: request line, header
// fields and body (chunked transfer coding removed, gzip/deflate content coding decompressed),
// or into an error with the HTTP status and a message that says what was wrong. It does no I/O,
// so the transport (server/http/http_server.cc) and the fuzzer (fuzz/http_framing_fuzzer.cc)
// share it. The parsing underneath is Boost.Beast's (hidden here: no other file includes it);
// this class adds what RFC 9112 asks of a server and Beast leaves lenient, plus the limits.
//
// Strict framing (each a 400 unless noted, the connection is closed after the reply):
//   - request line: `method SP target SP HTTP/1.x CRLF`, up to --max-uri-bytes of target (414);
//     a version other than 1.0 / 1.1 is 505; a method that is not a standard one is 501;
//     CONNECT is 501 (not a proxy); up to 8 empty lines before it are skipped (RFC 9112 section 2.2);
//   - header: lines end with CRLF; no whitespace between a field name and its colon; no control
//     characters in values; no obsolete line folding (§5.2); at most --max-header-bytes in all
//     (431); HTTP/1.1 requests carry exactly one Host (§3.2);
//   - Content-Length: decimal digits only (a list of one repeated value is accepted); two that
//     differ, or one together with Transfer-Encoding, are refused (§6.3);
//   - Transfer-Encoding: exactly `chunked` (another coding is 501; `chunked` not last is 400);
//     refused in HTTP/1.0 requests (§6.1). Chunk sizes are hexadecimal; a chunk-size line or the
//     trailer longer than 4096 bytes is refused; trailer fields are read and dropped;
//   - no Content-Length and no Transfer-Encoding: the body is empty (§6.3 rule 7);
//   - body: at most max_body_bytes, counted after chunked decoding AND after decompression
//     (413); Content-Encoding gzip, x-gzip and deflate are decompressed; any other is 415;
//     a corrupt or truncated compressed body is 400.
//
// State machine: kHeader -(header complete)-> kBody -(body complete)-> kComplete; any error ->
// kFailed. A request without a body goes from kHeader to kComplete in one Feed.
//
// Memory: the framer holds the request's header fields and its decoded body, nothing else; the
// caller keeps unconsumed bytes. Before the body grows, `reserve(bytes)` is asked; when it
// refuses, the request fails with 503 (the transport's budget of body bytes in flight). A body of
// known length and no content coding has one buffer of its length from the start (Beast has
// checked it against the limit), a kept one where a body of that size gave one back
// (Tensor::Reusable), laid out so that its byte at `Inference-Header-Content-Length` (where the
// KServe binary tensor data begins) is 64-byte aligned: the decoder can then use binary inputs
// where they lie. Other bodies grow as they arrive.
//
// Thread safety: none; one framer per request, used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ebb/tensor.h"

namespace ebb::server {

struct FramingLimits {
  // Request line plus header fields. Beyond: 431. KServe clients send a few short headers.
  size_t max_header_bytes = 16u << 10;
  // The request target. Beyond: 414. Model names are at most 128 characters.
  size_t max_uri_bytes = 8u << 10;
  // The decoded body (after chunked decoding and decompression). Beyond: 413.
  size_t max_body_bytes = 256u << 20;
};

// What a client gets when framing fails: the status and a message for {"error": ...}.
struct FramingError {
  int status = 0;
  std::string message;
};

// Room one request's framer leaves to the next one on its connection: the strings its target and
// header fields were copied into, with their capacity, and the buffer of a small body of known
// length (so that the next request's, as a rule, need no allocation). What they held is never
// shown to the next request: its framer shows only what it wrote there itself. Kept only while
// small (kMaxKeptBytes of strings, a body buffer of at most kMaxKeptBytes): a connection keeps at
// most 8 KiB of it.
struct FramerRoom {
  static constexpr size_t kMaxKeptBytes = 4096;
  std::string target;
  std::vector<std::pair<std::string, std::string>> fields;
  Tensor body;
};

class RequestFramer {
 public:
  enum class State { kHeader, kBody, kComplete, kFailed };
  // Asked before the body grows by `bytes`; returns false to refuse (the request fails with 503).
  using Reserve = std::function<bool(size_t bytes)>;

  // `room`: taken for this request, and given back (when small) as the framer goes; the caller's,
  // outliving the framer. Null: none.
  explicit RequestFramer(const FramingLimits& limits, Reserve reserve = {}, FramerRoom* room = nullptr);
  ~RequestFramer();
  RequestFramer(const RequestFramer&) = delete;
  RequestFramer& operator=(const RequestFramer&) = delete;

  // Parses from the start of `data` (the bytes not yet consumed: the caller keeps what this does
  // not use and passes it again, followed by more) and returns how many bytes it used. Stops at
  // the end of the header (state kBody, so the caller can answer `Expect: 100-continue`) and at the
  // end of the request (kComplete; what follows belongs to the next request).
  // REQUIRES: state() is kHeader or kBody.
  size_t Feed(std::string_view data);
  // The peer closed its side: a request begun and not complete fails (400).
  void EndOfInput();

  State state() const;
  // Whether any byte of this request (empty lines before it excluded) was seen.
  bool started() const;
  // Valid in kFailed.
  const FramingError& error() const;

  // Valid in kBody and kComplete:
  std::string_view method() const;
  std::string_view target() const;
  int version() const;  // 10 or 11
  std::span<const std::pair<std::string, std::string>> headers() const;
  bool keep_alive() const;        // by version and Connection
  bool expects_continue() const;  // `Expect: 100-continue` and a body still to come
  // Valid in kBody: the bytes of a Content-Length body still to come (as sent, before any
  // decompression); nullopt for a chunked body, whose length is not known.
  std::optional<uint64_t> body_bytes_left() const;
  // Valid in kComplete: the decoded body. Valid until the framer goes.
  std::string_view body() const;
  // Valid in kBody: where the rest of a body of known length and no content coding goes, so that
  // the caller can read it from the socket straight there (then Feed those bytes: the framer sees
  // that they are in place and copies nothing). Empty for other bodies, which Feed copies.
  std::span<char> body_tail();
  // Bytes granted by `reserve` so far (what the caller's budget holds for this request).
  size_t reserved_bytes() const;
  // Body bytes Feed copied (what was not read into body_tail()).
  size_t copied_bytes() const;

 private:
  class Parser;
  std::unique_ptr<Parser> parser_;
};

}  // namespace ebb::server
