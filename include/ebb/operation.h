// ebb/operation.h — a whole piece of work made of several runs, released once.
//
// An Operation owns the count of its runs and marks which run ends it, so
// callers never pass the flag by hand. It is a planned list of steps; each
// step runs one session on inputs it builds when its turn comes (so a step
// can crop a tile, or take the previous model's output). The run boundary
// releases memory exactly once, after the final run: the last tile of the
// last frame. (Precisely: a run releases when no later run of the operation
// uses a session that shares an arena with it — with one session, or with the
// shared CPU arena, that is the very last run.)
//
// Between runs the operation checks its stop token: a cancelled operation
// stops with kCancelled and gives its arena memory back at once through
// Runtime::Trim(). A failed run stops it with that run's error; memory is
// given back the same way, and the session follows the run boundary's rules
// (dropped on resource exhaustion, kept otherwise).
//
// An operation whose later steps depend on an earlier step's outputs (OCR:
// the detector's boxes decide how many classifier and recogniser runs follow)
// grows while it runs: a step added with `may_add_steps` may call AddStep()
// from its TakeOutputs, and those steps run right after it, before the steps
// planned already. Such a step never ends the operation itself (what follows
// it is unknown when it runs); when it turns out to be the last, Execute()
// gives the memory back after it through Runtime::Trim() (when its runs release
// under ReleaseMode::kOperationEnd, the only mode that releases at an end; see
// OperationReleaseMode: under the default kIdle an operation's runs do).
//
// Under an idle policy, the Runtime's idle release waits while an operation runs
// (Runtime::HoldIdleRelease), so that a release armed by single runs made
// before it does not shrink the arena between its runs.
//
// Thread safety: one Operation is executed by one thread; different
// operations may run concurrently on the same sessions.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "ebb/runtime.h"
#include "ebb/session.h"

namespace ebb {

struct Progress {
  int done = 0;   // runs finished
  int total = 0;  // runs planned
};

struct OperationOptions {
  // Called on the executing thread after every run.
  std::function<void(const Progress&)> on_progress;
  // Checked before every run; a stop request cancels the operation.
  std::stop_token stop;
  // Sees every run's record (release flags, timing).
  const RunObserver* observer = nullptr;
  // Whether this operation's last run ends the caller's whole operation, and
  // so releases. false: more of it comes later (the server's open sequence of
  // requests), and nothing is released at this one's end.
  bool ends_operation = true;
  // Passed to every run as RunFlags::release; unset: OperationReleaseMode's (the
  // policy's mode, with kIdle as kOperationEnd: an operation releases at its end).
  std::optional<ReleaseMode> release;
};

class Operation {
 public:
  // Builds one step's inputs (called when the step's turn comes).
  using MakeInputs = std::function<Result<std::vector<NamedTensor>>()>;
  // Receives one step's outputs.
  using TakeOutputs = std::function<Status(std::vector<NamedTensor>)>;

  // REQUIRES: `runtime` outlives the operation.
  Operation(Runtime& runtime, OperationOptions options);

  // Appends a step. `outputs` selects model outputs (empty = all). Called
  // from the TakeOutputs of a step added with `may_add_steps`, it inserts the
  // step after that one (and after the steps it added before).
  void AddStep(std::shared_ptr<Session> session, MakeInputs make_inputs, TakeOutputs take_outputs,
               std::vector<std::string> outputs = {}, bool may_add_steps = false);

  int step_count() const { return static_cast<int>(steps_.size()); }

  // Runs every step in order. Returns OK, kCancelled, or the first error.
  // REQUIRES: called once.
  Status Execute();

  // Runs finished by Execute() so far.
  int runs_done() const { return done_; }

 private:
  struct Step {
    std::shared_ptr<Session> session;
    MakeInputs make_inputs;
    TakeOutputs take_outputs;
    std::vector<std::string> outputs;
    bool may_add_steps = false;
  };
  // Whether step i ends the operation for its arenas, as far as planned now.
  bool EndsForArenas(size_t i) const;
  Status Abort(Status status);

  Runtime& runtime_;
  OperationOptions options_;
  std::vector<Step> steps_;
  int done_ = 0;
  // While a may_add_steps step takes its outputs: where AddStep inserts; -1 otherwise.
  std::ptrdiff_t insert_at_ = -1;
};

// --- An operation the caller drives run by run --------------------------------
//
// A ScopedOperation is an operation whose runs are not planned as steps: its
// caller makes each run as it goes (a binding's `with runtime.operation()`
// block, a loop over frames read one at a time), then ends it. Every binding
// wraps this one state machine (the C API's ebb_operation_t, and through it
// Python and Java).
//
// Release: with planned_runs > 0 the planned last run carries the release
// itself (RunFlags::ends_operation), as a planned Operation's does (needed
// where a trim cannot shrink an arena at once: per-session arenas, CUDA); with
// planned_runs == 0 no run releases and End() gives the memory back through
// Runtime::Trim (when its runs release under ReleaseMode::kOperationEnd, the only
// mode that releases at an end, as they do under the default kIdle: see
// OperationReleaseMode; nothing when no run was made or a run already released).
// options.ends_operation == false: nothing is released at the end either.
//
// Ending early: before every run options.stop is checked; a stop request ends
// the operation with kCancelled. A failed run ends it with that run's error,
// and Abandon() ends it for a failure of the caller's own (an exception leaving
// its block). Each gives the memory back at once (Runtime::Trim), as a failed
// Operation does. After any end, Run() answers kFailedPrecondition, naming
// why it ended early. options.on_progress is called after every run with
// {runs done, planned_runs}; options.observer and options.release are passed to
// every run. While it is open, the Runtime's idle release waits, as during an
// Operation. The destructor ends an operation still open (End(), its error
// dropped).
//
// Thread safety: one thread at a time; different operations may run
// concurrently on the same sessions.
class ScopedOperation {
 public:
  // REQUIRES: runtime is not null; planned_runs >= 0 (0: not planned).
  ScopedOperation(std::shared_ptr<Runtime> runtime, int planned_runs, OperationOptions options = {});
  ~ScopedOperation();
  ScopedOperation(const ScopedOperation&) = delete;
  ScopedOperation& operator=(const ScopedOperation&) = delete;

  // One run of `session`: as Session::Run (the same errors) with `outputs`
  // selected (empty: all), keeping the arena for the next run unless this is
  // the planned last one. Errors also: kFailedPrecondition (the operation has
  // ended, or all planned runs are done; nothing is released), kCancelled (a
  // stop request came; the operation ends).
  Result<std::vector<NamedTensor>> Run(Session& session, const std::vector<NamedTensor>& inputs,
                                       std::vector<std::string> outputs = {});

  // Ends the operation: the memory goes back now (see above) unless a run
  // already gave it. Returns Runtime::Trim's status; OK and nothing done once
  // ended.
  Status End();
  // Ends the operation early for the caller's own failure: the memory goes
  // back now. Nothing once ended.
  void Abandon();

  int runs_done() const { return done_; }
  int planned_runs() const { return planned_; }
  // Whether its memory has been given back (by a run, an end, or an early end).
  bool released() const { return released_; }
  // Whether it has ended (End, a failure, a cancellation, Abandon).
  bool ended() const { return state_ != State::kOpen; }

 private:
  enum class State { kOpen, kEndedEarly, kEnded };
  // Ends the operation early because of `why`, giving the memory back; returns `why`.
  Status EndEarly(Status why);

  std::shared_ptr<Runtime> runtime_;
  int planned_;
  OperationOptions options_;
  State state_ = State::kOpen;
  int done_ = 0;
  bool released_ = false;
  std::string ended_;  // why it ended early: the status's text
  // While open: the idle release waits (no shrink between the operation's runs).
  std::unique_ptr<IdleReleaseHold> idle_hold_;
};

// --- Operations over images (tensors [N,C,H,W]) -----------------------------
// Image models here take their first input and give their first output.

// One run per frame, in order (frames may differ in size: an image sequence).
Result<std::vector<Tensor>> RunPerFrame(Runtime& runtime, const std::shared_ptr<Session>& session,
                                        const std::vector<Tensor>& frames, const OperationOptions& options = {});

// One run over all frames at once: they are stacked into one batch [N,C,H,W]
// (REQUIRES equal sizes), and the batch output is split back per frame.
Result<std::vector<Tensor>> RunJoint(Runtime& runtime, const std::shared_ptr<Session>& session,
                                     const std::vector<Tensor>& frames, const OperationOptions& options = {});

// Per frame, each model in turn: the output of stage k is the input of k+1.
Result<std::vector<Tensor>> RunPipeline(Runtime& runtime, const std::vector<std::shared_ptr<Session>>& stages,
                                        const std::vector<Tensor>& frames, const OperationOptions& options = {});

}  // namespace ebb
