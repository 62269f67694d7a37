// ebb._ebb._bench: the C++ baselines of python/bench/bench_python.py, timed in
// C++ in the same process, on the same sessions and inputs as the Python calls
// they are compared with. Each timing is (wall seconds, process CPU seconds).
// Not part of the public API.
#include <time.h>

#include <chrono>
#include <cstdint>

#include "binding.h"
#include "ebb/operation.h"
#include "ebb/tiler.h"

namespace ebb::python {
namespace {

// Wall and process CPU time since construction.
class Stopwatch {
 public:
  Stopwatch() : wall_(std::chrono::steady_clock::now()), cpu_(CpuSeconds()) {}
  std::pair<double, double> Elapsed() const {
    return {std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count(), CpuSeconds() - cpu_};
  }

 private:
  static double CpuSeconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  }
  std::chrono::steady_clock::time_point wall_;
  double cpu_;
};

// Frames as tensors the C++ loop reads in place (the caller's list keeps them alive).
Frames TensorFrames(const py::handle& frames, const Session& session) {
  Frames f = FramesFromList(frames, session);
  if (f.images) throw py::type_error("the C++ baselines take float32 NCHW frames");
  return f;
}

// (wall, cpu, results): the results go back to the caller, so that they are
// freed when the caller drops them, as the Python calls' results are.
template <typename Fn>
py::tuple TimeOperation(Fn fn) {
  Result<std::vector<Tensor>> out = InvalidArgument("not run");
  std::pair<double, double> elapsed;
  {
    py::gil_scoped_release nogil;
    Stopwatch watch;
    out = fn();
    elapsed = watch.Elapsed();
  }
  return py::make_tuple(elapsed.first, elapsed.second, FramesToList(Unwrap(std::move(out)), false));
}

}  // namespace

void BindBench(py::module_& m) {
  py::module_ bench = m.def_submodule("_bench", "C++ baselines for the Python benchmark (not public API).");
  bench.def(
      "time_cpp_runs",
      [](Session& session, const py::dict& inputs, int iterations, bool ends_operation) {
        std::vector<py::object> keep;
        std::vector<NamedTensor> named = InputsFromDict(session, inputs, &keep);
        std::vector<std::pair<double, double>> times;
        Status failed;
        {
          py::gil_scoped_release nogil;
          RunFlags flags;
          flags.ends_operation = ends_operation;
          for (int i = 0; i < iterations && failed.ok(); ++i) {
            Stopwatch watch;
            Result<std::vector<NamedTensor>> out = session.Run(named, flags);
            times.push_back(watch.Elapsed());
            if (!out.ok()) failed = out.status();
          }
        }
        Check(failed);
        return times;
      },
      py::arg("session"), py::arg("inputs"), py::arg("iterations"), py::arg("ends_operation") = true,
      "(wall, cpu) seconds of each of `iterations` Session::Run calls, timed in C++.");
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
      "(wall, cpu, results) of one RunTiled call over float32 frames, timed in C++ without the GIL.");
  bench.def(
      "time_cpp_run_per_frame",
      [](Runtime& runtime, const std::shared_ptr<Session>& session, const py::list& frames) {
        Frames f = TensorFrames(frames, *session);
        return TimeOperation([&] { return RunPerFrame(runtime, session, f.tensors); });
      },
      py::arg("runtime"), py::arg("session"), py::arg("frames"),
      "(wall, cpu, results) of one RunPerFrame call (one C++ ebb::Operation), timed in C++ without the GIL.");
}

}  // namespace ebb::python
