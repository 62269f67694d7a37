#include "ebb/operation.h"

#include <cstddef>
#include <cstring>

namespace ebb {

Operation::Operation(Runtime& runtime, OperationOptions options) : runtime_(runtime), options_(std::move(options)) {}

void Operation::AddStep(std::shared_ptr<Session> session, MakeInputs make_inputs, TakeOutputs take_outputs,
                        std::vector<std::string> outputs, bool may_add_steps) {
  Step step{std::move(session), std::move(make_inputs), std::move(take_outputs), std::move(outputs), may_add_steps};
  if (insert_at_ >= 0) {
    steps_.insert(steps_.begin() + insert_at_++, std::move(step));
  } else {
    steps_.push_back(std::move(step));
  }
}

bool Operation::EndsForArenas(size_t i) const {
  if (steps_[i].may_add_steps) return false;
  for (size_t j = i + 1; j < steps_.size(); ++j) {
    if (steps_[i].session->SharesArenaWith(*steps_[j].session)) return false;
  }
  return true;
}

Status Operation::Abort(Status status) {
  // Whatever the operation still holds goes back now, not at a later operation.
  (void)runtime_.Trim();
  return status;
}

Status Operation::Execute() {
  const std::unique_ptr<IdleReleaseHold> idle_hold = runtime_.HoldIdleRelease();  // no idle shrink between its runs
  bool last_released = true;  // whether the last run so far was flagged as ending
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& step = steps_[i];
    if (options_.stop.stop_requested()) {
      return Abort(Cancelled("operation cancelled after " + std::to_string(done_) + " of " +
                             std::to_string(step_count()) + " runs"));
    }
    Result<std::vector<NamedTensor>> inputs = step.make_inputs();
    if (!inputs.ok()) return Abort(inputs.status());
    RunFlags flags;
    flags.ends_operation = EndsForArenas(i) && options_.ends_operation;
    last_released = flags.ends_operation || !step.may_add_steps;
    flags.release = OperationReleaseMode(runtime_.policy(), options_.release);
    flags.outputs = step.outputs;
    flags.observer = options_.observer;
    Result<std::vector<NamedTensor>> outputs = step.session->Run(*inputs, flags);
    if (!outputs.ok()) return Abort(outputs.status());
    ++done_;
    // The step's own callback may insert steps (and so move steps_): it is called from here.
    const TakeOutputs take = std::move(step.take_outputs);
    insert_at_ = step.may_add_steps ? static_cast<std::ptrdiff_t>(i) + 1 : -1;
    Status st = take(std::move(outputs).value());
    insert_at_ = -1;
    if (!st.ok()) return Abort(st);
    if (options_.on_progress) options_.on_progress({done_, step_count()});
  }
  // A step that could have added more turned out to be the last: release now.
  if (!last_released && options_.ends_operation &&
      OperationReleaseMode(runtime_.policy(), options_.release) == ReleaseMode::kOperationEnd) {
    (void)runtime_.Trim();
  }
  return Status::Ok();
}

namespace {

Status CheckImageModel(const Session& session) {
  if (session.inputs().empty() || session.outputs().empty()) {
    return InvalidArgument("model '" + session.name() + "' has no input or no output");
  }
  return Status::Ok();
}

// A caller's frame as a run input, read in place (frames outlive the
// operation, and a run only reads its inputs): no copy per frame.
Tensor View(const Tensor& frame) {
  return Tensor::Borrow(frame.type(), frame.shape(), const_cast<std::byte*>(frame.data()));
}

std::vector<NamedTensor> AsInput(const Session& session, Tensor t) {
  std::vector<NamedTensor> in;
  in.push_back({session.inputs()[0].name, std::move(t)});
  return in;
}

}  // namespace

Result<std::vector<Tensor>> RunPerFrame(Runtime& runtime, const std::shared_ptr<Session>& session,
                                        const std::vector<Tensor>& frames, const OperationOptions& options) {
  EBB_RETURN_IF_ERROR(CheckImageModel(*session));
  std::vector<Tensor> results;
  Operation op(runtime, options);
  for (const Tensor& frame : frames) {
    op.AddStep(
        session, [&]() -> Result<std::vector<NamedTensor>> { return AsInput(*session, View(frame)); },
        [&](std::vector<NamedTensor> out) {
          results.push_back(std::move(out[0].tensor));
          return Status::Ok();
        },
        {session->outputs()[0].name});
  }
  EBB_RETURN_IF_ERROR(op.Execute());
  return results;
}

Result<std::vector<Tensor>> RunJoint(Runtime& runtime, const std::shared_ptr<Session>& session,
                                     const std::vector<Tensor>& frames, const OperationOptions& options) {
  EBB_RETURN_IF_ERROR(CheckImageModel(*session));
  if (frames.empty()) return std::vector<Tensor>{};
  std::vector<Tensor> results;
  Operation op(runtime, options);
  op.AddStep(
      session,
      [&]() -> Result<std::vector<NamedTensor>> {
        Result<Tensor> batch = StackBatch(frames);
        if (!batch.ok()) return batch.status();
        return AsInput(*session, std::move(batch).value());
      },
      [&](std::vector<NamedTensor> out) {
        const Tensor& batch = out[0].tensor;
        if (batch.shape().empty() || batch.shape()[0] != static_cast<int64_t>(frames.size())) {
          return InvalidArgument("joint output " + ShapeToString(batch.shape()) + " does not have one item per frame");
        }
        for (size_t i = 0; i < frames.size(); ++i) results.push_back(BatchItem(batch, static_cast<int64_t>(i)));
        return Status::Ok();
      },
      {session->outputs()[0].name});
  EBB_RETURN_IF_ERROR(op.Execute());
  return results;
}

Result<std::vector<Tensor>> RunPipeline(Runtime& runtime, const std::vector<std::shared_ptr<Session>>& stages,
                                        const std::vector<Tensor>& frames, const OperationOptions& options) {
  if (stages.empty()) return InvalidArgument("a pipeline needs at least one model");
  for (const auto& s : stages) EBB_RETURN_IF_ERROR(CheckImageModel(*s));
  std::vector<Tensor> carry(frames.size());  // the latest stage output per frame
  Operation op(runtime, options);
  for (size_t f = 0; f < frames.size(); ++f) {
    for (size_t k = 0; k < stages.size(); ++k) {
      const std::shared_ptr<Session>& stage = stages[k];
      op.AddStep(
          stage,
          [&, f, k]() -> Result<std::vector<NamedTensor>> {
            return AsInput(*stage, k == 0 ? View(frames[f]) : std::move(carry[f]));
          },
          [&, f](std::vector<NamedTensor> out) {
            carry[f] = std::move(out[0].tensor);
            return Status::Ok();
          },
          {stage->outputs()[0].name});
    }
  }
  EBB_RETURN_IF_ERROR(op.Execute());
  return carry;
}

}  // namespace ebb
