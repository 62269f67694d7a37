// `ebb bench grpc`: what the gRPC front end costs, beside HTTP, in one run.
// The model and input of `bench http` (the small `tiny` model, one [1,64]
// FP32 input) go in-process through the run boundary, over HTTP/1.1 as JSON
// (keep-alive, one client), and over gRPC (one channel; the input in
// raw_input_contents, as Triton's clients send it; and in typed
// fp32_contents), interleaved in an order shuffled each round; and a request that does nothing on each
// (ServerLive, GET /v2/health/live), the floor of each transport.
// Overhead = median over the wire - median in-process. Reported: each transport's overhead, its
// floor (ServerLive, GET /v2/health/live) and the overhead beyond it, which is ebb's handling of the
// inference; the floor is the transport library's (tools/grpc_floor.cc). The tiny request's figures
// have no goal. With --size (an image-sized request) a raw loopback exchange of the gRPC request's
// and reply's bytes (RawExchange, bench_server.h; a plain socket, not an HTTP/2 stream) is timed
// among them; goal: the gRPC (raw_input_contents) overhead p50 <= 3x its p50.
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <algorithm>
#include <functional>
#include <thread>
#include <utility>

#include "bench_goals.h"
#include "bench_server.h"
#include "grpc/grpc_server.h"
#include "grpc/inference_api.h"
#include "grpc_service.grpc.pb.h"

namespace ebb::cli {

namespace {

// A gRPC message as it goes on the wire inside HTTP/2 DATA frames: a byte saying it is not
// compressed, its length (4 bytes, big-endian), the message. The HTTP/2 frames' own headers (9 bytes
// a frame) and the call's HEADERS are not counted.
std::string GrpcMessage(const google::protobuf::Message& message) {
  const std::string bytes = message.SerializeAsString();
  const auto n = static_cast<uint32_t>(bytes.size());
  const char prefix[5] = {0, static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                          static_cast<char>(n)};
  return std::string(prefix, sizeof prefix) + bytes;
}

}  // namespace

int BenchGrpc(const BenchOptions& options) {
  const int n = options.iterations ? options.iterations : 2000;
  std::unique_ptr<BenchServer> b = BenchServer::Start(options);
  if (!b) return 1;
  const std::string model = b->model_label;
  const std::string release = ReleaseModeName(b->release());  // ebb serve's (ServerPolicy)
  std::unique_ptr<server::AsyncService> inference = server::MakeGrpcInferenceService(b->service());
  server::GrpcServer grpc_server({.port = 0});
  grpc_server.AddService(inference.get(), server::kGrpcInferenceServiceName);
  if (Status st = grpc_server.Start(); !st.ok()) return Fail(st);
  const std::vector<float>& values = b->values;

  inference::ModelInferRequest raw, typed;
  for (inference::ModelInferRequest* r : {&raw, &typed}) {
    r->set_model_name(b->model);
    auto* tensor = r->add_inputs();
    tensor->set_name(b->input_name);
    tensor->set_datatype("FP32");
    for (int64_t d : b->shape) tensor->add_shape(d);
  }
  raw.add_raw_input_contents(values.data(), values.size() * sizeof(float));
  typed.mutable_inputs(0)->mutable_contents()->mutable_fp32_contents()->Add(values.begin(), values.end());

  httplib::Client client("127.0.0.1", b->http_port());
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
  // Replies as large as the outputs (gRPC's client takes at most 4 MiB by default: a 1024x1024 image
  // is 12 MiB), as Triton's own clients allow.
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(-1);
  channel_args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(grpc_server.port()),
                                           grpc::InsecureChannelCredentials(), channel_args);
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  auto grpc_infer = [&](const inference::ModelInferRequest& request) {
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    return stub->ModelInfer(&context, request, &response).ok() && response.raw_output_contents_size() == 1;
  };
  std::vector<double> local_us, http_us, raw_us, typed_us, live_us, http_live_us;
  int failures = 0;
  // The six kinds of request, in an order shuffled each round: a request that follows one over the
  // other transport finds that transport's threads asleep, so a fixed order would bias one kind.
  std::vector<TimedKind> kinds = {
      {&local_us, [&] { return b->session()->Run(b->inputs).ok(); }},
      {&http_us,
       [&] {
         auto res = client.Post(b->infer_path.c_str(), b->json_body, "application/json");
         return res && res->status == 200;
       }},
      {&raw_us, [&] { return grpc_infer(raw); }},
      {&typed_us, [&] { return grpc_infer(typed); }},
      {&live_us,
       [&] {
         grpc::ClientContext context;
         inference::ServerLiveResponse live;
         return stub->ServerLive(&context, {}, &live).ok();  // gRPC's own floor
       }},
      {&http_live_us,
       [&] {
         auto live = client.Get("/v2/health/live");  // HTTP's
         return live && live->status == 200;
       }},
  };
  // An image-sized request (--size): the raw request's and its reply's bytes, exchanged raw over loopback.
  std::unique_ptr<RawExchange> raw_exchange;
  if (options.size > 0) {
    grpc::ClientContext context;
    inference::ModelInferResponse reply;
    if (const grpc::Status st = stub->ModelInfer(&context, raw, &reply); !st.ok()) {
      return Fail(Internal("the gRPC request for the raw exchange's sizes failed: " + st.error_message()));
    }
    raw_exchange = RawExchange::Start(GrpcMessage(raw), GrpcMessage(reply));
    if (!raw_exchange) return 1;
    raw_exchange->AddKinds(&kinds);
  }
  failures += TimeShuffled(kinds, n);
  grpc_server.Shutdown();
  client.stop();  // close the keep-alive connection, or the server waits for it to time out
  b.reset();
  const double local_p50 = Median(local_us);
  const double http_overhead = Median(http_us) - local_p50, grpc_overhead = Median(raw_us) - local_p50;
  const double http_p99 = Percentile(http_us, 0.99) - local_p50, grpc_p99 = Percentile(raw_us, 0.99) - local_p50;
  // Each transport's floor (a request that does nothing) and what ebb's handling of an inference costs
  // beyond it: whether gRPC's overhead is the library's per-call cost or ebb's own.
  const double grpc_floor = Median(live_us), http_floor = Median(http_live_us);
  const double grpc_beyond_floor = Median(raw_us) - local_p50 - grpc_floor;
  const double http_beyond_floor = Median(http_us) - local_p50 - http_floor;
  // The tiny request's goals against HTTP's overhead are retired (issue 38); their figures stay.
  Goals goals;
  nlohmann::json figures = {{"model", model},
                            {"requests", n},
                            {"failures", failures},
                            {"release", release},
                            {"in_process_p50_us", local_p50},
                            {"http_p50_us", Median(http_us)},
                            {"http_p99_us", Percentile(http_us, 0.99)},
                            {"http_overhead_p50_us", http_overhead},
                            {"http_overhead_p99_us", http_p99},
                            {"grpc_raw_p50_us", Median(raw_us)},
                            {"grpc_raw_p99_us", Percentile(raw_us, 0.99)},
                            {"grpc_overhead_p50_us", grpc_overhead},
                            {"grpc_overhead_p99_us", grpc_p99},
                            // The retired goals' values: gRPC's overhead over HTTP's (JSON).
                            {"grpc_overhead_over_http_p50", grpc_overhead / http_overhead},
                            {"grpc_overhead_over_http_p99", grpc_p99 / http_p99},
                            {"grpc_typed_p50_us", Median(typed_us)},
                            {"grpc_server_live_p50_us", grpc_floor},
                            {"http_health_live_p50_us", http_floor},
                            {"grpc_floor_over_http_floor", grpc_floor / http_floor},
                            {"grpc_overhead_beyond_floor_p50_us", grpc_beyond_floor},
                            {"http_overhead_beyond_floor_p50_us", http_beyond_floor}};
  if (raw_exchange) {
    const double raw_p50 = raw_exchange->p50_us();
    figures["raw_exchange"] = raw_exchange->Figures();
    figures["grpc_overhead_over_raw"] = grpc_overhead / raw_p50;
    goals.AtMost("grpc_raw_overhead_at_most_3x_raw", grpc_overhead / raw_p50, 3,
                 "gRPC (raw_input_contents) overhead p50 over the run / p50 of a raw loopback exchange of its bytes");
  }
  return goals.Finish(figures, failures ? 1 : 0);
}

}  // namespace ebb::cli
