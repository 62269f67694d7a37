// Operations from Python: `with runtime.operation() as op` (Operation below)
// and the library's ready-made operations (RunPerFrame, RunJoint, RunTiled,
// RunPipeline) over lists of NumPy frames.
//
// The GIL is released for every run and for the whole of a ready-made
// operation; between runs the operation's progress hook takes it back to check
// for Ctrl-C (PyErr_CheckSignals), call on_progress and read the cancel event.
// Whatever stops an operation, the library gives its memory back (a cancelled
// or failed ebb::Operation calls Runtime::Trim).
#include <stop_token>

#include "binding.h"
#include "ebb/memory_policy.h"
#include "ebb/operation.h"
#include "ebb/tiler.h"

namespace ebb::python {
namespace {

bool IsFalse(const py::handle& value) { return value.ptr() == Py_False; }

void CheckCancelArg(const py::handle& cancel) {
  if (!cancel.is_none() && !py::hasattr(cancel, "is_set")) {
    throw py::type_error("cancel must be None or a threading.Event (anything with is_set())");
  }
}

bool EventSet(const py::handle& cancel) { return !cancel.is_none() && py::bool_(cancel.attr("is_set")()); }

// Progress, cancellation and Ctrl-C for one ready-made operation.
class Control {
 public:
  Control(py::object on_progress, py::object cancel) : on_progress_(std::move(on_progress)), cancel_(std::move(cancel)) {
    CheckCancelArg(cancel_);
    if (EventSet(cancel_)) stop_.request_stop();  // the operation then stops before its first run
  }

  OperationOptions Options() {
    OperationOptions options;
    options.stop = stop_.get_token();
    options.on_progress = [this](const Progress& p) { Between(p); };
    return options;
  }

  // Raises what stopped the operation: a Python error from between runs
  // (KeyboardInterrupt, an exception of on_progress), else the library's Status.
  std::vector<Tensor> Finish(Result<std::vector<Tensor>> result) {
    if (error_) {
      py::error_already_set e = std::move(*error_);
      error_.reset();
      throw e;
    }
    return Unwrap(std::move(result));
  }

 private:
  // Called by the library on the executing thread after every run, without the GIL.
  void Between(const Progress& p) {
    py::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (!on_progress_.is_none() && IsFalse(on_progress_(p.done, p.total))) stop_.request_stop();
      if (EventSet(cancel_)) stop_.request_stop();
    } catch (py::error_already_set& e) {
      error_ = std::move(e);
      stop_.request_stop();
    } catch (const std::exception& e) {  // nothing may escape into the library's loop
      PyErr_SetString(PyExc_RuntimeError, e.what());
      error_ = py::error_already_set();
      stop_.request_stop();
    }
  }

  py::object on_progress_, cancel_;
  std::stop_source stop_;
  std::optional<py::error_already_set> error_;
};

template <typename Fn>
py::list RunFrames(const py::object& on_progress, const py::object& cancel, Frames frames, Fn fn) {
  Control control(on_progress, cancel);
  OperationOptions options = control.Options();
  Result<std::vector<Tensor>> result = [&] {
    py::gil_scoped_release nogil;
    return fn(frames.tensors, options);
  }();
  return FramesToList(control.Finish(std::move(result)), frames.images);
}

constexpr const char* kFramesDoc = R"doc( Returns a list of numpy arrays, one per frame.

frames: a list of numpy arrays, all of one kind:
  * float32 NCHW tensors [1,C,H,W] (C-contiguous; read without a copy); the
    results are float32 tensors [1,C',H',W'];
  * uint8 HWC images [H,W,C] or [H,W] (as ebb.read_image gives): converted with
    ebb.image_to_tensor to the model's channel count (values v/255), and the
    results back with ebb.tensor_to_image (clamped to [0,1], x255, rounded) to
    uint8 [H',W',C'] images.
on_progress(done, total): called between runs with the GIL held; return False
  to cancel. Exceptions it raises stop the operation and are re-raised.
cancel: a threading.Event; setting it (from any thread) stops the operation
  before its next run with ebb.Cancelled. Ctrl-C (KeyboardInterrupt) also
  stops it between runs. A stopped or failed operation gives its memory back
  at once (Runtime.trim), as the C++ ebb::Operation does.

The whole operation runs with the GIL released; memory is released once,
after its last run.)doc";

// `with runtime.operation() as op:` — runs of one operation, released once.
class BlockOperation {
 public:
  BlockOperation(std::shared_ptr<Runtime> runtime, std::optional<int> total, py::object on_progress,
                 py::object cancel)
      : runtime_(std::move(runtime)), total_(total), on_progress_(std::move(on_progress)), cancel_(std::move(cancel)) {
    if (total_ && *total_ < 0) throw py::value_error("total_runs must be None or >= 0");
    CheckCancelArg(cancel_);
  }

  BlockOperation& Enter() {
    if (state_ != State::kNew) Throw(FailedPrecondition("an operation is entered once; start a new one"));
    state_ = State::kOpen;
    return *this;
  }

  bool Exit(const py::handle& exc_type) {
    const State was = state_;
    state_ = State::kClosed;
    if (was != State::kOpen) return false;  // aborted: memory already given back
    if (!exc_type.is_none()) {
      Abort();
      return false;
    }
    // The deferred release: no run was marked last, so the memory goes back now.
    if (!released_ && done_ > 0 && runtime_->policy().release == ReleaseMode::kOperationEnd) {
      py::gil_scoped_release nogil;
      Check(runtime_->Trim());
      released_ = true;
    }
    return false;
  }

  py::dict Run(Session& session, const py::handle& inputs, const py::handle& outputs) {
    if (state_ != State::kOpen) {
      Throw(FailedPrecondition(state_ == State::kAborted
                                   ? "this operation already ended: " + ended_
                                   : "op.run() is only valid inside `with runtime.operation() as op:`"));
    }
    if (total_ && done_ >= *total_) {
      Throw(FailedPrecondition("this operation planned " + std::to_string(*total_) +
                               " runs (total_runs) and all of them are done"));
    }
    if (stop_requested_ || EventSet(cancel_)) {
      Status cancelled = Cancelled("operation cancelled after " + std::to_string(done_) + " runs");
      Abort();
      ended_ = cancelled.ToString();
      Throw(cancelled);
    }
    std::vector<py::object> keep;
    std::vector<NamedTensor> named = InputsFromDict(session, inputs, &keep);
    RunFlags flags;
    flags.ends_operation = total_ && done_ + 1 == *total_;  // the planned last run carries the release
    flags.outputs = OutputNames(outputs);
    Result<std::vector<NamedTensor>> result = [&] {
      py::gil_scoped_release nogil;
      return session.Run(named, flags);
    }();
    if (!result.ok()) {
      Abort();  // as a failed ebb::Operation does
      ended_ = result.status().ToString();
      Throw(result.status());
    }
    ++done_;
    released_ = released_ || flags.ends_operation;
    py::dict out = ToDict(std::move(result).value());
    if (!on_progress_.is_none() &&
        IsFalse(on_progress_(done_, total_ ? py::object(py::int_(*total_)) : py::object(py::none())))) {
      stop_requested_ = true;
    }
    return out;
  }

  int done() const { return done_; }
  std::optional<int> total() const { return total_; }
  bool released() const { return released_; }

 private:
  enum class State { kNew, kOpen, kAborted, kClosed };

  void Abort() {
    state_ = state_ == State::kOpen ? State::kAborted : state_;
    py::gil_scoped_release nogil;
    (void)runtime_->Trim();
    released_ = true;
  }

  std::shared_ptr<Runtime> runtime_;
  std::optional<int> total_;
  py::object on_progress_, cancel_;
  State state_ = State::kNew;
  int done_ = 0;
  bool released_ = false;
  bool stop_requested_ = false;
  std::string ended_;
};

constexpr const char* kOperationDoc = R"doc(operation(total_runs=None, on_progress=None, cancel=None) -> Operation

Several runs as ONE operation, released once, after its last run:

    with runtime.operation() as op:
        for frame in frames:
            out = op.run(session, {"x": frame})

The caller never marks the last run. Without total_runs the runs keep the
arena and the release happens when the block ends (Runtime.trim: the shared CPU
arena is shrunk, heap pages go back); with total_runs=N the N-th run carries
the release itself, exactly as a planned C++ ebb::Operation does (needed where
trim cannot shrink an arena at once: per-session CPU arenas, CUDA). Both end at
the same memory floor as the C++ Operation (see python/bench and the tests).

on_progress(done, total): called after every run (total None when not
planned); return False to cancel: the next op.run raises ebb.Cancelled.
cancel: a threading.Event, checked before every run. A failed run, a
cancellation, or any exception leaving the block gives the memory back at
once, as a cancelled C++ operation does. Each op.run releases the GIL while the
model runs.)doc";

using FramesFunction = Result<std::vector<Tensor>> (*)(Runtime&, const std::shared_ptr<Session>&,
                                                        const std::vector<Tensor>&, const OperationOptions&);

// Runtime.<name>(session, frames, *, on_progress, cancel) over the library's `fn`.
void DefFramesOperation(RuntimeClass& runtime, const char* name, FramesFunction fn, const std::string& doc) {
  runtime.def(
      name,
      [fn](const std::shared_ptr<Runtime>& rt, const std::shared_ptr<Session>& session, const py::object& frames,
           py::object on_progress, py::object cancel) {
        return RunFrames(on_progress, cancel, FramesFromList(frames, *session),
                         [&](const std::vector<Tensor>& f, const OperationOptions& o) { return fn(*rt, session, f, o); });
      },
      py::arg("session"), py::arg("frames"), py::kw_only(), py::arg("on_progress") = py::none(),
      py::arg("cancel") = py::none(), (doc + kFramesDoc).c_str());
}

}  // namespace

void BindOperations(py::module_& m, RuntimeClass& runtime) {
  py::class_<BlockOperation>(m, "Operation", kOperationDoc)
      .def("__enter__", &BlockOperation::Enter, py::return_value_policy::reference_internal)
      .def(
          "__exit__",
          [](BlockOperation& op, const py::object& exc_type, const py::object&, const py::object&) {
            return op.Exit(exc_type);
          },
          py::arg("exc_type"), py::arg("exc"), py::arg("traceback"))
      .def("run", &BlockOperation::Run, py::arg("session"), py::arg("inputs"), py::arg("outputs") = py::none(),
           R"doc(One run of the operation: like Session.run (same inputs, outputs and errors),
but the run keeps the arena for the next run, unless it is the planned last one
(total_runs). The GIL is released while the model runs.)doc")
      .def_property_readonly("done", &BlockOperation::done, "Runs finished so far.")
      .def_property_readonly("total", &BlockOperation::total, "total_runs as planned (None when not planned).")
      .def_property_readonly("released", &BlockOperation::released,
                             "Whether the operation's memory has been given back.");

  runtime.def(
      "operation",
      [](const std::shared_ptr<Runtime>& rt, std::optional<int> total_runs, py::object on_progress, py::object cancel) {
        return BlockOperation(rt, total_runs, std::move(on_progress), std::move(cancel));
      },
      py::arg("total_runs") = py::none(), py::arg("on_progress") = py::none(), py::arg("cancel") = py::none(),
      kOperationDoc);

  DefFramesOperation(runtime, "run_per_frame", &RunPerFrame,
                     "One run per frame, in order (frames may differ in size), as one operation.");
  DefFramesOperation(runtime, "run_joint", &RunJoint,
                     "One run over all frames stacked into one batch (frames of equal size), split back per "
                     "frame.");

  runtime.def(
      "run_tiled",
      [](const std::shared_ptr<Runtime>& rt, const std::shared_ptr<Session>& session, const py::object& frames,
         int64_t tile, int64_t overlap, int64_t scale, int tiles_per_run, py::object on_progress, py::object cancel) {
        TileOptions tiles{tile, overlap, scale, tiles_per_run};
        return RunFrames(on_progress, cancel, FramesFromList(frames, *session),
                         [&](const std::vector<Tensor>& f, const OperationOptions& o) {
                           return RunTiled(*rt, session, f, tiles, o);
                         });
      },
      py::arg("session"), py::arg("frames"), py::kw_only(), py::arg("tile") = 128, py::arg("overlap") = 8,
      py::arg("scale") = 0, py::arg("tiles_per_run") = 1, py::arg("on_progress") = py::none(),
      py::arg("cancel") = py::none(),
      (std::string("An image-to-image model over tiles of tile x tile pixels, each core with `overlap` pixels of "
                   "context, every tile of every frame in ONE operation: memory is released after the last tile of "
                   "the last frame. scale: output/input ratio (0: the model's metadata ebb.scale, else measured). "
                   "tiles_per_run tiles are stacked into one run.") + kFramesDoc)
          .c_str());

  runtime.def(
      "run_pipeline",
      [](const std::shared_ptr<Runtime>& rt, const std::vector<std::shared_ptr<Session>>& stages,
         const py::object& frames, py::object on_progress, py::object cancel) {
        if (stages.empty()) Throw(InvalidArgument("a pipeline needs at least one model"));
        return RunFrames(on_progress, cancel, FramesFromList(frames, *stages.front()),
                         [&](const std::vector<Tensor>& f, const OperationOptions& o) {
                           return RunPipeline(*rt, stages, f, o);
                         });
      },
      py::arg("sessions"), py::arg("frames"), py::kw_only(), py::arg("on_progress") = py::none(),
      py::arg("cancel") = py::none(),
      (std::string("Per frame, each model in turn (the output of one is the input of the next), as one "
                   "operation.") + kFramesDoc)
          .c_str());
}

}  // namespace ebb::python
