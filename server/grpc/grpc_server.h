// server/grpc/grpc_server.h — the gRPC transport of `ebb serve`.
//
// Listens on one port (HTTP/2, no TLS) and serves every service added to it:
// the v2 inference service (server/grpc/inference_api.h), the standard
// health service grpc.health.v1.Health (health_service.h: Check and Watch,
// answering SERVING until SetServing(false), for the whole server "" and for
// each service added), and whatever comes next on the same port
// (AddService). Messages are received up to `max_message_bytes` (larger ones
// get RESOURCE_EXHAUSTED from gRPC itself), compressed ones only when
// `compressed_requests`, and sent without limit. gRPC receives a message
// whole before any handler sees it. Every method is an async method served
// from one completion queue, polled by one thread of the server's at a time
// (async_call.h: why not the callback API); what may block runs on a queue
// thread that handed the polling on first, or on the services' own workers.
// Inference is bounded by the core's admission queue, as over HTTP.
//
// Lifecycle: AddService() any number of times, then Start() once; Shutdown()
// stops listening, ends the health watches, cancels what is still open after
// a grace period, and returns when every call has ended. For a graceful
// stop, call SetServing(false) and wait for the core to go idle
// (InferenceService::WaitIdle) first.
// Thread safety: SetServing() and Shutdown() may be called from any thread;
// the rest from one.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ebb/status.h"

namespace ebb::server {

class AsyncService;  // async_call.h

struct GrpcOptions {
  std::string host = "127.0.0.1";        // loopback unless asked otherwise
  int port = 8001;                       // 0 picks a free port
  size_t max_message_bytes = 256u << 20;  // largest request message (ebb serve: --max-body-bytes)
  // Accept gzip- and deflate-compressed requests (--grpc-compressed-requests).
  // Off: gRPC 1.51 inflates a compressed message whole before it compares its
  // size with max_message_bytes, so a 1 MB message that inflates to 1 GiB
  // cost +1.1 GiB before RESOURCE_EXHAUSTED (measured). Refused, a compressed
  // request gets UNIMPLEMENTED ("Compression algorithm 'gzip' is disabled")
  // before any byte is inflated. Replies are never compressed.
  bool compressed_requests = false;
  // Shutdown(): how long the calls still open may take to end. Their inferences are over by then
  // (ebb serve waits for them first), but a large reply may still be on its way to a slow reader;
  // cancelled earlier, the client loses an answer that was computed (ebb serve: --write-timeout-s,
  // the time any one reply may take to write).
  std::chrono::milliseconds drain_grace{10000};
};

class GrpcServer {
 public:
  explicit GrpcServer(GrpcOptions options);
  ~GrpcServer();

  // Serves `service` too; `name` is its full name for the health service
  // ("inference.GRPCInferenceService"). REQUIRES: before Start(); `service`
  // outlives the server.
  void AddService(AsyncService* service, const std::string& name);
  // Binds and starts serving (the completion queue's thread). Errors: kUnavailable.
  Status Start();
  // The bound port (after Start).
  int port() const;
  // What the health service answers (SERVING after Start).
  void SetServing(bool serving);
  void Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ebb::server
