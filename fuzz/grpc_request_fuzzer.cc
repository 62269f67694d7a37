// libFuzzer target: the gRPC ModelInfer request decoder (server/grpc/), the way the server runs it:
// the input is a serialized inference.ModelInferRequest; it is scanned (infer_scan.h), parsed into an
// arena and decoded (tensor_codec.h), and whatever decodes is encoded back as a reply. Beyond the
// sanitizers, it checks the contracts between the steps:
//   * the scan refuses nothing protobuf accepts except over a limit, or a group;
//   * what the scan accepts and protobuf parses holds no more entries than the limits, and the scan
//     read the model name and version the parser did;
//   * decoding fails with kInvalidArgument and a message; tensors have the size their shape says;
//   * the reply's pieces, concatenated, parse as a ModelInferResponse with every output.
#include <google/protobuf/arena.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "grpc/infer_scan.h"
#include "grpc/tensor_codec.h"
#include "grpc_service.pb.h"

namespace {

void Check(bool condition) {
  if (!condition) std::abort();
}

bool Contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

}  // namespace

// protobuf logs every string that is not UTF-8 it refuses: most inputs here.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ebb;
  using namespace ebb::server;
  const GrpcInferLimits limits;
  google::protobuf::io::ArrayInputStream scan_input(data, static_cast<int>(size));
  Result<ScannedInferRequest> scanned = ScanModelInferRequest(&scan_input, size, limits);

  google::protobuf::Arena arena;
  google::protobuf::io::ArrayInputStream parse_input(data, static_cast<int>(size));
  Result<const inference::ModelInferRequest*> parsed = ParseModelInferRequest(&parse_input, &arena);
  if (!scanned.ok()) {
    Check(scanned.status().code() == StatusCode::kInvalidArgument && !scanned.status().message().empty());
    const std::string& why = scanned.status().message();
    if (parsed.ok()) Check(Contains(why, "more than") || Contains(why, "group"));
    return 0;
  }
  if (!parsed.ok()) {
    Check(parsed.status().code() == StatusCode::kInvalidArgument);
    return 0;
  }
  const inference::ModelInferRequest& request = **parsed;
  Check(scanned->model_name == request.model_name() && scanned->model_version == request.model_version());
  Check(request.inputs_size() <= limits.max_tensors && request.outputs_size() <= limits.max_tensors &&
        request.raw_input_contents_size() <= limits.max_tensors);
  for (const auto& input : request.inputs()) Check(input.shape_size() <= limits.max_dims);

  Result<InferRequest> decoded = DecodeModelInferRequest(request, int64_t{1} << 20);
  if (!decoded.ok()) {
    Check(decoded.status().code() == StatusCode::kInvalidArgument && !decoded.status().message().empty());
    return 0;
  }
  InferResponse response{scanned->model_name, scanned->model_version, decoded->id, {}};
  for (NamedTensor& input : decoded->inputs) {
    if (input.tensor.type() != DataType::kBytes) {
      Check(input.tensor.byte_size() ==
            static_cast<size_t>(input.tensor.element_count()) * ElementSize(input.tensor.type()));
    }
    response.outputs.push_back(std::move(input));
  }
  const EncodedInferResponse encoded = EncodeModelInferResponse(response);
  std::string wire = encoded.head;
  for (const EncodedInferResponse::Raw& raw : encoded.raw) wire += raw.prefix + std::string(raw.data);
  Check(wire.size() == encoded.size());
  inference::ModelInferResponse reply;
  Check(reply.ParseFromString(wire));
  Check(reply.outputs_size() == static_cast<int>(response.outputs.size()) &&
        reply.raw_output_contents_size() == reply.outputs_size());
  return 0;
}
