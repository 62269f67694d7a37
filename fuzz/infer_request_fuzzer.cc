// libFuzzer target: the KServe v2 inference request parser (server/http/protocol.h), in its JSON
// and binary forms. The first byte chooses the form: 0 = the rest is a JSON body (no
// Inference-Header-Content-Length); n > 0 = the last n - 1 bytes of the rest are binary tensor
// data after a JSON header. Beyond the sanitizers, it checks the parser's contract: failures are
// kInvalidArgument with a message, tensors have the size their shape says, and whatever parsed
// encodes as a response.
#include <cstdint>
#include <cstdlib>
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
  if (!parsed.ok()) {
    Check(parsed.status().code() == StatusCode::kInvalidArgument && !parsed.status().message().empty());
    return 0;
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
