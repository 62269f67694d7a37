// server/grpc/inference_api.h — the v2 gRPC inference service over the core.
//
// inference.GRPCInferenceService (server/grpc/proto/grpc_service.proto): each
// RPC decodes its message into the core's typed request (server/core/
// inference.h), calls one InferenceService method, and encodes the answer.
// GrpcStatusFor is the one place where an ebb Status becomes a gRPC status:
//   kInvalidArgument -> INVALID_ARGUMENT, kFailedPrecondition -> FAILED_PRECONDITION,
//   kNotFound -> NOT_FOUND, kUnavailable -> UNAVAILABLE (a full queue, as
//   Triton answers it; not loaded; shutting down), kResourceExhausted ->
//   RESOURCE_EXHAUSTED (the memory budget), kCancelled -> CANCELLED,
//   kInternal -> INTERNAL; the message is the Status's.
//
// ModelInfer reads typed `contents` or `raw_input_contents` (all inputs one
// way), request parameter "keep_alive" (int64 ms, at most 365 days, as over
// REST: CheckKeepAlive in core/inference.h) and output parameter
// "classification" (int64 K); other parameters are ignored, as over REST. It
// answers every output in `raw_output_contents`, as Triton does (typed
// contents cannot carry FP16/BF16). Typed contents are range-checked for the
// narrow types (INT8 in int_contents, ...); BYTES elements come from
// bytes_contents, or raw as 4-byte little-endian lengths before each element.
//
// With `model_id_header` (ebb serve --modelmesh), a request carrying the gRPC
// metadata "mm-model-id" is for the model it names, whatever the request's
// own name field says (ModelMesh's routing header; ModelMesh also writes the
// id into the name field, see modelmesh_api.h). Applies to ModelInfer,
// ModelMetadata, ModelReady, ModelConfig and ModelStatistics.
//
// Thread safety: the service may be called concurrently (gRPC's threads).
#pragma once

#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/status.h>

#include <memory>

#include "core/service.h"

namespace ebb::server {

// The full name of the service, for the health service.
inline constexpr const char* kGrpcInferenceServiceName = "inference.GRPCInferenceService";

// The one mapping from an ebb Status to a gRPC status.
grpc::Status GrpcStatusFor(const Status& status);

// The metadata key that names the model of a request under ModelMesh.
inline constexpr const char* kModelIdHeader = "mm-model-id";

// The service, to add to a GrpcServer. REQUIRES: `core` outlives it.
std::unique_ptr<grpc::Service> MakeGrpcInferenceService(InferenceService& core, bool model_id_header = false);

}  // namespace ebb::server
