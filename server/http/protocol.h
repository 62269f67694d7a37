// server/http/protocol.h — the KServe v2 / Open Inference Protocol codec for HTTP/REST inference.
//
// Turns the body of `POST v2/models/<name>[/versions/<v>]/infer` into the core's InferRequest
// (server/core/inference.h) plus the REST-only choice of binary outputs, and an InferResponse into
// the response body. Both the plain JSON form and the binary tensor data
// extension are handled:
//
//   request body  = JSON header, then the raw bytes of every input whose JSON entry carries
//                   parameters.binary_data_size, in the order those inputs are listed. The JSON
//                   header's length comes from the HTTP header Inference-Header-Content-Length.
//   response body = JSON header, then the raw bytes of every output returned as binary, in the
//                   order of the JSON "outputs" array; header_length is set in that case and the
//                   HTTP layer must send it as Inference-Header-Content-Length.
//
// Binary tensor data is little-endian, row-major, unpadded; BOOL is one byte, 0 or 1.
// JSON "data" may be flat or nested (any nesting is flattened in row-major order; only the total
// element count is checked against the shape). Element conversion:
//   - BOOL: true/false only.
//   - integer types: integer JSON numbers within the type's range; a JSON number with a fraction
//     part of zero (2.0) is accepted too when |value| <= 2^53. 1.5, 300 for UINT8, "7" are refused.
//   - FP64/FP32/FP16/BF16: any JSON number, rounded to nearest-even; a finite number that would
//     round to infinity in the target type is refused. JSON null decodes to NaN.
// Encoding writes every float (FP16/BF16 via float) as the shortest number that a double-precision
// JSON parser reads back as exactly the same value, so finite values survive a JSON round trip
// bit for bit (-0.0 included). NaN and ±Inf, which JSON cannot express, are written as null: NaN
// survives a round trip, infinities come back as NaN.
// BYTES: outputs are encoded as JSON strings (bytes that are not UTF-8 become U+FFFD) or, as
// binary data, in the KServe form (each element a 4-byte little-endian length, then its bytes).
// BYTES inputs: JSON "data" leaves must be strings (escapes resolved; \u0000 is an embedded NUL; a
// lone surrogate is refused); as binary data, parameters.binary_data_size bytes holding exactly the
// shape's element count in that same length-prefixed form.
//
// Every error is a kInvalidArgument Status whose message names the offending input; nothing here
// throws, and no input, however malformed, makes the parser allocate more than the body justifies
// (shape products are overflow-checked before any tensor is allocated).
//
// Hostile input. The request is read in one pass by a SAX reader (RapidJSON) that builds no tree
// of the body: each input's "data" array goes straight into its tensor's typed buffer
// (json_data.h), and only the small members ("id", "parameters", "outputs", an input's "name",
// "datatype", "shape", "parameters") are kept, each at most kMaxFieldBytes long. Memory is the
// tensors (bounded by the body: a shape asking for more elements than the text holds is refused
// before allocating), one copy of the JSON header (RapidJSON decodes strings in it, in situ) and a
// few small buffers. Nesting is limited: kMaxJsonDepth levels outside
// "data", kMaxDataDepth within it; nothing recurses deeper than that. Error messages quote at most
// 40 characters of a value and never serialise one recursively. A "data" that comes before its
// input's "datatype" or "shape" is found first and decoded when the input object ends.
// parameters.keep_alive is checked by CheckKeepAlive (core/inference.h), as over gRPC.
//
// Implementation: protocol_decode.cc (ParseInferRequest, ParseHeaderContentLength) and
// protocol_encode.cc (BinaryOutputs::Wants, EncodeInferResponse, EncodeError); what both use is in
// protocol_internal.h. This is the codec's one public header.
//
// Thread safety: all functions are pure; call them from any thread.
// Ownership: ParseInferRequest copies tensor data out of `body` into the returned tensors, so the
// body may be freed afterwards, unless ParseOptions::borrow_binary lets binary inputs view it. The
// encoders copy what they need into the returned strings, except binary outputs, which
// EncodedResponse::binary views in the response.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ebb/status.h"
#include "core/inference.h"
#include "ebb/tensor.h"

namespace ebb::server {

// The HTTP header giving the length of the JSON part of a body that has binary data appended.
inline constexpr std::string_view kInferenceHeaderContentLength = "Inference-Header-Content-Length";

// Which outputs a REST client wants back as binary data (the binary tensor data extension).
struct BinaryOutputs {
  std::set<std::string> binary;  // outputs with parameters.binary_data: true
  std::set<std::string> json;    // outputs with parameters.binary_data: false (beats `all`)
  bool all = false;              // top-level parameters.binary_data_output

  // Whether output `name` goes back as binary data: listed in `binary`, or `all` is set and it is
  // not listed in `json`.
  [[nodiscard]] bool Wants(const std::string& name) const;
};

// A decoded REST inference request: the core's request and the REST-only output choices.
struct RestInferRequest {
  InferRequest request;
  BinaryOutputs binary;
};

// Deepest nesting of the request's JSON outside "data" arrays (which have kMaxDataDepth).
inline constexpr int kMaxJsonDepth = 32;
// Longest JSON text of one member other than "data" ("outputs", "parameters", "shape", "id", ...).
inline constexpr size_t kMaxFieldBytes = 64 * 1024;

struct ParseOptions {
  // Largest element count accepted for one input (a policy limit; shapes whose byte size
  // overflows int64 are always refused).
  int64_t max_input_elements = std::numeric_limits<int64_t>::max();
  // Binary inputs of fixed-size types whose bytes lie in `body` aligned for their type become
  // views of the body (Tensor::Borrow), not copies: the caller keeps `body` alive and unwritten
  // while the request's tensors live (the HTTP front end: the body lives until the reply is
  // made, and the transport lays it out so that the binary section starts 64-byte aligned).
  // BOOL inputs (checked 0 or 1) are viewed too; BYTES inputs are always copied.
  bool borrow_binary = false;
};

// Parses the value of the Inference-Header-Content-Length HTTP header: decimal digits, optionally
// surrounded by spaces or tabs.
[[nodiscard]] Result<size_t> ParseHeaderContentLength(std::string_view value);

// Parses an inference request. `body` is the whole HTTP body; `header_length` is the value of
// Inference-Header-Content-Length if that header was sent (nullopt: the whole body is JSON).
// Request fields ebb does not use ("model_name", unknown parameters, ...) are ignored.
[[nodiscard]] Result<RestInferRequest> ParseInferRequest(std::string_view body, std::optional<size_t> header_length,
                                                     const ParseOptions& options = {});

struct EncodedResponse {
  std::string body;  // the JSON header (the whole body when no output is binary)
  // The binary outputs' bytes, in order: the rest of the body. Views of the response's tensors,
  // not copies (a transport sends them from there): valid while the response lives.
  std::vector<std::string_view> binary;
  std::optional<size_t> header_length;  // JSON header length; set iff any output is binary

  // The whole body in one string: `body`, then `binary` (tests, fuzzers).
  [[nodiscard]] std::string Joined() const;
};

// The JSON text an output takes in a reply, about (what EncodeInferResponse reserves for it): 16
// bytes an element, and a string's own bytes; 0 for an output `binary` sends in binary form.
int64_t ReplyTextBytes(const NamedTensor& output, const BinaryOutputs& binary);

// Encodes every output of `response`, in order. "model_version" is omitted when empty, "id" when
// response.id is empty. The result's `binary` points into `response`, which must outlive it.
[[nodiscard]] EncodedResponse EncodeInferResponse(const InferResponse& response, const BinaryOutputs& binary);

// {"error":"<message>"}; invalid UTF-8 in `message` is replaced by U+FFFD.
[[nodiscard]] std::string EncodeError(std::string_view message);

}  // namespace ebb::server
