// server/grpc/async_call.h — how the gRPC front end's calls are served:
// gRPC's completion-queue (async) API, one thread polling the queue.
//
// Why not the callback API: a server with any callback method (gRPC 1.51's
// own health service has two) gets gRPC's process-wide "callback
// alternative" queue, whose threads poll the same sockets; a call's bytes
// are then read on one of them and its reaction run on another. A do-nothing
// unary RPC cost ~30 µs and ~12 thread switches served that way, ~19 µs and
// ~3.3 switches served from a completion queue polled by one thread of the
// server's own (docs/performance.md, "gRPC, 2026-12-02"). So every method of
// every service here is an async method, the health service included
// (health_service.h), and the server has no callback and no sync method.
//
// The server (grpc_server.h) owns the completion queue and its thread; every
// tag on it is a CqTag, whose Proceed runs on that thread and must not block:
// a handler that may block posts its work to worker threads
// (call_support.h), which call UnaryCall::Finish when done.
//
// UnaryCall, one call of a raw unary method, from request to end:
//   1. requested (UnaryCall::Request): gRPC fills the context and the
//      message (unparsed, a grpc::ByteBuffer) when a call comes;
//   2. arrived: the next call of the method is requested, and the method's
//      handler runs on the queue's thread;
//   3. the handler, or work it posted, calls Finish once, from any thread;
//   4. ended: once gRPC completed both the Finish and the call itself
//      (AsyncNotifyWhenDone), the object is deleted on the queue's thread,
//      and what was kept with it (KeepUntilEnd) is released.
// cancelled() turns true when gRPC says the call is over before it finished:
// the client cancelled, its deadline passed, or the server shut down.
//
// Thread safety: Finish, cancelled() and KeepUntilEnd may be called from any
// thread (KeepUntilEnd before Finish); the rest on the queue's thread.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/async_stream.h>
#include <grpcpp/support/async_unary_call.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace ebb::server {

// A tag on the server's completion queue.
class CqTag {
 public:
  virtual void Proceed(bool ok) = 0;

 protected:
  ~CqTag() = default;
};

// The calls alive on a server (requested, running or ending): its completion
// queue is shut down only once none is left, so that no call starts an
// operation on a queue that is gone.
class LiveCalls {
 public:
  void Add();
  void Remove();
  void WaitNone();

 private:
  std::mutex mu_;
  std::condition_variable none_;
  size_t count_ = 0;  // guarded by mu_
};

class UnaryCall;

// One raw unary method of an async service: how to request a call of it (the
// generated RequestX of a WithRawMethod_X service) and what to do with one.
struct UnaryMethod {
  std::function<void(grpc::ServerContext*, grpc::ByteBuffer*, grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>*,
                     grpc::ServerCompletionQueue*, void* tag)>
      request;
  // Runs on the queue's thread; must not block. Calls (or has a worker call) Finish.
  std::function<void(UnaryCall*)> handle;
};

// The UnaryMethod of `owner`'s generated `request` (&Service::RequestX of a
// WithRawMethod_X service), handled by `handle`.
template <typename Owner, typename RequestFn>
UnaryMethod RawUnaryMethod(Owner* owner, RequestFn request, std::function<void(UnaryCall*)> handle) {
  return {[owner, request](grpc::ServerContext* context, grpc::ByteBuffer* in,
                           grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* out, grpc::ServerCompletionQueue* cq,
                           void* tag) { (owner->*request)(context, in, out, cq, cq, tag); },
          std::move(handle)};
}

// A service served this way: the grpc::Service to register (every method
// async) and its unary methods.
class AsyncService {
 public:
  virtual ~AsyncService() = default;
  virtual grpc::Service* service() = 0;
  virtual std::vector<UnaryMethod> UnaryMethods() = 0;
  // Called on the queue's thread once the server has started, for the
  // methods that are not unary (health_service.h's Watch). Default: none.
  virtual void RequestStreams(grpc::ServerCompletionQueue*, LiveCalls*) {}
};

class UnaryCall {
 public:
  // Requests a call of `method` on `cq`; each call, once it arrives, requests
  // the next. REQUIRES: `method` and `live` outlive every call.
  static void Request(const UnaryMethod* method, grpc::ServerCompletionQueue* cq, LiveCalls* live);

  grpc::ServerContext* context() { return &context_; }
  // The message, the call's own (Clear() it to free it early).
  grpc::ByteBuffer* request() { return &request_; }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // Holds `held` until the call has ended (a budget's charge, a deadline to forget). Before Finish.
  void KeepUntilEnd(std::shared_ptr<void> held) { held_.push_back(std::move(held)); }
  // Sends `reply` with an OK status, or `status` alone. Exactly once.
  void Finish(grpc::ByteBuffer reply, const grpc::Status& status);

 private:
  struct Step final : CqTag {
    Step(UnaryCall* c, void (UnaryCall::*f)(bool)) : call(c), on(f) {}
    void Proceed(bool ok) override { (call->*on)(ok); }
    UnaryCall* call;
    void (UnaryCall::*on)(bool);
  };

  UnaryCall(const UnaryMethod* method, grpc::ServerCompletionQueue* cq, LiveCalls* live);
  ~UnaryCall();
  void Arrived(bool ok);
  void Finished(bool ok);
  void Done(bool ok);
  void EndOne();

  const UnaryMethod* const method_;
  grpc::ServerCompletionQueue* const cq_;
  LiveCalls* const live_;
  grpc::ServerContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer reply_;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> writer_{&context_};
  Step arrived_{this, &UnaryCall::Arrived};
  Step finished_{this, &UnaryCall::Finished};
  Step done_{this, &UnaryCall::Done};
  int pending_ = 2;  // the Finish and the end of the call, on the queue's thread only
  std::mutex finish_mu_;  // held by Finish; taken by EndOne (async_call.cc)
  std::atomic<bool> cancelled_{false};
  std::vector<std::shared_ptr<void>> held_;
};

}  // namespace ebb::server
