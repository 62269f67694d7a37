#include "inference_api.h"

#include <grpcpp/grpcpp.h>

#include "core/model_configuration.h"
#include "grpc_service.grpc.pb.h"
#include "tensor_codec.h"

namespace ebb::server {
namespace {

using grpc::ServerContext;

void Describe(const std::vector<TensorInfo>& infos,
              google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* out) {
  for (const TensorInfo& t : infos) {
    auto* m = out->Add();
    m->set_name(t.name);
    m->set_datatype(DataTypeName(t.type));
    for (int64_t d : t.shape) m->add_shape(d);
  }
}

inference::DataType ConfigType(DataType type) {
  inference::DataType out = inference::TYPE_INVALID;
  inference::DataType_Parse(ConfigTypeName(type), &out);
  return out;
}

void FillConfig(const ModelConfiguration& c, inference::ModelConfig* out) {
  out->set_name(c.name);
  out->set_platform(c.platform);
  out->set_backend(c.backend);
  out->set_max_batch_size(c.max_batch_size);
  auto* policy = out->mutable_version_policy();
  switch (c.version_policy) {
    case ModelConfiguration::VersionPolicy::kLatest: policy->mutable_latest()->set_num_versions(1); break;
    case ModelConfiguration::VersionPolicy::kAll: policy->mutable_all(); break;
    case ModelConfiguration::VersionPolicy::kSpecific:
      for (int64_t v : c.versions) policy->mutable_specific()->add_versions(v);
      break;
  }
  for (const TensorInfo& t : c.inputs) {
    auto* input = out->add_input();
    input->set_name(t.name);
    input->set_data_type(ConfigType(t.type));
    for (int64_t d : t.shape) input->add_dims(d);
  }
  for (const TensorInfo& t : c.outputs) {
    auto* output = out->add_output();
    output->set_name(t.name);
    output->set_data_type(ConfigType(t.type));
    for (int64_t d : t.shape) output->add_dims(d);
    output->set_label_filename(c.label_filename);
  }
  (*out->mutable_parameters())["ebb"].set_string_value(EbbFieldsToJson(c));
}

void FillDuration(const Duration& d, inference::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

void FillStatistics(const ModelStatistics& s, inference::ModelStatistics* out) {
  out->set_name(s.name);
  out->set_version(s.version);
  out->set_last_inference(s.last_inference_ms);
  out->set_inference_count(s.inference_count);
  out->set_execution_count(s.execution_count);
  auto* stats = out->mutable_inference_stats();
  FillDuration(s.success, stats->mutable_success());
  FillDuration(s.fail, stats->mutable_fail());
  FillDuration(s.queue, stats->mutable_queue());
  FillDuration(s.compute_input, stats->mutable_compute_input());
  FillDuration(s.compute_infer, stats->mutable_compute_infer());
  FillDuration(s.compute_output, stats->mutable_compute_output());
  stats->mutable_cache_hit();
  stats->mutable_cache_miss();
  auto* ebb = out->mutable_ebb();
  ebb->set_releases(s.releases);
  ebb->set_loads(s.loads);
  ebb->set_charge_bytes(s.charge_bytes);
  ebb->set_transient_peak_bytes(s.transient_peak_bytes);
  ebb->set_state(s.state);
  for (const NeedPoint& p : s.need_points) {
    auto* point = ebb->add_need_points();
    point->set_input_elements(p.input_elements);
    point->set_bytes(p.bytes);
  }
  for (const NeedPoint& p : s.arena_need_points) {
    auto* point = ebb->add_arena_need_points();
    point->set_input_elements(p.input_elements);
    point->set_bytes(p.bytes);
  }
  ebb->set_predicted_need_bytes(s.predicted_need_bytes);
  ebb->set_predicted_arena_need_bytes(s.predicted_arena_need_bytes);
  ebb->set_reserved_bytes(s.reserved_bytes);
  ebb->set_waiting_for_memory(s.waiting_for_memory);
  ebb->set_out_of_memory(s.out_of_memory);
}

template <typename Map>
Parameters RepositoryParameters(const Map& in) {
  Parameters out;
  for (const auto& [key, value] : in) {
    switch (value.parameter_choice_case()) {
      case inference::ModelRepositoryParameter::kBoolParam: out[key] = value.bool_param(); break;
      case inference::ModelRepositoryParameter::kInt64Param: out[key] = value.int64_param(); break;
      case inference::ModelRepositoryParameter::kStringParam: out[key] = value.string_param(); break;
      case inference::ModelRepositoryParameter::kBytesParam: out[key] = value.bytes_param(); break;
      case inference::ModelRepositoryParameter::PARAMETER_CHOICE_NOT_SET: out[key] = std::string(); break;
    }
  }
  return out;
}

class InferenceApi final : public inference::GRPCInferenceService::Service {
 public:
  InferenceApi(InferenceService& core, bool model_id_header) : core_(core), model_id_header_(model_id_header) {}

  grpc::Status ServerLive(ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* out) override {
    out->set_live(core_.Live());
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* out) override {
    out->set_ready(core_.Ready());
    return grpc::Status::OK;
  }

  grpc::Status ModelReady(ServerContext* context, const inference::ModelReadyRequest* in,
                          inference::ModelReadyResponse* out) override {
    Result<bool> ready = core_.ModelReady(ModelName(context, in->name()), in->version());
    if (!ready.ok()) return GrpcStatusFor(ready.status());
    out->set_ready(*ready);
    return grpc::Status::OK;
  }

  grpc::Status ServerMetadata(ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* out) override {
    const server::ServerMetadata m = core_.Metadata();
    out->set_name(m.name);
    out->set_version(m.version);
    for (const std::string& e : m.extensions) out->add_extensions(e);
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(ServerContext* context, const inference::ModelMetadataRequest* in,
                             inference::ModelMetadataResponse* out) override {
    Result<server::ModelMetadata> m = core_.DescribeModel(ModelName(context, in->name()), in->version());
    if (!m.ok()) return GrpcStatusFor(m.status());
    out->set_name(m->name);
    for (const std::string& v : m->versions) out->add_versions(v);
    out->set_platform(m->platform);
    Describe(m->inputs, out->mutable_inputs());
    Describe(m->outputs, out->mutable_outputs());
    return grpc::Status::OK;
  }

  grpc::Status ModelInfer(ServerContext* context, const inference::ModelInferRequest* in,
                          inference::ModelInferResponse* out) override {
    Result<InferResponse> response = core_.Infer(
        ModelName(context, in->model_name()), in->model_version(),
        [&] { return DecodeModelInferRequest(*in, core_.options().max_input_elements); },
        [context] { return context->IsCancelled(); });  // the client cancelled, or its deadline passed
    if (!response.ok()) return GrpcStatusFor(response.status());
    EncodeModelInferResponse(*response, out);
    return grpc::Status::OK;
  }

  grpc::Status ModelConfig(ServerContext* context, const inference::ModelConfigRequest* in,
                           inference::ModelConfigResponse* out) override {
    Result<ModelConfiguration> c = core_.Configuration(ModelName(context, in->name()), in->version());
    if (!c.ok()) return GrpcStatusFor(c.status());
    FillConfig(*c, out->mutable_config());
    return grpc::Status::OK;
  }

  grpc::Status ModelStatistics(ServerContext* context, const inference::ModelStatisticsRequest* in,
                               inference::ModelStatisticsResponse* out) override {
    Result<std::vector<server::ModelStatistics>> stats =
        core_.Statistics(ModelName(context, in->name()), in->version());
    if (!stats.ok()) return GrpcStatusFor(stats.status());
    for (const server::ModelStatistics& s : *stats) FillStatistics(s, out->add_model_stats());
    return grpc::Status::OK;
  }

  grpc::Status RepositoryIndex(ServerContext*, const inference::RepositoryIndexRequest* in,
                               inference::RepositoryIndexResponse* out) override {
    for (const ModelInfo& m : core_.Index(in->ready())) {
      auto* entry = out->add_models();
      entry->set_name(m.name);
      entry->set_version(m.version);
      entry->set_state(PoolStateName(m.state));
      entry->set_reason(m.reason);
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryModelLoad(ServerContext*, const inference::RepositoryModelLoadRequest* in,
                                   inference::RepositoryModelLoadResponse*) override {
    return GrpcStatusFor(core_.Load(in->model_name(), RepositoryParameters(in->parameters())));
  }

  grpc::Status RepositoryModelUnload(ServerContext*, const inference::RepositoryModelUnloadRequest* in,
                                     inference::RepositoryModelUnloadResponse*) override {
    return GrpcStatusFor(core_.Unload(in->model_name(), RepositoryParameters(in->parameters())));
  }

 private:
  // The model a request is for: the mm-model-id header when honoured and present, else its name field.
  std::string ModelName(const ServerContext* context, const std::string& field) const {
    if (!model_id_header_) return field;
    const auto& metadata = context->client_metadata();
    auto it = metadata.find(kModelIdHeader);
    return it == metadata.end() ? field : std::string(it->second.data(), it->second.size());
  }

  InferenceService& core_;
  const bool model_id_header_;
};

}  // namespace

grpc::Status GrpcStatusFor(const Status& status) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (status.code()) {
    case StatusCode::kOk: return grpc::Status::OK;
    case StatusCode::kInvalidArgument: code = grpc::StatusCode::INVALID_ARGUMENT; break;
    case StatusCode::kFailedPrecondition: code = grpc::StatusCode::FAILED_PRECONDITION; break;
    case StatusCode::kNotFound: code = grpc::StatusCode::NOT_FOUND; break;
    case StatusCode::kUnavailable: code = grpc::StatusCode::UNAVAILABLE; break;
    case StatusCode::kResourceExhausted: code = grpc::StatusCode::RESOURCE_EXHAUSTED; break;
    case StatusCode::kCancelled: code = grpc::StatusCode::CANCELLED; break;
    case StatusCode::kInternal: code = grpc::StatusCode::INTERNAL; break;
  }
  return grpc::Status(code, status.message());
}

std::unique_ptr<grpc::Service> MakeGrpcInferenceService(InferenceService& core, bool model_id_header) {
  return std::make_unique<InferenceApi>(core, model_id_header);
}

}  // namespace ebb::server
