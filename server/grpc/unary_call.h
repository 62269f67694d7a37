// server/grpc/unary_call.h — every RPC besides ModelInfer: its message
// bounded before it is parsed, its handler run where it may block.
//
// gRPC's synchronous methods parse a request before any ebb code sees it, up
// to the whole --max-body-bytes, and protobuf keeps every unknown field it
// meets: 16 MiB of empty unknown fields sent to ModelMetadata peaked at
// +358 MiB (measured), so 256 MiB would have cost several GiB. So every
// method is a raw async method instead (async_call.h), served by ServeUnary: the message
// must be at most `max_bytes` (the requests of these RPCs hold names,
// versions and a few parameters; a load's "config" is a few KiB of JSON),
// its entries and unknown fields are counted on its wire form (wire_scan.h)
// against the limits, and only then is it parsed, into an arena.
//
// Errors: RESOURCE_EXHAUSTED over max_bytes (as gRPC answers a message over
// its own limit), INVALID_ARGUMENT over a count or for a malformed message.
// Thread safety: ServeUnary may be called from any thread.
#pragma once

#include <google/protobuf/arena.h>
#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>
#include <utility>

#include "async_call.h"
#include "call_support.h"
#include "ebb/status.h"
#include "inference_api.h"

namespace ebb::server {

struct UnaryLimits {
  size_t max_bytes = 4u << 20;        // one request message
  int64_t max_entries = 4096;         // entries of all its repeated fields and maps together
  int64_t max_unknown_fields = 1024;  // fields unknown to ebb's schema (a newer client's), at any depth
};

// Checks `bytes` against `limits` and parses them into `message`.
Status ParseBounded(const grpc::ByteBuffer& bytes, google::protobuf::Message* message, const UnaryLimits& limits);

// `message` serialized, as a reply.
grpc::ByteBuffer SerializeReply(const google::protobuf::Message& message);

// Serves one unary call (async_call.h): parses the request (ParseBounded),
// runs `handler(UnaryCall*, const Request&, Response*) -> grpc::Status` on
// `workers`, or at once on the completion queue's thread when `workers` is
// null (for handlers that never block), and finishes the call with the
// response. REQUIRES: `workers` outlives the call.
template <typename Request, typename Response, typename Handler>
void ServeUnary(UnaryCall* call, WorkerThreads* workers, Handler handler) {
  auto run = [call, handler = std::move(handler)] {
    google::protobuf::Arena arena;
    auto* in = google::protobuf::Arena::CreateMessage<Request>(&arena);
    if (Status parsed = ParseBounded(*call->request(), in, UnaryLimits{}); !parsed.ok()) {
      return call->Finish({}, GrpcStatusFor(parsed));
    }
    call->request()->Clear();
    auto* out = google::protobuf::Arena::CreateMessage<Response>(&arena);
    const grpc::Status status = handler(call, *in, out);
    call->Finish(status.ok() ? SerializeReply(*out) : grpc::ByteBuffer(), status);
  };
  if (workers == nullptr) {
    run();
  } else {
    workers->Post(std::move(run));
  }
}

}  // namespace ebb::server
