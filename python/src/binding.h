// The Python binding of ebb (module ebb._ebb): shared declarations.
//
// The rule of this folder: conversions and the GIL only. Every behaviour
// (validation, release, caching, tiling, budgets) is the library's; the binding
// turns NumPy arrays into ebb::Tensors (borrowed, never copied, where the array
// allows), calls the library with the GIL released, turns the results back into
// arrays (taking ownership, never copying), and raises a library Status as the
// ebb.* exception of its code.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ebb/image.h"
#include "ebb/runtime.h"
#include "ebb/session.h"
#include "ebb/status.h"
#include "ebb/tensor.h"

namespace ebb::python {

namespace py = pybind11;

// --- errors.cc ----------------------------------------------------------------

// A non-OK Status on its way to Python; raised there as ebb.<Code>(message).
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  Status status_;
};

[[noreturn]] inline void Throw(Status status) { throw StatusError(std::move(status)); }
inline void Check(Status status) {
  if (!status.ok()) Throw(std::move(status));
}
template <typename T>
T Unwrap(Result<T> result) {
  if (!result.ok()) Throw(result.status());
  return std::move(result).value();
}

// Installs the translator StatusError -> ebb.<Code>.
void RegisterErrors(py::module_& m);
// The Status carried by a Python exception: its code when it is an ebb.Error,
// kInternal otherwise. REQUIRES: the GIL.
Status StatusFromPython(const py::error_already_set& e);

// --- convert.cc ----------------------------------------------------------------

// The NumPy dtype of an ebb type (BF16, which NumPy lacks, travels as uint16).
py::dtype DtypeOf(DataType type);

// Model inputs from a dict {name: ndarray}. Arrays of the input's dtype that are
// C-contiguous and aligned are borrowed (read in place by the run); others raise
// TypeError (not an ndarray, wrong dtype) or ValueError (layout), naming the
// input, the dtype and shape the model expects. Names the model does not have
// are passed on, so the library reports them. `keep` holds the arrays.
std::vector<NamedTensor> InputsFromDict(const Session& session, const py::handle& inputs,
                                        std::vector<py::object>* keep);
// Requested output names: None -> all; else a sequence of str.
std::vector<std::string> OutputNames(const py::handle& outputs);
// An ndarray that owns `tensor` (no copy).
py::array ToArray(Tensor tensor);
py::dict ToDict(std::vector<NamedTensor> outputs);

// 8-bit HWC images <-> ndarrays (uint8 [H,W,C]; [H,W] accepted as gray).
Image ImageFromArray(const py::handle& value, const std::string& what);
py::array ImageToArray(Image image);

// Frames of a ready-made operation: all float32 NCHW tensors [1,C,H,W]
// (borrowed) or all uint8 HWC images (converted with ebb::ImageToTensor to the
// model's channel count).
struct Frames {
  std::vector<Tensor> tensors;
  bool images = false;
  std::vector<py::object> keep;
};
Frames FramesFromList(const py::handle& frames, const Session& first_model);
// Results in the form the frames came in (images back through ebb::TensorToImage).
py::list FramesToList(std::vector<Tensor> results, bool images);

// --- module parts ----------------------------------------------------------------

using RuntimeClass = py::class_<Runtime, std::shared_ptr<Runtime>>;

// Runtime.operation() and the ready-made operations (Runtime.run_tiled, ...).
void BindOperations(py::module_& m, RuntimeClass& runtime);
// ModelPool, Lease, ModelStatus, PoolEvent; _shutdown (atexit).
void BindPool(py::module_& m);
// ebb._ebb._bench: C++ loops timed in C++, the baselines of python/bench.
void BindBench(py::module_& m);

}  // namespace ebb::python
