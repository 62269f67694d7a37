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
// ModelInfer, step by step, so that a message costs what its bytes do and no
// more, and only as long as needed (docs/server.md, "Limits and hostile
// input"). It is a raw async method (async_call.h) that receives the message
// unparsed (a grpc::ByteBuffer); so is every other RPC, bounded before it is
// parsed (unary_call.h) and run on the same workers, but ServerLive,
// ServerReady and ServerMetadata, which never block and run on the server's
// completion-queue thread.
//   1. Its bytes are charged to the core's request byte budget, shared with
//      HTTP (InferenceService::request_bytes(), --max-body-bytes-in-flight):
//      over it, UNAVAILABLE "server busy" at once. The charge is held until the
//      call ends.
//   2. On the queue thread that took the call, once it handed the polling on
//      (async_call.h, QueueThreads; at most 3 at a time), else on one of
//      `threads` workers: the wire form is scanned (infer_scan.h):
//      entry counts over GrpcInferLimits are INVALID_ARGUMENT, before anything
//      is parsed; the scan yields the model name and version.
//   3. The core checks the model and admits the request (UNAVAILABLE when the
//      queue is full); only then is the message parsed, into an arena, its
//      bytes freed, and its tensors decoded (tensor_codec.h); the arena goes
//      when decoding ends.
//   4. The reply is sent from the output tensors without a copy. A reply not
//      taken within `write_timeout_s` (--write-timeout-s) ends the call:
//      gRPC cancels the stream and frees the reply (call_support.h).
//
// With `model_id_header` (ebb serve --modelmesh), a request carrying the gRPC
// metadata "mm-model-id" is for the model it names, whatever the request's
// own name field says (ModelMesh's routing header; ModelMesh also writes the
// id into the name field, see modelmesh_api.h). Applies to ModelInfer,
// ModelMetadata, ModelReady, ModelConfig and ModelStatistics.
//
// Thread safety: the service may be called concurrently (the completion queue's thread and the workers).
#pragma once

#include <grpcpp/support/status.h>

#include <memory>

#include "async_call.h"
#include "core/service.h"
#include "infer_scan.h"

namespace ebb::server {

// The full name of the service, for the health service.
inline constexpr const char* kGrpcInferenceServiceName = "inference.GRPCInferenceService";

// The one mapping from an ebb Status to a gRPC status.
grpc::Status GrpcStatusFor(const Status& status);

// The metadata key that names the model of a request under ModelMesh.
inline constexpr const char* kModelIdHeader = "mm-model-id";

struct GrpcInferenceOptions {
  // Honour the mm-model-id metadata (ebb serve --modelmesh).
  bool model_id_header = false;
  // Workers that run ModelInfer calls (scan, admission, inference, encoding)
  // that no queue thread took (async_call.h: up to 3 run there) and the RPCs
  // that may block (loads); started as needed. A call waiting for admission
  // holds one; 32, as HTTP's --http-threads: more than --workers plus a short
  // queue.
  size_t threads = 32;
  // Seconds a reply may take to be sent (--write-timeout-s, as over HTTP):
  // 256 MiB needs ~26 MB/s in the default 10 s.
  int write_timeout_s = 10;
  // What one ModelInfer message may hold (infer_scan.h).
  GrpcInferLimits limits;
};

// The service, to add to a GrpcServer. REQUIRES: `core` outlives it.
// Destroying it waits for the ModelInfer work still queued or running;
// REQUIRES: the GrpcServer it was added to is shut down first.
std::unique_ptr<AsyncService> MakeGrpcInferenceService(InferenceService& core, GrpcInferenceOptions options = {});

}  // namespace ebb::server
