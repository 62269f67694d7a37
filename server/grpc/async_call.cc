#include "async_call.h"

#include <utility>

namespace ebb::server {

void LiveCalls::Add() {
  std::lock_guard<std::mutex> lock(mu_);
  ++count_;
}

void LiveCalls::Remove() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--count_ == 0) none_.notify_all();
}

void LiveCalls::WaitNone() {
  std::unique_lock<std::mutex> lock(mu_);
  none_.wait(lock, [this] { return count_ == 0; });
}

void UnaryCall::Request(const UnaryMethod* method, grpc::ServerCompletionQueue* cq, LiveCalls* live) {
  auto* call = new UnaryCall(method, cq, live);
  call->context_.AsyncNotifyWhenDone(&call->done_);
  method->request(&call->context_, &call->request_, &call->writer_, cq, &call->arrived_);
}

UnaryCall::UnaryCall(const UnaryMethod* method, grpc::ServerCompletionQueue* cq, LiveCalls* live)
    : method_(method), cq_(cq), live_(live) {
  live_->Add();
}

UnaryCall::~UnaryCall() {
  held_.clear();  // before the server may see no call left
  live_->Remove();
}

void UnaryCall::Arrived(bool ok) {
  if (!ok) {  // the server is shutting down: no call came, and no end will be reported
    delete this;
    return;
  }
  Request(method_, cq_, live_);
  method_->handle(this);
}

void UnaryCall::Finish(grpc::ByteBuffer reply, const grpc::Status& status) {
  std::lock_guard<std::mutex> lock(finish_mu_);
  if (status.ok()) {
    reply_ = std::move(reply);
    writer_.Finish(reply_, status, &finished_);
  } else {
    writer_.FinishWithError(status, &finished_);
  }
}

void UnaryCall::Finished(bool) { EndOne(); }

void UnaryCall::Done(bool) {
  if (context_.IsCancelled()) cancelled_.store(true, std::memory_order_release);
  EndOne();
}

void UnaryCall::EndOne() {
  // gRPC returns the Finish's tag only once Finish was called, but it orders the two through its own
  // (uninstrumented) completion queue: taking the lock Finish held makes that order one ThreadSanitizer
  // sees too, before anything Finish's thread wrote is read or freed here.
  { std::lock_guard<std::mutex> lock(finish_mu_); }
  if (--pending_ == 0) delete this;
}

}  // namespace ebb::server
