"""Python values <-> ebb tensors (ebb_tensor_t), without a copy where the layout allows.

In: a NumPy array of the input's dtype, C-contiguous and aligned, is borrowed (read in place by
the run); so is any other object with the buffer protocol (bytes, bytearray, array.array,
memoryview, ebb.Tensor), C-contiguous, whose format matches the input's dtype (a flat buffer
takes the model's static shape; memoryview(buf).cast(fmt, shape) gives one a shape). BYTES inputs
are copied (the library's form differs from NumPy's).

Out: with NumPy, an ndarray over the memory of the tensor ebb made (no copy), which is freed when
the array goes; without NumPy (or with EBB_NUMPY=0), an ebb.Tensor over that memory.
"""
import ctypes
import os
import struct
from ctypes import byref, c_char, c_int64, c_size_t, c_void_p

from ._lib import BYTES, DTYPES, FLOAT32, UINT8, check, lib

try:
    if os.environ.get("EBB_NUMPY", "1") == "0":
        raise ImportError("EBB_NUMPY=0")
    import numpy as np
except ImportError:
    np = None

# Per ebb_dtype_t: NumPy's name (BF16, which NumPy lacks, travels as uint16 bits), and the struct format.
NAMES = ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "uint16",
         "float32", "float64", "object")
FORMATS = ("?", "B", "H", "I", "Q", "b", "h", "i", "q", "e", "H", "f", "d", "")
SIZES = tuple(lib.ebb_dtype_size(i) for i in range(len(DTYPES)))
NP_DTYPES = tuple(np.dtype(n) for n in NAMES) if np is not None else ()

_KINDS = {"?": "bool", "e": "float", "f": "float", "d": "float"}
_KINDS.update({c: "int" for c in "bhilqn"})
_KINDS.update({c: "uint" for c in "BHILQN"})
_TYPE_KINDS = ("bool", "uint", "uint", "uint", "uint", "int", "int", "int", "int", "float", "uint", "float", "float", "")


def shape_string(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def np_shape(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def expectation(dtype: int, shape) -> str:
    return f"{NAMES[dtype]} ({DTYPES[dtype]}) with shape {shape_string(shape)} (-1 = any)"


def type_name(value) -> str:
    return type(value).__name__


# --- the buffer protocol (any CPython 3, through its C API) -----------------------------------------

class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", c_void_p), ("obj", c_void_p), ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int), ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.POINTER(ctypes.c_ssize_t)), ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
                ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)), ("internal", c_void_p)]


_GetBuffer = ctypes.pythonapi.PyObject_GetBuffer
_GetBuffer.argtypes = (ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int)
_GetBuffer.restype = ctypes.c_int
_ReleaseBuffer = ctypes.pythonapi.PyBuffer_Release
_ReleaseBuffer.argtypes = (ctypes.POINTER(_PyBuffer),)
_ReleaseBuffer.restype = None
_PYBUF_C_CONTIGUOUS_FORMAT = 0x0038 | 0x0004  # PyBUF_C_CONTIGUOUS | PyBUF_FORMAT (read-only is fine)


def has_buffer(value) -> bool:
    try:
        memoryview(value).release()
        return True
    except TypeError:
        return False


class Held:
    """What one call borrows: tensor handles (destroyed after the call), buffers (released), objects (kept)."""

    __slots__ = ("handles", "buffers", "keep")

    def __init__(self):
        self.handles = []
        self.buffers = []
        self.keep = []

    def close(self):
        for h in self.handles:
            lib.ebb_tensor_destroy(h)
        self.handles = []
        for b in self.buffers:
            _ReleaseBuffer(byref(b))
        self.buffers = []
        self.keep = []

    def borrow(self, dtype: int, shape, address: int, nbytes: int) -> int:
        h = c_void_p()
        check(lib.ebb_tensor_borrow(dtype, (c_int64 * len(shape))(*shape), len(shape), address, nbytes, byref(h)))
        self.handles.append(h.value)
        return h.value

    def buffer(self, value, what: str):
        """(format, shape, address, nbytes) of an object's C-contiguous buffer, held until close()."""
        view = _PyBuffer()
        try:
            _GetBuffer(value, byref(view), _PYBUF_C_CONTIGUOUS_FORMAT)
        except (BufferError, ValueError) as e:
            raise ValueError(f"{what} must be a C-contiguous buffer (it is read in place, without a copy): {e}") from None
        self.buffers.append(view)
        fmt = (view.format or b"B").decode()
        shape = tuple(view.shape[i] for i in range(view.ndim)) if view.shape else (view.len // max(view.itemsize, 1),)
        return fmt, shape, view.buf or 0, view.len

    def strings(self, shape, values, what: str) -> int:
        items = []
        for item in values:
            if isinstance(item, bytes):
                items.append(item)
            elif isinstance(item, str):
                items.append(item.encode("utf-8"))
            else:
                raise TypeError(f"{what} must hold bytes or str elements; got one of type {type_name(item)}")
        n = len(items)
        h = c_void_p()
        check(lib.ebb_tensor_create_strings((c_int64 * len(shape))(*shape), len(shape), (ctypes.c_char_p * n)(*items),
                                            (c_size_t * n)(*[len(i) for i in items]), n, byref(h)))
        self.handles.append(h.value)
        return h.value


def _format_matches(fmt: str, dtype: int) -> bool:
    fmt = fmt.lstrip("@=<")
    if len(fmt) != 1 or fmt not in _KINDS:
        return False
    return _KINDS[fmt] == _TYPE_KINDS[dtype] and struct.calcsize(fmt) == SIZES[dtype]


def _buffer_input(held: Held, value, dtype: int, shape, what: str) -> int:
    """A model input from a buffer-protocol object (not a NumPy array)."""
    if isinstance(value, Tensor):
        if value._dtype != dtype:
            raise TypeError(f"{what} must be {expectation(dtype, shape)}; got an ebb.Tensor of {value.type}")
        return held.borrow(dtype, value.shape, value._address, value.nbytes)
    if not has_buffer(value):
        raise TypeError(f"{what} must be {expectation(dtype, shape)}: a numpy.ndarray or an object with the buffer "
                        f"protocol (bytes, bytearray, array.array, memoryview); got {type_name(value)}")
    fmt, got, address, nbytes = held.buffer(value, what)
    static = all(d >= 0 for d in shape)
    if len(got) <= 1 and len(shape) != 1:
        if not static:
            raise TypeError(f"{what} must be {expectation(dtype, shape)}; got a flat buffer, whose shape the "
                            f"model does not fix: give it one, e.g. memoryview(buf).cast('{FORMATS[dtype]}', shape)")
        got = tuple(shape)
        raw = fmt.lstrip("@=<") in ("B", "b", "c")
        if not (_format_matches(fmt, dtype) or raw):
            raise TypeError(f"{what} must be {expectation(dtype, shape)}; got a buffer of format '{fmt}'")
        return held.borrow(dtype, got, address, nbytes)
    if not _format_matches(fmt, dtype):
        raise TypeError(f"{what} must be {expectation(dtype, shape)}; got a buffer of format '{fmt}' and shape "
                        f"{np_shape(got)} (ebb does not convert)")
    return held.borrow(dtype, got, address, nbytes)


def input_tensor(held: Held, value, dtype: int, shape, model: str, name: str) -> int:
    """One model input (the model declares `dtype` and `shape`), as a handle held by `held`."""
    what = f"input '{name}' of model '{model}'"
    is_array = np is not None and isinstance(value, np.ndarray)
    if dtype == BYTES:
        if is_array:
            if value.dtype.kind not in "OSU":
                raise TypeError(f"{what} must be {expectation(dtype, shape)} (bytes or str elements); got a "
                                f"{value.dtype.name} array of shape {np_shape(value.shape)}")
            return held.strings(value.shape, value.ravel().tolist(), what)
        if isinstance(value, (list, tuple)):
            shape, flat = _nested(value)
            return held.strings(shape, flat, what)
        raise TypeError(f"{what} must be a numpy.ndarray of {expectation(dtype, shape)} (bytes or str elements); "
                        f"got {type_name(value)} (use numpy.asarray(value, dtype=object))")
    if not is_array:
        if np is not None and not has_buffer(value):
            raise TypeError(f"{what} must be a numpy.ndarray of {expectation(dtype, shape)}; got {type_name(value)} "
                            f"(use numpy.asarray(value, dtype={NAMES[dtype]}))")
        return _buffer_input(held, value, dtype, shape, what)
    if value.dtype != NP_DTYPES[dtype]:
        raise TypeError(f"{what} must be {expectation(dtype, shape)}; got a {value.dtype.name} array of shape "
                        f"{np_shape(value.shape)} (ebb does not convert: use .astype(numpy.{NAMES[dtype]}))")
    flags = value.flags
    if not (flags.c_contiguous and flags.aligned):
        raise ValueError(f"{what} must be a C-contiguous, aligned array (it is read in place, without a copy); got "
                         f"one of shape {np_shape(value.shape)} that is not (use numpy.ascontiguousarray(value))")
    held.keep.append(value)
    return held.borrow(dtype, value.shape, value.ctypes.data, value.nbytes)


def _nested(value):
    """(shape, flat items) of nested lists of equal lengths (the strings of a BYTES input without NumPy)."""
    shape, level = [], value
    while isinstance(level, (list, tuple)):
        shape.append(len(level))
        level = level[0] if level else None
    flat = list(value)
    for _ in shape[1:]:
        flat = [item for row in flat for item in row]
    return tuple(shape), flat


def any_tensor(held: Held, value) -> int:
    """A tensor of whatever the value is (an input name the model lacks: the library reports the name)."""
    if np is not None and isinstance(value, np.ndarray) and value.dtype.kind in "biuf" and value.flags.c_contiguous:
        for i, d in enumerate(NP_DTYPES):
            if value.dtype == d and i != BYTES:
                held.keep.append(value)
                return held.borrow(i, value.shape, value.ctypes.data, value.nbytes)
    return held.borrow(FLOAT32, (0,), 0, 0)


# --- outputs --------------------------------------------------------------------------------------

class _Owner:
    """Frees an ebb tensor when the last view of its memory goes."""

    __slots__ = ("handle", "__weakref__")

    def __init__(self, handle: int):
        self.handle = handle

    def __del__(self):
        destroy = getattr(lib, "ebb_tensor_destroy", None)
        if destroy is not None and self.handle:
            destroy(self.handle)
            self.handle = None


def _shape_of(h: int):
    rank = lib.ebb_tensor_rank(h)
    dims = lib.ebb_tensor_shape(h)
    return tuple(dims[i] for i in range(rank))


def _memory(h: int, nbytes: int):
    """A ctypes char array over the tensor's memory that owns the tensor (freed with the last reference)."""
    buf = (c_char * nbytes).from_address(lib.ebb_tensor_data(h))
    buf._ebb_owner = _Owner(h)
    return buf


class Tensor:
    """A tensor ebb made (a run's output, without NumPy), over ebb's own memory, freed when it goes.

    shape: tuple of dims; type: ebb's type name ("FP32", ...); format: its struct format ("f", ...;
    FP16 and BF16 as "H" bits); nbytes; data: a memoryview of the elements with that format and shape
    (writable, no copy; BYTES tensors: a list of bytes instead); tolist(), tobytes(). It is also an
    input: a run reads it in place.
    """

    __slots__ = ("_buf", "_address", "_strings", "_dtype", "shape", "nbytes")

    def __init__(self):
        raise TypeError("ebb.Tensor objects are made by ebb (the outputs of a run without NumPy)")

    @classmethod
    def _take(cls, h: int) -> "Tensor":
        t = object.__new__(cls)
        t._dtype = lib.ebb_tensor_dtype(h)
        t.shape = _shape_of(h)
        t.nbytes = lib.ebb_tensor_byte_size(h)
        t._strings = None
        if t._dtype == BYTES:
            t._strings = _strings(h, t.shape)
            lib.ebb_tensor_destroy(h)
            t._buf, t._address = None, 0
        elif t.nbytes == 0:
            lib.ebb_tensor_destroy(h)
            t._buf, t._address = (c_char * 0)(), 0
        else:
            t._buf = _memory(h, t.nbytes)
            t._address = ctypes.addressof(t._buf)
        return t

    @property
    def type(self) -> str:
        return DTYPES[self._dtype]

    @property
    def format(self) -> str:
        return FORMATS[self._dtype]

    @property
    def data(self):
        if self._strings is not None:
            return list(self._strings)
        view = memoryview(self._buf).cast("B")
        return view.cast(FORMATS[self._dtype] if self._dtype not in (9, 10) else "H", self.shape)

    def __buffer__(self, flags):  # Python 3.12+: memoryview(tensor)
        return self.data

    def tobytes(self) -> bytes:
        return bytes(self._buf) if self._strings is None else b"".join(self._strings)

    def tolist(self):
        return self.data.tolist() if self._strings is None else list(self._strings)

    def __len__(self):
        return self.shape[0] if self.shape else 0

    def __repr__(self):
        return f"<ebb.Tensor {self.type} {shape_string(self.shape)}>"


def _strings(h: int, shape):
    out = []
    data, length = c_void_p(), c_size_t()
    for i in range(lib.ebb_tensor_element_count(h)):
        check(lib.ebb_tensor_string(h, i, byref(data), byref(length)))
        out.append(ctypes.string_at(data.value, length.value) if length.value else b"")
    return out


def output(h: int):
    """A tensor ebb made, now owned by the caller, as an ndarray (NumPy) or an ebb.Tensor."""
    if np is None:
        return Tensor._take(h)
    dtype = lib.ebb_tensor_dtype(h)
    shape = _shape_of(h)
    if dtype == BYTES:
        items = _strings(h, shape)
        lib.ebb_tensor_destroy(h)
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out.reshape(shape)
    nbytes = lib.ebb_tensor_byte_size(h)
    if nbytes == 0:
        lib.ebb_tensor_destroy(h)
        return np.empty(shape, NP_DTYPES[dtype])
    return np.frombuffer(_memory(h, nbytes), NP_DTYPES[dtype]).reshape(shape)


def take_list(lst: int):
    """[(name, value)] of a tensor list, which is destroyed."""
    try:
        out = []
        for i in range(lib.ebb_tensors_count(lst)):
            name = lib.ebb_tensors_name(lst, i).decode("utf-8", "replace")
            out.append((name, output(lib.ebb_tensors_take(lst, i))))
        return out
    finally:
        lib.ebb_tensors_destroy(lst)


# --- images and frames ------------------------------------------------------------------------------

def _is_array(value) -> bool:
    return np is not None and isinstance(value, np.ndarray)


def _describe(value) -> str:
    if _is_array(value):
        return f"a {value.dtype.name} array of shape {np_shape(value.shape)}"
    if isinstance(value, Tensor):
        return f"an ebb.Tensor of {value.type} {shape_string(value.shape)}"
    view = memoryview(value)
    return f"a buffer of format '{view.format}' and shape {np_shape(view.shape)}"


def _kind(value):
    """('tensor' | 'image' | None, dtype, shape) of an array, an ebb.Tensor or a buffer."""
    if _is_array(value):
        dtype = value.dtype
        shape = value.shape
        is_f32, is_u8 = dtype == np.float32, dtype == np.uint8
    elif isinstance(value, Tensor):
        shape = value.shape
        is_f32, is_u8 = value._dtype == FLOAT32, value._dtype == UINT8
    else:
        view = memoryview(value)
        shape = view.shape
        is_f32, is_u8 = _format_matches(view.format, FLOAT32), view.format.lstrip("@=<") in ("B", "c")
    if is_f32 and len(shape) == 4:
        return "tensor"
    if is_u8 and len(shape) in (2, 3):
        return "image"
    return None


def image_handle(held: Held, value, what: str) -> int:
    """A UINT8 image [H,W,C] / [H,W] as a tensor handle (NumPy arrays of any strides are copied to C order)."""
    if _is_array(value):
        if value.dtype != np.uint8 or value.ndim not in (2, 3):
            raise TypeError(f"{what} must be a uint8 image [H,W,C] (C = 1, 3 or 4) or [H,W]; got {_describe(value)}")
        value = np.ascontiguousarray(value)
        held.keep.append(value)
        return held.borrow(UINT8, value.shape, value.ctypes.data, value.nbytes)
    if isinstance(value, Tensor) or has_buffer(value):
        if _kind(value) != "image":
            raise TypeError(f"{what} must be a uint8 image [H,W,C] (C = 1, 3 or 4) or [H,W]; got {_describe(value)}")
        if isinstance(value, Tensor):
            return held.borrow(UINT8, value.shape, value._address, value.nbytes)
        _, shape, address, nbytes = held.buffer(value, what)
        return held.borrow(UINT8, shape, address, nbytes)
    raise TypeError(f"{what} must be a numpy.ndarray of uint8 [H,W,C] (C = 1, 3 or 4) or [H,W]; got "
                    f"{type_name(value)}")


def float_handle(held: Held, value, what: str) -> int:
    """A C-contiguous float32 tensor as a borrowed handle."""
    if _is_array(value):
        if not (value.flags.c_contiguous and value.flags.aligned):
            raise ValueError(f"{what} must be C-contiguous and aligned (it is read in place); got shape "
                             f"{np_shape(value.shape)} that is not (use numpy.ascontiguousarray(frame))")
        held.keep.append(value)
        return held.borrow(FLOAT32, value.shape, value.ctypes.data, value.nbytes)
    if isinstance(value, Tensor):
        return held.borrow(FLOAT32, value.shape, value._address, value.nbytes)
    _, shape, address, nbytes = held.buffer(value, what)
    return held.borrow(FLOAT32, shape, address, nbytes)


def frames_in(held: Held, frames, channels: int):
    """Frames of a ready-made operation: ([handle], images?). Images become tensors of `channels` (> 0)."""
    if _is_array(frames) or not isinstance(frames, (list, tuple)):
        raise TypeError("frames must be a list of numpy arrays (float32 [1,C,H,W] tensors or uint8 [H,W,C] "
                        f"images); got {type_name(frames)}")
    handles, images = [], False
    for index, value in enumerate(frames):
        what = f"frame {index}"
        if not (_is_array(value) or isinstance(value, Tensor) or (np is None and has_buffer(value))):
            raise TypeError(f"{what} must be a numpy.ndarray; got {type_name(value)}")
        kind = _kind(value)
        if kind is None:
            raise TypeError(f"{what} must be a float32 NCHW tensor [1,C,H,W] or a uint8 HWC image [H,W,C] / [H,W]; "
                            f"got {_describe(value)}")
        image = kind == "image"
        if index > 0 and image != images:
            raise TypeError(f"{what} is {'a uint8 image' if image else 'a float32 tensor'} but frame 0 is "
                            f"{'a uint8 image' if images else 'a float32 tensor'}: give frames of one kind")
        images = image
        if image:
            source = image_handle(held, value, what)
            c = channels if channels > 0 else (_shape_of(source)[2] if lib.ebb_tensor_rank(source) == 3 else 1)
            h = c_void_p()
            check(lib.ebb_image_to_tensor(source, c, byref(h)))
            held.handles.append(h.value)
            handles.append(h.value)
        else:
            handles.append(float_handle(held, value, what))
    return handles, images


def frames_out(lst: int, images: bool):
    """The results of a ready-made operation, as the frames came in (images back through TensorToImage)."""
    if not images:
        return [value for _, value in take_list(lst)]
    out = []
    try:
        for i in range(lib.ebb_tensors_count(lst)):
            t = lib.ebb_tensors_take(lst, i)
            image = c_void_p()
            try:
                check(lib.ebb_tensor_to_image(t, byref(image)))
            finally:
                lib.ebb_tensor_destroy(t)
            out.append(output(image.value))
    finally:
        lib.ebb_tensors_destroy(lst)
    return out
