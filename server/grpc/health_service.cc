#include "health_service.h"

#include <utility>

#include "health.grpc.pb.h"
#include "unary_call.h"

namespace ebb::server {

using Health = grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

struct HealthService::Generated {
  Health::WithRawMethod_Check<Health::WithRawMethod_Watch<Health::Service>> service;
};

// One Watch stream. Its state is guarded by the service's mu_; it is deleted once the call has ended
// and no write is in flight.
class HealthService::Watch {
 public:
  static void Request(HealthService* health, grpc::ServerCompletionQueue* cq, LiveCalls* live) {
    auto* watch = new Watch(health, cq, live);
    watch->context_.AsyncNotifyWhenDone(&watch->done_);
    health->generated_->service.RequestWatch(&watch->context_, &watch->request_, &watch->writer_, cq, cq,
                                             &watch->arrived_);
  }

  // Sends the current status if it is not the last one sent. REQUIRES: health_->mu_ held.
  void Update() {
    if (writing_ || ended_) return;
    const int status = health_->StatusOf(name_);
    if (status == sent_) return;
    HealthCheckResponse response;
    response.set_status(static_cast<HealthCheckResponse::ServingStatus>(status));
    out_ = SerializeReply(response);
    sent_ = status;
    writing_ = true;
    writer_.Write(out_, &wrote_);
  }

  void Cancel() { context_.TryCancel(); }

 private:
  struct Step final : CqTag {
    Step(Watch* w, void (Watch::*f)(bool)) : watch(w), on(f) {}
    void Proceed(bool ok) override { (watch->*on)(ok); }
    Watch* watch;
    void (Watch::*on)(bool);
  };

  Watch(HealthService* health, grpc::ServerCompletionQueue* cq, LiveCalls* live)
      : health_(health), cq_(cq), live_(live) {
    live_->Add();
  }
  ~Watch() { live_->Remove(arrived_call_); }

  void Arrived(bool ok) {
    if (!ok) {  // shutting down: no call came, and no end will be reported
      delete this;
      return;
    }
    arrived_call_ = true;
    live_->Arrived();
    HealthCheckRequest in;
    const bool parsed = ParseBounded(request_, &in, UnaryLimits{}).ok();
    request_.Clear();
    name_ = in.service();
    std::lock_guard<std::mutex> lock(health_->mu_);
    if (!health_->stopped_) Request(health_, cq_, live_);
    health_->watches_.insert(this);
    if (!parsed || health_->stopped_) return Cancel();
    Update();
  }

  void Wrote(bool ok) {
    bool gone = false;
    {
      std::lock_guard<std::mutex> lock(health_->mu_);
      writing_ = false;
      if (!ok) ended_ = true;  // the stream is broken; its end is reported next
      Update();
      gone = Gone();
    }
    if (gone) delete this;
  }

  void Done(bool) {
    bool gone = false;
    {
      std::lock_guard<std::mutex> lock(health_->mu_);
      ended_ = done_seen_ = true;
      gone = Gone();
    }
    if (gone) delete this;
  }

  // REQUIRES: health_->mu_ held. True when the watch is to be deleted now (and it is forgotten).
  bool Gone() {
    if (!done_seen_ || writing_) return false;
    health_->watches_.erase(this);
    return true;
  }

  HealthService* const health_;
  grpc::ServerCompletionQueue* const cq_;
  LiveCalls* const live_;
  grpc::ServerContext context_;
  grpc::ByteBuffer request_, out_;
  grpc::ServerAsyncWriter<grpc::ByteBuffer> writer_{&context_};
  Step arrived_{this, &Watch::Arrived};
  Step wrote_{this, &Watch::Wrote};
  Step done_{this, &Watch::Done};
  std::string name_;
  int sent_ = -1;
  bool writing_ = false, ended_ = false, done_seen_ = false;
  bool arrived_call_ = false;  // set once, in Arrived
};

HealthService::HealthService() : generated_(std::make_unique<Generated>()) {}

HealthService::~HealthService() = default;

grpc::Service* HealthService::service() { return &generated_->service; }

void HealthService::AddName(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  names_.insert(name);
}

int HealthService::StatusOf(const std::string& name) const {
  if (names_.count(name) == 0) return HealthCheckResponse::SERVICE_UNKNOWN;
  return serving_ ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

void HealthService::SetServing(bool serving) {
  std::lock_guard<std::mutex> lock(mu_);
  serving_ = serving;
  for (Watch* watch : watches_) watch->Update();
}

void HealthService::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  for (Watch* watch : watches_) watch->Cancel();
}

std::vector<UnaryMethod> HealthService::UnaryMethods() {
  UnaryMethod check;
  check.request = [this](grpc::ServerContext* context, grpc::ByteBuffer* in,
                         grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* out, grpc::ServerCompletionQueue* cq,
                         void* tag) { generated_->service.RequestCheck(context, in, out, cq, cq, tag); };
  check.handle = [this](UnaryCall* call) {
    ServeUnary<HealthCheckRequest, HealthCheckResponse>(
        call, nullptr, [this](UnaryCall*, const HealthCheckRequest& in, HealthCheckResponse* out) {
          std::lock_guard<std::mutex> lock(mu_);
          const int status = StatusOf(in.service());
          if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
            return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + in.service() + "'");
          }
          out->set_status(static_cast<HealthCheckResponse::ServingStatus>(status));
          return grpc::Status::OK;
        });
  };
  return {std::move(check)};
}

void HealthService::RequestStreams(grpc::ServerCompletionQueue* cq, LiveCalls* live) { Watch::Request(this, cq, live); }

}  // namespace ebb::server
