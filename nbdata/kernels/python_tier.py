"""Tier 0 of nbdata's record kernels: their Python source, while Numba compiles them.

On a machine whose Numba cache is empty, a first TFRecord or CSV pipeline waited 2.5-3.7 s
for its first batch, nearly all of it Numba compiling the record scanner and the Example
or CSV parser (their serial tiers, :mod:`nbdata.kernels.tiers`). A :class:`ColdStart`
kernel whose machine code for a call's argument types is neither compiled in this process
nor in Numba's disk cache starts compiling it on a background thread and meanwhile runs
the function's own Python source for calls small enough (the first batches): the same
code run by the interpreter, with every njit function it calls replaced by its Python
source too, ``prange`` by ``range`` and intrinsics by registered Python equivalents
(:func:`python_equivalent`). Once the machine code is ready, every call runs it.

The values are the same bit for bit. Numba widens integers narrower than 64 bits before
arithmetic; so that the interpreter does too, arguments that are arrays of such integers
(bytes of records and lines above all) are handed to the Python source as memoryviews,
whose items are Python ints (NumPy would keep ``uint8 - 48`` a wrapping uint8). A call
the Python source cannot run as Numba would (it raises, or meets a construct with no
Python equivalent) waits for the machine code instead (what it wrote
undone first), and so does a call predicted to
take longer than :data:`MAX_CALL_SECONDS` in Python or past the kernel's :data:`MAX_SECONDS`
(the rate is measured per kernel; before the first measurement, calls of up to
``first_work`` units of work run).
``tests/io/test_python_tier.py`` runs the Python tier against the compiled kernels.

A process that ends before such a compile does waits for it (so that the next process
finds the kernel in Numba's disk cache: a first process that reads one batch and ends
takes the compile's seconds at its exit, once), and so does a ``fork()``
(:func:`nbdata.kernels.tiers.compile_thread`).

``NBDATA_PYTHON_TIER=0`` turns the tier off (a first call then compiles in the foreground
as the kernel's own dispatcher does).
"""

from __future__ import annotations

import os
import threading
import time
import types as pytypes

import numba
import numpy as np
from numba.core.dispatcher import Dispatcher

from nbdata.kernels import tiers
from nbdata.kernels.tiers import arg_types, load_if_free

# A call runs in Python only when the kernel's measured rate says it takes at most
# MAX_CALL_SECONDS, and while the kernel's Python calls took less than MAX_SECONDS in all:
# the interpreter shares the GIL with the compile (Numba compiles in Python), so every
# second of Python delays the machine code by about as much. A first pipeline gets its
# first batches at once and the rest from the machine code, ~0.2 s later than without.
MAX_CALL_SECONDS = 0.1
MAX_SECONDS = 0.2
ENABLED = os.environ.get("NBDATA_PYTHON_TIER", "1").strip().lower() not in ("0", "false", "no")

_EQUIVALENTS: dict = {}   # id(intrinsic) -> (intrinsic, Python function)


def python_equivalent(intrinsic, function) -> None:
    """Register ``function`` as what ``intrinsic`` (a ``numba.extending.intrinsic``)
    does, for the Python source of kernels that call it."""
    _EQUIVALENTS[id(intrinsic)] = (intrinsic, function)


class NoPythonSource(Exception):
    """The kernel calls something with no Python equivalent."""


class _NumbaForPython:
    """``numba`` as the Python source sees it: ``numba.prange`` is ``range``."""

    prange = range

    def __getattr__(self, name):
        return getattr(numba, name)


_NUMBA = _NumbaForPython()


def _names(code) -> set:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= _names(const)
    return names


def python_source(kernel, memo: dict | None = None):
    """The Python function that runs ``kernel`` (a Numba dispatcher, a tiered kernel, or
    a plain function) in the interpreter, with the njit functions it calls replaced by
    theirs. Raises NoPythonSource for an intrinsic without a registered equivalent."""
    memo = {} if memo is None else memo
    found = memo.get(id(kernel))
    if found is not None:
        return found[1]
    func = getattr(kernel, "py_func", kernel)
    scope = dict(func.__globals__)
    cells = func.__closure__
    if cells:   # (a kernel made inside a function calls its neighbours through cells)
        cells = tuple(pytypes.CellType() for _ in cells)
    twin = pytypes.FunctionType(func.__code__, scope, func.__name__, func.__defaults__, cells)
    memo[id(kernel)] = (kernel, twin)
    for name in _names(func.__code__):
        if name in scope:
            scope[name] = _in_python(name, scope[name], func, memo)
    for i, cell in enumerate(func.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:   # (an empty cell stays empty)
            continue
        cells[i].cell_contents = _in_python(func.__code__.co_freevars[i], value, func, memo)
    return twin


def _in_python(name: str, value, func, memo: dict):
    """What the Python source of ``func`` calls in place of ``value``."""
    if isinstance(value, (Dispatcher, tiers.TieredKernel)):
        return python_source(value, memo)
    if value is numba.prange:
        return range
    if value is numba:
        return _NUMBA
    if type(value).__name__ == "_Intrinsic":
        equivalent = _EQUIVALENTS.get(id(value))
        if equivalent is None:
            raise NoPythonSource(f"{func.__qualname__} calls the intrinsic {name}")
        return equivalent[1]
    return value


def _has_cache_index(kernel) -> bool:
    """Whether Numba's disk cache has an index file for ``kernel`` (some signature of
    it was saved: loading, not compiling, is what a call most likely waits for)."""
    try:
        return os.path.exists(kernel._cache._cache_file._index_path)
    except (AttributeError, OSError):
        return False


def _writable(args) -> list:
    """The writable arrays among ``args`` and inside their tuples (a kernel's outputs)."""
    found = []
    for a in args:
        for x in (a if isinstance(a, tuple) else (a,)):
            if type(x) is np.ndarray and x.flags.writeable:
                found.append(x)
    return found


def _for_python(arg):
    """An argument as the Python source takes it: an array of integers narrower than 64
    bits (or of booleans) as a memoryview, whose items are Python ints."""
    if (type(arg) is np.ndarray and arg.dtype.kind in "biu" and arg.dtype.itemsize < 8
            and arg.flags.c_contiguous and arg.ndim >= 1 and arg.size):
        return memoryview(arg)
    return arg


class ColdStart:
    """``kernel`` (a Numba dispatcher with ``cache=True``) called through
    :meth:`call`, which runs its Python source while the machine code for the call's
    argument types compiles in the background (see the module)."""

    def __init__(self, kernel, first_work: int):
        self.kernel = kernel
        self.first_work = first_work
        self._lock = threading.Lock()
        self._types: dict = {}       # argument fingerprints -> signature (arg_types)
        self._ready: set = set()     # signatures with machine code
        self._ready_keys: set = set()   # their arguments' type fingerprints
        self._compiling: dict = {}   # signature -> background thread
        self._source = None          # the Python source (False: none)
        self.seconds_per_work: float | None = None
        self.python_calls = 0        # calls the Python source ran (for tests and stats)
        self.python_seconds = 0.0

    def call(self, args: tuple, work: int, python_args: tuple | None = None):
        """``kernel(*args)``; ``work``: the most the call may do in the kernel's unit of
        work (bytes), which predicts its time in Python; ``python_args``: the arguments
        for the Python source when they differ (a scanner asked to stop sooner: fewer
        records, the same ones)."""
        key = tiers.fingerprints(args)   # (a signature hashes its types in Python)
        tiers.LAST_CALL.python = False
        if key is not None and key in self._ready_keys:
            return self.kernel(*args)
        sig = arg_types(args, self._types, key)
        if sig in self._ready:
            if key is not None:
                self._ready_keys.add(key)
            return self.kernel(*args)
        thread = self._compiling.get(sig)
        if thread is None:
            # (the disk cache is looked in here unless another thread is compiling; then
            # the call waits for it only where the cache has an entry for the kernel, else
            # the background compile looks there itself, and this call does not wait)
            loaded = load_if_free(self.kernel, sig) if ENABLED else True
            if loaded or (loaded is None and _has_cache_index(self.kernel)):
                self._ready.add(sig)
                return self.kernel(*args)
            thread = self._start(sig)
        if thread.is_alive() and self._fits(work):
            source = self._python()
            if source is not None:
                began = time.perf_counter()
                # (what the call may write, as it was: a source that raises half way has
                # written some of it, and the machine code may rely on zeroed arrays)
                run = args if python_args is None else python_args
                kept = [(a, a.copy()) for a in _writable(run)]
                try:
                    with np.errstate(all="ignore"):
                        result = source(*[_for_python(a) for a in run])
                except Exception:  # noqa: BLE001 - the machine code decides, as it would
                    for a, before in kept:
                        np.copyto(a, before)
                else:
                    self._measured(work, time.perf_counter() - began)
                    tiers.LAST_CALL.python = True
                    return result
        thread.join()
        self._ready.add(sig)
        return self.kernel(*args)   # (compiles here if the background compile failed)

    def _start(self, sig: tuple) -> threading.Thread:
        with self._lock:
            thread = self._compiling.get(sig)
            if thread is None:
                kernel = self.kernel

                def compile_now():
                    try:
                        kernel.compile(sig)
                    except Exception:  # noqa: BLE001 - the foreground call raises it
                        pass

                # Not a daemon: a process that ends before the compile does waits for it,
                # so that Numba's disk cache has the kernel for the next process.
                thread = self._compiling[sig] = tiers.compile_thread(compile_now, daemon=False)
        return thread

    def _fits(self, work: int) -> bool:
        rate = self.seconds_per_work
        if rate is None:
            return work <= self.first_work
        return work * rate <= min(MAX_CALL_SECONDS, MAX_SECONDS - self.python_seconds)

    def _measured(self, work: int, seconds: float) -> None:
        self.python_calls += 1
        self.python_seconds += seconds
        if work > 0:
            rate = seconds / work
            old = self.seconds_per_work
            self.seconds_per_work = rate if old is None else max(rate, 0.5 * (old + rate))

    def _python(self):
        if self._source is None:
            try:
                self._source = python_source(self.kernel)
            except NoPythonSource:
                self._source = False
        return self._source or None

    def run_python(self, *args):
        """The Python source's result for ``args`` (for tests: no machine code runs)."""
        source = self._python()
        if source is None:
            raise NoPythonSource(f"{self.kernel} has no Python source")
        with np.errstate(all="ignore"):
            return source(*[_for_python(a) for a in args])


_COLD: dict = {}   # id(kernel) -> (kernel, its ColdStart)
_COLD_LOCK = threading.Lock()


def cold_start(kernel, first_work: int) -> ColdStart:
    """The :class:`ColdStart` of ``kernel`` (one per dispatcher: a tiered kernel's serial
    twin, whichever kernel object the caller holds now)."""
    found = _COLD.get(id(kernel))
    if found is None or found[0] is not kernel:
        with _COLD_LOCK:
            found = _COLD.get(id(kernel))
            if found is None or found[0] is not kernel:
                found = _COLD[id(kernel)] = (kernel, ColdStart(kernel, first_work))
    return found[1]
