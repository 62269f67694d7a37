// server/core/inference.h — the typed requests and answers of the server core.
//
// Every front end (HTTP/REST, gRPC) decodes its wire format into these types
// and encodes its replies from them; the core (InferenceService) sees nothing
// else. Wire-only choices stay in their front end: which outputs a REST client
// wants as binary data, how a gRPC message carries raw contents.
//
// Thread safety: plain values.
// Ownership: tensors are owned (ebb::Tensor); a request's inputs are read in
// place by the run boundary, and a response's outputs belong to the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ebb/model_config.h"
#include "ebb/model_pool.h"
#include "ebb/run_need.h"
#include "ebb/session.h"
#include "ebb/tensor.h"

namespace ebb::server {

// A sequence id: an unsigned integer or a string (Triton's correlation id).
using SequenceId = std::variant<uint64_t, std::string>;
// The longest string sequence_id accepted, on every front end (1 KiB: a UUID is 36 bytes). The
// sequence table keeps each open id, and messages and logs quote it (clipped, status.h's Clip).
inline constexpr size_t kMaxSequenceIdBytes = 1024;

// 7, or the string itself: the id whole (the table's key is made of it).
std::string SequenceIdText(const SequenceId& id);
// As Triton writes it in its messages and logs: SequenceIdText clipped to 128 bytes.
std::string SequenceIdForMessage(const SequenceId& id);

// A request's sequence parameters, decoded. No id (absent, 0 or ""): not part
// of a sequence, and the flags mean nothing (as in Triton).
struct SequenceControl {
  std::optional<SequenceId> id;
  bool start = false;
  bool end = false;
  bool in_sequence() const { return id.has_value(); }
};
// What every front end builds from the parameters it decoded (`id` nullopt
// when sequence_id was absent): an id of 0 or "" is no sequence.
// Errors: kInvalidArgument for a string id longer than kMaxSequenceIdBytes.
Result<SequenceControl> MakeSequenceControl(std::optional<SequenceId> id, bool start, bool end);

// One inference request, decoded.
struct InferRequest {
  std::string id;                        // echoed back in the response; empty when not given
  std::vector<NamedTensor> inputs;       // in request order; names are unique
  std::vector<std::string> outputs;      // requested output names, in request order; empty = all
  std::optional<int64_t> keep_alive_ms;  // parameters.keep_alive (milliseconds; negative = never unload)
  // The classification extension: output name -> K. That output comes back as
  // BYTES "value:index[:label]", the top K per batch row (see classification.h).
  std::map<std::string, int64_t> classification;
  // parameters.sequence_id / sequence_start / sequence_end (sequences.h).
  SequenceControl sequence;
  // What the front end's reply takes for an output beyond the output's own bytes (JSON text), held
  // with the outputs until the reply goes (InferResponse::memory). Unset: nothing beyond them, the
  // reply sending the outputs' bytes from where they lie (HTTP's binary form, gRPC's raw contents).
  std::function<int64_t(const NamedTensor& output)> reply_bytes;
};

// parameters.keep_alive as every front end reads it: an integer of
// milliseconds, at most kMaxKeepAliveMs (365 days; ebb/model_config.h), a
// negative one meaning never unload. `ms` is the value when the wire held an
// integer that fits int64 (nullopt otherwise: a fraction, a string, a bool,
// an integer past int64); `as_sent` quotes what the client sent, for the
// message. Errors: kInvalidArgument naming the parameter and the range.
Result<int64_t> CheckKeepAlive(std::optional<int64_t> ms, std::string_view as_sent);

// Its answer: the outputs in the order requested (model order when all).
struct InferResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  std::vector<NamedTensor> outputs;
  // The outputs and the reply encoded from them, reserved against the memory budget until the
  // response goes (ModelPool::HoldMemory): they outlive the run's lease.
  MemoryHold memory;
};

// A request parameter as the protocols carry them (KServe: bool, int64,
// string; gRPC adds double and bytes, carried here as strings).
using Parameter = std::variant<bool, int64_t, double, std::string>;
using Parameters = std::map<std::string, Parameter>;

// What `GET /v2` and gRPC ServerMetadata report.
struct ServerMetadata {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
};

// What `GET /v2/models/{m}` and gRPC ModelMetadata report.
struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // the versions served
  std::string platform;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
};

// What `GET /v2/models/{m}/config` and gRPC ModelConfig report: Triton's model
// configuration (model_configuration.h writes and reads its JSON form) plus
// ebb's own fields.
struct ModelConfiguration {
  std::string name;
  std::string platform = "onnxruntime_onnx";
  std::string backend = "onnxruntime";
  enum class VersionPolicy { kLatest, kSpecific, kAll } version_policy = VersionPolicy::kLatest;
  std::vector<int64_t> versions;  // served (kSpecific lists them)
  int max_batch_size = 0;         // ebb models carry their own batch dimension in `dims`
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  std::string label_filename;     // "labels.txt" when the folder has one (it names every output's classes)
  // ebb's own:
  ModelConfig config;             // config.json (or the last load request's); device: the one in force
  bool config_from_request = false;
  bool config_file = false;       // the folder has a config.json (else the defaults are in force)
  int64_t charge_bytes = 0;       // the pool's measured charge of the default version
};

// Cumulative count and duration (Triton's StatisticDuration).
struct Duration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

// Statistics of one model version (Triton's ModelStatistics), counted in the
// core for every front end, so /metrics, REST and gRPC agree by construction.
struct ModelStatistics {
  std::string name;
  std::string version;
  uint64_t last_inference_ms = 0;  // milliseconds since the epoch; 0 = never
  uint64_t inference_count = 0;    // successful requests (no dynamic batching: one each)
  uint64_t execution_count = 0;    // successful model executions
  Duration success;         // whole requests that succeeded, from arrival to answer
  Duration fail;            // requests that failed after the model was found
  Duration queue;           // waiting for an inference worker (admission)
  Duration compute_input;   // decoding the request into input tensors
  Duration compute_infer;   // running the model (Session::Run, or the whole image operation)
  Duration compute_output;  // turning run outputs into the response (classification)
  // ebb's own:
  uint64_t releases = 0;            // runs that gave arena memory back (ebb_releases_total)
  int64_t charge_bytes = 0;         // the pool's measured charge
  int64_t transient_peak_bytes = 0; // largest operation peak seen (the arena/RSS peak a run needed)
  // Admission by memory: what its runs were measured to need by input size,
  // what its latest run was predicted to need (and reserved), what its runs in
  // flight hold, how many wait, how many ran out of memory (each raised it).
  std::vector<NeedPoint> need_points;        // memory (RSS)
  std::vector<NeedPoint> arena_need_points;  // the shared CPU arena
  int64_t predicted_need_bytes = 0;
  int64_t predicted_arena_need_bytes = 0;
  int64_t reserved_bytes = 0;
  int waiting_for_memory = 0;
  uint64_t out_of_memory = 0;
  uint64_t loads = 0;
  std::string state;                // READY, LOADING, UNAVAILABLE
};

}  // namespace ebb::server
