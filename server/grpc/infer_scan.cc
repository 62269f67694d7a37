#include "infer_scan.h"

#include <array>
#include <utility>

#include "grpc_service.pb.h"
#include "wire_scan.h"

namespace ebb::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

enum class Kind { kInputs, kOutputs, kRawContents, kParameters, kDims, kTyped, kBytes, kOther };

// The repeated fields of ModelInferRequest and of the messages in it, by what they are limited by.
struct Fields {
  const FieldDescriptor* model_name;
  const FieldDescriptor* model_version;
  std::array<std::pair<const FieldDescriptor*, Kind>, 15> repeated;
};

const Fields& RequestFields() {
  static const Fields fields = [] {
    const Descriptor* request = inference::ModelInferRequest::descriptor();
    const Descriptor* input = inference::ModelInferRequest::InferInputTensor::descriptor();
    const Descriptor* output = inference::ModelInferRequest::InferRequestedOutputTensor::descriptor();
    const Descriptor* contents = inference::InferTensorContents::descriptor();
    return Fields{request->FindFieldByName("model_name"),
                  request->FindFieldByName("model_version"),
                  {{{request->FindFieldByName("inputs"), Kind::kInputs},
                    {request->FindFieldByName("outputs"), Kind::kOutputs},
                    {request->FindFieldByName("raw_input_contents"), Kind::kRawContents},
                    {request->FindFieldByName("parameters"), Kind::kParameters},
                    {input->FindFieldByName("parameters"), Kind::kParameters},
                    {output->FindFieldByName("parameters"), Kind::kParameters},
                    {input->FindFieldByName("shape"), Kind::kDims},
                    {contents->FindFieldByName("bool_contents"), Kind::kTyped},
                    {contents->FindFieldByName("int_contents"), Kind::kTyped},
                    {contents->FindFieldByName("int64_contents"), Kind::kTyped},
                    {contents->FindFieldByName("uint_contents"), Kind::kTyped},
                    {contents->FindFieldByName("uint64_contents"), Kind::kTyped},
                    {contents->FindFieldByName("fp32_contents"), Kind::kTyped},
                    {contents->FindFieldByName("fp64_contents"), Kind::kTyped},
                    {contents->FindFieldByName("bytes_contents"), Kind::kBytes}}}};
  }();
  return fields;
}

Status Over(int64_t limit, const std::string& what) {
  return InvalidArgument("the request has more than " + std::to_string(limit) + " " + what);
}

class Scanner final : public WireVisitor {
 public:
  explicit Scanner(const GrpcInferLimits& limits) : limits_(limits), fields_(RequestFields()) {}

  Status OnEntries(const FieldDescriptor& field, int64_t added, int64_t in_message) override {
    switch (KindOf(field)) {
      case Kind::kInputs: return Check(&inputs_, added, limits_.max_tensors, "inputs (the limit per request)");
      case Kind::kOutputs:
        return Check(&outputs_, added, limits_.max_tensors, "requested outputs (the limit per request)");
      case Kind::kRawContents:
        return Check(&raw_, added, limits_.max_tensors, "raw_input_contents entries (the limit per request)");
      case Kind::kParameters:
        return Check(&parameters_, added, limits_.max_parameters,
                     "parameters (in all its 'parameters' maps together; the limit per request)");
      case Kind::kDims:
        if (in_message > limits_.max_dims) {
          return InvalidArgument("an input's shape has more than " + std::to_string(limits_.max_dims) +
                                 " dimensions (the limit)");
        }
        return Status::Ok();
      case Kind::kTyped:
        return Check(&typed_, added, limits_.max_typed_elements,
                     "elements in typed contents (the limit per request; send large tensors in raw_input_contents)");
      case Kind::kBytes:
        return Check(&bytes_, added, limits_.max_bytes_elements, "elements in bytes_contents (the limit per request)");
      case Kind::kOther: return Status::Ok();
    }
    return Status::Ok();
  }

  Status OnUnknownField(int) override {
    return Check(&unknown_, 1, limits_.max_unknown_fields,
                 "fields unknown to inference.ModelInferRequest (the limit per request)");
  }

  bool WantsString(const FieldDescriptor& field, int depth) override {
    return depth == 0 && (&field == fields_.model_name || &field == fields_.model_version);
  }
  void OnString(const FieldDescriptor& field, std::string value) override {
    (&field == fields_.model_name ? scanned_.model_name : scanned_.model_version) = std::move(value);
  }

  ScannedInferRequest Take() { return std::move(scanned_); }

 private:
  Kind KindOf(const FieldDescriptor& field) const {
    for (const auto& [f, kind] : fields_.repeated) {
      if (f == &field) return kind;
    }
    return Kind::kOther;
  }

  static Status Check(int64_t* count, int64_t added, int64_t limit, const char* what) {
    *count += added;
    return *count > limit ? Over(limit, what) : Status::Ok();
  }

  const GrpcInferLimits& limits_;
  const Fields& fields_;
  int64_t inputs_ = 0, outputs_ = 0, raw_ = 0, parameters_ = 0, typed_ = 0, bytes_ = 0, unknown_ = 0;
  ScannedInferRequest scanned_;
};

}  // namespace

Result<ScannedInferRequest> ScanModelInferRequest(google::protobuf::io::ZeroCopyInputStream* wire, size_t size,
                                                  const GrpcInferLimits& limits) {
  Scanner scanner(limits);
  EBB_RETURN_IF_ERROR(WalkWire(*inference::ModelInferRequest::descriptor(), wire, size, scanner));
  return scanner.Take();
}

}  // namespace ebb::server
