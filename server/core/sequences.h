// server/core/sequences.h — operations that span requests: Triton's sequences.
//
// A client that sends one operation as several requests (a video job posting
// one frame per request, a remote tiler one tile per request) marks them with
// Triton's request parameters `sequence_id`, `sequence_start` and
// `sequence_end`, as tritonclient's infer(..., sequence_id=, sequence_start=,
// sequence_end=) sends them. ebb keeps MEMORY between the requests of a
// sequence, nothing else: no model state, no order, no batching (ebb is not a
// stateful-model server; each request's outputs depend on its inputs alone).
//
// The contract, the same on HTTP and gRPC (both front ends decode the
// parameters into InferRequest::sequence; the table is in the core):
//   * a sequence is open from its request with sequence_start to its request
//     with sequence_end (one request may carry both); its requests run as
//     runs of one operation that does not end, so none releases, and under
//     the idle release mode the idle release waits while any sequence is
//     open (IdleReleaseHold);
//   * the request with sequence_end runs as the operation's last run: it
//     releases memory at its end (under every mode but `never`), once;
//   * a sequence with no request for `idle_timeout` (--sequence-timeout-ms) is
//     ended by the server, and its memory released (on_timeout);
//   * at most `max_open` sequences are open at once (--max-sequences); a start
//     beyond that is kUnavailable (HTTP 503, gRPC UNAVAILABLE), naming it;
//   * ids as Triton has them: an unsigned integer (0 = no sequence) or a
//     non-empty string, 7 and "7" being different ids, per model and version.
//     A request without sequence_start for an id that is not open (never
//     started, ended, timed out) is refused as Triton refuses it, with
//     kInvalidArgument: "inference request for sequence 7 to model 'm' must
//     specify the START flag on the first request of the sequence". A start
//     for an id that is open restarts it, as Triton does ("the previous
//     sequence did not end before this sequence start"): logged, not refused.
//
// Thread safety: every method may be called concurrently. on_timeout is
// called on the table's own thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ebb/runtime.h"
#include "ebb/status.h"
#include "inference.h"

namespace ebb::server {

struct SequenceOptions {
  // Open sequences at once, over every model: each holds an entry (~200
  // bytes) and, under the idle release mode, keeps the memory it ran with.
  size_t max_open = 1024;
  // A sequence with no request for this long is ended and released. Triton
  // has no default (max_sequence_idle_microseconds is per model, 1 s in its
  // examples); a minute outlasts a slow client's pause between frames.
  std::chrono::milliseconds idle_timeout{60000};
};

class SequenceTable {
 public:
  // `hold` takes the idle release's hold for one open sequence (Runtime::HoldIdleRelease).
  using MakeHold = std::function<std::unique_ptr<IdleReleaseHold>()>;
  using OnTimeout = std::function<void(const std::string& model, const std::string& version, const SequenceId& id)>;

  SequenceTable(SequenceOptions options, MakeHold hold, OnTimeout on_timeout);
  // Stops the timeout thread; open sequences are dropped (their holds end).
  ~SequenceTable();
  SequenceTable(const SequenceTable&) = delete;
  SequenceTable& operator=(const SequenceTable&) = delete;

  // A request of a sequence is about to run. REQUIRES: control.in_sequence().
  // Errors: kInvalidArgument (no START for an id not open), kUnavailable
  // (a START beyond max_open).
  Status Enter(const std::string& model, const std::string& version, const SequenceControl& control);
  // Its run ended, whatever the outcome (REQUIRES: Enter succeeded): the
  // sequence's idle clock restarts; after the END request it is closed.
  void Leave(const std::string& model, const std::string& version, const SequenceControl& control);

  size_t open() const;
  const SequenceOptions& options() const { return options_; }

 private:
  struct Entry {
    std::string model, version;
    SequenceId id;
    int in_flight = 0;
    std::chrono::steady_clock::time_point last_seen;
    std::unique_ptr<IdleReleaseHold> hold;
  };
  static std::string Key(const std::string& model, const std::string& version, const SequenceId& id);
  void Reap();

  const SequenceOptions options_;
  const MakeHold make_hold_;
  const OnTimeout on_timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                  // guarded by mu_
  std::map<std::string, Entry> open_;  // guarded by mu_
  std::thread reaper_;                 // last: started once the rest is built
};

}  // namespace ebb::server
