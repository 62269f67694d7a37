#include "grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <climits>
#include <utility>
#include <vector>

namespace ebb::server {

struct GrpcServer::Impl {
  GrpcOptions options;
  std::vector<std::pair<grpc::Service*, std::string>> services;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

GrpcServer::GrpcServer(GrpcOptions options) : impl_(std::make_unique<Impl>()) { impl_->options = std::move(options); }

GrpcServer::~GrpcServer() { Shutdown(); }

void GrpcServer::AddService(grpc::Service* service, const std::string& name) {
  impl_->services.emplace_back(service, name);
}

Status GrpcServer::Start() {
  grpc::EnableDefaultHealthCheckService(true);  // grpc.health.v1.Health, built into grpc++
  grpc::ServerBuilder builder;
  const std::string address = impl_->options.host + ":" + std::to_string(impl_->options.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &impl_->port);
  const size_t limit = std::min<size_t>(impl_->options.max_message_bytes, INT_MAX);
  builder.SetMaxReceiveMessageSize(static_cast<int>(limit));
  builder.SetMaxSendMessageSize(-1);  // replies are as large as the outputs
  if (!impl_->options.compressed_requests) {
    builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
    builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  }
  for (const auto& [service, name] : impl_->services) builder.RegisterService(service);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0) {
    impl_->server.reset();
    return Unavailable("gRPC cannot listen on " + address + " (address in use?)");
  }
  SetServing(true);
  return Status::Ok();
}

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::SetServing(bool serving) {
  if (!impl_->server) return;
  grpc::HealthCheckServiceInterface* health = impl_->server->GetHealthCheckService();
  if (!health) return;
  health->SetServingStatus("", serving);
  for (const auto& [service, name] : impl_->services) health->SetServingStatus(name, serving);
}

void GrpcServer::Shutdown() {
  if (!impl_->server) return;
  // Calls still open now are streams (health watches) or stragglers: end them.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace ebb::server
