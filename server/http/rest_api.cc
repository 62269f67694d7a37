#include "rest_api.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/model_configuration.h"
#include "protocol.h"

namespace ebb::server {
namespace {

using nlohmann::json;

HttpReply JsonReply(int status, const json& body) { return {status, body.dump(), "application/json", {}}; }

json Describe(const std::vector<TensorInfo>& infos) {
  json list = json::array();
  for (const TensorInfo& t : infos) {
    list.push_back({{"name", t.name}, {"datatype", DataTypeName(t.type)}, {"shape", t.shape}});
  }
  return list;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// For messages: a path cut short when long.
std::string Shown(std::string_view path) {
  constexpr size_t kMax = 120;
  return path.size() <= kMax ? std::string(path) : std::string(path.substr(0, kMax)) + "...";
}

// The path of a request target (query dropped) as percent-decoded segments; one trailing slash is
// ignored ("/v2/" is "/v2"). A segment is a view of the target, or of its decoded copy in
// `decoded` when it has a '%'. No endpoint has more than kMax segments: of a longer path only the
// first kMax are kept, and `count` still counts them all (no route matches it); every segment's
// escapes are checked.
struct Segments {
  static constexpr size_t kMax = 7;
  std::string_view at[kMax];
  std::string decoded[kMax];
  size_t count = 0;
  size_t size() const { return count; }
  std::string_view operator[](size_t i) const { return at[i]; }
};

Status SplitPath(std::string_view target, Segments* s) {
  std::string_view path = target.substr(0, target.find('?'));
  if (path.empty() || path[0] != '/') return InvalidArgument("the request target must be an absolute path");
  path.remove_prefix(1);
  if (!path.empty() && path.back() == '/') path.remove_suffix(1);
  size_t start = 0;
  while (true) {
    const size_t slash = std::min(path.find('/', start), path.size());
    const std::string_view raw = path.substr(start, slash - start);
    const size_t n = s->count++;
    if (raw.find('%') == std::string_view::npos) {
      if (n < Segments::kMax) s->at[n] = raw;
    } else {
      // Decoded where it is kept; checked wherever it is (a malformed escape is 400 in any segment).
      std::string ignored;
      std::string& out = n < Segments::kMax ? s->decoded[n] : ignored;
      for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] != '%') {
          out += raw[i];
        } else if (i + 2 < raw.size() && HexDigit(raw[i + 1]) >= 0 && HexDigit(raw[i + 2]) >= 0) {
          out += static_cast<char>(HexDigit(raw[i + 1]) * 16 + HexDigit(raw[i + 2]));
          i += 2;
        } else {
          return InvalidArgument("the request path has a malformed percent-encoding: " + Shown(path));
        }
      }
      if (n < Segments::kMax) s->at[n] = out;
    }
    if (slash == path.size()) return Status::Ok();
    start = slash + 1;
  }
}

using Endpoint = RestApi::Endpoint;
using Route = RestApi::Route;

bool Is(std::string_view segment, std::string_view name) { return segment == name; }

// /v2/models/{m}[/versions/{v}][/ready|/config|/stats|/infer].
Route MatchModel(const Segments& s) {
  size_t next = 3;
  std::string_view version;
  if (s.size() >= 5 && Is(s[3], "versions")) {
    version = s[4];
    next = 5;
  }
  auto route = [&](Endpoint endpoint, std::string_view method) {
    return Route{endpoint, method, std::string(s[2]), std::string(version)};
  };
  if (s.size() == next) return route(Endpoint::kModelMetadata, "GET");
  if (s.size() != next + 1) return {};
  if (Is(s[next], "infer")) return route(Endpoint::kInfer, "POST");
  if (Is(s[next], "ready")) return route(Endpoint::kModelReady, "GET");
  if (Is(s[next], "config")) return route(Endpoint::kModelConfig, "GET");
  if (Is(s[next], "stats")) return route(Endpoint::kModelStats, "GET");
  return {};
}

Route Match(const Segments& s) {
  if (s.size() == 1 && Is(s[0], "metrics")) return {Endpoint::kMetrics, "GET", "", ""};
  if (s.size() == 0 || !Is(s[0], "v2")) return {};
  if (s.size() == 1) return {Endpoint::kServerMetadata, "GET", "", ""};
  if (s.size() == 3 && Is(s[1], "health") && Is(s[2], "live")) return {Endpoint::kLive, "GET", "", ""};
  if (s.size() == 3 && Is(s[1], "health") && Is(s[2], "ready")) return {Endpoint::kReady, "GET", "", ""};
  if (s.size() == 3 && Is(s[1], "models") && Is(s[2], "stats")) return {Endpoint::kAllStats, "GET", "", ""};
  if (s.size() >= 3 && Is(s[1], "models")) return MatchModel(s);
  if (s.size() == 3 && Is(s[1], "repository") && Is(s[2], "index")) return {Endpoint::kIndex, "POST", "", ""};
  if (s.size() == 5 && Is(s[1], "repository") && Is(s[2], "models")) {
    if (Is(s[4], "load")) return {Endpoint::kLoad, "POST", std::string(s[3]), ""};
    if (Is(s[4], "unload")) return {Endpoint::kUnload, "POST", std::string(s[3]), ""};
  }
  return {};
}

json IndexEntry(const ModelInfo& m) {
  json entry = {{"name", m.name},         {"version", m.version},    {"state", PoolStateName(m.state)},
                {"charge_bytes", m.charge_bytes}, {"in_flight", m.in_flight}, {"pinned", m.pinned}};
  if (!m.reason.empty()) entry["reason"] = m.reason;
  return entry;
}

json DurationJson(const Duration& d) { return {{"count", d.count}, {"ns", d.ns}}; }

json NeedPointsJson(const std::vector<NeedPoint>& points) {
  json list = json::array();
  for (const NeedPoint& p : points) list.push_back({{"input_elements", p.input_elements}, {"bytes", p.bytes}});
  return list;
}

// Triton's statistics extension: one $model_stat, plus ebb's own figures under "ebb".
json StatsEntry(const ModelStatistics& s) {
  return {{"name", s.name},
          {"version", s.version},
          {"last_inference", s.last_inference_ms},
          {"inference_count", s.inference_count},
          {"execution_count", s.execution_count},
          {"inference_stats",
           {{"success", DurationJson(s.success)},
            {"fail", DurationJson(s.fail)},
            {"queue", DurationJson(s.queue)},
            {"compute_input", DurationJson(s.compute_input)},
            {"compute_infer", DurationJson(s.compute_infer)},
            {"compute_output", DurationJson(s.compute_output)},
            {"cache_hit", DurationJson({})},
            {"cache_miss", DurationJson({})}}},
          {"batch_stats", json::array()},
          {"ebb",
           {{"state", s.state},
            {"releases", s.releases},
            {"loads", s.loads},
            {"charge_bytes", s.charge_bytes},
            {"transient_peak_bytes", s.transient_peak_bytes},
            {"need_points", NeedPointsJson(s.need_points)},
            {"arena_need_points", NeedPointsJson(s.arena_need_points)},
            {"predicted_need_bytes", s.predicted_need_bytes},
            {"predicted_arena_need_bytes", s.predicted_arena_need_bytes},
            {"reserved_bytes", s.reserved_bytes},
            {"waiting_for_memory", s.waiting_for_memory},
            {"out_of_memory", s.out_of_memory}}}};
}

// The body of a repository request: empty, or a JSON object.
Result<json> OptionalJsonObject(std::string_view body, const char* what) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return json::object();
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(std::string("the ") + what + " request body must be a JSON object");
  return j;
}

// {"parameters": {...}} of a load or unload request, typed.
Result<Parameters> RepositoryParameters(std::string_view body, const char* what) {
  Result<json> j = OptionalJsonObject(body, what);
  if (!j.ok()) return j.status();
  Parameters parameters;
  const auto it = j->find("parameters");
  if (it == j->end()) return parameters;
  if (!it->is_object()) return InvalidArgument(std::string("the ") + what + " request's 'parameters' must be an object");
  for (const auto& [key, value] : it->items()) {
    if (value.is_boolean()) {
      parameters[key] = value.get<bool>();
    } else if (value.is_number_integer() &&
               !(value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()})) {
      parameters[key] = value.get<int64_t>();
    } else if (value.is_number()) {
      parameters[key] = value.get<double>();
    } else if (value.is_string()) {
      parameters[key] = value.get<std::string>();
    } else if (key == "config" && value.is_object()) {
      parameters[key] = value.dump();  // a configuration sent as an object rather than a string
    } else {
      return InvalidArgument(std::string(what) + " parameter '" + key + "' must be a bool, a number or a string");
    }
  }
  return parameters;
}

}  // namespace

std::optional<std::string_view> HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoreCase(key, name)) return value;
  }
  return std::nullopt;
}

Result<std::optional<std::string_view>> HttpRequest::SingleHeader(std::string_view name) const {
  std::optional<std::string_view> found;
  for (const auto& [key, value] : headers) {
    if (!EqualsIgnoreCase(key, name)) continue;
    if (found && *found != value) {
      return InvalidArgument("the header " + std::string(name) + " is sent twice with different values");
    }
    found = value;
  }
  return found;
}

HttpReply ErrorReply(int status, std::string_view message) {
  return {status, EncodeError(message), "application/json", {}};
}

size_t HttpReply::body_size() const {
  size_t size = body.size();
  for (std::string_view piece : tail) size += piece.size();
  return size;
}

HttpReply ReplyFor(const Status& status) {
  int code = 500;
  switch (status.code()) {
    case StatusCode::kOk: code = 200; break;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition: code = 400; break;
    case StatusCode::kNotFound: code = 404; break;
    case StatusCode::kUnavailable:
    case StatusCode::kResourceExhausted:
    case StatusCode::kCancelled: code = 503; break;
    case StatusCode::kInternal: code = 500; break;
  }
  return ErrorReply(code, status.message());
}

RestApi::Route RestApi::Find(const HttpRequest& request) {
  Segments segments;
  if (Status st = SplitPath(request.target, &segments); !st.ok()) {
    Route route;
    route.error = std::move(st);
    return route;
  }
  return Match(segments);
}

RestApi::Kind RestApi::KindOf(const HttpRequest& request, const Route& route) {
  if (request.method != route.method) return Kind::kControl;  // 404, 405, a malformed target
  if (route.endpoint == Endpoint::kInfer) return Kind::kInference;
  if (route.endpoint == Endpoint::kLoad || route.endpoint == Endpoint::kUnload) return Kind::kRepository;
  return Kind::kControl;
}

bool RestApi::RunsAtOnce(const HttpRequest& request, Route* route, std::chrono::nanoseconds limit) {
  if (request.method != "POST" || route->endpoint != Endpoint::kInfer) return false;
  return service_.RunsAtOnce(route->model, route->version, limit, &route->resolved);  // names it only when true
}

HttpReply RestApi::Handle(const HttpRequest& request, const Route& route) {
  if (!route.error.ok()) return ReplyFor(route.error);
  auto shown = [&] { return std::string(request.method) + " " + Shown(request.target); };  // for an error only
  if (route.endpoint == Endpoint::kNone) return ErrorReply(404, "no such endpoint: " + shown());
  const bool head = request.method == "HEAD" && route.method == "GET";
  if (request.method != route.method && !head) {
    HttpReply reply = ErrorReply(405, "method not allowed: " + shown() + " (allowed: " + std::string(route.method) + ")");
    reply.headers.emplace_back("Allow", route.method);
    return reply;
  }
  InferenceService& s = service_;
  switch (route.endpoint) {
    case Endpoint::kNone: break;
    case Endpoint::kLive: return JsonReply(200, {{"live", s.Live()}});
    case Endpoint::kReady: return JsonReply(s.Ready() ? 200 : 503, {{"ready", s.Ready()}});
    case Endpoint::kServerMetadata: {
      const ServerMetadata m = s.Metadata();
      return JsonReply(200, {{"name", m.name}, {"version", m.version}, {"extensions", m.extensions}});
    }
    case Endpoint::kMetrics: return {200, s.RenderMetrics(), "text/plain; version=0.0.4; charset=utf-8", {}};
    case Endpoint::kModelMetadata: {
      Result<ModelMetadata> m = s.DescribeModel(route.model, route.version);
      if (!m.ok()) return ReplyFor(m.status());
      return JsonReply(200, {{"name", m->name},
                             {"versions", m->versions},
                             {"platform", m->platform},
                             {"inputs", Describe(m->inputs)},
                             {"outputs", Describe(m->outputs)}});
    }
    case Endpoint::kModelReady: {
      Result<bool> ready = s.ModelReady(route.model, route.version);
      if (!ready.ok()) return ReplyFor(ready.status());
      return JsonReply(*ready ? 200 : 400, {{"name", route.model}, {"ready", *ready}});
    }
    case Endpoint::kModelConfig: {
      Result<ModelConfiguration> c = s.Configuration(route.model, route.version);
      if (!c.ok()) return ReplyFor(c.status());
      return {200, ModelConfigurationToJson(*c), "application/json", {}};
    }
    case Endpoint::kModelStats:
    case Endpoint::kAllStats: {
      Result<std::vector<ModelStatistics>> stats = s.Statistics(route.model, route.version);
      if (!stats.ok()) return ReplyFor(stats.status());
      json list = json::array();
      for (const ModelStatistics& m : *stats) list.push_back(StatsEntry(m));
      return JsonReply(200, {{"model_stats", list}});
    }
    case Endpoint::kInfer: return Infer(route, request);
    case Endpoint::kIndex: {
      Result<json> body = OptionalJsonObject(request.body, "repository index");
      if (!body.ok()) return ReplyFor(body.status());
      const auto ready = body->find("ready");
      if (ready != body->end() && !ready->is_boolean()) return ErrorReply(400, "'ready' must be true or false");
      json list = json::array();
      for (const ModelInfo& m : s.Index(ready != body->end() && ready->get<bool>())) list.push_back(IndexEntry(m));
      return JsonReply(200, list);
    }
    case Endpoint::kLoad:
    case Endpoint::kUnload: {
      const bool load = route.endpoint == Endpoint::kLoad;
      Result<Parameters> parameters = RepositoryParameters(request.body, load ? "load" : "unload");
      if (!parameters.ok()) return ReplyFor(parameters.status());
      Status st = load ? s.Load(route.model, *parameters) : s.Unload(route.model, *parameters);
      if (!st.ok()) return ReplyFor(st);
      return JsonReply(200, json::object());
    }
  }
  return ErrorReply(500, "unrouted endpoint");
}

HttpReply RestApi::Infer(const Route& route, const HttpRequest& request) {
  // What the decoder reads and leaves, behind one reference: a std::function holds a functor of two
  // pointers without an allocation.
  struct Decoding {
    const HttpRequest& request;
    BinaryOutputs binary;
  } decoding{request, {}};
  const ModelRepository::Route* resolved = route.resolved.name.empty() ? nullptr : &route.resolved;
  Result<InferResponse> response = service_.Infer(route.model, route.version, [this, &decoding]() -> Result<InferRequest> {
    const HttpRequest& request = decoding.request;
    std::optional<size_t> json_length;
    Result<std::optional<std::string_view>> header = request.SingleHeader(kInferenceHeaderContentLength);
    if (!header.ok()) return header.status();
    if (*header) {
      Result<size_t> parsed = ParseHeaderContentLength(**header);
      if (!parsed.ok()) return parsed.status();
      json_length = *parsed;
    }
    // The body outlives the request's tensors (it lives until Handle returns), so binary inputs
    // are used where they lie in it.
    Result<RestInferRequest> parsed = ParseInferRequest(
        request.body, json_length, {.max_input_elements = service_.options().max_input_elements, .borrow_binary = true});
    if (!parsed.ok()) return parsed.status();
    decoding.binary = std::move(parsed->binary);
    parsed->request.reply_bytes = [&binary = decoding.binary](const NamedTensor& output) {
      return ReplyTextBytes(output, binary);
    };
    return std::move(parsed->request);
  }, request.cancelled, resolved);
  if (!response.ok()) return ReplyFor(response.status());
  EncodedResponse encoded = EncodeInferResponse(*response, decoding.binary);
  HttpReply reply{200, std::move(encoded.body), "application/json", {}};
  reply.memory = std::move(response->memory);  // until the reply has gone (its text, its outputs)
  if (encoded.header_length) {
    reply.content_type = "application/octet-stream";
    reply.headers.emplace_back(std::string(kInferenceHeaderContentLength), std::to_string(*encoded.header_length));
  }
  if (!encoded.binary.empty()) {
    // The reply holds the response: its binary outputs are sent from the tensors themselves (their
    // buffers stay where they are when the response moves).
    reply.tail = std::move(encoded.binary);
    reply.tail_owner = std::make_shared<const InferResponse>(std::move(response).value());
  }
  return reply;
}

}  // namespace ebb::server
