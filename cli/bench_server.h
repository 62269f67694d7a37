// The in-process server both transport benchmarks (`bench http`, `bench grpc`)
// measure: the core with one small model loaded (under `ebb serve`'s release), the REST front end on a free
// loopback port, and the benchmark's input (one FP32 tensor of 0.5, dynamic
// dimensions 1) as tensors and as a KServe JSON body.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "core/service.h"
#include "http/http_server.h"

namespace ebb::cli {

class BenchServer {
 public:
  // nullptr (the error printed) on failure. `--model` defaults to `tiny`; a
  // model file outside a model folder is served from a temporary repository.
  static std::unique_ptr<BenchServer> Start(const BenchOptions& options);
  ~BenchServer();  // stops the HTTP server

  server::InferenceService& service() { return *service_; }
  int http_port() const { return http_->port(); }
  const std::shared_ptr<Session>& session() const { return handle_->session(); }
  // The runtime's release mode: `ebb serve`'s (cli/common.h, ServerPolicy), idle unless --policy sets one.
  ReleaseMode release() const { return release_; }

  std::string model;        // its name in the server's repository
  std::string model_label;  // the name to report
  std::string input_name;
  Shape shape;
  std::vector<float> values;
  std::vector<NamedTensor> inputs;  // for in-process runs
  std::string json_body;            // the KServe JSON request
  // The same request as Triton's HTTP client sends it by default: the input's bytes after a JSON
  // header (Inference-Header-Content-Length), the outputs asked for as binary data.
  std::string binary_body;
  size_t binary_header_length = 0;
  std::string infer_path;           // /v2/models/<model>/infer
  std::string repository_root;      // the folder the server's repository is

 private:
  ReleaseMode release_ = ReleaseMode::kIdle;
  std::unique_ptr<Runtime> runtime_;
  std::unique_ptr<server::InferenceService> service_;
  std::unique_ptr<server::RestApi> api_;
  std::unique_ptr<server::HttpServer> http_;
  std::thread serving_;
  std::optional<server::ModelHandle> handle_;  // holds the model for in-process runs
  std::filesystem::path temp_dir_;             // removed at the end when set
};

// A kind of request the transport benchmarks time: where its times (microseconds) go, and the
// request itself (true: it succeeded).
using TimedKind = std::pair<std::vector<double>*, std::function<bool()>>;

// Sends every kind warmup + rounds times, in an order shuffled each round (a fixed seed), so that
// no kind always follows the same one; the warm-up rounds' times are not kept. Returns the
// requests that failed, warm-up included.
int TimeShuffled(const std::vector<TimedKind>& kinds, int rounds, int warmup = 50);

// The baseline a transport's overhead is compared with when the request is image-sized (`--size`): a
// raw loopback exchange of the same bytes. A thread on 127.0.0.1 reads exactly the request's bytes
// and writes exactly the reply's back; the client sends the one and reads the other on one persistent
// connection (TCP_NODELAY, as the benchmarks' clients). No framing, no parsing: what moving those
// bytes both ways over loopback costs. Timed twice, as two interleaved kinds (A and A'), for an A/A
// figure. Not thread-safe: one client.
class RawExchange {
 public:
  // `request` and `reply`: the bytes the transport's request and reply put on the wire. nullptr (the
  // error printed) when the loopback socket cannot be set up.
  static std::unique_ptr<RawExchange> Start(std::string request, std::string reply);
  ~RawExchange();  // closes the connection and joins the thread

  // Appends the two kinds (A, A') that time an exchange, for TimeShuffled.
  void AddKinds(std::vector<TimedKind>* kinds);
  double p50_us() const { return Median(times_us_); }
  // {"request_bytes", "reply_bytes", "p50_us", "p99_us", "again_p50_us", "aa_ratio" (A' p50 / A p50)}.
  nlohmann::json Figures() const;

 private:
  struct Connection;  // the sockets and the server thread (bench_raw_exchange.cc)
  RawExchange() = default;
  bool Exchange();  // one round trip; false on a socket error

  std::string request_, reply_;
  std::string reply_read_;  // where the client reads the reply
  std::unique_ptr<Connection> connection_;
  std::vector<double> times_us_, again_us_;
};

// The client `bench http` judges its binary form's goal with: a lean HTTP/1.1 client over one
// persistent loopback connection (Boost.Asio's blocking socket, TCP_NODELAY, as RawExchange's client),
// so that the comparison with the raw exchange charges the server, not a general client's own work
// (cpp-httplib reads a reply in small chunks into a fresh string and parses every header: measured,
// docs/performance.md). It writes the request's bytes as given, reads the status line and headers up
// to CRLFCRLF, takes Content-Length and reads the body into a buffer reused from one reply to the
// next. Not thread-safe: one request at a time.
class LeanHttpClient {
 public:
  // Connects to 127.0.0.1:port; `request`: a whole HTTP/1.1 request (request line, headers, body)
  // that keeps the connection open. nullptr (the error printed) when it cannot connect.
  static std::unique_ptr<LeanHttpClient> Connect(int port, std::string request);
  ~LeanHttpClient();  // closes the connection

  // One request and its reply: true when the status is 200 and the reply has a Content-Length and an
  // Inference-Header-Content-Length header (the binary form's). After a failure the connection is
  // closed and every later call fails.
  bool Exchange();
  size_t reply_bytes() const { return reply_bytes_; }  // the last reply's, headers included

 private:
  struct Connection;  // the socket (bench_raw_exchange.cc)
  LeanHttpClient() = default;

  std::string request_;
  std::string reply_;  // reused: the headers, then the body after them
  size_t reply_bytes_ = 0;
  std::unique_ptr<Connection> connection_;
};

}  // namespace ebb::cli
