// Operations of the C API (include/ebb/c.h): the control (progress and
// cancellation), the operation a caller drives run by run, and the ready-made
// operations.
//
// ebb_operation_t is ebb::ScopedOperation (ebb/operation.h) behind a handle: the state machine
// of a caller-driven operation is the library's, wrapped alike by every binding.
#include "c_api.h"
#include "ebb/memory_policy.h"
#include "ebb/tiler.h"

namespace ebb::c_api {
namespace {

// A ready-made operation's answer as a new list.
ebb_status_t* Results(Result<std::vector<Tensor>> results, ebb_tensors_t** out) {
  if (!results.ok()) return ToC(results.status());
  *out = ToList(std::move(results).value()).release();
  return nullptr;
}

// The arguments every ready-made operation checks the same way.
ebb_status_t* CheckFramesCall(const char* function, ebb_runtime_t* runtime, const void* session,
                              ebb_tensors_t** results) {
  if (!results) return NullArgument(function, "results");
  *results = nullptr;
  if (!runtime) return NullArgument(function, "runtime");
  if (!session) return NullArgument(function, "session");
  return nullptr;
}

}  // namespace

OperationOptions OptionsOf(ebb_control_t* control) {
  OperationOptions options;
  if (!control) return options;
  options.stop = control->stop.get_token();
  options.on_progress = [control](const Progress& p) {
    if (control->progress && control->progress(control->user_data, p.done, p.total) != 0) {
      control->stop.request_stop();
    }
  };
  return options;
}

}  // namespace ebb::c_api

using namespace ebb;
using namespace ebb::c_api;

extern "C" {

// --- Control ------------------------------------------------------------------------

ebb_control_t* ebb_control_create(void) { return new (std::nothrow) ebb_control_t; }

void ebb_control_destroy(ebb_control_t* control) { delete control; }

void ebb_control_set_progress(ebb_control_t* control, ebb_progress_fn fn, void* user_data) {
  if (!control) return;
  control->progress = fn;
  control->user_data = user_data;
}

void ebb_control_cancel(ebb_control_t* control) {
  if (control) control->stop.request_stop();
}

int ebb_control_cancelled(const ebb_control_t* control) {
  return control && control->stop.stop_requested() ? 1 : 0;
}

// --- The operation a caller drives ------------------------------------------------------

ebb_status_t* ebb_operation_create(ebb_runtime_t* runtime, int planned_runs, ebb_control_t* control,
                                   ebb_operation_t** out) {
  constexpr const char* kFn = "ebb_operation_create";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!out) return NullArgument(kFn, "out");
    *out = nullptr;
    if (!runtime) return NullArgument(kFn, "runtime");
    if (planned_runs < 0) {
      return Error(StatusCode::kInvalidArgument, std::string(kFn) + ": planned_runs must be >= 0 (0: not planned)");
    }
    *out = new ebb_operation_t{ScopedOperation(runtime->runtime, planned_runs, OptionsOf(control))};
    return nullptr;
  });
}

ebb_status_t* ebb_operation_run(ebb_operation_t* operation, ebb_session_t* session, const char* const* input_names,
                                const ebb_tensor_t* const* inputs, size_t input_count,
                                const char* const* output_names, size_t output_count, ebb_tensors_t** outputs) {
  constexpr const char* kFn = "ebb_operation_run";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!outputs) return NullArgument(kFn, "outputs");
    *outputs = nullptr;
    if (!operation) return NullArgument(kFn, "operation");
    if (!session) return NullArgument(kFn, "session");
    Result<std::vector<NamedTensor>> in = Inputs(kFn, input_names, inputs, input_count);
    if (!in.ok()) return ToC(in.status());
    Result<std::vector<std::string>> names = Names(kFn, output_names, output_count);
    if (!names.ok()) return ToC(names.status());
    Result<std::vector<NamedTensor>> out = operation->operation.Run(*session->session, *in, std::move(*names));
    if (!out.ok()) return ToC(out.status());
    *outputs = ToList(std::move(out).value()).release();
    return nullptr;
  });
}

ebb_status_t* ebb_operation_end(ebb_operation_t* operation) {
  constexpr const char* kFn = "ebb_operation_end";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!operation) return NullArgument(kFn, "operation");
    return ToC(operation->operation.End());
  });
}

void ebb_operation_abandon(ebb_operation_t* operation) {
  if (operation) operation->operation.Abandon();
}

void ebb_operation_destroy(ebb_operation_t* operation) { delete operation; }  // ends it if still open

int ebb_operation_runs_done(const ebb_operation_t* operation) {
  return operation ? operation->operation.runs_done() : 0;
}

int ebb_operation_released(const ebb_operation_t* operation) {
  return operation && operation->operation.released() ? 1 : 0;
}

int ebb_operation_ended(const ebb_operation_t* operation) { return !operation || operation->operation.ended() ? 1 : 0; }

// --- Ready-made operations ---------------------------------------------------------------

ebb_status_t* ebb_run_per_frame(ebb_runtime_t* runtime, ebb_session_t* session, const ebb_tensor_t* const* frames,
                                size_t frame_count, ebb_control_t* control, ebb_tensors_t** results) {
  constexpr const char* kFn = "ebb_run_per_frame";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (ebb_status_t* bad = CheckFramesCall(kFn, runtime, session, results)) return bad;
    Result<std::vector<Tensor>> f = Frames(kFn, frames, frame_count);
    if (!f.ok()) return ToC(f.status());
    return Results(RunPerFrame(*runtime->runtime, session->session, *f, OptionsOf(control)), results);
  });
}

ebb_status_t* ebb_run_joint(ebb_runtime_t* runtime, ebb_session_t* session, const ebb_tensor_t* const* frames,
                            size_t frame_count, ebb_control_t* control, ebb_tensors_t** results) {
  constexpr const char* kFn = "ebb_run_joint";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (ebb_status_t* bad = CheckFramesCall(kFn, runtime, session, results)) return bad;
    Result<std::vector<Tensor>> f = Frames(kFn, frames, frame_count);
    if (!f.ok()) return ToC(f.status());
    return Results(RunJoint(*runtime->runtime, session->session, *f, OptionsOf(control)), results);
  });
}

ebb_status_t* ebb_run_tiled(ebb_runtime_t* runtime, ebb_session_t* session, const ebb_tensor_t* const* frames,
                            size_t frame_count, int64_t tile, int64_t overlap, int64_t scale, int tiles_per_run,
                            ebb_control_t* control, ebb_tensors_t** results) {
  constexpr const char* kFn = "ebb_run_tiled";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (ebb_status_t* bad = CheckFramesCall(kFn, runtime, session, results)) return bad;
    Result<std::vector<Tensor>> f = Frames(kFn, frames, frame_count);
    if (!f.ok()) return ToC(f.status());
    const TileOptions tiles{tile, overlap, scale, tiles_per_run};
    return Results(RunTiled(*runtime->runtime, session->session, *f, tiles, OptionsOf(control)), results);
  });
}

ebb_status_t* ebb_run_pipeline(ebb_runtime_t* runtime, ebb_session_t* const* stages, size_t stage_count,
                               const ebb_tensor_t* const* frames, size_t frame_count, ebb_control_t* control,
                               ebb_tensors_t** results) {
  constexpr const char* kFn = "ebb_run_pipeline";
  return Guard(kFn, [&]() -> ebb_status_t* {
    if (!results) return NullArgument(kFn, "results");
    *results = nullptr;
    if (!runtime) return NullArgument(kFn, "runtime");
    if (stage_count > 0 && !stages) return NullArgument(kFn, "stages");
    std::vector<std::shared_ptr<Session>> sessions;
    for (size_t i = 0; i < stage_count; ++i) {
      if (!stages[i]) {
        return Error(StatusCode::kInvalidArgument, std::string(kFn) + ": stages[" + std::to_string(i) + "] is NULL");
      }
      sessions.push_back(stages[i]->session);
    }
    Result<std::vector<Tensor>> f = Frames(kFn, frames, frame_count);
    if (!f.ok()) return ToC(f.status());
    return Results(RunPipeline(*runtime->runtime, sessions, *f, OptionsOf(control)), results);
  });
}

}  // extern "C"
