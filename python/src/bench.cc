// ebb._ebb._bench: the C++ baselines of python/bench/bench_python.py, timed in
// C++ in the same process, on the same sessions and inputs as the Python calls
// they are compared with. Not part of the public API.
#include <chrono>
#include <cstdint>

#include "binding.h"
#include "ebb/operation.h"
#include "ebb/tiler.h"

namespace ebb::python {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Frames as tensors the C++ loop reads in place (the caller's list keeps them alive).
Frames TensorFrames(const py::handle& frames, const Session& session) {
  Frames f = FramesFromList(frames, session);
  if (f.images) throw py::type_error("the C++ baselines take float32 NCHW frames");
  return f;
}

// (seconds, results): the results go back to the caller, so that they are freed
// when the caller drops them, as the Python calls' results are.
template <typename Fn>
py::tuple TimeOperation(Fn fn) {
  Result<std::vector<Tensor>> out = InvalidArgument("not run");
  double seconds = 0;
  {
    py::gil_scoped_release nogil;
    const auto start = Clock::now();
    out = fn();
    seconds = Seconds(start);
  }
  return py::make_tuple(seconds, FramesToList(Unwrap(std::move(out)), false));
}

}  // namespace

void BindBench(py::module_& m) {
  py::module_ bench = m.def_submodule("_bench", "C++ baselines for the Python benchmark (not public API).");
  bench.def(
      "time_cpp_runs",
      [](Session& session, const py::dict& inputs, int iterations, bool ends_operation) {
        std::vector<py::object> keep;
        std::vector<NamedTensor> named = InputsFromDict(session, inputs, &keep);
        std::vector<double> seconds;
        Status failed;
        {
          py::gil_scoped_release nogil;
          RunFlags flags;
          flags.ends_operation = ends_operation;
          for (int i = 0; i < iterations && failed.ok(); ++i) {
            const auto start = Clock::now();
            Result<std::vector<NamedTensor>> out = session.Run(named, flags);
            seconds.push_back(Seconds(start));
            if (!out.ok()) failed = out.status();
          }
        }
        Check(failed);
        return seconds;
      },
      py::arg("session"), py::arg("inputs"), py::arg("iterations"), py::arg("ends_operation") = true,
      "Seconds of each of `iterations` Session::Run calls, timed in C++.");
  bench.def(
      "input_views",
      [](Session& session, const py::dict& inputs) {
        std::vector<py::object> keep;
        std::vector<NamedTensor> named = InputsFromDict(session, inputs, &keep);
        py::dict views;
        for (const NamedTensor& t : named) {
          views[py::str(t.name)] = py::make_tuple(t.tensor.borrowed(), reinterpret_cast<uintptr_t>(t.tensor.data()));
        }
        return views;
      },
      py::arg("session"), py::arg("inputs"),
      "How Session.run hands each input to the library: {name: (borrowed, data address)}. For tests.");
  bench.def(
      "time_cpp_run_tiled",
      [](Runtime& runtime, const std::shared_ptr<Session>& session, const py::list& frames, int64_t tile,
         int64_t overlap, int tiles_per_run) {
        Frames f = TensorFrames(frames, *session);
        return TimeOperation([&] { return RunTiled(runtime, session, f.tensors, {tile, overlap, 0, tiles_per_run}); });
      },
      py::arg("runtime"), py::arg("session"), py::arg("frames"), py::arg("tile"), py::arg("overlap"),
      py::arg("tiles_per_run") = 1,
      "(seconds, results) of one RunTiled call over float32 frames, timed in C++ without the GIL.");
  bench.def(
      "time_cpp_run_per_frame",
      [](Runtime& runtime, const std::shared_ptr<Session>& session, const py::list& frames) {
        Frames f = TensorFrames(frames, *session);
        return TimeOperation([&] { return RunPerFrame(runtime, session, f.tensors); });
      },
      py::arg("runtime"), py::arg("session"), py::arg("frames"),
      "(seconds, results) of one RunPerFrame call (one C++ ebb::Operation), timed in C++ without the GIL.");
}

}  // namespace ebb::python
