"""The exceptions of ebb: one class per ebb::StatusCode, all under ebb.Error.

The extension raises these with the message of the library's Status and its code
(``err.code == "resource_exhausted"``). Each also derives from the built-in
exception a Python caller would expect, so ``except MemoryError`` catches
ResourceExhausted and ``except ValueError`` catches InvalidArgument.
"""


class Error(Exception):
    """Base of every error ebb raises from the library's Status.

    ``code`` is the name of ebb's StatusCode (``"invalid_argument"``,
    ``"resource_exhausted"``, ...); ``message`` is the Status message.
    """

    code = "unknown"

    def __init__(self, message: str, code: "str | None" = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidArgument(Error, ValueError):
    """The caller's input is wrong: shape, name, model file, policy, option."""

    code = "invalid_argument"


class NotFound(Error, LookupError):
    """A model file, pool model or policy file does not exist."""

    code = "not_found"


class ResourceExhausted(Error, MemoryError):
    """Memory ran out (arena cap, device out of memory, budget). The session
    that ran out is dropped from the cache; the next load builds it afresh."""

    code = "resource_exhausted"


class Unavailable(Error, RuntimeError):
    """A device or model cannot be used now (strict CUDA request, pool model not loaded)."""

    code = "unavailable"


class FailedPrecondition(Error, RuntimeError):
    """The object is not in a state that allows the call (a second Runtime owning
    the shared arena, a run outside its operation, a released lease)."""

    code = "failed_precondition"


class Cancelled(Error):
    """An operation stopped because the caller asked it to (event, callback)."""

    code = "cancelled"


class Internal(Error, RuntimeError):
    """ONNX Runtime or ebb failed in an unexpected way."""

    code = "internal"


_BY_CODE = {c.code: c for c in (InvalidArgument, NotFound, ResourceExhausted, Unavailable,
                                 FailedPrecondition, Cancelled, Internal)}


def _make(code: str, message: str) -> Error:
    """The exception for a Status (called by the extension)."""
    return _BY_CODE.get(code, Error)(message, code)
