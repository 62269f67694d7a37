// server/http/http_server.h — the HTTP/1.1 transport of `ebb serve`.
//
// Accepts connections, frames HTTP/1.1 requests (server/http/http_framing.h: strict RFC 9112,
// limits on header, target and body, chunked and gzip/deflate bodies) and hands each one to the
// RestApi (server/http/rest_api.h), which does everything else. The libraries (Boost.Asio for
// the event loop, Boost.Beast's parser for framing) are hidden behind a pimpl: no other file
// includes them.
//
// Threads: `io_threads` run the event loop: they accept, read, frame and write, and answer the
// health probes themselves. Every other request (inference and its decoding, load/unload,
// metrics, metadata) runs where it was framed when an event-loop turn is free (at most
// io_threads - 1 such requests at once, so one event-loop thread always stays free for the
// others and for health), or when it is quick (`quick_run_us`: a lone client's small inference
// that took less than that last time), else on one of `threads` worker threads. Both save the hop to a
// worker, which can cost a small inference more than its run (docs/performance.md). A request may wait in its turn (for an inference slot, for memory) as on a worker; it leaves
// when its client goes away (its socket is asked, as the waits poll). A connection owns no
// thread while it waits: idle, slow and many clients cost a socket and a few KiB each, within
// `max_connections` (one more is refused with 503).
//
// Deadlines per connection (a client that misses one gets 408, or is closed when idle):
//   idle (no request begun) idle_timeout_s | header header_timeout_s from its first byte |
//   body body_timeout_s from the end of the header | any read read_timeout_s without a byte |
//   a reply write_timeout_s. While a request runs there is no deadline.
// Memory: a request's body is held whole until it has been answered; the bodies held at once
// are bounded by the request byte budget (503 beyond), not by max_connections x max_body_bytes.
// That budget is the core's (InferenceService::request_bytes(), --max-body-bytes-in-flight),
// shared with the gRPC front end: it bounds the bytes held by both together.
//
// Lifecycle: Bind() once, then Serve() on one thread until Stop() is called from another.
// Stop() closes the listening socket and the idle connections, lets requests already received
// (and bodies being received) finish and be answered, then Serve() returns.
// Thread safety: Stop() may be called from any thread; the rest from one.
#pragma once

#include <memory>
#include <string>

#include "core/byte_budget.h"
#include "ebb/status.h"
#include "rest_api.h"

namespace ebb::server {

struct HttpOptions {
  std::string host = "127.0.0.1";  // loopback unless asked otherwise
  int port = 8000;                  // 0 picks a free port

  // Threads: workers run the requests that do work; a request waiting for admission holds one.
  // 32: more than --workers + a short queue, so that health and metadata stay answerable.
  size_t threads = 32;
  // Event-loop threads. One keeps up with tens of thousands of small requests a second. More
  // let io_threads - 1 requests at a time run without the hop to a worker: more throughput and a
  // lower median under many small requests, but asio's threads then wake each other on every
  // event, which costs a lone request ~10 us and, on 2 cores, the tail (docs/performance.md).
  size_t io_threads = 1;
  // A quick request runs on the event-loop thread that framed it, without the hop to a worker: an
  // inference from a lone client (no other connection dispatched one within 1 ms), when nothing
  // else is in flight, its model is loaded and its last request took less than this many
  // microseconds in the core (InferenceService::RunsAtOnce), with a body of at most 64 KiB. The event loop then waits for it, so this bounds (by the last
  // request) what one such request delays the other connections and the health probes. 0: never.
  size_t quick_run_us = 200;

  // Connections open at once; one more gets 503 and is closed. An idle one costs ~5 KiB (measured).
  size_t max_connections = 1024;
  // Request line plus header fields (431 beyond); the request target alone (414 beyond).
  size_t max_header_bytes = 16u << 10;
  size_t max_uri_bytes = 8u << 10;
  // One request's body after chunked decoding and decompression (413 beyond). The bodies held at
  // once are charged to the budget given to the server (ServiceOptions::max_request_bytes_in_flight).
  size_t max_body_bytes = 256u << 20;

  // Seconds. read: longest wait for the next bytes of a request begun; write: to send a reply;
  // header / body: the whole header from its first byte / the whole body from the header's end
  // (a client trickling bytes cannot hold a connection longer); idle: a keep-alive connection
  // with no request begun is closed after this (longer than the usual client pool idle times).
  int read_timeout_s = 10;
  int write_timeout_s = 10;
  int header_timeout_s = 10;
  int body_timeout_s = 60;
  int idle_timeout_s = 60;
};

class HttpServer {
 public:
  // Bodies are charged to `body_budget` as they arrive, and given back once answered.
  // REQUIRES: `api` and `body_budget` outlive the server.
  HttpServer(RestApi& api, HttpOptions options, ByteBudget& body_budget);
  ~HttpServer();

  // Binds the listening socket (and raises the soft limit on open files to what max_connections
  // needs). Errors: kUnavailable (address in use, ...), kInvalidArgument (bad options, or the
  // hard limit on open files is below what max_connections needs).
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
