"""ebb: ONNX models in-process that keep loaded but give their inference memory back.

A thin binding of ebb's C API (libebb.so.1 / ebb.dll, through ctypes: one package for every
CPython from 3.10): a Runtime owns one memory policy and a cache of sessions; the arena memory a
run grows into is released at the end of the caller's operation (a ``with runtime.operation()``
block, or a ready-made operation such as run_tiled) or, for single session.run calls, once they
pause (50 ms by default, so a loop of runs keeps it), not kept for the life of the session.

    import ebb, numpy as np
    rt = ebb.Runtime()
    up = rt.load("models/waifu2x_scale2x/model.onnx")
    frames = [ebb.read_image("a.png"), ebb.read_image("b.png")]
    out = rt.run_tiled(up, frames, tile=128, overlap=8)  # one operation, one release
    ebb.write_png("a_2x.png", out[0])
    print(rt.memory()["rss_bytes"])

NumPy is optional: without it, inputs are any buffer-protocol objects and outputs ebb.Tensor
objects (see docs/python.md). Errors are ebb.Error subclasses carrying the library's status code;
the GIL is released during every call into the library.
"""

import atexit as _atexit

from ._errors import (
    Cancelled,
    Error,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unavailable,
)
from ._ebb import (
    Operation,
    Runtime,
    Session,
    TensorInfo,
    __version__,
    image_to_tensor,
    read_image,
    read_model_config,
    tensor_to_image,
    write_png,
)
from ._pool import Lease, ModelPool, ModelStatus, PoolEvent, _shutdown
from ._tensors import Tensor

# Leases go back and pools stop calling Python from their keep-alive threads before the interpreter shuts down.
_atexit.register(_shutdown)

__all__ = [
    "Cancelled",
    "Error",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "Lease",
    "ModelPool",
    "ModelStatus",
    "NotFound",
    "Operation",
    "PoolEvent",
    "ResourceExhausted",
    "Runtime",
    "Session",
    "Tensor",
    "TensorInfo",
    "Unavailable",
    "__version__",
    "image_to_tensor",
    "read_image",
    "read_model_config",
    "tensor_to_image",
    "write_png",
]
