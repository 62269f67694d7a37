#include "grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "health_service.h"
#include "port.h"

namespace ebb::server {
namespace {

// A port already taken is one clear error before gRPC tries (port::CheckListenable binds as gRPC
// would): gRPC core would log its own multi-line bind failure to stderr first.
Status CheckPortFree(const std::string& host, int port) {
  Status st = port::CheckListenable(host, port);
  if (st.ok()) return st;
  return Unavailable("gRPC cannot listen on " + host + ":" + std::to_string(port) + ": " + st.message());
}

// The completion queue's threads (async_call.h): one leads, up to 3 more run ModelInfer calls (and the
// RPCs that may block) they took from it; beyond, calls go to their service's workers.
constexpr size_t kQueueThreads = 4;

// At shutdown, once every reply was received: how long the clients get to close their connections
// after gRPC's GOAWAY before the server closes them.
constexpr auto kCloseWait = std::chrono::milliseconds(500);

}  // namespace

struct GrpcServer::Impl {
  GrpcOptions options;
  std::vector<std::pair<AsyncService*, std::string>> services;
  HealthService health;
  std::deque<UnaryMethod> methods;  // every service's, stable while calls refer to them
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  std::unique_ptr<grpc::Server> server;
  LiveCalls live;
  std::unique_ptr<QueueThreads> threads;  // they take what the completion queue returns
  int port = 0;
};

GrpcServer::GrpcServer(GrpcOptions options) : impl_(std::make_unique<Impl>()) { impl_->options = std::move(options); }

GrpcServer::~GrpcServer() { Shutdown(); }

void GrpcServer::AddService(AsyncService* service, const std::string& name) {
  impl_->services.emplace_back(service, name);
  impl_->health.AddName(name);
}

Status GrpcServer::Start() {
  grpc::EnableDefaultHealthCheckService(false);  // a callback service: ours instead (health_service.h)
  grpc::ServerBuilder builder;
  const std::string address = impl_->options.host + ":" + std::to_string(impl_->options.port);
  if (Status st = CheckPortFree(impl_->options.host, impl_->options.port); !st.ok()) return st;
  // Without SO_REUSEPORT (gRPC's default on Linux) a second server on the same port fails as the
  // check above says, instead of silently sharing the port's connections with the first.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl_->port);
  const size_t limit = std::min<size_t>(impl_->options.max_message_bytes, INT_MAX);
  builder.SetMaxReceiveMessageSize(static_cast<int>(limit));
  builder.SetMaxSendMessageSize(-1);  // replies are as large as the outputs
  if (!impl_->options.compressed_requests) {
    builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
    builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  }
  std::vector<AsyncService*> all = {&impl_->health};
  for (const auto& [service, name] : impl_->services) all.push_back(service);
  for (AsyncService* service : all) {
    builder.RegisterService(service->service());
    for (UnaryMethod& method : service->UnaryMethods()) impl_->methods.push_back(std::move(method));
  }
  impl_->cq = builder.AddCompletionQueue();
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0) {
    impl_->server.reset();
    impl_->cq->Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (impl_->cq->Next(&tag, &ok)) {
    }
    impl_->cq.reset();
    impl_->methods.clear();
    return Unavailable("gRPC cannot listen on " + address + " (address in use?)");
  }
  for (const UnaryMethod& method : impl_->methods) UnaryCall::Request(&method, impl_->cq.get(), &impl_->live);
  for (AsyncService* service : all) service->RequestStreams(impl_->cq.get(), &impl_->live);
  impl_->threads = std::make_unique<QueueThreads>(impl_->cq.get(), kQueueThreads);
  impl_->threads->Start();
  SetServing(true);
  return Status::Ok();
}

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::SetServing(bool serving) { impl_->health.SetServing(serving); }

void GrpcServer::Shutdown() {
  if (!impl_->server) return;
  impl_->health.Shutdown();  // health watches: ended now
  // gRPC's own Shutdown closes each connection once its last call has ended, and a call ends once
  // its reply is in the kernel's send queue. Closed with the client's window updates unread, the
  // connection is reset, and the reset discards the tail of a large reply that the client has not
  // received yet (measured: 2 SIGTERMs in 25 during a 28 MB reply lost it). So, first, the calls open
  // now end and the peers acknowledge every byte sent, each within the grace.
  const auto deadline = std::chrono::steady_clock::now() + impl_->options.drain_grace;
  if (impl_->live.WaitNoneOpen(deadline)) {
    while (port::UnacknowledgedBytesOn(impl_->port) > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  // Then gRPC's Shutdown: a GOAWAY on each connection, and a wait for its clients to close them. A
  // client with no call out may not answer (grpc-python polls a channel only during a call: measured,
  // 5 s), and nothing is left to lose on the connections by now, so after kCloseWait they are closed.
  // A call that came meanwhile is a straggler: gRPC cancels it; a worker running it sees cancelled()
  // and finishes; the completion queue takes the ends until none is left.
  const std::chrono::steady_clock::duration close_wait = std::clamp<std::chrono::steady_clock::duration>(
      deadline - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration::zero(), kCloseWait);
  impl_->server->Shutdown(std::chrono::system_clock::now() + close_wait);
  impl_->live.WaitNone();
  impl_->cq->Shutdown();
  impl_->threads->Join();
  impl_->threads.reset();
  impl_->server.reset();
  impl_->cq.reset();
}

}  // namespace ebb::server
