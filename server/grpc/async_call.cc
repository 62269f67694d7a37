#include "async_call.h"

#include <algorithm>
#include <utility>

namespace ebb::server {
namespace {

// The pool the calling thread belongs to, whether it leads now, and the work it took.
thread_local QueueThreads* t_pool = nullptr;
thread_local bool t_leading = false;
thread_local std::function<void()>* t_work = nullptr;

}  // namespace

QueueThreads::QueueThreads(grpc::ServerCompletionQueue* cq, size_t max_threads)
    : cq_(cq), max_threads_(std::max<size_t>(1, max_threads)) {}

QueueThreads::~QueueThreads() = default;

void QueueThreads::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  threads_.emplace_back([this] { Loop(false); });
}

void QueueThreads::Join() {
  for (;;) {
    std::thread thread;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (threads_.empty()) return;
      thread = std::move(threads_.back());
      threads_.pop_back();
    }
    thread.join();  // a thread started meanwhile is in threads_ before its starter ends
  }
}

bool QueueThreads::RunHereAfter(std::function<void()>& work) {
  QueueThreads* pool = t_pool;
  if (pool == nullptr || !t_leading) return false;
  return pool->TakeWork(work);
}

bool QueueThreads::TakeWork(std::function<void()>& work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || working_ + 1 >= max_threads_) return false;
    ++working_;
    led_ = false;
    if (idle_ == 0) {
      ++idle_;  // counted from now, so that no other thread is started for the same lead
      threads_.emplace_back([this] { Loop(true); });
    }
  }
  lead_free_.notify_one();
  *t_work = std::move(work);
  t_leading = false;
  return true;
}

void QueueThreads::Loop(bool counted) {
  t_pool = this;
  std::function<void()> work;
  t_work = &work;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!counted) ++idle_;
    counted = false;
    lead_free_.wait(lock, [this] { return stopping_ || !led_; });
    --idle_;
    if (stopping_) return;
    led_ = true;
    lock.unlock();
    if (!Lead()) {
      lock.lock();
      stopping_ = true;
      lead_free_.notify_all();
      return;
    }
    work();  // taken in a Proceed; the lead is another thread's now
    work = nullptr;
    lock.lock();
    --working_;
  }
}

bool QueueThreads::Lead() {
  t_leading = true;
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    static_cast<CqTag*>(tag)->Proceed(ok);
    if (!t_leading) return true;  // Proceed took work and handed the lead on
  }
  t_leading = false;
  return false;
}

void LiveCalls::Add() {
  std::lock_guard<std::mutex> lock(mu_);
  ++count_;
}

void LiveCalls::Arrived() {
  std::lock_guard<std::mutex> lock(mu_);
  ++open_;
}

void LiveCalls::Remove(bool arrived) {
  std::lock_guard<std::mutex> lock(mu_);
  if (arrived) --open_;
  if (--count_ == 0 || open_ == 0) none_.notify_all();
}

void LiveCalls::WaitNone() {
  std::unique_lock<std::mutex> lock(mu_);
  none_.wait(lock, [this] { return count_ == 0; });
}

bool LiveCalls::WaitNoneOpen(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return none_.wait_until(lock, deadline, [this] { return open_ == 0; });
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
  live_->Remove(arrived_call_);
}

void UnaryCall::Arrived(bool ok) {
  if (!ok) {  // the server is shutting down: no call came, and no end will be reported
    delete this;
    return;
  }
  arrived_call_ = true;
  live_->Arrived();
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
