#include "modelmesh_api.h"

#include <grpcpp/grpcpp.h>

#include "inference_api.h"
#include "model-runtime.grpc.pb.h"
#include "unary_call.h"

namespace ebb::server {
namespace {

template <typename Request>
ModelMeshLoad LoadOf(const Request& in) {
  return {in.modelid(), in.modeltype(), in.modelpath(), in.modelkey()};
}

// Every method a raw async method (async_call.h), its message bounded before it is parsed (unary_call.h), its
// handler run on the service's workers (a load blocks).
using Mesh = mmesh::ModelRuntime;
using RawService =
    Mesh::WithRawMethod_loadModel<Mesh::WithRawMethod_unloadModel<Mesh::WithRawMethod_predictModelSize<
        Mesh::WithRawMethod_modelSize<Mesh::WithRawMethod_runtimeStatus<Mesh::Service>>>>>;

// Workers for ModelMesh's calls: it sends at most maxLoadingConcurrency loads at a time (1), and unloads
// and size queries beside them.
constexpr size_t kModelMeshThreads = 16;

class ModelRuntimeApi final : public RawService, public AsyncService {
 public:
  explicit ModelRuntimeApi(ModelMeshRuntime& runtime) : runtime_(runtime), workers_(kModelMeshThreads) {}

  grpc::Service* service() override { return this; }

  std::vector<UnaryMethod> UnaryMethods() override {
    auto serve = [this](auto handler) { return [this, handler](UnaryCall* call) { Serve(call, handler); }; };
    using A = ModelRuntimeApi;
    return {
        RawUnaryMethod(this, &A::RequestruntimeStatus, serve(&A::DoRuntimeStatus)),
        RawUnaryMethod(this, &A::RequestloadModel, serve(&A::DoLoadModel)),
        RawUnaryMethod(this, &A::RequestunloadModel, serve(&A::DoUnloadModel)),
        RawUnaryMethod(this, &A::RequestpredictModelSize, serve(&A::DoPredictModelSize)),
        RawUnaryMethod(this, &A::RequestmodelSize, serve(&A::DoModelSize)),
    };
  }

 private:
  template <typename Request, typename Response>
  void Serve(UnaryCall* call, grpc::Status (ModelRuntimeApi::*handler)(UnaryCall*, const Request&, Response*)) {
    ServeUnary<Request, Response>(call, &workers_, [this, handler](UnaryCall* c, const Request& request,
                                                                   Response* response) {
      return (this->*handler)(c, request, response);
    });
  }

  grpc::Status DoRuntimeStatus(UnaryCall*, const mmesh::RuntimeStatusRequest&,
                               mmesh::RuntimeStatusResponse* out) {
    const ModelMeshStatus s = runtime_.RuntimeStatus();
    out->set_status(mmesh::RuntimeStatusResponse::READY);
    out->set_capacityinbytes(static_cast<uint64_t>(s.capacity_bytes));
    out->set_maxloadingconcurrency(s.max_loading_concurrency);
    out->set_modelloadingtimeoutms(s.model_loading_timeout_ms);
    out->set_defaultmodelsizeinbytes(static_cast<uint64_t>(s.default_model_size_bytes));
    out->set_runtimeversion(s.runtime_version);
    for (const std::string& method : ModelMeshInferenceMethods()) {
      (*out->mutable_methodinfos())[method].add_idinjectionpath(1);  // name / model_name = 1
    }
    return grpc::Status::OK;
  }

  grpc::Status DoLoadModel(UnaryCall* call, const mmesh::LoadModelRequest& in,
                           mmesh::LoadModelResponse* out) {
    Result<int64_t> size = runtime_.LoadModel(LoadOf(in), [call] { return call->cancelled(); });
    if (!size.ok()) return GrpcStatusFor(size.status());
    out->set_sizeinbytes(static_cast<uint64_t>(*size));
    return grpc::Status::OK;
  }

  grpc::Status DoUnloadModel(UnaryCall*, const mmesh::UnloadModelRequest& in,
                             mmesh::UnloadModelResponse*) {
    return GrpcStatusFor(runtime_.UnloadModel(in.modelid()));
  }

  grpc::Status DoPredictModelSize(UnaryCall*, const mmesh::PredictModelSizeRequest& in,
                                  mmesh::PredictModelSizeResponse* out) {
    Result<int64_t> size = runtime_.PredictModelSize(LoadOf(in));
    if (!size.ok()) return GrpcStatusFor(size.status());
    out->set_sizeinbytes(static_cast<uint64_t>(*size));
    return grpc::Status::OK;
  }

  grpc::Status DoModelSize(UnaryCall*, const mmesh::ModelSizeRequest& in,
                           mmesh::ModelSizeResponse* out) {
    Result<int64_t> size = runtime_.ModelSize(in.modelid());
    if (!size.ok()) return GrpcStatusFor(size.status());
    out->set_sizeinbytes(static_cast<uint64_t>(*size));
    return grpc::Status::OK;
  }

  ModelMeshRuntime& runtime_;
  WorkerThreads workers_;  // last: destroyed first, so that no work runs on what is gone
};

}  // namespace

std::vector<std::string> ModelMeshInferenceMethods() {
  std::vector<std::string> methods;
  for (const char* method : {"ModelInfer", "ModelMetadata", "ModelReady", "ModelConfig", "ModelStatistics"}) {
    methods.push_back(std::string(kGrpcInferenceServiceName) + "/" + method);
  }
  return methods;
}

std::unique_ptr<AsyncService> MakeGrpcModelRuntimeService(ModelMeshRuntime& runtime) {
  return std::make_unique<ModelRuntimeApi>(runtime);
}

}  // namespace ebb::server
