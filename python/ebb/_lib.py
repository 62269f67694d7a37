"""The C API of ebb (include/ebb/c.h) through ctypes: the library, its functions' signatures, and
the conversions every call shares (status -> exception, str -> bytes, JSON strings).

The library is libebb.so.1 (Linux) or ebb.dll (Windows), found beside this file (the wheel ships
it there with ONNX Runtime's library), else at $EBB_LIBRARY. ctypes.CDLL releases the GIL during
every call; callbacks (ctypes.CFUNCTYPE) take it back while they run.
"""
import ctypes
import json
import os
import sys
from ctypes import POINTER, c_char_p, c_double, c_int, c_int64, c_size_t, c_uint64, c_void_p

from . import _errors

_HERE = os.path.dirname(os.path.abspath(__file__))

if sys.platform == "win32":
    LIBRARY = "ebb.dll"  # the Windows build's name (CMake: PREFIX "" on ebb_c)
    _ORT = ("onnxruntime.dll",)
else:
    LIBRARY = "libebb.so.1"  # the soname: EBB_ABI_VERSION 1
    _ORT = ("libonnxruntime.so.1",)


def _load() -> ctypes.CDLL:
    path = os.path.join(_HERE, LIBRARY)
    if not os.path.exists(path):
        path = os.environ.get("EBB_LIBRARY", "")
        if not path:
            raise ImportError(f"ebb: {LIBRARY} is neither beside {__file__} nor named by $EBB_LIBRARY")
    folder = os.path.dirname(os.path.abspath(path))
    if sys.platform == "win32":
        os.add_dll_directory(folder)
    # ONNX Runtime's library beside ours is the one to use (whatever else the loader would find).
    for name in _ORT:
        ort = os.path.join(folder, name)
        if os.path.exists(ort):
            ctypes.CDLL(ort)
    return ctypes.CDLL(path)


lib = _load()

# Opaque handles are void pointers; a status is NULL on success.
H = c_void_p
PH = POINTER(c_void_p)
P64 = POINTER(c_int64)
PROGRESS = ctypes.CFUNCTYPE(c_int, c_void_p, c_int, c_int)
POOL_EVENT = ctypes.CFUNCTYPE(None, c_void_p, c_void_p)
POOL_BODY = ctypes.CFUNCTYPE(c_void_p, c_void_p, c_void_p)

_SIGNATURES = {
    # name: (restype, argtypes); restype H for functions returning ebb_status_t*
    "ebb_abi_version": (c_int, ()),
    "ebb_version": (c_char_p, ()),
    "ebb_free": (None, (c_void_p,)),
    "ebb_status_code": (c_int, (H,)),
    "ebb_status_message": (c_char_p, (H,)),
    "ebb_status_create": (H, (c_int, c_char_p)),
    "ebb_status_destroy": (None, (H,)),
    "ebb_code_name": (c_char_p, (c_int,)),
    "ebb_dtype_size": (c_size_t, (c_int,)),
    "ebb_tensor_borrow": (H, (c_int, P64, c_size_t, c_void_p, c_size_t, PH)),
    "ebb_tensor_create_copy": (H, (c_int, P64, c_size_t, c_void_p, c_size_t, PH)),
    "ebb_tensor_create_strings": (H, (P64, c_size_t, POINTER(c_char_p), POINTER(c_size_t), c_size_t, PH)),
    "ebb_tensor_destroy": (None, (H,)),
    "ebb_tensor_dtype": (c_int, (H,)),
    "ebb_tensor_rank": (c_size_t, (H,)),
    "ebb_tensor_shape": (P64, (H,)),
    "ebb_tensor_element_count": (c_int64, (H,)),
    "ebb_tensor_byte_size": (c_size_t, (H,)),
    "ebb_tensor_data": (c_void_p, (H,)),
    "ebb_tensor_borrowed": (c_int, (H,)),
    "ebb_tensor_string": (H, (H, c_size_t, POINTER(c_void_p), POINTER(c_size_t))),
    "ebb_tensors_count": (c_size_t, (H,)),
    "ebb_tensors_name": (c_char_p, (H, c_size_t)),
    "ebb_tensors_take": (H, (H, c_size_t)),
    "ebb_tensors_destroy": (None, (H,)),
    "ebb_runtime_create": (H, (c_char_p, c_size_t, PH)),
    "ebb_runtime_create_from_file": (H, (c_char_p, PH)),
    "ebb_runtime_destroy": (None, (H,)),
    "ebb_runtime_policy_json": (c_char_p, (H,)),
    "ebb_load_options_create": (H, ()),
    "ebb_load_options_destroy": (None, (H,)),
    "ebb_load_options_set_device": (H, (H, c_char_p)),
    "ebb_load_options_set_strict": (None, (H, c_int)),
    "ebb_load_options_set_name": (H, (H, c_char_p)),
    "ebb_runtime_load": (H, (H, c_char_p, H, PH)),
    "ebb_runtime_load_bytes": (H, (H, c_char_p, c_size_t, H, PH)),
    "ebb_runtime_unload_path": (c_size_t, (H, c_char_p)),
    "ebb_runtime_unload_session": (c_int, (H, H)),
    "ebb_runtime_clear": (None, (H,)),
    "ebb_runtime_trim": (H, (H,)),
    "ebb_runtime_load_count": (c_uint64, (H,)),
    "ebb_runtime_cached_count": (c_size_t, (H,)),
    "ebb_runtime_memory": (H, (H, PH)),
    "ebb_memory_destroy": (None, (H,)),
    "ebb_memory_json": (c_char_p, (H,)),
    "ebb_session_destroy": (None, (H,)),
    "ebb_session_share": (H, (H, PH)),
    "ebb_session_same": (c_int, (H, H)),
    "ebb_session_name": (c_char_p, (H,)),
    "ebb_session_source_path": (c_char_p, (H,)),
    "ebb_session_device": (c_char_p, (H,)),
    "ebb_session_provider": (c_char_p, (H,)),
    "ebb_session_fallback_reason": (c_char_p, (H,)),
    "ebb_session_input_count": (c_size_t, (H,)),
    "ebb_session_output_count": (c_size_t, (H,)),
    "ebb_session_input": (c_int, (H, c_size_t, POINTER(c_char_p), POINTER(c_int), POINTER(P64), POINTER(c_size_t))),
    "ebb_session_output": (c_int, (H, c_size_t, POINTER(c_char_p), POINTER(c_int), POINTER(P64), POINTER(c_size_t))),
    "ebb_session_metadata": (H, (H, c_char_p, POINTER(c_void_p))),
    "ebb_session_release_targets": (H, (H, POINTER(c_void_p))),
    "ebb_session_run_count": (c_uint64, (H,)),
    "ebb_session_release_count": (c_uint64, (H,)),
    "ebb_session_in_flight": (c_int, (H,)),
    "ebb_session_run": (H, (H, POINTER(c_char_p), POINTER(H), c_size_t, POINTER(c_char_p), c_size_t, PH)),
    "ebb_control_create": (H, ()),
    "ebb_control_destroy": (None, (H,)),
    "ebb_control_set_progress": (None, (H, PROGRESS, c_void_p)),
    "ebb_control_cancel": (None, (H,)),
    "ebb_operation_create": (H, (H, c_int, H, PH)),
    "ebb_operation_run": (H, (H, H, POINTER(c_char_p), POINTER(H), c_size_t, POINTER(c_char_p), c_size_t, PH)),
    "ebb_operation_end": (H, (H,)),
    "ebb_operation_abandon": (None, (H,)),
    "ebb_operation_destroy": (None, (H,)),
    "ebb_operation_runs_done": (c_int, (H,)),
    "ebb_operation_released": (c_int, (H,)),
    "ebb_run_per_frame": (H, (H, H, POINTER(H), c_size_t, H, PH)),
    "ebb_run_joint": (H, (H, H, POINTER(H), c_size_t, H, PH)),
    "ebb_run_tiled": (H, (H, H, POINTER(H), c_size_t, c_int64, c_int64, c_int64, c_int, H, PH)),
    "ebb_run_pipeline": (H, (H, POINTER(H), c_size_t, POINTER(H), c_size_t, H, PH)),
    "ebb_model_resolve": (H, (c_char_p, c_char_p, c_char_p, c_char_p, POINTER(c_void_p), POINTER(c_void_p))),
    "ebb_model_config_json": (H, (c_char_p, POINTER(c_void_p))),
    "ebb_image_read": (H, (c_char_p, PH)),
    "ebb_image_write_png": (H, (c_char_p, H)),
    "ebb_image_to_tensor": (H, (H, c_int, PH)),
    "ebb_tensor_to_image": (H, (H, PH)),
    "ebb_ocr_load": (H, (H, c_char_p, H, PH)),
    "ebb_ocr_destroy": (None, (H,)),
    "ebb_ocr_images": (H, (H, POINTER(c_void_p), POINTER(c_int), POINTER(c_int), POINTER(c_int), c_size_t, H,
                           POINTER(c_void_p))),
    "ebb_pool_options_create": (H, ()),
    "ebb_pool_options_destroy": (None, (H,)),
    "ebb_pool_options_set_cpu_budget": (None, (H, c_int64, c_double)),
    "ebb_pool_options_set_cuda_budget": (None, (H, c_int64, c_double)),
    "ebb_pool_options_set_wait_for_capacity_ms": (None, (H, c_int64)),
    "ebb_pool_options_set_keep_alive_ms": (None, (H, c_int64)),
    "ebb_pool_options_set_memory_admission": (None, (H, c_int, c_int64)),
    "ebb_pool_options_set_wait_events": (None, (H, c_int)),
    "ebb_pool_event_kind": (c_int, (H,)),
    "ebb_pool_event_model": (c_char_p, (H,)),
    "ebb_pool_event_on_demand": (c_int, (H,)),
    "ebb_pool_event_load_ms": (c_double, (H,)),
    "ebb_pool_event_reason": (c_char_p, (H,)),
    "ebb_pool_event_wait_ms": (c_double, (H,)),
    "ebb_pool_event_admitted": (c_int, (H,)),
    "ebb_pool_create": (H, (H, H, POOL_EVENT, c_void_p, PH)),
    "ebb_pool_destroy": (None, (H,)),
    "ebb_pool_add": (H, (H, c_char_p, c_char_p, H, c_int, P64)),
    "ebb_pool_contains": (c_int, (H, c_char_p)),
    "ebb_pool_acquire_for_run": (H, (H, c_char_p, P64, c_int, c_int64, c_int64, PH)),
    "ebb_lease_session": (H, (H,)),
    "ebb_lease_destroy": (None, (H,)),
    "ebb_pool_run_within": (H, (H, c_char_p, P64, c_int, c_int64, c_int64, POOL_BODY, c_void_p)),
    "ebb_pool_load": (H, (H, c_char_p)),
    "ebb_pool_unload": (H, (H, c_char_p)),
    "ebb_pool_reap_now": (None, (H,)),
    "ebb_pool_budget": (c_int64, (H, c_char_p)),
    "ebb_pool_used": (c_int64, (H, c_char_p)),
    "ebb_pool_status": (H, (H, c_char_p, PH)),
    "ebb_pool_snapshot": (H, (H, PH)),
    "ebb_pool_snapshot_destroy": (None, (H,)),
    "ebb_pool_snapshot_count": (c_size_t, (H,)),
    "ebb_pool_snapshot_json": (c_void_p, (H, c_size_t)),
    "ebb_pool_predict_need_json": (H, (H, c_char_p, c_int64, POINTER(c_void_p))),
    "ebb_pool_admission_json": (c_void_p, (H,)),
}

for _name, (_res, _args) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

if lib.ebb_abi_version() != 1:
    raise ImportError(f"ebb: {LIBRARY} has ABI version {lib.ebb_abi_version()}; this package speaks 1")

# ebb_dtype_t values (ebb::DataType) and names.
DTYPES = ("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "BF16",
          "FP32", "FP64", "BYTES")
BYTES = 13
UINT8 = 1
FLOAT32 = 11


def error(status: int) -> _errors.Error:
    """The exception of a non-NULL status, which is destroyed."""
    code = lib.ebb_code_name(lib.ebb_status_code(status)).decode()
    message = lib.ebb_status_message(status).decode("utf-8", "replace")
    lib.ebb_status_destroy(status)
    return _errors._make(code, message)


def check(status) -> None:
    if status:
        raise error(status)


def status_of(exc: BaseException) -> int:
    """A new status for a Python exception (its code when it is an ebb.Error), for a callback to return."""
    code = getattr(exc, "code", None) if isinstance(exc, _errors.Error) else None
    codes = {"invalid_argument": 1, "not_found": 2, "resource_exhausted": 3, "unavailable": 4,
             "failed_precondition": 5, "cancelled": 6}
    text = str(exc) if code else f"Python error: {type(exc).__name__}: {exc}"
    return lib.ebb_status_create(codes.get(code, 7), text.encode("utf-8", "replace"))


def taken_string(pointer) -> str:
    """The text of a char* the library returned for the caller to free; freed here."""
    value = pointer.value if isinstance(pointer, c_void_p) else pointer
    if not value:
        raise MemoryError("ebb: out of memory")
    try:
        return ctypes.string_at(value).decode("utf-8", "replace")
    finally:
        lib.ebb_free(value)


def taken_json(pointer):
    return json.loads(taken_string(pointer))


def text(value: str) -> bytes:
    return value.encode("utf-8")


def path_arg(path, what: str) -> bytes:
    """A str or os.PathLike as the library's path bytes (UTF-8 on Windows, the file system's bytes elsewhere)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a str or os.PathLike; got {type(path).__name__}")
    value = os.fspath(path)
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    return value.encode("utf-8") if sys.platform == "win32" else os.fsencode(value)


def version() -> str:
    return lib.ebb_version().decode()
