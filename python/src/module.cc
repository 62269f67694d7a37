// ebb._ebb: Runtime, Session, images. Operations are in bind_operations.cc,
// the model pool in bind_pool.cc, the benchmark helpers in bench.cc.
#include "binding.h"
#include "ebb/memory_policy.h"
#include "ebb/model_config.h"
#include "ebb/model_location.h"

namespace ebb::python {
namespace {

std::string PathArg(const py::handle& path, const char* what) {
  if (!py::isinstance<py::str>(path) && !py::hasattr(path, "__fspath__")) {
    throw py::type_error(std::string(what) + " must be a str or os.PathLike; got " +
                         std::string(py::str(path.get_type().attr("__name__"))));
  }
  return py::str(py::module_::import("os").attr("fspath")(path));
}

MemoryPolicy PolicyArg(const py::handle& policy) {
  if (policy.is_none()) return {};
  if (py::isinstance<py::dict>(policy)) {
    const std::string json = py::str(py::module_::import("json").attr("dumps")(policy));
    return Unwrap(ParseMemoryPolicy(json));
  }
  if (py::isinstance<py::str>(policy) || py::hasattr(policy, "__fspath__")) {
    return Unwrap(LoadMemoryPolicy(PathArg(policy, "policy")));
  }
  throw py::type_error("policy must be None, a dict (docs/memory-policy.md) or the path of a policy JSON file");
}

py::object JsonToPython(const std::string& json) { return py::module_::import("json").attr("loads")(json); }

LoadOptions LoadArgs(const std::string& device, const std::optional<bool>& strict, const std::optional<std::string>& name) {
  LoadOptions options;
  options.device = Unwrap(DeviceRequest::Parse(device));
  options.strict_device = strict;
  if (name) options.name = *name;
  return options;
}

py::tuple ShapeTuple(const Shape& shape) {
  py::tuple t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t[i] = py::int_(shape[i]);
  return t;
}

py::dict Run(Session& session, const py::handle& inputs, const py::handle& outputs) {
  std::vector<py::object> keep;
  std::vector<NamedTensor> named = InputsFromDict(session, inputs, &keep);
  RunFlags flags;  // ends_operation: a call is one whole operation
  flags.outputs = OutputNames(outputs);
  Result<std::vector<NamedTensor>> result = [&] {
    py::gil_scoped_release nogil;
    return session.Run(named, flags);
  }();
  return ToDict(Unwrap(std::move(result)));
}

constexpr const char* kRunDoc = R"doc(Runs the model once, as ONE whole operation: when the run ends, the arena
memory it grew into is given back (the shared CPU arena is shrunk and freed
heap pages return to the OS), while the model stays loaded. To run several
times and release only after the last run, use ``runtime.operation()`` or a
ready-made operation (``runtime.run_tiled`` ...): releasing after every run
pays the arena's regrowth on the next run.

inputs: ``{input name: numpy.ndarray}``, every model input once. An array of
  the input's dtype that is C-contiguous and aligned is read in place, without
  a copy (do not write to it from another thread during the run). Another dtype
  raises TypeError, another layout ValueError, both naming the input, the dtype
  and the shape the model expects; a wrong shape or name raises
  ebb.InvalidArgument (a ValueError). ebb converts nothing implicitly.
outputs: names of the outputs to compute; None computes all, in model order.

Returns ``{output name: numpy.ndarray}`` (dict[str, numpy.ndarray]); the arrays own their memory (never an
arena's). The GIL is released while the model runs, so other Python threads
keep running, and several threads may run models (even this one) at once.

Raises ebb.ResourceExhausted (also a MemoryError) when memory ran out: the
session is then dropped from the runtime's cache and the next load builds it
afresh.)doc";

void BindRuntime(RuntimeClass& runtime) {
  runtime.doc() = R"doc(Runtime(policy=None)

The entry point: one memory policy and one cache of loaded sessions, keyed by
the model's content (SHA-256 of the model file and of every external-data file
it names), device and options. policy: None (ebb's
defaults: one capped shared CPU arena, release at the end of each operation),
a dict in the JSON form of docs/memory-policy.md, or the path of such a file.

One Runtime per process while the policy uses the shared CPU arena: creating a
second one raises ebb.FailedPrecondition. Every method may be called from any
thread.)doc";
  runtime
      .def(py::init([](const py::object& policy) { return std::shared_ptr<Runtime>(Unwrap(Runtime::Create(PolicyArg(policy)))); }),
           py::arg("policy") = py::none())
      .def_property_readonly(
          "policy", [](const Runtime& rt) { return JsonToPython(MemoryPolicyToJson(rt.policy())); },
          "The policy in force, every field written (a dict).")
      .def(
          "load",
          [](Runtime& rt, const py::object& path, const std::string& device, std::optional<bool> strict,
             std::optional<std::string> name, const py::object& models) {
            // The command line's ResolveModel, not a copy of it: the same three forms, the same errors.
            const ModelLocation model = Unwrap(ResolveModel(PathArg(path, "path"), PathArg(models, "models"), "models="));
            LoadOptions options = LoadArgs(DeviceFor(device, model), strict, name);
            py::gil_scoped_release nogil;
            return Unwrap(rt.Load(model.path, options));
          },
          py::arg("path"), py::arg("device") = "auto", py::kw_only(), py::arg("strict") = py::none(),
          py::arg("name") = py::none(), py::arg("models") = "models",
          R"doc(Loads a model and returns its Session, or the cached one: a second
load of the same bytes on the same device returns the same session without loading again
(see load_count). path takes a model the way the ebb command does (ebb/model_location.h):
a model folder (its model.onnx, with its config.json when there is one: the config's
"device" applies when device is "auto"), a model file, or the name of a folder under
models (default "models", relative to the working directory): "models/convnet",
"models/convnet/model.onnx" and "convnet" are the same model. A model with ONNX external
data (weights in files beside it) is the same model only while those files are too: new
weights load anew. device: "auto" (CUDA when it can be used, else CPU), "cpu", "cuda",
"cuda:N". strict: fail with ebb.Unavailable instead of falling back to CPU (default: the
policy's). Raises ebb.NotFound (no such file, folder or name; a folder without model.onnx),
ebb.InvalidArgument (not a model; a broken config.json; an external-data file outside the
model's folder), ebb.FailedPrecondition (an external-data file missing). The GIL is released.)doc")
      .def(
          "load_bytes",
          [](Runtime& rt, const py::bytes& data, const std::string& device, std::optional<bool> strict,
             std::optional<std::string> name) {
            std::string bytes = data;
            LoadOptions options = LoadArgs(device, strict, name);
            py::gil_scoped_release nogil;
            return Unwrap(rt.LoadFromBytes(bytes, options));
          },
          py::arg("data"), py::arg("device") = "auto", py::kw_only(), py::arg("strict") = py::none(),
          py::arg("name") = py::none(),
          "Like load(), for model bytes already in memory. Bytes that name external-data files raise\n"
          "ebb.InvalidArgument: they have no folder to find them in; load the file instead.")
      .def(
          "unload",
          [](Runtime& rt, const py::object& target, const py::object& models) -> size_t {
            if (py::isinstance<Session>(target)) return rt.Unload(target.cast<const Session&>()) ? 1 : 0;
            const std::string path = PathArg(target, "target");
            Result<ModelLocation> model = ResolveModel(path, PathArg(models, "models"), "models=");
            return rt.Unload(model.ok() ? model->path : path);  // a file gone since its load: by its path
          },
          py::arg("target"), py::kw_only(), py::arg("models") = "models",
          "Drops from the cache the sessions loaded from a model (a folder, file or name, as load() takes it), "
          "or one Session; returns how many. Sessions still referenced stay usable.")
      .def("clear", &Runtime::Clear, "Drops every session from the cache.")
      .def(
          "trim",
          [](Runtime& rt) {
            py::gil_scoped_release nogil;
            Check(rt.Trim());
          },
          "Gives idle memory back now: the shared CPU arena is shrunk (or by the last run in flight) and "
          "heap pages return to the OS; per-session arenas release on their next run that starts alone.")
      .def(
          "memory", [](const Runtime& rt) { return JsonToPython(rt.ReadMemory().ToJson()); },
          R"doc(The memory readings of MemoryReading::ToJson, as a dict: "rss_bytes", "peak_rss_bytes",
"arenas" (one dict per arena: "name" ("cpu:shared", "cpu:<model>", "gpu:N:<model>"), "reserved",
"in_use", "peak_in_use", "limit", "regions", "extensions", "shrinks", "allocations") and "gpus".)doc")
      .def_property_readonly("load_count", &Runtime::load_count, "Successful loads so far (cache hits do not count).")
      .def_property_readonly(
          "cached", [](Runtime& rt) { return rt.cache().size(); }, "Sessions in the cache now.");
}

void BindSession(py::module_& m) {
  py::class_<TensorInfo>(m, "TensorInfo", "A model input or output as the model declares it.")
      .def_readonly("name", &TensorInfo::name)
      .def_property_readonly(
          "dtype", [](const TensorInfo& t) { return DtypeOf(t.type); }, "numpy dtype (BF16 as uint16 bits).")
      .def_property_readonly(
          "type", [](const TensorInfo& t) { return DataTypeName(t.type); }, "ebb's type name: \"FP32\", \"INT64\", ...")
      .def_property_readonly(
          "shape", [](const TensorInfo& t) { return ShapeTuple(t.shape); }, "Dimensions; -1 marks a dynamic one.")
      .def("__repr__", [](const TensorInfo& t) {
        return "TensorInfo(name='" + t.name + "', type=" + DataTypeName(t.type) + ", shape=" + ShapeToString(t.shape) + ")";
      });

  py::class_<Session, std::shared_ptr<Session>>(m, "Session", R"doc(A loaded model on one device (from Runtime.load).

Sessions are shared with the runtime's cache; one stays usable after it left the
cache or after its Runtime is gone. run() may be called from several threads at once.)doc")
      .def_property_readonly("name", &Session::name)
      .def_property_readonly("source_path", &Session::source_path)
      .def_property_readonly(
          "device", [](const Session& s) { return s.device().ToString(); }, "Where it REALLY runs: \"cpu\", \"cuda:0\".")
      .def_property_readonly("provider", [](const Session& s) { return s.device().provider; })
      .def_property_readonly(
          "fallback_reason", [](const Session& s) { return s.device().fallback_reason; },
          "Why it runs elsewhere than asked (\"\" when it does not).")
      .def_property_readonly("inputs", &Session::inputs)
      .def_property_readonly("outputs", &Session::outputs)
      .def(
          "metadata",
          [](const Session& s, const std::string& key) -> py::object {
            std::string v = s.metadata(key);
            return v.empty() ? py::none() : py::object(py::str(v));
          },
          py::arg("key"), "A value of the model's metadata_props, or None.")
      .def_property_readonly("release_targets", &Session::release_targets,
                             "The arena shrink entries of this session (\"cpu:0\", \"gpu:0\").")
      .def_property_readonly("run_count", &Session::run_count)
      .def_property_readonly("release_count", &Session::release_count, "Runs that carried a release.")
      .def_property_readonly("in_flight", &Session::in_flight)
      .def("run", &Run, py::arg("inputs"), py::arg("outputs") = py::none(), kRunDoc)
      .def("__repr__", [](const Session& s) { return "<ebb.Session '" + s.name() + "' on " + s.device().ToString() + ">"; });
}

void BindImages(py::module_& m) {
  m.def(
      "read_image",
      [](const py::object& path) {
        const std::string file = PathArg(path, "path");
        Result<Image> image = [&] {
          py::gil_scoped_release nogil;
          return ReadImage(file);
        }();
        return ImageToArray(Unwrap(std::move(image)));
      },
      py::arg("path"),
      R"doc(Reads a PNG or JPEG file (by its magic bytes) with ebb's image code: a uint8 array
[H,W,C], C = 1 (gray), 3 (RGB) or 4 (RGBA). Raises ebb.NotFound, ebb.InvalidArgument
(corrupt, truncated or unsupported file, named in the message).)doc");
  m.def(
      "write_png",
      [](const py::object& path, const py::object& image) {
        const std::string file = PathArg(path, "path");
        Image img;
        if (py::isinstance<py::array>(image) && py::reinterpret_borrow<py::array>(image).dtype().equal(py::dtype::of<float>())) {
          py::array a = py::reinterpret_borrow<py::array>(image);
          if (!(a.flags() & py::array::c_style)) throw py::value_error("a float32 tensor image must be C-contiguous");
          Tensor t = Tensor::Borrow(DataType::kFloat32, Shape(a.shape(), a.shape() + a.ndim()),
                                    static_cast<std::byte*>(const_cast<void*>(a.data())));
          img = Unwrap(TensorToImage(t));
        } else {
          img = ImageFromArray(image, "image");
        }
        py::gil_scoped_release nogil;
        Check(WritePng(file, img));
      },
      py::arg("path"), py::arg("image"),
      R"doc(Writes an 8-bit PNG with ebb's image code. image: uint8 [H,W,C] (C = 1, 3, 4) or [H,W];
or a float32 tensor [1,C,H,W] / [C,H,W] with values in [0,1] (clamped, scaled to 0..255, rounded).)doc");
  m.def(
      "image_to_tensor",
      [](const py::object& image, int channels) {
        return ToArray(Unwrap(ImageToTensor(ImageFromArray(image, "image"), channels)));
      },
      py::arg("image"), py::arg("channels") = 3,
      "uint8 HWC image -> float32 [1,C,H,W] with values v/255 (C = 3: RGB, 1: luma, 4: RGBA), as ebb does.");
  m.def(
      "tensor_to_image",
      [](const py::array& tensor) {
        if (!tensor.dtype().equal(py::dtype::of<float>()) || !(tensor.flags() & py::array::c_style)) {
          throw py::type_error("tensor must be a C-contiguous float32 array [1,C,H,W] or [C,H,W]");
        }
        Tensor t = Tensor::Borrow(DataType::kFloat32, Shape(tensor.shape(), tensor.shape() + tensor.ndim()),
                                  static_cast<std::byte*>(const_cast<void*>(tensor.data())));
        return ImageToArray(Unwrap(TensorToImage(t)));
      },
      py::arg("tensor"), "float32 [1,C,H,W] / [C,H,W] in [0,1] -> uint8 HWC image (clamped, x255, rounded).");
}

void BindModelConfig(py::module_& m) {
  m.def(
      "read_model_config",
      [](const py::object& folder) {
        const std::string path = PathArg(folder, "folder");
        return JsonToPython(ModelConfigToJson(Unwrap(LoadModelConfig(path, path))));  // confined to the folder
      },
      py::arg("folder"),
      R"doc(The config.json of a model folder as ebb reads it (LoadModelConfig, strict: unknown keys and
out-of-range values raise ebb.InvalidArgument naming the file), written back with every field it has:
{"kind": "tensor" | "image_to_image", "pinned": bool, and when set "device", "tile": {"size", "overlap",
"tiles_per_run"}, "scale", "keep_alive_ms", "versions"}. A folder without config.json gives the defaults
({"kind": "tensor", "pinned": False}). config.json must be a regular file inside the folder (a link out of
it, a FIFO or a device is refused), of at most 64 KiB.)doc");
}

}  // namespace
}  // namespace ebb::python

PYBIND11_MODULE(_ebb, m) {
  namespace py = pybind11;
  using namespace ebb::python;
  m.doc() = "ebb's C++ runtime (the extension behind the package ebb; import ebb instead).";
  m.attr("__version__") = EBB_VERSION;
  RegisterErrors(m);
  BindSession(m);
  RuntimeClass runtime(m, "Runtime");
  BindRuntime(runtime);
  BindImages(m);
  BindModelConfig(m);
  BindOperations(m, runtime);
  BindPool(m);
  BindBench(m);
}
