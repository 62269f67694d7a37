// tools/grpc_floor.cc — an experiment, not part of ebb: what a do-nothing
// ServerLive costs gRPC 1.51 served in different ways, in one process, timed
// from the sync stub `ebb bench grpc` uses (and Triton's clients), the kinds
// interleaved in an order shuffled each round; `cb_aa` and `async_aa` repeat
// `cb` and `async` over their own channels (the A/A). docs/performance.md,
// "gRPC, 2026-12-02", has what it measured.
//
// Servers (one each, own port): cb — every method a raw callback method, as
// ebb served them until 2026-12-02; cbmin — the same with GRPC_ARG_MINIMAL_STACK;
// cbstreams — with GRPC_ARG_MAX_CONCURRENT_STREAMS 1; sync — the sync API;
// syncopt — sync with one CQ and one poller; async — a raw async method on a
// completion queue polled by one thread of its own. Client kinds beside:
// cb_cli_minimal, cb_cli_nobdp_noretry (channel arguments), cb_generic
// (grpc::GenericStub); http — a do-nothing GET on cpp-httplib.
// Environment knobs: NOHEALTH=1 (no default health service: it is a callback
// service), ASYNC_WORKER=1 (async's handler on another thread, as ModelInfer on
// a worker), ASYNC_THREADS=N (N threads in Next on async's queue),
// ASYNC_LF=1 (two threads, one in Next at a time, the one that takes a call
// hands the lead on first), SRV_MINIMAL=1 / SRV_NOBDP=1 (server channel
// arguments), NODEADLOCK=1 (absl's mutex deadlock detection off).
//
// Usage: grpc_floor [--rounds=N] [--only=kind,kind] — build with
//   cmake --build build --target grpc_floor
// Every server in a process shares gRPC's pollers, so compare variants with
// --only (one server per process, e.g. under `perf stat -e context-switches`);
// --serve / --connect=LINE put the servers and the client in two processes.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <absl/synchronization/mutex.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "grpc_service.grpc.pb.h"

using V2 = inference::GRPCInferenceService;

// Callback, all 11 methods raw callback methods as ebb's InferenceApi (only ServerLive served).
using RawCb = V2::WithRawCallbackMethod_ServerLive<
    V2::WithRawCallbackMethod_ServerReady<V2::WithRawCallbackMethod_ModelReady<V2::WithRawCallbackMethod_ServerMetadata<
        V2::WithRawCallbackMethod_ModelMetadata<V2::WithRawCallbackMethod_ModelInfer<
            V2::WithRawCallbackMethod_ModelConfig<V2::WithRawCallbackMethod_ModelStatistics<
                V2::WithRawCallbackMethod_RepositoryIndex<V2::WithRawCallbackMethod_RepositoryModelLoad<
                    V2::WithRawCallbackMethod_RepositoryModelUnload<V2::Service>>>>>>>>>>>;

class CbService final : public RawCb {
 public:
  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context, const grpc::ByteBuffer* in,
                                       grpc::ByteBuffer* out) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    inference::ServerLiveRequest req;
    grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(in));
    req.ParseFromZeroCopyStream(&reader);
    inference::ServerLiveResponse resp;
    resp.set_live(true);
    grpc::Slice slice(resp.SerializeAsString());
    *out = grpc::ByteBuffer(&slice, 1);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

class SyncService final : public V2::Service {
 public:
  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* out) override {
    out->set_live(true);
    return grpc::Status::OK;
  }
};

// Async: raw ServerLive on a CQ polled by one dedicated thread (the rest of the service async too, never requested).
using RawAsync = V2::WithRawMethod_ServerLive<V2::WithAsyncMethod_ServerReady<V2::WithAsyncMethod_ModelReady<
    V2::WithAsyncMethod_ServerMetadata<V2::WithAsyncMethod_ModelMetadata<V2::WithAsyncMethod_ModelInfer<
        V2::WithAsyncMethod_ModelConfig<V2::WithAsyncMethod_ModelStatistics<V2::WithAsyncMethod_RepositoryIndex<
            V2::WithAsyncMethod_RepositoryModelLoad<V2::WithAsyncMethod_RepositoryModelUnload<V2::Service>>>>>>>>>>>;

struct AsyncServer {
  RawAsync service;
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  std::unique_ptr<grpc::Server> server;
  std::thread thread;
  struct Call {
    grpc::ServerContext ctx;
    grpc::ByteBuffer in, out;
    grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> writer{&ctx};
    bool finishing = false;
  };
  void Request(AsyncServer* s) {
    auto* c = new Call;
    service.RequestServerLive(&c->ctx, &c->in, &c->writer, cq.get(), cq.get(), c);
  }
  std::vector<std::thread> more;
  // Leader/follower: one thread at a time in Next; a thread that takes work hands the lead on first.
  bool lf = getenv("ASYNC_LF") != nullptr;
  std::mutex lf_mu;
  std::condition_variable lf_cv;
  bool led = false, lf_stop = false;
  void LoopLF(bool first) {
    if (first) for (int i = 0; i < 2; ++i) Request(this);
    for (;;) {
      {
        std::unique_lock<std::mutex> l(lf_mu);
        lf_cv.wait(l, [&] { return !led || lf_stop; });
        if (lf_stop) return;
        led = true;
      }
      for (;;) {
        void* tag;
        bool ok;
        if (!cq->Next(&tag, &ok)) {
          std::lock_guard<std::mutex> l(lf_mu);
          lf_stop = true;
          lf_cv.notify_all();
          return;
        }
        auto* c = static_cast<Call*>(tag);
        if (c->finishing || !ok) {
          delete c;
          continue;
        }
        Request(this);
        {
          std::lock_guard<std::mutex> l(lf_mu);
          led = false;
        }
        lf_cv.notify_one();
        Handle(c);
        break;
      }
    }
  }
  void Loop(bool first = true) {
    if (first) for (int i = 0; i < 2; ++i) Request(this);
    void* tag;
    bool ok;
    while (cq->Next(&tag, &ok)) {
      auto* c = static_cast<Call*>(tag);
      if (c->finishing || !ok) {
        delete c;
        continue;
      }
      Request(this);
      if (worker_mode) {
        std::lock_guard<std::mutex> l(mu);
        queue.push_back(c);
        cv.notify_one();
        continue;
      }
      Handle(c);
    }
  }
  bool worker_mode = getenv("ASYNC_WORKER") != nullptr;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Call*> queue;
  std::thread worker;
  void Work() {
    for (;;) {
      Call* c;
      {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return !queue.empty(); });
        c = queue.front();
        queue.pop_front();
      }
      if (!c) return;
      Handle(c);
    }
  }
  void Handle(Call* c) {
    {
      inference::ServerLiveRequest req;
      grpc::ProtoBufferReader reader(&c->in);
      req.ParseFromZeroCopyStream(&reader);
      inference::ServerLiveResponse resp;
      resp.set_live(true);
      grpc::Slice slice(resp.SerializeAsString());
      c->out = grpc::ByteBuffer(&slice, 1);
      c->finishing = true;
      c->writer.Finish(c->out, grpc::Status::OK, c);
    }
  }
};

struct Opts {
  bool minimal = false;
  int max_streams = 0;
  int sync_cqs = 0, sync_min = 0, sync_max = 0;
};

std::unique_ptr<grpc::Server> Build(grpc::Service* s, int* port, const Opts& o,
                                    std::unique_ptr<grpc::ServerCompletionQueue>* cq = nullptr) {
  grpc::ServerBuilder b;
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (o.minimal || getenv("SRV_MINIMAL")) b.AddChannelArgument(GRPC_ARG_MINIMAL_STACK, 1);
  if (getenv("SRV_NOBDP")) b.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  if (o.max_streams) b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, o.max_streams);
  if (o.sync_cqs) b.SetSyncServerOption(grpc::ServerBuilder::NUM_CQS, o.sync_cqs);
  if (o.sync_min) b.SetSyncServerOption(grpc::ServerBuilder::MIN_POLLERS, o.sync_min);
  if (o.sync_max) b.SetSyncServerOption(grpc::ServerBuilder::MAX_POLLERS, o.sync_max);
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  b.SetMaxReceiveMessageSize(256 << 20);
  b.SetMaxSendMessageSize(-1);
  b.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  b.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  b.RegisterService(s);
  if (cq) *cq = b.AddCompletionQueue();
  return b.BuildAndStart();
}

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

int main(int argc, char** argv) {
  int rounds = 2000;
  std::string only;  // run one kind only (for perf stat)
  bool serve = false;   // servers only: print the ports, serve until stdin closes
  std::string connect;  // client only: the ports line a --serve process printed
  for (int i = 1; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--rounds=", 9)) rounds = std::atoi(argv[i] + 9);
    if (!std::strncmp(argv[i], "--only=", 7)) only = argv[i] + 7;
    if (!std::strcmp(argv[i], "--serve")) serve = true;
    if (!std::strncmp(argv[i], "--connect=", 10)) connect = argv[i] + 10;
  }
  if (getenv("NODEADLOCK")) absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  grpc::EnableDefaultHealthCheckService(getenv("NOHEALTH") == nullptr);
  std::vector<std::unique_ptr<grpc::Server>> servers;
  std::map<std::string, int> ports;
  CbService cb, cb_min, cb_streams;
  SyncService sync, sync_opt;
  AsyncServer async;
  auto add = [&](const std::string& name, grpc::Service* s, Opts o) {
    if (!only.empty() && ("," + only).find("," + name) == std::string::npos) return;
    int port = 0;
    servers.push_back(Build(s, &port, o));
    ports[name] = port;
  };
  httplib::Server http;
  std::thread http_thread;
  if (connect.empty()) {
  add("cb", &cb, {});
  add("cbmin", &cb_min, {.minimal = true});
  add("cbstreams", &cb_streams, {.max_streams = 1});
  add("sync", &sync, {});
  add("syncopt", &sync_opt, {.sync_cqs = 1, .sync_min = 1, .sync_max = 1});
  if (only.empty() || ("," + only).find(",async") != std::string::npos) {
    int port = 0;
    servers.push_back(Build(&async.service, &port, {}, &async.cq));
    ports["async"] = port;
    async.thread = std::thread([&] { if (async.lf) async.LoopLF(true); else async.Loop(); });
    if (async.lf) async.more.emplace_back([&] { async.LoopLF(false); });
    if (async.worker_mode) async.worker = std::thread([&] { async.Work(); });
    for (int i = 1; i < (getenv("ASYNC_THREADS") ? atoi(getenv("ASYNC_THREADS")) : 1); ++i)
      async.more.emplace_back([&] { async.Loop(false); });
  }
  // The HTTP do-nothing GET for reference (cpp-httplib, as ebb's HTTP front end).
  http.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  const int http_port = http.bind_to_any_port("127.0.0.1");
  http_thread = std::thread([&] { http.listen_after_bind(); });
  ports["http"] = http_port;
  if (serve) {
    for (auto& [k, v] : ports) std::printf("%s=%d,", k.c_str(), v);
    std::printf("\n");
    std::fflush(stdout);
    char buf[16];
    while (std::fread(buf, 1, sizeof buf, stdin) > 0) {
    }
    std::_Exit(0);
  }
  } else {
    for (size_t at = 0; at < connect.size();) {
      size_t comma = connect.find(',', at);
      if (comma == std::string::npos) comma = connect.size();
      std::string item = connect.substr(at, comma - at);
      size_t eq = item.find('=');
      if (eq != std::string::npos) ports[item.substr(0, eq)] = std::atoi(item.c_str() + eq + 1);
      at = comma + 1;
    }
  }
  httplib::Client hc("127.0.0.1", ports["http"]);
  hc.set_keep_alive(true);
  hc.set_tcp_nodelay(true);

  struct Kind {
    std::string name;
    std::function<bool()> call;
    std::vector<double> us;
  };
  std::vector<Kind> kinds;
  auto stub_for = [&](int port, grpc::ChannelArguments args) {
    auto ch = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args);
    return std::shared_ptr<V2::Stub>(V2::NewStub(ch));
  };
  auto live = [](std::shared_ptr<V2::Stub> stub) {
    return [stub] {
      grpc::ClientContext context;
      inference::ServerLiveResponse r;
      return stub->ServerLive(&context, {}, &r).ok() && r.live();
    };
  };
  auto want = [&](const std::string& k) { return only.empty() || ("," + only + ",").find("," + k + ",") != std::string::npos; };
  if (ports.count("cb")) {
    if (want("cb")) kinds.push_back({"cb", live(stub_for(ports["cb"], {}))});
    if (want("cb_aa")) kinds.push_back({"cb_aa", live(stub_for(ports["cb"], {}))});  // A/A: same server, own channel
    grpc::ChannelArguments minimal;
    minimal.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
    if (want("cb_cli_minimal")) kinds.push_back({"cb_cli_minimal", live(stub_for(ports["cb"], minimal))});
    grpc::ChannelArguments tuned;
    tuned.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    tuned.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    if (want("cb_cli_nobdp_noretry")) kinds.push_back({"cb_cli_nobdp_noretry", live(stub_for(ports["cb"], tuned))});
    if (want("cb_generic")) {
      auto ch = grpc::CreateChannel("127.0.0.1:" + std::to_string(ports["cb"]), grpc::InsecureChannelCredentials());
      auto gs = std::make_shared<grpc::GenericStub>(ch);
      kinds.push_back({"cb_generic", [gs] {
                         // GenericStub's async unary call, completed on a CQ the caller polls (as the sync stub does inside).
                         grpc::ClientContext context;
                         grpc::CompletionQueue cq;
                         grpc::ByteBuffer in, out;
                         grpc::Slice empty("");
                         in = grpc::ByteBuffer(&empty, 1);
                         auto call = gs->PrepareUnaryCall(&context, "/inference.GRPCInferenceService/ServerLive", in, &cq);
                         call->StartCall();
                         grpc::Status st;
                         call->Finish(&out, &st, reinterpret_cast<void*>(1));
                         void* tag;
                         bool ok;
                         cq.Next(&tag, &ok);
                         return ok && st.ok();
                       }});
    }
  }
  if (ports.count("cbmin") && want("cbmin")) kinds.push_back({"cbmin", live(stub_for(ports["cbmin"], {}))});
  if (ports.count("cbstreams") && want("cbstreams"))
    kinds.push_back({"cbstreams", live(stub_for(ports["cbstreams"], {}))});
  if (ports.count("sync") && want("sync")) kinds.push_back({"sync", live(stub_for(ports["sync"], {}))});
  if (ports.count("syncopt") && want("syncopt")) kinds.push_back({"syncopt", live(stub_for(ports["syncopt"], {}))});
  if (want("async")) kinds.push_back({"async", live(stub_for(ports["async"], {}))});
  if (want("async_aa")) kinds.push_back({"async_aa", live(stub_for(ports["async"], {}))});
  if (want("http")) kinds.push_back({"http", [&] {
                        auto r = hc.Get("/v2/health/live");
                        return r && r->status == 200;
                      }});

  if (serve) kinds.clear();
  std::mt19937 rng(42);
  std::vector<size_t> order(kinds.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  int failures = 0;
  const int warmup = 100;
  for (int r = 0; r < warmup + rounds; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      auto t0 = std::chrono::steady_clock::now();
      bool ok = kinds[i].call();
      auto t1 = std::chrono::steady_clock::now();
      if (!ok) ++failures;
      if (r >= warmup) kinds[i].us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  if (!serve) std::printf("{\"rounds\": %d, \"failures\": %d", rounds, failures);
  if (!serve) for (Kind& k : kinds) std::printf(", \"%s\": [%.1f, %.1f]", k.name.c_str(), Pct(k.us, 0.5), Pct(k.us, 0.99));
  if (!serve) std::printf("}\n");
  hc.stop();
  if (!connect.empty()) return failures ? 1 : 0;
  for (auto& s : servers) s->Shutdown(std::chrono::system_clock::now());
  if (async.cq) async.cq->Shutdown();
  if (async.thread.joinable()) async.thread.join();
  for (auto& t : async.more) t.join();
  if (async.worker.joinable()) {
    { std::lock_guard<std::mutex> l(async.mu); async.queue.push_back(nullptr); }
    async.cv.notify_one();
    async.worker.join();
  }
  http.stop();
  http_thread.join();
  return failures ? 1 : 0;
}
