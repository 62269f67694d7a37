// libFuzzer target: the KServe v2 inference request parser (server/http/protocol.h), in its JSON
// and binary forms. The first byte chooses the form: 0 = the rest is a JSON body (no
// Inference-Header-Content-Length); n > 0 = the last n - 1 bytes of the rest are binary tensor
// data after a JSON header. Beyond the sanitizers, it checks the parser's contract: failures are
// kInvalidArgument with a message, tensors have the size their shape says, and whatever parsed
// encodes as a response. Each input is parsed twice, copying and borrowing the binary section
// (ParseOptions::borrow_binary, the HTTP front end's way): both must agree, byte for byte.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "http/protocol.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ebb;
  using namespace ebb::server;
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::optional<size_t> header_length;
  if (data[0] != 0) header_length = body.size() - std::min<size_t>(data[0] - 1, body.size());
  Result<RestInferRequest> parsed = ParseInferRequest(body, header_length, {.max_input_elements = 1 << 20});
  // The borrowing parse reads a body of its own, 64-byte aligned as the transport lays it out.
  std::string aligned(body.size() + 64, '\0');
  const size_t shift = (64 - reinterpret_cast<uintptr_t>(aligned.data()) % 64) % 64;
  std::memcpy(aligned.data() + shift, body.data(), body.size());
  const std::string_view aligned_body(aligned.data() + shift, body.size());
  Result<RestInferRequest> borrowed =
      ParseInferRequest(aligned_body, header_length, {.max_input_elements = 1 << 20, .borrow_binary = true});
  Check(parsed.ok() == borrowed.ok());
  if (!parsed.ok()) {
    Check(parsed.status().code() == StatusCode::kInvalidArgument && !parsed.status().message().empty());
    Check(borrowed.status().message() == parsed.status().message());
    return 0;
  }
  Check(borrowed->request.inputs.size() == parsed->request.inputs.size());
  for (size_t i = 0; i < parsed->request.inputs.size(); ++i) {
    const Tensor& a = parsed->request.inputs[i].tensor;
    const Tensor& b = borrowed->request.inputs[i].tensor;
    Check(a.type() == b.type() && a.shape() == b.shape() && a.byte_size() == b.byte_size());
    if (a.type() != DataType::kBytes && a.byte_size() > 0) Check(std::memcmp(a.data(), b.data(), a.byte_size()) == 0);
  }
  InferResponse response{"m", "1", parsed->request.id, {}};
  for (NamedTensor& input : parsed->request.inputs) {
    Check(input.tensor.byte_size() == static_cast<size_t>(input.tensor.element_count()) * ElementSize(input.tensor.type()));
    response.outputs.push_back(std::move(input));
  }
  const EncodedResponse encoded = EncodeInferResponse(response, parsed->binary);
  Check(!encoded.body.empty() && (!encoded.header_length || *encoded.header_length <= encoded.body.size()));
  return 0;
}
