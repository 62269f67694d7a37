// server/http/rest_api.h — the KServe v2 REST API over the server core.
//
// RestApi turns one HTTP request, already framed by a transport
// (server/http/http_server.h), into one call of the core (InferenceService)
// and its answer into an HTTP reply. It routes by method and path, decodes and
// encodes bodies (server/http/protocol.h for inference), and is the one place
// where an ebb Status becomes an HTTP status (ReplyFor):
//   kInvalidArgument, kFailedPrecondition -> 400; kNotFound -> 404;
//   kUnavailable, kResourceExhausted, kCancelled -> 503; anything else -> 500;
// always with the body {"error": "<message>"}.
//
// Endpoints: GET /v2/health/live, /v2/health/ready, /v2, /metrics,
// /v2/models/stats, /v2/models/{m}[/versions/{v}][/ready|/config|/stats];
// POST /v2/models/{m}[/versions/{v}]/infer, /v2/repository/index (body empty
// or {"ready": bool}), /v2/repository/models/{m}/load and .../unload (body
// empty or {"parameters": {...}}). One trailing slash is ignored ("/v2/" is
// "/v2"). An unknown path is 404; a known path with the wrong method is 405.
//
// Thread safety: Handle() may be called concurrently.
// Ownership: the request's views must stay valid during Handle() (an
// inference's binary inputs are used where they lie in the body, not copied:
// ParseOptions::borrow_binary); the reply owns its body (its tail through
// tail_owner).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/service.h"

namespace ebb::server {

// A request as the transport framed it.
struct HttpRequest {
  std::string_view method;  // "GET", "POST", ...
  std::string_view target;  // the request target as sent: path (percent-encoded) and query
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  std::string_view body;
  // Whether the client went away (closed its connection) while the request is handled; set by
  // the transport, polled while an inference waits. Empty: never.
  std::function<bool()> cancelled;

  // The first header called `name` (ASCII case-insensitive), if any.
  std::optional<std::string_view> Header(std::string_view name) const;
  // A header that carries one value (a length): absent, or sent once, or repeated with the same
  // value. Errors: kInvalidArgument when copies disagree (which one counts would be a guess, and a
  // proxy and ebb could guess differently: the request smuggling of two Content-Lengths).
  Result<std::optional<std::string_view>> SingleHeader(std::string_view name) const;
};

struct HttpReply {
  int status = 200;
  std::string body;
  const char* content_type = "application/json";  // a literal (a computed string cannot dangle here)
  std::vector<std::pair<std::string, std::string>> headers;
  // The rest of the body, after `body`: views of memory that `tail_owner` holds (an inference's
  // binary outputs, where its run left them), for a transport to send as they are (scatter/gather
  // writes) instead of copying them into `body`.
  std::vector<std::string_view> tail;
  std::shared_ptr<const void> tail_owner;
  // The memory budget's hold on what the reply keeps (InferResponse::memory), released once it
  // has gone.
  MemoryHold memory;

  // The body's length: `body` and `tail`.
  size_t body_size() const;
};

// The one mapping from an ebb Status to an HTTP reply.
HttpReply ReplyFor(const Status& status);
// A reply with `status` and the body {"error": message}.
HttpReply ErrorReply(int status, std::string_view message);

class RestApi {
 public:
  // REQUIRES: `service` outlives the API.
  explicit RestApi(InferenceService& service) : service_(service) {}

  // Where a request goes, found from its method and target alone: its path split and
  // percent-decoded once, then matched against the endpoints. A transport finds it once and hands
  // it to KindOf, RunsAtOnce and Handle.
  enum class Endpoint {
    kNone,  // no such endpoint, or a malformed target (`error`)
    kLive,
    kReady,
    kServerMetadata,
    kMetrics,
    kModelMetadata,
    kModelReady,
    kModelConfig,
    kModelStats,
    kAllStats,
    kInfer,
    kIndex,
    kLoad,
    kUnload,
  };
  struct Route {
    Endpoint endpoint = Endpoint::kNone;
    std::string_view method;  // the one method the endpoint answers
    std::string model;
    std::string version;  // "" = not given
    Status error;         // a target that is not a path, or its malformed percent-encoding
    // An inference's model version as RunsAtOnce found it, when it said true: the request runs on
    // it (InferenceService::Infer's route). Empty (no name) otherwise.
    ModelRepository::Route resolved;
  };
  static Route Find(const HttpRequest& request);

  // REQUIRES: `route` is Find(request).
  HttpReply Handle(const HttpRequest& request, const Route& route);
  HttpReply Handle(const HttpRequest& request) { return Handle(request, Find(request)); }

  // What a request is to a transport that hands requests to threads: an inference (at most
  // InferencesAtOnce() handed off at once; more get Busy() at once), a repository change (load
  // and unload: as long as a model's load), or control (health, server and model metadata,
  // configuration, statistics, metrics, the repository index, and whatever gets an error reply:
  // quick, and never to wait behind inferences).
  enum class Kind { kInference, kRepository, kControl };
  static Kind KindOf(const HttpRequest& request, const Route& route);
  size_t InferencesAtOnce() const { return service_.InferencesAtOnce(); }
  // 503 {"error": "server busy: ..."}: the core's answer when its queue is full.
  HttpReply Busy() const { return ReplyFor(service_.Busy()); }
  // Whether the request is an inference that would start at once and take less than `limit`
  // (InferenceService::RunsAtOnce), for a transport that would then run it where it was framed.
  // When true, route->resolved is where the request runs (Handle with the same route uses it).
  bool RunsAtOnce(const HttpRequest& request, Route* route, std::chrono::nanoseconds limit);

 private:
  HttpReply Infer(const Route& route, const HttpRequest& request);

  InferenceService& service_;
};

}  // namespace ebb::server
