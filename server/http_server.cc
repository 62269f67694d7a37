#include "http_server.h"

#include <httplib.h>

namespace ebb::server {

struct HttpServer::Impl {
  InferenceService& service;
  HttpOptions options;
  httplib::Server http;
  int port = 0;

  Impl(InferenceService& s, HttpOptions o) : service(s), options(std::move(o)) {}

  static void Send(const HttpReply& reply, httplib::Response& res) {
    res.status = reply.status;
    for (const auto& [k, v] : reply.headers) res.set_header(k, v);
    res.set_content(reply.body, reply.content_type);
  }

  void Route() {
    auto get = [this](const char* pattern, std::function<HttpReply(const httplib::Request&)> handler) {
      http.Get(pattern, [handler](const httplib::Request& req, httplib::Response& res) { Send(handler(req), res); });
    };
    auto post = [this](const char* pattern, std::function<HttpReply(const httplib::Request&)> handler) {
      http.Post(pattern, [handler](const httplib::Request& req, httplib::Response& res) { Send(handler(req), res); });
    };
    InferenceService& s = service;
    get("/v2/health/live", [&s](const httplib::Request&) { return s.Live(); });
    get("/v2/health/ready", [&s](const httplib::Request&) { return s.Ready(); });
    get("/v2", [&s](const httplib::Request&) { return s.ServerMetadata(); });
    get("/metrics", [&s](const httplib::Request&) { return s.Metrics(); });
    get(R"(/v2/models/([^/]+)(?:/versions/[^/]+)?)", [&s](const httplib::Request& r) { return s.ModelMetadata(r.matches[1]); });
    get(R"(/v2/models/([^/]+)(?:/versions/[^/]+)?/ready)", [&s](const httplib::Request& r) { return s.ModelReady(r.matches[1]); });
    post(R"(/v2/models/([^/]+)(?:/versions/[^/]+)?/infer)", [&s](const httplib::Request& r) {
      std::optional<std::string> header_length;
      if (r.has_header("Inference-Header-Content-Length")) header_length = r.get_header_value("Inference-Header-Content-Length");
      return s.Infer(r.matches[1], r.body, header_length);
    });
    post("/v2/repository/index", [&s](const httplib::Request&) { return s.RepositoryIndex(); });
    post(R"(/v2/repository/models/([^/]+)/load)", [&s](const httplib::Request& r) { return s.LoadModel(r.matches[1]); });
    post(R"(/v2/repository/models/([^/]+)/unload)", [&s](const httplib::Request& r) { return s.UnloadModel(r.matches[1]); });

    // Errors the HTTP library answers itself (no route, body too large) get
    // the protocol's JSON error body too.
    const size_t limit = options.max_body_bytes;
    http.set_error_handler([limit](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string message = "HTTP error " + std::to_string(res.status) + " for " + req.method + " " + req.path;
      if (res.status == 404) message = "no such endpoint: " + req.method + " " + req.path;
      if (res.status == 400) message = "malformed HTTP request (a POST needs a Content-Length header)";
      if (res.status == 413) message = "request body is larger than the limit of " + std::to_string(limit) + " bytes";
      res.set_content(EncodeError(message), "application/json");
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      res.status = 500;
      res.set_content(EncodeError("internal error"), "application/json");
    });
  }
};

HttpServer::HttpServer(InferenceService& service, HttpOptions options)
    : impl_(std::make_unique<Impl>(service, std::move(options))) {
  const size_t threads = impl_->options.threads;
  impl_->http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl_->http.set_tcp_nodelay(true);  // small responses must not wait for delayed ACKs
  impl_->http.set_payload_max_length(impl_->options.max_body_bytes);
  impl_->http.set_read_timeout(impl_->options.read_timeout_s, 0);
  impl_->http.set_write_timeout(impl_->options.write_timeout_s, 0);
  impl_->Route();
}

HttpServer::~HttpServer() = default;

Status HttpServer::Bind() {
  const HttpOptions& o = impl_->options;
  int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port <= 0) return Unavailable("cannot listen on " + o.host + ":" + std::to_string(o.port) + " (address in use?)");
  impl_->port = port;
  return Status::Ok();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::Serve() { impl_->http.listen_after_bind(); }

void HttpServer::Stop() { impl_->http.stop(); }

}  // namespace ebb::server
