"""Exceptions raised by nbdata, mirroring ``tf.errors``.

Each class derives from :class:`OpError` and, where Python has a matching
built-in, from that built-in too, so ``except ValueError`` catches an
:class:`InvalidArgumentError`.

>>> import nbdata as nd
>>> issubclass(nd.errors.InvalidArgumentError, ValueError)
True
>>> try:
...     nd.Dataset.range(0).make_one_shot_iterator().get_next()
... except nd.errors.OutOfRangeError as e:
...     print(type(e).__name__)
OutOfRangeError
"""

from __future__ import annotations


class OpError(Exception):
    """Base class of every nbdata runtime error.

    Attributes:
        message: the human-readable explanation.
        op: the name of the operation that failed, or ``None``.
    """

    def __init__(self, message: str, op: str | None = None):
        super().__init__(message)
        self.message = message
        self.op = op


class CancelledError(OpError):
    """An operation was cancelled (e.g. an iterator was closed)."""


class InvalidArgumentError(OpError, ValueError):
    """An argument or an element has an invalid value, type or shape."""


class FormattedValueError(ValueError):
    """Raised from compiled (nopython) code as ``raise FormattedValueError(template,
    *values)``; what Python receives is a plain :class:`ValueError` whose message is
    ``template.format(*values)``. The values cross into Python as they are, so the
    compiled function builds no string: ``"..." + str(n)`` in nopython code makes Numba
    compile its string machinery, seconds per process and signature.

    >>> import numba
    >>> @numba.njit
    ... def check(n):
    ...     if n < 0:
    ...         raise FormattedValueError("n must be >= 0, got {}", n)
    ...     return n
    >>> try:
    ...     check(-2)
    ... except ValueError as e:
    ...     print(type(e).__name__, e)
    ValueError n must be >= 0, got -2
    """

    def __new__(cls, template, *values):
        return ValueError(template.format(*values))


class NotFoundError(OpError, FileNotFoundError):
    """A file or other resource does not exist."""


class AlreadyExistsError(OpError):
    """A resource that should be new already exists (e.g. a cache file being written)."""


class FailedPreconditionError(OpError):
    """The system is not in a state that allows the operation (e.g. an uninitialized iterator)."""


class OutOfRangeError(OpError):
    """Iteration went past the end of a dataset."""


class UnimplementedError(OpError, NotImplementedError):
    """The operation is not supported."""


class ResourceExhaustedError(OpError, MemoryError):
    """A resource such as memory or a buffer ran out."""


class UnavailableError(OpError):
    """A resource is temporarily unavailable."""


class DataLossError(OpError):
    """Data is corrupt or truncated."""


class DeadlineExceededError(OpError, TimeoutError):
    """An operation did not finish before its deadline (a session's operation timeout)."""


class InternalError(OpError):
    """A failure inside the runtime (e.g. a CUDA driver call), not caused by the input."""


class UnknownError(OpError):
    """An error of no other class (e.g. an exception of an unusual type in a py_func)."""


__all__ = [
    "OpError", "CancelledError", "InvalidArgumentError", "NotFoundError",
    "AlreadyExistsError", "FailedPreconditionError", "OutOfRangeError",
    "UnimplementedError", "ResourceExhaustedError", "UnavailableError",
    "DataLossError", "DeadlineExceededError", "InternalError", "UnknownError",
]
