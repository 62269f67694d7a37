// server/grpc/async_call.h — how the gRPC front end's calls are served:
// gRPC's completion-queue (async) API, one thread at a time polling the queue.
//
// Why not the callback API: a server with any callback method (gRPC 1.51's
// own health service has two) gets gRPC's process-wide "callback
// alternative" queue, whose threads poll the same sockets; a call's bytes
// are then read on one of them and its reaction run on another. A do-nothing
// unary RPC cost ~32-34 µs and ~12-13 thread switches served that way, ~19
// µs and ~3.2 switches served from a completion queue polled by one thread
// of the server's own (docs/performance.md, "gRPC, 2026-12-02"). So every
// method of every service here is an async method, the health service
// included (health_service.h), and the server has no callback and no sync
// method.
//
// The server (grpc_server.h) owns the completion queue and its threads
// (QueueThreads); every tag on it is a CqTag, whose Proceed runs on the
// thread that leads and must not block: a handler that may block takes its
// work for this thread, which hands the lead on first (RunHereAfter), or
// posts it to worker threads (call_support.h); either calls
// UnaryCall::Finish when done.
//
// UnaryCall, one call of a raw unary method, from request to end:
//   1. requested (UnaryCall::Request): gRPC fills the context and the
//      message (unparsed, a grpc::ByteBuffer) when a call comes;
//   2. arrived: the next call of the method is requested, and the method's
//      handler runs on the queue's (leading) thread;
//   3. the handler, or work it posted, calls Finish once, from any thread;
//   4. ended: once gRPC completed both the Finish and the call itself
//      (AsyncNotifyWhenDone), the object is deleted on the queue's thread,
//      and what was kept with it (KeepUntilEnd) is released.
// cancelled() turns true when gRPC says the call is over before it finished:
// the client cancelled, its deadline passed, or the server shut down.
//
// Thread safety: Finish, cancelled() and KeepUntilEnd may be called from any
// thread (KeepUntilEnd before Finish); the rest on the queue's leading
// thread (one at a time: the lead passes under QueueThreads' lock).
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/async_stream.h>
#include <grpcpp/support/async_unary_call.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
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
// operation on a queue that is gone. Of those, the calls that arrived and
// have not ended are open: a server shutting down lets them end first.
class LiveCalls {
 public:
  void Add();                  // requested
  void Arrived();              // a call came for it: open
  void Remove(bool arrived);   // ended (or never came, at shutdown)
  void WaitNone();
  // Waits until no call is open or `deadline` passes; true when none is.
  bool WaitNoneOpen(std::chrono::steady_clock::time_point deadline);

 private:
  std::mutex mu_;
  std::condition_variable none_;
  size_t count_ = 0;  // guarded by mu_
  size_t open_ = 0;   // guarded by mu_
};

// The threads that take what the completion queue returns: one at a time
// (the leader) waits in Next() and runs each tag's Proceed. A handler about
// to run work that may block calls RunHereAfter: the lead passes to another
// thread (an idle one, or one started for it), and the work runs on this
// thread as soon as the handler returns, without waiting for a worker thread
// to wake (which cost ~7.5 µs and ~5.5 thread switches a call in
// tools/grpc_floor.cc, and ~9 µs of `ebb bench grpc`'s overhead p50:
// docs/performance.md, "gRPC, 2026-12-02"). At most `max_threads` - 1 run such work at a time; beyond,
// RunHereAfter says no and the caller posts the work to its workers.
class QueueThreads {
 public:
  QueueThreads(grpc::ServerCompletionQueue* cq, size_t max_threads);
  ~QueueThreads();  // REQUIRES: Join() called
  void Start();
  // Returns when the queue is shut down and drained, and no thread is left.
  void Join();
  // On a leader thread, inside a Proceed: takes `work` to run on this thread once Proceed
  // returns, and hands the lead on; true. Anywhere else, or when max_threads - 1 already run
  // work: false, and `work` is left as it was.
  static bool RunHereAfter(std::function<void()>& work);

 private:
  void Loop(bool counted);  // counted: TakeWork counted it idle already
  bool Lead();              // false: the queue is shut down
  bool TakeWork(std::function<void()>& work);

  grpc::ServerCompletionQueue* const cq_;
  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable lead_free_;
  bool led_ = false;                  // guarded by mu_: a thread leads (or is about to)
  bool stopping_ = false;             // guarded by mu_: the queue is shut down
  size_t idle_ = 0;                   // guarded by mu_: threads waiting for the lead
  size_t working_ = 0;                // guarded by mu_: threads running work they took
  std::vector<std::thread> threads_;  // guarded by mu_
};

class UnaryCall;

// One raw unary method of an async service: how to request a call of it (the
// generated RequestX of a WithRawMethod_X service) and what to do with one.
struct UnaryMethod {
  std::function<void(grpc::ServerContext*, grpc::ByteBuffer*, grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>*,
                     grpc::ServerCompletionQueue*, void* tag)>
      request;
  // Runs on the queue's leading thread; must not block (QueueThreads::RunHereAfter). Calls Finish, or has
  // the work it started call it.
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
  int pending_ = 2;  // the Finish and the end of the call, on the leading thread only
  bool arrived_call_ = false;  // on the leading thread only
  std::mutex finish_mu_;  // held by Finish; taken by EndOne (async_call.cc)
  std::atomic<bool> cancelled_{false};
  std::vector<std::shared_ptr<void>> held_;
};

}  // namespace ebb::server
