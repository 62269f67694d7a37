// NumPy arrays <-> ebb tensors and images. Inputs are borrowed (no copy) when
// an array already has the model's dtype and a C-contiguous, aligned layout;
// anything else is an error that says what the model expects. Outputs become
// arrays that own the library's tensors (no copy either).
#include <cstdint>

#include "binding.h"

namespace ebb::python {
namespace {

constexpr int kNpyHalf = 23;  // NPY_HALF: NumPy's float16 type number

std::string Repr(const py::handle& value) { return py::str(py::repr(value)); }

std::string DtypeName(const py::dtype& dtype) { return py::str(dtype.attr("name")); }

std::string TypeName(const py::handle& value) { return py::str(value.get_type().attr("__name__")); }

std::string ShapeOf(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

std::string Expectation(const TensorInfo& info) {
  return DtypeName(DtypeOf(info.type)) + " (" + DataTypeName(info.type) + ") with shape " +
         ShapeToString(info.shape) + " (-1 = any)";
}

bool CContiguousAligned(const py::array& a) {
  constexpr int kFlags = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  return (a.flags() & kFlags) == kFlags;
}

Shape ShapeVector(const py::array& a) { return Shape(a.shape(), a.shape() + a.ndim()); }

std::byte* Bytes(const py::array& a) { return static_cast<std::byte*>(const_cast<void*>(a.data())); }

// A BYTES (ONNX string) input: an array of bytes or str elements (dtype object, bytes_ or str_),
// copied into the library's length-prefixed form (str is encoded as UTF-8).
Tensor StringsInput(const py::handle& value, const TensorInfo& info, const std::string& what) {
  if (!py::isinstance<py::array>(value)) {
    throw py::type_error(what + " must be a numpy.ndarray of " + Expectation(info) + " (bytes or str elements); got " +
                         TypeName(value) + " (use numpy.asarray(value, dtype=object))");
  }
  py::array a = py::reinterpret_borrow<py::array>(value);
  const char kind = a.dtype().kind();
  if (kind != 'O' && kind != 'S' && kind != 'U') {
    throw py::type_error(what + " must be " + Expectation(info) + " (bytes or str elements); got a " +
                         DtypeName(a.dtype()) + " array of shape " + ShapeOf(a));
  }
  std::vector<std::string> values;
  values.reserve(static_cast<size_t>(a.size()));
  for (py::handle item : a.attr("ravel")().attr("tolist")()) {
    if (py::isinstance<py::bytes>(item)) {
      values.push_back(item.cast<std::string>());
    } else if (py::isinstance<py::str>(item)) {
      values.push_back(py::reinterpret_borrow<py::str>(item).attr("encode")("utf-8").cast<std::string>());
    } else {
      throw py::type_error(what + " must hold bytes or str elements; got one of type " + TypeName(item));
    }
  }
  return Tensor::FromStrings(ShapeVector(a), values);
}

// One model input, borrowed (BYTES inputs are copied: the library's form differs from NumPy's).
Tensor BorrowInput(const py::handle& value, const TensorInfo& info, const std::string& model) {
  const std::string what = "input '" + info.name + "' of model '" + model + "'";
  if (info.type == DataType::kBytes) return StringsInput(value, info, what);
  if (!py::isinstance<py::array>(value)) {
    throw py::type_error(what + " must be a numpy.ndarray of " + Expectation(info) + "; got " + TypeName(value) +
                         " (use numpy.asarray(value, dtype=" + DtypeName(DtypeOf(info.type)) + "))");
  }
  py::array a = py::reinterpret_borrow<py::array>(value);
  const py::dtype expected = DtypeOf(info.type);
  if (!a.dtype().equal(expected)) {
    throw py::type_error(what + " must be " + Expectation(info) + "; got a " + DtypeName(a.dtype()) +
                         " array of shape " + ShapeOf(a) + " (ebb does not convert: use .astype(numpy." +
                         DtypeName(expected) + "))");
  }
  if (!CContiguousAligned(a)) {
    throw py::value_error(what + " must be a C-contiguous, aligned array (it is read in place, without a copy); got "
                          "one of shape " + ShapeOf(a) + " that is not (use numpy.ascontiguousarray(value))");
  }
  return Tensor::Borrow(info.type, ShapeVector(a), Bytes(a));
}

const TensorInfo* FindInput(const Session& session, const std::string& name) {
  for (const TensorInfo& info : session.inputs()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

}  // namespace

py::dtype DtypeOf(DataType type) {
  switch (type) {
    case DataType::kBool: return py::dtype::of<bool>();
    case DataType::kUInt8: return py::dtype::of<uint8_t>();
    case DataType::kUInt16: return py::dtype::of<uint16_t>();
    case DataType::kUInt32: return py::dtype::of<uint32_t>();
    case DataType::kUInt64: return py::dtype::of<uint64_t>();
    case DataType::kInt8: return py::dtype::of<int8_t>();
    case DataType::kInt16: return py::dtype::of<int16_t>();
    case DataType::kInt32: return py::dtype::of<int32_t>();
    case DataType::kInt64: return py::dtype::of<int64_t>();
    case DataType::kFloat16: return py::dtype(kNpyHalf);
    case DataType::kBFloat16: return py::dtype::of<uint16_t>();  // NumPy has no bfloat16: raw bits
    case DataType::kFloat32: return py::dtype::of<float>();
    case DataType::kFloat64: return py::dtype::of<double>();
    case DataType::kBytes: return py::dtype("O");  // an object array of bytes
  }
  return py::dtype::of<float>();
}

std::vector<NamedTensor> InputsFromDict(const Session& session, const py::handle& inputs,
                                        std::vector<py::object>* keep) {
  if (!py::isinstance<py::dict>(inputs)) {
    throw py::type_error("inputs must be a dict {input name: numpy.ndarray}; got " + TypeName(inputs));
  }
  std::vector<NamedTensor> named;
  for (auto [key, value] : py::reinterpret_borrow<py::dict>(inputs)) {
    if (!py::isinstance<py::str>(key)) throw py::type_error("input names must be str; got " + Repr(key));
    std::string name = key.cast<std::string>();
    const TensorInfo* info = FindInput(session, name);
    // An unknown name: the run boundary reports it with the model's input names.
    Tensor tensor = info ? BorrowInput(value, *info, session.name()) : Tensor();
    keep->push_back(py::reinterpret_borrow<py::object>(value));
    named.push_back({std::move(name), std::move(tensor)});
  }
  return named;
}

std::vector<std::string> OutputNames(const py::handle& outputs) {
  if (outputs.is_none()) return {};
  if (py::isinstance<py::str>(outputs) || !py::isinstance<py::sequence>(outputs)) {
    throw py::type_error("outputs must be None or a list of output names; got " + Repr(outputs));
  }
  std::vector<std::string> names;
  for (py::handle name : py::reinterpret_borrow<py::sequence>(outputs)) {
    if (!py::isinstance<py::str>(name)) throw py::type_error("output names must be str; got " + Repr(name));
    names.push_back(name.cast<std::string>());
  }
  return names;
}

py::array ToArray(Tensor tensor) {
  if (tensor.type() == DataType::kBytes) {  // an object array of bytes (a copy: NumPy has no such layout)
    py::list items;
    for (std::string_view v : tensor.strings()) items.append(py::bytes(v.data(), v.size()));
    py::array out = py::array(py::dtype("O"), std::vector<py::ssize_t>{static_cast<py::ssize_t>(items.size())});
    for (size_t i = 0; i < items.size(); ++i) out.attr("__setitem__")(i, items[i]);
    std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
    return out.attr("reshape")(shape);
  }
  auto* owned = new Tensor(std::move(tensor));
  py::capsule base(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(owned->shape().begin(), owned->shape().end());
  return py::array(DtypeOf(owned->type()), shape, {}, owned->data(), base);
}

py::dict ToDict(std::vector<NamedTensor> outputs) {
  py::dict d;
  for (NamedTensor& t : outputs) d[py::str(t.name)] = ToArray(std::move(t.tensor));
  return d;
}

// --- images ---------------------------------------------------------------------

Image ImageFromArray(const py::handle& value, const std::string& what) {
  if (!py::isinstance<py::array>(value)) {
    throw py::type_error(what + " must be a numpy.ndarray of uint8 [H,W,C] (C = 1, 3 or 4) or [H,W]; got " +
                         TypeName(value));
  }
  py::array a = py::reinterpret_borrow<py::array>(value);
  if (!a.dtype().equal(py::dtype::of<uint8_t>()) || (a.ndim() != 2 && a.ndim() != 3)) {
    throw py::type_error(what + " must be a uint8 image [H,W,C] (C = 1, 3 or 4) or [H,W]; got a " +
                         DtypeName(a.dtype()) + " array of shape " + ShapeOf(a));
  }
  Image image;
  image.height = static_cast<int>(a.shape(0));
  image.width = static_cast<int>(a.shape(1));
  image.channels = a.ndim() == 3 ? static_cast<int>(a.shape(2)) : 1;
  // Pixels are copied into the Image (it owns them); any strides are fine.
  py::array_t<uint8_t, py::array::c_style> c = py::array_t<uint8_t, py::array::c_style>::ensure(a);
  if (!c) throw py::error_already_set();
  image.pixels.assign(c.data(), c.data() + c.size());
  return image;
}

py::array ImageToArray(Image image) {
  auto* owned = new Image(std::move(image));
  py::capsule base(owned, [](void* p) { delete static_cast<Image*>(p); });
  std::vector<py::ssize_t> shape = {owned->height, owned->width, owned->channels};
  return py::array(py::dtype::of<uint8_t>(), shape, {}, owned->pixels.data(), base);
}

// --- frames ---------------------------------------------------------------------

Frames FramesFromList(const py::handle& frames, const Session& first_model) {
  if (py::isinstance<py::array>(frames) || !py::isinstance<py::sequence>(frames)) {
    throw py::type_error("frames must be a list of numpy arrays (float32 [1,C,H,W] tensors or uint8 [H,W,C] "
                         "images); got " + TypeName(frames));
  }
  Frames out;
  const Shape& in_shape = first_model.inputs().empty() ? Shape{} : first_model.inputs()[0].shape;
  const int64_t model_channels = in_shape.size() == 4 ? in_shape[1] : -1;
  size_t index = 0;
  for (py::handle value : py::reinterpret_borrow<py::sequence>(frames)) {
    const std::string what = "frame " + std::to_string(index);
    if (!py::isinstance<py::array>(value)) {
      throw py::type_error(what + " must be a numpy.ndarray; got " + TypeName(value));
    }
    py::array a = py::reinterpret_borrow<py::array>(value);
    const bool tensor = a.dtype().equal(py::dtype::of<float>()) && a.ndim() == 4;
    const bool image = a.dtype().equal(py::dtype::of<uint8_t>()) && (a.ndim() == 2 || a.ndim() == 3);
    if (!tensor && !image) {
      throw py::type_error(what + " must be a float32 NCHW tensor [1,C,H,W] or a uint8 HWC image [H,W,C] / [H,W]; "
                           "got a " + DtypeName(a.dtype()) + " array of shape " + ShapeOf(a));
    }
    if (index > 0 && image != out.images) {
      throw py::type_error(what + " is " + (image ? "a uint8 image" : "a float32 tensor") + " but frame 0 is " +
                           (out.images ? "a uint8 image" : "a float32 tensor") + ": give frames of one kind");
    }
    out.images = image;
    if (tensor) {
      if (!CContiguousAligned(a)) {
        throw py::value_error(what + " must be C-contiguous and aligned (it is read in place); got shape " +
                              ShapeOf(a) + " that is not (use numpy.ascontiguousarray(frame))");
      }
      out.tensors.push_back(Tensor::Borrow(DataType::kFloat32, ShapeVector(a), Bytes(a)));
      out.keep.push_back(py::reinterpret_borrow<py::object>(value));
    } else {
      Image img = ImageFromArray(value, what);
      const int channels = model_channels > 0 ? static_cast<int>(model_channels) : img.channels;
      out.tensors.push_back(Unwrap(ImageToTensor(img, channels)));
    }
    ++index;
  }
  return out;
}

py::list FramesToList(std::vector<Tensor> results, bool images) {
  py::list list;
  for (Tensor& t : results) {
    if (images) {
      list.append(ImageToArray(Unwrap(TensorToImage(t))));
    } else {
      list.append(ToArray(std::move(t)));
    }
  }
  return list;
}

}  // namespace ebb::python
