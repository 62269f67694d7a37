// server/grpc/health_service.h — grpc.health.v1.Health, served from the
// server's completion queue (async_call.h).
//
// What gRPC's own default health service answers (which is a callback
// service, and one callback method on a server costs every call on it
// gRPC's callback threads: async_call.h), for the names added:
//   Check(service): SERVING or NOT_SERVING for a known name ("" is the whole
//     server); NOT_FOUND for any other.
//   Watch(service): the status at once, then each change, until the client
//     goes away or Shutdown(); SERVICE_UNKNOWN for an unknown name (and the
//     stream stays open, as the protocol says).
// Requests are bounded before they are parsed (unary_call.h).
//
// Thread safety: SetServing() and Shutdown() from any thread; AddName()
// before the server starts.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "async_call.h"

namespace ebb::server {

class HealthService final : public AsyncService {
 public:
  HealthService();
  ~HealthService() override;

  void AddName(const std::string& name);
  void SetServing(bool serving);
  // Ends every watch (the client sees CANCELLED) and refuses new ones.
  void Shutdown();

  grpc::Service* service() override;
  std::vector<UnaryMethod> UnaryMethods() override;
  void RequestStreams(grpc::ServerCompletionQueue* cq, LiveCalls* live) override;

  class Watch;

 private:
  friend class Watch;
  // The status of `name` as a HealthCheckResponse's enum value.
  int StatusOf(const std::string& name) const;  // REQUIRES: mu_ held

  struct Generated;
  std::unique_ptr<Generated> generated_;
  mutable std::mutex mu_;
  std::set<std::string> names_{""};  // guarded by mu_
  bool serving_ = false;             // guarded by mu_
  bool stopped_ = false;             // guarded by mu_
  std::set<Watch*> watches_;         // guarded by mu_
};

}  // namespace ebb::server
