"""Two tiers for nbdata's parallel library kernels (record parsing, CSV decoding,
compaction, shuffle draws, packing), as fused stages have them.

Numba's parallel lowering costs seconds per signature (3 s for the TFRecord parse kernel,
6 s for the CSV one on a 2-core machine), while the same function compiled without
``parallel`` takes a fraction of that. A :class:`TieredKernel` compiles that serial twin
first and runs it; once the twin has run :data:`PARALLEL_AFTER` seconds for a signature
(calls that compiled or loaded the twin do not count), the parallel kernel compiles on a
background thread and takes over at the next call. A parallel kernel already compiled in
this process, or found in Numba's disk cache, runs from the first call. Both tiers run
the same code (``prange`` is ``range`` in the twin), so which one ran a call changes
nothing but speed. The twin is a copy of the function under its own name, so Numba's
disk cache keeps the two tiers apart. A kernel that only splits the work of an existing
serial kernel into parallel parts (the Example parser's) is called through
:meth:`TieredKernel.call_or` with that serial kernel in the twin's place, so that a first
pipeline compiles no twin at all.

Below the twin, a first pipeline's record kernels have a tier 0: their Python source,
run while Numba compiles the twin (:mod:`nbdata.kernels.python_tier`).

``NBDATA_PARALLEL_KERNEL_AFTER`` sets :data:`PARALLEL_AFTER` for the process (seconds;
``0``: parallel kernels from the first call, ``inf``: serial twins only), and the default
of ``Options().parallel_kernel_after``, which a pipeline's fused stages follow.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
import types as pytypes

import numba
from numba.core import sigutils
from numba.core.compiler_lock import global_compiler_lock

from nbdata.options import parallel_kernel_after_default


PARALLEL_AFTER = parallel_kernel_after_default()

# ``LAST_CALL.python``: whether this thread's last call through a ColdStart kernel ran its
# Python source (nbdata/kernels/python_tier.py), whose time is no measure of the work.
LAST_CALL = threading.local()

try:   # Numba's C fingerprint of a value's type (its dispatchers key their type cache by it)
    from numba._dispatcher import compute_fingerprint as _fingerprint
except ImportError:  # pragma: no cover - an unfamiliar Numba: numba.typeof every call
    _fingerprint = None


def fingerprints(args) -> tuple | None:
    """The arguments' Numba type fingerprints, a tuple that hashes in C (None where one
    has none: a value Numba cannot fingerprint)."""
    if _fingerprint is None:
        return None
    try:
        return tuple(map(_fingerprint, args))
    except Exception:  # noqa: BLE001 - a value Numba cannot fingerprint
        return None


_UNSET = object()


def arg_types(args, cache: dict, key=_UNSET) -> tuple:
    """``tuple(numba.typeof(a) for a in args)``, memoized in ``cache`` by the arguments'
    type fingerprints (``key``, when the caller has them): ``numba.typeof`` costs about
    20 us an array in Python, a kernel with 22 array arguments paid half a millisecond a
    call for it. (Numba types every array as aligned, so the fingerprint, which leaves
    alignment out, decides.)"""
    if key is _UNSET:
        key = fingerprints(args)
    if key is not None:
        found = cache.get(key)
        if found is not None:
            return found
    types = tuple(numba.typeof(a) for a in args)
    if key is not None:
        cache[key] = types
    return types


class TieredKernel:
    """A ``parallel=True`` kernel called from Python, with its serial twin (see the
    module). ``kernel.parallel`` and ``kernel.serial`` are the two Numba dispatchers."""

    def __init__(self, py_func, options: dict):
        functools.update_wrapper(self, py_func)
        self.py_func = py_func
        self.parallel = numba.njit(**dict(options, parallel=True))(py_func)
        twin = pytypes.FunctionType(py_func.__code__, py_func.__globals__,
                                    py_func.__name__ + "_serial", py_func.__defaults__,
                                    py_func.__closure__)
        twin.__qualname__ = py_func.__qualname__ + "_serial"
        twin.__module__ = py_func.__module__
        twin.__doc__ = py_func.__doc__
        self.serial = numba.njit(**dict(options, parallel=False))(twin)
        self._lock = threading.Lock()
        # signature -> {"parallel": bool, "seconds": serial time, "promoting": thread}
        self._tiers: dict = {}
        self._types: dict = {}   # argument fingerprints -> signature (arg_types)
        # (the tiers it indexes, argument fingerprints -> tier): call_or's lookup
        self._by_key: tuple = (self._tiers, {})

    @property
    def signatures(self) -> list:
        """Every signature compiled in either tier."""
        return list(dict.fromkeys(self.serial.signatures + self.parallel.signatures))

    def _tier(self, sig: tuple) -> dict:
        tier = self._tiers.get(sig)
        if tier is None:
            with self._lock:
                tier = self._tiers.get(sig)
                if tier is None:
                    after = PARALLEL_AFTER
                    ready = after == 0 or (after != math.inf
                                           and load_if_free(self.parallel, sig))
                    tier = {"parallel": bool(ready), "seconds": 0.0, "promoting": None}
                    if ready is None:
                        # Another thread is compiling (a first pipeline's other kernels,
                        # nbdata/kernels/python_tier.py): this call runs the serial tier
                        # and a later one looks in the disk cache again.
                        return tier
                    self._tiers[sig] = tier
        return tier

    def __call__(self, *args):
        serial = self.serial
        return self.call_or(args, lambda: serial(*args), serial)

    def _tiers_by_key(self) -> dict:
        """Tiers by their arguments' type fingerprints (emptied where the tiers were
        reset: they start over)."""
        by_key = self._by_key
        if by_key[0] is not self._tiers:
            by_key = self._by_key = (self._tiers, {})
        return by_key[1]

    def parallel_for(self, args: tuple):
        """The parallel dispatcher where the tier of ``args``' types runs it (a caller
        calling with the same types again may call it directly), else None."""
        key = fingerprints(args)
        tier = self._tiers_by_key().get(key) if key is not None else None
        return self.parallel if tier is not None and tier["parallel"] else None

    def call_or(self, args: tuple, run_serial, compiled_by, counts: bool = True):
        """The kernel's result for ``args``: the parallel kernel's once its tier is
        ready, else ``run_serial()``'s, a serial computation of the same result (the
        twin, or an existing serial kernel the parallel one only splits into parts, so
        that a first pipeline compiles no twin of it). Its seconds count toward the
        promotion as the twin's do, except for a call that grew ``compiled_by``'s
        overloads (the Numba dispatcher ``run_serial`` calls) and where ``counts`` is
        False (work too small for parallel parts to speed up)."""
        # (the tier by the arguments' type fingerprints, ints: a tuple of Numba types
        # hashes each type in Python at every lookup)
        key = fingerprints(args)
        by_key = self._tiers_by_key()
        tier = by_key.get(key) if key is not None else None
        if tier is None:
            sig = arg_types(args, self._types, key)
            tier = self._tier(sig)
            if key is not None and self._tiers.get(sig) is tier:
                by_key[key] = tier
        if tier["parallel"]:
            return self.parallel(*args)
        known = len(compiled_by.overloads)
        began = time.perf_counter()
        LAST_CALL.python = False
        result = run_serial()
        if not counts or len(compiled_by.overloads) != known or LAST_CALL.python:
            # Not counted: work the caller says parallel parts cannot speed up, or a call
            # that compiled the serial kernel (or loaded it from the disk cache), whose
            # time is no measure of the work; counting it promoted every kernel whose
            # twin takes over PARALLEL_AFTER to compile at its first call, doubling a cold
            # start's compiling for work that may take milliseconds. (A call the serial
            # kernel's Python source ran, while it compiles, is no measure either.)
            return result
        tier["seconds"] += time.perf_counter() - began
        if tier["seconds"] >= PARALLEL_AFTER and tier["promoting"] is None:
            self._promote(arg_types(args, self._types, key), tier)
        return result

    def _promote(self, sig: tuple, tier: dict) -> None:
        with self._lock:
            if tier["promoting"] is None:
                promote(tier, lambda: self.parallel.compile(sig))


def load_compiled(kernel, signature: tuple) -> bool:
    """Whether the Numba dispatcher ``kernel`` has machine code for ``signature`` without
    compiling: compiled in this process already, or loaded now from its disk cache."""
    args, _ = sigutils.normalize_signature(signature)
    if tuple(args) in kernel.overloads:
        return True
    cache = getattr(kernel, "_cache", None)
    if cache is None:
        return False
    with global_compiler_lock:
        try:
            cres = cache.load_overload(signature, kernel.targetctx)
        except Exception:  # noqa: BLE001 - an unreadable entry: compile instead
            return False
        if cres is None:
            return False
        kernel.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        kernel.add_overload(cres)
    return True


def load_if_free(kernel, signature: tuple) -> bool | None:
    """:func:`load_compiled`, or None without waiting when another thread holds Numba's
    compiler lock (compiling: looking in the disk cache would wait for it to finish)."""
    args, _ = sigutils.normalize_signature(signature)
    if tuple(args) in kernel.overloads:
        return True
    lock = getattr(global_compiler_lock, "_lock", None)
    if lock is None or not lock.acquire(blocking=False):
        return None
    try:
        return load_compiled(kernel, signature)
    finally:
        lock.release()


_COMPILING: set = set()   # background compile threads still running
_COMPILING_LOCK = threading.Lock()


def compile_thread(target, daemon: bool) -> threading.Thread:
    """Start ``target()`` (a background compile) on a thread of its own. A fork() waits
    for every such thread first: the child of a fork taken mid-compile inherits Numba's
    compiler lock held by a thread it does not have, and its first compile would wait
    for it forever."""
    def run():
        try:
            target()
        finally:
            with _COMPILING_LOCK:
                _COMPILING.discard(thread)

    thread = threading.Thread(target=run, name="nbdata-kernel-compile", daemon=daemon)
    with _COMPILING_LOCK:
        _COMPILING.add(thread)
    thread.start()
    return thread


def finish_compiles() -> None:
    """Wait for every background compile (tier 0's, promotions) to end."""
    with _COMPILING_LOCK:
        running = list(_COMPILING)
    for thread in running:
        if thread is not threading.current_thread():
            thread.join()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=finish_compiles)


def promote(tier: dict, compile_parallel) -> None:
    """Start ``compile_parallel()`` on a background thread (``tier["promoting"]``); once
    it returns the parallel kernel takes over (``tier["parallel"]``). If it raises, the
    serial twin goes on running."""
    def run():
        try:
            compile_parallel()
        except Exception:  # noqa: BLE001 - the serial twin goes on running
            return
        tier["parallel"] = True

    tier["promoting"] = compile_thread(run, daemon=True)


def tiered(**options):
    """Decorator: a :class:`TieredKernel` of the function with these ``numba.njit``
    options (``parallel`` is set per tier)."""
    return lambda py_func: TieredKernel(py_func, options)
