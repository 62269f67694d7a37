// Status <-> Python exceptions. The classes live in ebb/_errors.py (plain
// Python, so that each can also derive from the built-in exception callers
// expect); this file only maps codes both ways.
#include "binding.h"

namespace ebb::python {
namespace {

// ebb._errors._make(code, message); imported once, kept for the process's life.
py::handle MakeError() {
  static py::handle make = py::object(py::module_::import("ebb._errors").attr("_make")).release();
  return make;
}

void Raise(const Status& status) {
  py::object exc = py::reinterpret_borrow<py::object>(MakeError())(StatusCodeName(status.code()), status.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
}

}  // namespace

void RegisterErrors(py::module_& m) {
  (void)m;
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      Raise(e.status());
    }
  });
}

Status StatusFromPython(const py::error_already_set& e) {
  static const std::pair<const char*, StatusCode> kCodes[] = {
      {"invalid_argument", StatusCode::kInvalidArgument}, {"not_found", StatusCode::kNotFound},
      {"resource_exhausted", StatusCode::kResourceExhausted}, {"unavailable", StatusCode::kUnavailable},
      {"failed_precondition", StatusCode::kFailedPrecondition}, {"cancelled", StatusCode::kCancelled},
      {"internal", StatusCode::kInternal}};
  py::handle base = py::module_::import("ebb._errors").attr("Error");
  if (e.matches(base)) {
    const std::string code = py::str(e.value().attr("code"));
    for (const auto& [name, value] : kCodes) {
      if (code == name) return Status(value, py::str(e.value()));
    }
  }
  return Internal(std::string("Python error: ") + e.what());
}

}  // namespace ebb::python
