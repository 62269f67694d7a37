// ScopedOperation (ebb/operation.h): the operation a caller drives run by run, made with the
// library's own tools: RunFlags::ends_operation on a planned last run, or Runtime::Trim when the
// operation ends without one, as Operation does.
#include <string>
#include <utility>

#include "ebb/operation.h"

namespace ebb {

ScopedOperation::ScopedOperation(std::shared_ptr<Runtime> runtime, int planned_runs, OperationOptions options)
    : runtime_(std::move(runtime)),
      planned_(planned_runs),
      options_(std::move(options)),
      idle_hold_(runtime_->HoldIdleRelease()) {}

ScopedOperation::~ScopedOperation() { (void)End(); }

Status ScopedOperation::EndEarly(Status why) {
  state_ = State::kEndedEarly;
  idle_hold_.reset();
  ended_ = why.ToString();
  (void)runtime_->Trim();  // whatever the operation holds goes back now, not at a later operation
  released_ = true;
  return why;
}

Result<std::vector<NamedTensor>> ScopedOperation::Run(Session& session, const std::vector<NamedTensor>& inputs,
                                                      std::vector<std::string> outputs) {
  if (state_ != State::kOpen) {
    return FailedPrecondition(ended_.empty() ? "this operation has ended" : "this operation already ended: " + ended_);
  }
  if (planned_ > 0 && done_ >= planned_) {
    return FailedPrecondition("this operation planned " + std::to_string(planned_) +
                              " runs and all of them are done");
  }
  if (options_.stop.stop_requested()) {
    return EndEarly(Cancelled("operation cancelled after " + std::to_string(done_) + " runs"));
  }
  RunFlags flags;
  flags.ends_operation = options_.ends_operation && planned_ > 0 && done_ + 1 == planned_;
  flags.outputs = std::move(outputs);
  flags.observer = options_.observer;
  flags.release = OperationReleaseMode(runtime_->policy(), options_.release);
  Result<std::vector<NamedTensor>> out = session.Run(inputs, flags);
  if (!out.ok()) return EndEarly(out.status());
  ++done_;
  released_ = released_ || flags.ends_operation;
  if (options_.on_progress) options_.on_progress({done_, planned_});
  return out;
}

Status ScopedOperation::End() {
  if (state_ != State::kOpen) return Status::Ok();
  state_ = State::kEnded;
  idle_hold_.reset();
  // No run was marked last: the memory goes back now.
  if (!released_ && done_ > 0 && options_.ends_operation &&
      OperationReleaseMode(runtime_->policy(), options_.release) == ReleaseMode::kOperationEnd) {
    released_ = true;
    return runtime_->Trim();
  }
  return Status::Ok();
}

void ScopedOperation::Abandon() {
  if (state_ == State::kOpen) {
    (void)EndEarly(Cancelled("abandoned by its caller after " + std::to_string(done_) + " runs"));
  }
}

}  // namespace ebb
