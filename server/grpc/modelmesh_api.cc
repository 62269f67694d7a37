#include "modelmesh_api.h"

#include <grpcpp/grpcpp.h>

#include "inference_api.h"
#include "model-runtime.grpc.pb.h"

namespace ebb::server {
namespace {

using grpc::ServerContext;

template <typename Request>
ModelMeshLoad LoadOf(const Request& in) {
  return {in.modelid(), in.modeltype(), in.modelpath(), in.modelkey()};
}

class ModelRuntimeApi final : public mmesh::ModelRuntime::Service {
 public:
  explicit ModelRuntimeApi(ModelMeshRuntime& runtime) : runtime_(runtime) {}

  grpc::Status runtimeStatus(ServerContext*, const mmesh::RuntimeStatusRequest*,
                             mmesh::RuntimeStatusResponse* out) override {
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

  grpc::Status loadModel(ServerContext* context, const mmesh::LoadModelRequest* in,
                         mmesh::LoadModelResponse* out) override {
    Result<int64_t> size = runtime_.LoadModel(LoadOf(*in), [context] { return context->IsCancelled(); });
    if (!size.ok()) return GrpcStatusFor(size.status());
    out->set_sizeinbytes(static_cast<uint64_t>(*size));
    return grpc::Status::OK;
  }

  grpc::Status unloadModel(ServerContext*, const mmesh::UnloadModelRequest* in, mmesh::UnloadModelResponse*) override {
    return GrpcStatusFor(runtime_.UnloadModel(in->modelid()));
  }

  grpc::Status predictModelSize(ServerContext*, const mmesh::PredictModelSizeRequest* in,
                                mmesh::PredictModelSizeResponse* out) override {
    Result<int64_t> size = runtime_.PredictModelSize(LoadOf(*in));
    if (!size.ok()) return GrpcStatusFor(size.status());
    out->set_sizeinbytes(static_cast<uint64_t>(*size));
    return grpc::Status::OK;
  }

  grpc::Status modelSize(ServerContext*, const mmesh::ModelSizeRequest* in, mmesh::ModelSizeResponse* out) override {
    Result<int64_t> size = runtime_.ModelSize(in->modelid());
    if (!size.ok()) return GrpcStatusFor(size.status());
    out->set_sizeinbytes(static_cast<uint64_t>(*size));
    return grpc::Status::OK;
  }

 private:
  ModelMeshRuntime& runtime_;
};

}  // namespace

std::vector<std::string> ModelMeshInferenceMethods() {
  std::vector<std::string> methods;
  for (const char* method : {"ModelInfer", "ModelMetadata", "ModelReady", "ModelConfig", "ModelStatistics"}) {
    methods.push_back(std::string(kGrpcInferenceServiceName) + "/" + method);
  }
  return methods;
}

std::unique_ptr<grpc::Service> MakeGrpcModelRuntimeService(ModelMeshRuntime& runtime) {
  return std::make_unique<ModelRuntimeApi>(runtime);
}

}  // namespace ebb::server
