// server/http/http_server.h — the HTTP/1.1 transport of `ebb serve`.
//
// Accepts connections, frames HTTP/1.1 requests and hands each one to the
// RestApi (server/http/rest_api.h), which does everything else. The HTTP
// library (cpp-httplib) is hidden behind a pimpl: no other file includes it.
// Connections are served by a pool of HTTP threads (slow or vanished clients
// occupy only one of those, up to the read/write timeouts); inference itself
// is bounded by the core's admission queue.
//
// Lifecycle: Bind() once, then Serve() on one thread until Stop() is called
// from another (Stop lets in-flight requests finish; Serve then returns).
// Thread safety: Stop() may be called from any thread; the rest from one.
#pragma once

#include <memory>
#include <string>

#include "ebb/status.h"
#include "rest_api.h"

namespace ebb::server {

struct HttpOptions {
  std::string host = "127.0.0.1";  // loopback unless asked otherwise
  int port = 8000;                  // 0 picks a free port
  size_t threads = 32;              // connection threads
  size_t max_body_bytes = 256u << 20;
  int read_timeout_s = 10;          // a slow client is dropped after this
  int write_timeout_s = 10;
};

class HttpServer {
 public:
  // REQUIRES: `api` outlives the server.
  HttpServer(RestApi& api, HttpOptions options);
  ~HttpServer();

  // Binds the listening socket. Errors: kUnavailable (address in use, ...).
  Status Bind();
  // The bound port (after Bind).
  int port() const;
  // Serves until Stop(); returns once in-flight requests have finished.
  void Serve();
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ebb::server
