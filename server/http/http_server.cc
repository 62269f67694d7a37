#include "http_server.h"

#include <httplib.h>

#include "protocol.h"

namespace ebb::server {

struct HttpServer::Impl {
  RestApi& api;
  HttpOptions options;
  httplib::Server http;
  int port = 0;

  Impl(RestApi& a, HttpOptions o) : api(a), options(std::move(o)) {}

  void Handle(const httplib::Request& req, httplib::Response& res) {
    HttpRequest request{req.method, req.target, {}, req.body};
    for (const auto& [key, value] : req.headers) request.headers.emplace_back(key, value);
    HttpReply reply = api.Handle(request);
    res.status = reply.status;
    for (const auto& [k, v] : reply.headers) res.set_header(k, v);
    res.set_content(std::move(reply.body), reply.content_type);
  }

  void Route() {
    // Every request goes to the RestApi, which routes by method and path itself.
    auto all = [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); };
    http.Get(".*", all);
    http.Post(".*", all);
    http.Put(".*", all);
    http.Delete(".*", all);
    http.Patch(".*", all);
    http.Options(".*", all);

    // Errors the HTTP library answers itself (malformed request, body too
    // large) get the protocol's JSON error body too.
    const size_t limit = options.max_body_bytes;
    http.set_error_handler([limit](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      std::string message = "HTTP error " + std::to_string(res.status) + " for " + req.method + " " + req.path;
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

HttpServer::HttpServer(RestApi& api, HttpOptions options) : impl_(std::make_unique<Impl>(api, std::move(options))) {
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
