// server/http/protocol_internal.h — what the two halves of the KServe v2 codec share: the request
// reader (protocol_decode.cc) and the response writer (protocol_encode.cc). Not for other files:
// protocol.h is the codec's one public header.
//
// Thread safety: pure functions.
#pragma once

#include <bit>
#include <string>
#include <string_view>

namespace ebb::server {

static_assert(std::endian::native == std::endian::little,
              "binary tensor data is little-endian and is copied as is");

// `s` as a JSON string literal, quotes included; bytes that are not UTF-8 become U+FFFD. For
// response bodies and for the names and values that error messages quote.
[[nodiscard]] std::string Quote(std::string_view s);
// The same, appended to *out.
void AppendQuoted(std::string* out, std::string_view s);

}  // namespace ebb::server
