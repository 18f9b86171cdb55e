"""On-disk cache of generated fused-stage kernels, so a second process starts fast.

A kernel's generated source is written to ``<cache dir>/kernels/stage_<hash>.py``
and compiled with Numba's ``cache=True``, which stores the machine code beside it.
The hash covers the source text and a fingerprint of every user function the
kernel calls: bytecode, constants, closure values and the globals it reads (arrays
by content), plus the versions of Numba, NumPy and Python and the content of nbdata's
source files (not where or when they were installed: a reinstall of the same sources
finds its kernels). A function whose fingerprint cannot be taken (it reads an object
of unknown kind) makes the kernel compile in memory only, never from a possibly stale
cache.

The directory is :func:`nbdata.options.cache_dir` (``$NBDATA_CACHE_DIR``, ...);
``NBDATA_CACHE_DIR=""`` turns the disk cache off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import sys
import threading
import types as pytypes
from pathlib import Path
from typing import Any

import numba
import numpy as np

from nbdata.kernels.tiers import load_compiled
from nbdata.options import cache_dir, source_hash
from nbdata.primitives.table import Primitive

MAX_DEPTH = 4


class Unfingerprintable(Exception):
    """An object whose identity cannot be captured in a stable hash."""


def _package_stamp() -> str:
    """Changes whenever a source file of nbdata changes (its functions get inlined); the
    same for the same sources wherever and whenever they were installed (file contents,
    not paths or modification times)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        h.update(f"{path.relative_to(root).as_posix()}:{source_hash(str(path))};".encode())
    return h.hexdigest()


_STAMP: str | None = None


def fingerprint(obj: Any, h: "hashlib._Hash", depth: int = 0, versions: bool = True) -> None:
    """Feed a stable description of ``obj`` into ``h``; raise Unfingerprintable if none.
    With ``versions=False`` modules count by name only, not by their version or the
    state of nbdata's source files (a fingerprint that outlives upgrades of packages)."""
    if depth > MAX_DEPTH:
        raise Unfingerprintable("nested too deeply")
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise Unfingerprintable("object array")
        h.update(f"nd:{obj.dtype.str}:{obj.shape};".encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, (np.generic, np.dtype)):
        h.update(f"np:{obj!r};".encode())
    elif isinstance(obj, (tuple, list)):
        h.update(f"{type(obj).__name__}[{len(obj)}];".encode())
        for v in obj:
            fingerprint(v, h, depth + 1, versions)
    elif isinstance(obj, pytypes.CodeType):
        _code(obj, h)
    elif isinstance(obj, pytypes.ModuleType):
        name = obj.__name__
        if not versions:
            h.update(f"module:{name};".encode())
        elif _is_ours(name):
            global _STAMP
            if _STAMP is None:
                _STAMP = _package_stamp()
            h.update(f"module:{name}:{_STAMP};".encode())
        else:
            h.update(f"module:{name}:{getattr(obj, '__version__', '')};".encode())
    elif isinstance(obj, numba.core.dispatcher.Dispatcher):
        fingerprint(obj.py_func, h, depth, versions)
    elif isinstance(obj, pytypes.FunctionType):
        module = sys.modules.get(obj.__module__ or "")
        ours = module is not None and _is_ours(module.__name__)
        if ours and versions:
            h.update(f"nbdata-fn:{_nbdata_function_digest(obj)};".encode())
            return
        if ours:
            fingerprint(module, h, depth + 1, versions)
        _function(obj, h, depth, versions)
    elif isinstance(obj, Primitive):   # an op-table entry: its name and its functions
        h.update(f"primitive:{obj.name};".encode())
        for field in dataclasses.fields(obj):
            fingerprint(getattr(obj, field.name), h, depth + 1, versions)
    elif isinstance(obj, (pytypes.BuiltinFunctionType, np.ufunc, type)):
        h.update(f"named:{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', obj.__name__)};".encode())
    else:
        raise Unfingerprintable(type(obj).__name__)


# Digests of nbdata's own functions: (the function, its digest) by id.
_digests: dict = {}
_in_progress: set = set()
_cycles = [0]   # cycle markers written so far (a digest that wrote one is not kept)


def _nbdata_function_digest(fn) -> str:
    """The fingerprint of one of nbdata's functions: the package's source stamp, its name
    and code, and what it reads (closure cells, defaults, globals), fingerprinted fully.
    Nesting depth does not count inside nbdata: image ops call helpers a dozen deep, and a
    kernel calling them was never cached on disk ("nested too deeply"); a cycle (a function
    reached again while its digest is being made) counts by name. Kept for the process,
    as Numba keeps the global values a function read at its first compile."""
    hit = _digests.get(id(fn))
    if hit is not None and hit[0] is fn:
        return hit[1]
    if id(fn) in _in_progress:
        _cycles[0] += 1
        return f"cycle:{fn.__module__}.{fn.__qualname__}"
    cycles = _cycles[0]
    _in_progress.add(id(fn))
    try:
        h = hashlib.sha1()
        fingerprint(sys.modules[fn.__module__], h)
        _function(fn, h, 0, True, package=True)
        digest = h.hexdigest()
    finally:
        _in_progress.discard(id(fn))
    # Kept: module-level functions (one made per call, a closure, may hold a user's
    # function, which the cache must not keep alive), and only digests that met no cycle
    # (those depend on where the walk started).
    if not fn.__closure__ and _cycles[0] == cycles:
        _digests[id(fn)] = (fn, digest)
    return digest


def _function(fn, h, depth: int, versions: bool, package: bool = False) -> None:
    """A function's name and code and what it reads: its closure cells, its defaults and
    the globals its code names. ``package``: one of nbdata's own, whose globals may also
    hold run-time state of the package (a lock, a thread-local, a registry), counted by
    its type: no compiled code can read it (Numba freezes only numbers, strings, tuples,
    arrays and functions, all fingerprinted), and the code that uses it is in the source
    stamp."""
    h.update(f"fn:{fn.__qualname__};".encode())
    _code(fn.__code__, h)
    for cell in fn.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:      # a variable of the enclosing function, not set yet
            raise Unfingerprintable("an empty closure cell") from None
        fingerprint(contents, h, depth + 1, versions)
    fingerprint(fn.__defaults__, h, depth + 1, versions)
    for name in sorted(global_names(fn.__code__)):
        if name in fn.__globals__:
            value = fn.__globals__[name]
            h.update(f"global:{name};".encode())
            try:
                fingerprint(value, h, depth + 1, versions)
            except Unfingerprintable:
                if not package:
                    raise
                h.update(f"state:{type(value).__qualname__};".encode())


def _is_ours(module_name: str) -> bool:
    return module_name == "nbdata" or module_name.startswith("nbdata.")


def _code(code: pytypes.CodeType, h) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            _code(c, h)
        else:
            h.update(f"{type(c).__name__}:{_const_repr(c)};".encode())


def _const_repr(c) -> str:
    """A constant's repr, the same in every process (a frozenset of strings, as ``x in
    {"a", "b"}`` compiles, iterates in an order that depends on the string hash seed)."""
    if isinstance(c, frozenset):
        return "{" + ", ".join(sorted(_const_repr(v) for v in c)) + "}"
    if isinstance(c, tuple):
        return "(" + ", ".join(_const_repr(v) for v in c) + ")"
    return repr(c)


def global_names(code: pytypes.CodeType) -> set:
    """The names a code object (its nested code included) may read as globals."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            names |= global_names(c)
    return names


def stage_hash(text: str, functions: list) -> str | None:
    """The cache key of a kernel, or None when a function cannot be fingerprinted."""
    h = hashlib.sha1()
    h.update(f"{numba.__version__}:{np.__version__}:{sys.version}:".encode())
    fingerprint(sys.modules["nbdata"], h)
    h.update(text.encode())
    try:
        for fn in functions:
            fingerprint(fn, h)
    except (Unfingerprintable, RecursionError):
        return None
    return h.hexdigest()[:24]


def kernel_path(key: str):
    """Where the kernel source of cache key ``key`` lives (None: no disk cache)."""
    root = cache_dir()
    return None if root is None else root / "kernels" / f"stage_{key}.py"


_compile_lock = threading.Lock()


@contextlib.contextmanager
def _importable(module):
    """``module`` in ``sys.modules`` while Numba's cache loader may import it by name (one
    kernel at a time); not left there, so nothing outlives the kernel."""
    with _compile_lock:
        sys.modules[module.__name__] = module
        try:
            yield
        finally:
            sys.modules.pop(module.__name__, None)


def compile_kernel(kernel, signature: tuple) -> None:
    """Compile (or load from the disk cache) ``kernel`` for ``signature``. A kernel whose
    source is a file of the cache directory is compiled with its module importable."""
    module = getattr(kernel.py_func, "_nbdata_module", None)
    if module is None:
        kernel.compile(signature)
        return
    with _importable(module):
        try:
            kernel.compile(signature)
        except ImportError:
            # A cache entry that refers to a module this process lacks (a function
            # Numba saw without an importable module): compile without the cache.
            from numba.core.caching import NullCache
            kernel._cache = NullCache()
            kernel.compile(signature)


def load_kernel(kernel, signature: tuple) -> bool:
    """Whether ``kernel`` has machine code for ``signature`` without compiling: compiled
    in this process already, or loaded now from the disk cache (a kernel whose source is
    a file of the cache directory, with its module importable)."""
    module = getattr(kernel.py_func, "_nbdata_module", None)
    if module is None:
        return load_compiled(kernel, signature)
    with _importable(module):
        return load_compiled(kernel, signature)
