"""ebb: ONNX models in-process that keep loaded but give their inference memory back.

A thin binding of ebb's C++ library (same objects, same behaviour): a Runtime
owns one memory policy and a cache of sessions; the arena memory a run grows
into is released at the end of the caller's operation (one session.run, a
``with runtime.operation()`` block, or a ready-made operation such as
run_tiled), not kept for the life of the session.

    import ebb, numpy as np
    rt = ebb.Runtime()
    up = rt.load("models/waifu2x_scale2x/model.onnx")
    frames = [ebb.read_image("a.png"), ebb.read_image("b.png")]
    out = rt.run_tiled(up, frames, tile=128, overlap=8)  # one operation, one release
    ebb.write_png("a_2x.png", out[0])
    print(rt.memory()["rss_bytes"])

Errors are ebb.Error subclasses carrying the library's status code; the GIL is
released during every run and operation.
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
    Lease,
    ModelPool,
    ModelStatus,
    Operation,
    PoolEvent,
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
from . import _ebb

# Pools stop calling Python from their keep-alive threads before the interpreter shuts down.
_atexit.register(_ebb._shutdown)

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
    "TensorInfo",
    "Unavailable",
    "__version__",
    "image_to_tensor",
    "read_image",
    "read_model_config",
    "tensor_to_image",
    "write_png",
]
