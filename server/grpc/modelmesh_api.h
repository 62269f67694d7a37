// server/grpc/modelmesh_api.h — mmesh.ModelRuntime over the ModelMesh core.
//
// ModelMesh's model-runtime SPI (server/grpc/proto/model-runtime.proto) on
// the gRPC port of `ebb serve --modelmesh`, beside inference.
// GRPCInferenceService. Each RPC is one ModelMeshRuntime call (server/core/
// modelmesh.h); errors go through GrpcStatusFor (inference_api.h).
// runtimeStatus adds what only the wire knows: the inference methods
// ModelMesh may forward, each with the path to its model name field
// (idInjectionPath [1]: field 1, `name` or `model_name`, of the request), so
// ModelMesh writes the model id there. loadModel passes the call's
// cancellation (client cancel or deadline) to the core, which undoes a load
// whose caller went away.
//
// Every RPC's message is bounded before it is parsed (unary_call.h); its
// handler runs on one of the service's 16 workers (a load blocks).
// Thread safety: called concurrently.
#pragma once


#include <memory>
#include <string>
#include <vector>

#include "async_call.h"
#include "core/modelmesh.h"

namespace ebb::server {

inline constexpr const char* kModelRuntimeServiceName = "mmesh.ModelRuntime";

// The v2 methods listed in runtimeStatus's methodInfos ("inference.GRPCInferenceService/ModelInfer", ...).
std::vector<std::string> ModelMeshInferenceMethods();

// The service, to add to a GrpcServer. REQUIRES: `runtime` outlives it.
std::unique_ptr<AsyncService> MakeGrpcModelRuntimeService(ModelMeshRuntime& runtime);

}  // namespace ebb::server
