#include "inference_api.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <utility>
#include <vector>

#include "call_support.h"
#include "core/model_configuration.h"
#include "grpc_service.grpc.pb.h"
#include "tensor_codec.h"
#include "unary_call.h"

namespace ebb::server {
namespace {

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

// The reply's ByteBuffer: the encoded head and field prefixes copied, each output's bytes a slice over its
// tensor, which the slices keep alive (the response is shared by them and freed with the last).
grpc::ByteBuffer ReplyBuffer(InferResponse response) {
  auto owner = std::make_shared<const InferResponse>(std::move(response));
  const EncodedInferResponse encoded = EncodeModelInferResponse(*owner);
  std::vector<grpc::Slice> slices;
  slices.reserve(1 + 2 * encoded.raw.size());
  slices.emplace_back(encoded.head);
  for (const EncodedInferResponse::Raw& raw : encoded.raw) {
    slices.emplace_back(raw.prefix);
    if (raw.data.empty()) continue;
    auto* keep = new std::shared_ptr<const InferResponse>(owner);
    slices.emplace_back(const_cast<char*>(raw.data.data()), raw.data.size(),
                        [](void* p) { delete static_cast<std::shared_ptr<const InferResponse>*>(p); }, keep);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Every method a raw async method (async_call.h): ModelInfer's message is received unparsed and handled by
// InferenceApi::ModelInfer, every other one is bounded before it is parsed (unary_call.h).
using V2 = inference::GRPCInferenceService;
using RawService = V2::WithRawMethod_ServerLive<
    V2::WithRawMethod_ServerReady<V2::WithRawMethod_ModelReady<V2::WithRawMethod_ServerMetadata<
        V2::WithRawMethod_ModelMetadata<V2::WithRawMethod_ModelInfer<V2::WithRawMethod_ModelConfig<
            V2::WithRawMethod_ModelStatistics<V2::WithRawMethod_RepositoryIndex<V2::WithRawMethod_RepositoryModelLoad<
                V2::WithRawMethod_RepositoryModelUnload<V2::Service>>>>>>>>>>>;

class InferenceApi final : public RawService, public AsyncService {
 public:
  InferenceApi(InferenceService& core, GrpcInferenceOptions options)
      : core_(core), options_(std::move(options)), workers_(options_.threads) {}

  InferenceService& core() { return core_; }
  const GrpcInferenceOptions& options() const { return options_; }
  WorkerThreads& workers() { return workers_; }
  WriteDeadlines& deadlines() { return deadlines_; }

  // The model a request is for: the mm-model-id header when honoured and present, else its name field.
  std::string ModelName(const grpc::ServerContextBase* context, const std::string& field) const {
    if (!options_.model_id_header) return field;
    const auto& metadata = context->client_metadata();
    auto it = metadata.find(kModelIdHeader);
    return it == metadata.end() ? field : std::string(it->second.data(), it->second.size());
  }

  grpc::Service* service() override { return this; }

  std::vector<UnaryMethod> UnaryMethods() override {
    // The generated RequestX of each method, and its handler: inline for those that never block.
    auto serve = [this](auto handler, Where where) {
      return [this, handler, where](UnaryCall* call) { Serve(call, handler, where); };
    };
    using A = InferenceApi;
    return {
        RawUnaryMethod(this, &A::RequestModelInfer, [this](UnaryCall* call) { ModelInfer(call); }),
        RawUnaryMethod(this, &A::RequestServerLive, serve(&A::DoServerLive, kInline)),
        RawUnaryMethod(this, &A::RequestServerReady, serve(&A::DoServerReady, kInline)),
        RawUnaryMethod(this, &A::RequestServerMetadata, serve(&A::DoServerMetadata, kInline)),
        RawUnaryMethod(this, &A::RequestModelReady, serve(&A::DoModelReady, kOnWorker)),
        RawUnaryMethod(this, &A::RequestModelMetadata, serve(&A::DoModelMetadata, kOnWorker)),
        RawUnaryMethod(this, &A::RequestModelConfig, serve(&A::DoModelConfig, kOnWorker)),
        RawUnaryMethod(this, &A::RequestModelStatistics, serve(&A::DoModelStatistics, kOnWorker)),
        RawUnaryMethod(this, &A::RequestRepositoryIndex, serve(&A::DoRepositoryIndex, kOnWorker)),
        RawUnaryMethod(this, &A::RequestRepositoryModelLoad, serve(&A::DoRepositoryModelLoad, kOnWorker)),
        RawUnaryMethod(this, &A::RequestRepositoryModelUnload, serve(&A::DoRepositoryModelUnload, kOnWorker)),
    };
  }

 private:
  // Serves a unary RPC (unary_call.h) with its typed handler below, inline or on the workers.
  enum Where { kInline, kOnWorker };
  template <typename Request, typename Response>
  void Serve(UnaryCall* call, grpc::Status (InferenceApi::*handler)(const grpc::ServerContextBase*, const Request&, Response*),
             Where where) {
    ServeUnary<Request, Response>(call, where == kInline ? nullptr : &workers_,
                                  [this, handler](UnaryCall* c, const Request& request, Response* response) {
                                    return (this->*handler)(c->context(), request, response);
                                  });
  }

  // ModelInfer (inference_api.h, steps 1-4).
  void ModelInfer(UnaryCall* call);
  void RunInfer(UnaryCall* call);
  grpc::Status Infer(UnaryCall* call, grpc::ByteBuffer* reply);

  // The typed handlers; ServerLive, ServerReady and ServerMetadata never block.
  grpc::Status DoServerLive(const grpc::ServerContextBase*, const inference::ServerLiveRequest&,
                            inference::ServerLiveResponse* out) {
    out->set_live(core_.Live());
    return grpc::Status::OK;
  }

  grpc::Status DoServerReady(const grpc::ServerContextBase*, const inference::ServerReadyRequest&,
                             inference::ServerReadyResponse* out) {
    out->set_ready(core_.Ready());
    return grpc::Status::OK;
  }

  grpc::Status DoModelReady(const grpc::ServerContextBase* context, const inference::ModelReadyRequest& in,
                            inference::ModelReadyResponse* out) {
    Result<bool> ready = core_.ModelReady(ModelName(context, in.name()), in.version());
    if (!ready.ok()) return GrpcStatusFor(ready.status());
    out->set_ready(*ready);
    return grpc::Status::OK;
  }

  grpc::Status DoServerMetadata(const grpc::ServerContextBase*, const inference::ServerMetadataRequest&,
                                inference::ServerMetadataResponse* out) {
    const server::ServerMetadata m = core_.Metadata();
    out->set_name(m.name);
    out->set_version(m.version);
    for (const std::string& e : m.extensions) out->add_extensions(e);
    return grpc::Status::OK;
  }

  grpc::Status DoModelMetadata(const grpc::ServerContextBase* context, const inference::ModelMetadataRequest& in,
                               inference::ModelMetadataResponse* out) {
    Result<server::ModelMetadata> m = core_.DescribeModel(ModelName(context, in.name()), in.version());
    if (!m.ok()) return GrpcStatusFor(m.status());
    out->set_name(m->name);
    for (const std::string& v : m->versions) out->add_versions(v);
    out->set_platform(m->platform);
    Describe(m->inputs, out->mutable_inputs());
    Describe(m->outputs, out->mutable_outputs());
    return grpc::Status::OK;
  }

  grpc::Status DoModelConfig(const grpc::ServerContextBase* context, const inference::ModelConfigRequest& in,
                             inference::ModelConfigResponse* out) {
    Result<ModelConfiguration> c = core_.Configuration(ModelName(context, in.name()), in.version());
    if (!c.ok()) return GrpcStatusFor(c.status());
    FillConfig(*c, out->mutable_config());
    return grpc::Status::OK;
  }

  grpc::Status DoModelStatistics(const grpc::ServerContextBase* context, const inference::ModelStatisticsRequest& in,
                                 inference::ModelStatisticsResponse* out) {
    Result<std::vector<server::ModelStatistics>> stats = core_.Statistics(ModelName(context, in.name()), in.version());
    if (!stats.ok()) return GrpcStatusFor(stats.status());
    for (const server::ModelStatistics& s : *stats) FillStatistics(s, out->add_model_stats());
    return grpc::Status::OK;
  }

  grpc::Status DoRepositoryIndex(const grpc::ServerContextBase*, const inference::RepositoryIndexRequest& in,
                                 inference::RepositoryIndexResponse* out) {
    for (const ModelInfo& m : core_.Index(in.ready())) {
      auto* entry = out->add_models();
      entry->set_name(m.name);
      entry->set_version(m.version);
      entry->set_state(PoolStateName(m.state));
      entry->set_reason(m.reason);
    }
    return grpc::Status::OK;
  }

  grpc::Status DoRepositoryModelLoad(const grpc::ServerContextBase*, const inference::RepositoryModelLoadRequest& in,
                                     inference::RepositoryModelLoadResponse*) {
    return GrpcStatusFor(core_.Load(in.model_name(), RepositoryParameters(in.parameters())));
  }

  grpc::Status DoRepositoryModelUnload(const grpc::ServerContextBase*,
                                       const inference::RepositoryModelUnloadRequest& in,
                                       inference::RepositoryModelUnloadResponse*) {
    return GrpcStatusFor(core_.Unload(in.model_name(), RepositoryParameters(in.parameters())));
  }

  InferenceService& core_;
  const GrpcInferenceOptions options_;
  WriteDeadlines deadlines_;
  WorkerThreads workers_;  // last: destroyed first, so that no work runs on what is gone
};

void InferenceApi::ModelInfer(UnaryCall* call) {
  ByteBudget& budget = core_.request_bytes();
  auto reservation = std::make_shared<ByteBudget::Reservation>(budget.Reserve(call->request()->Length()));
  if (!reservation->held()) {
    return call->Finish({}, grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                         "server busy: the requests being received are over the server's budget of " +
                                             std::to_string(budget.capacity()) +
                                             " bytes (--max-body-bytes-in-flight, HTTP and gRPC together); retry later"));
  }
  call->KeepUntilEnd(std::move(reservation));  // the charge is held until the call ends
  std::function<void()> work = [this, call] { RunInfer(call); };
  if (!QueueThreads::RunHereAfter(work)) workers_.Post(std::move(work));  // here: no hop to a worker
}

void InferenceApi::RunInfer(UnaryCall* call) {
  grpc::ByteBuffer reply;
  const grpc::Status status = Infer(call, &reply);
  call->request()->Clear();
  if (status.ok()) {
    const uint64_t id = deadlines_.Watch(call->context()->c_call(), WriteDeadlines::Clock::now() +
                                                                        std::chrono::seconds(options_.write_timeout_s));
    call->KeepUntilEnd(std::shared_ptr<void>(nullptr, [this, id](void*) { deadlines_.Forget(id); }));
  }
  call->Finish(std::move(reply), status);
}

grpc::Status InferenceApi::Infer(UnaryCall* call, grpc::ByteBuffer* reply) {
  grpc::ByteBuffer* request = call->request();
  Result<ScannedInferRequest> scanned = [&] {
    grpc::ProtoBufferReader reader(request);
    return ScanModelInferRequest(&reader, request->Length(), options_.limits);
  }();
  if (!scanned.ok()) return GrpcStatusFor(scanned.status());
  // The parsed message lives until the reply is made: its raw_input_contents are the inputs
  // themselves (borrowed, not copied) while the request runs.
  google::protobuf::Arena arena;
  // Called by the core once the request is admitted.
  auto decode = [this, request, &arena]() -> Result<InferRequest> {
    Result<const inference::ModelInferRequest*> parsed = [&] {
      grpc::ProtoBufferReader reader(request);
      return ParseModelInferRequest(&reader, &arena);
    }();
    request->Clear();  // parsed (or refused): its bytes are in the arena now, and the tensors come next
    if (!parsed.ok()) return parsed.status();
    return DecodeModelInferRequest(**parsed, core_.options().max_input_elements, /*borrow_raw=*/true);
  };
  Result<InferResponse> response =
      core_.Infer(ModelName(call->context(), scanned->model_name), scanned->model_version, decode,
                  [call] { return call->cancelled(); });  // the client cancelled, or its deadline passed
  if (!response.ok()) return GrpcStatusFor(response.status());
  *reply = ReplyBuffer(std::move(response).value());
  return grpc::Status::OK;
}

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

std::unique_ptr<AsyncService> MakeGrpcInferenceService(InferenceService& core, GrpcInferenceOptions options) {
  return std::make_unique<InferenceApi>(core, std::move(options));
}

}  // namespace ebb::server
