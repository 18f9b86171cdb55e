"""``nd.Options``: per-dataset settings that travel with the plan (no globals); and
the one process-wide setting, where compiled code is cached on disk.

Every attribute starts unset (``None``) and reads as its default; merging
options (``ds.with_options``) keeps the values that were set, later ones win.

The cache directory (:func:`cache_dir`) is ``$NBDATA_CACHE_DIR``, else
``$XDG_CACHE_HOME/nbdata``, else ``~/.cache/nbdata``; ``NBDATA_CACHE_DIR=""`` keeps
nothing on disk. It holds the generated fused-stage kernels
(``nbdata/compiler/kernel_cache.py``) and, under ``numba/``, the machine code of
nbdata's own ``@njit(cache=True)`` kernels: importing nbdata (this module is its
first import) puts a Numba cache locator in front of Numba's for the package's
source files, so an installed package's directory is never written to. Both caches are
keyed by the content of the sources, not by where the package is installed or when its
files were written: a reinstall of the same sources finds what was compiled before.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from numba.core import caching


def cache_dir() -> Path | None:
    """nbdata's disk cache directory, or None when it is turned off."""
    explicit = os.environ.get("NBDATA_CACHE_DIR")
    if explicit is not None:
        return Path(explicit) if explicit else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nbdata"


_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_scratch: list = []


def _scratch_dir() -> str:
    """A directory of this process only, removed at exit (the cache turned off)."""
    if not _scratch:
        _scratch.append(tempfile.mkdtemp(prefix="nbdata-numba-"))
        atexit.register(shutil.rmtree, _scratch[0], True)
    return _scratch[0]


@functools.cache
def _file_hash(path: str, mtime_ns: int, size: int) -> str:
    """SHA-256 of a source file's bytes (memoized while its mtime and size stay)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def source_hash(path: str) -> str:
    """The content hash of the source file ``path``."""
    st = os.stat(path)
    return _file_hash(path, st.st_mtime_ns, st.st_size)


def _inside_package(path) -> bool:
    return isinstance(path, str) and os.path.abspath(path).startswith(_PACKAGE + os.sep)


def _code_names(code) -> set:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def kernel_sources(py_func) -> list:
    """The package's source files whose code Numba may compile into ``py_func``: its own
    file and, transitively, the files of the package's functions, kernels, intrinsics and
    modules that its code names (through globals or closures)."""
    files, seen, todo = set(), set(), [py_func]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        fn = getattr(obj, "py_func", None) or getattr(obj, "_defn", None) or obj
        code = getattr(fn, "__code__", None)
        if code is None or not _inside_package(code.co_filename):
            continue
        files.add(os.path.abspath(code.co_filename))
        names = _code_names(code)
        values = [fn.__globals__[n] for n in names if n in getattr(fn, "__globals__", {})]
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                values.append(cell.cell_contents)
            except ValueError:           # a variable of the enclosing function, unset
                pass
        for value in values:
            if isinstance(value, type(os)):          # a module: its file and what is named
                if _inside_package(getattr(value, "__file__", None)):
                    files.add(os.path.abspath(value.__file__))
                    todo.extend(getattr(value, n) for n in names if hasattr(value, n))
            else:
                todo.append(value)
    return sorted(files)


class _SourcesStamp:
    """The freshness stamp of a kernel's cache entry: the content hashes of
    :func:`kernel_sources` (paths relative to the package), so an entry is reused after a
    reinstall of the same sources and dropped when the kernel or any package code it
    calls changes. Computed when Numba first compares or saves it: when the kernel is
    decorated, the modules it calls into may not be imported yet."""

    __slots__ = ("_func", "_value")

    def __init__(self, py_func):
        self._func = py_func
        self._value = None

    def value(self) -> str:
        if self._value is None:
            h = hashlib.sha256()
            for path in kernel_sources(self._func):
                h.update(f"{os.path.relpath(path, _PACKAGE)}:{source_hash(path)};".encode())
            self._value = h.hexdigest()
        return self._value

    def __eq__(self, other):
        return self.value() == (other.value() if isinstance(other, _SourcesStamp) else other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.value())

    def __reduce__(self):                # stored in the index as the plain string
        return (str, (self.value(),))


_writable: set = set()


class _PackageCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Numba's cache of a function defined in nbdata's own source files: under
    ``<cache dir>/numba/<folder in the package>``, in files named after the function and
    its source file's content hash, with a :class:`_SourcesStamp`. Nothing depends on
    where the package is installed, so a reinstall of the same sources (another virtual
    environment, a rebuilt image) loads the kernels compiled before."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._py_func = py_func
        self._lineno = py_func.__code__.co_firstlineno
        root = cache_dir()
        root = os.path.join(root, "numba") if root is not None else _scratch_dir()
        folder = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), _PACKAGE)
        self._cache_path = os.path.normpath(os.path.join(root, folder))

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self):
        return _SourcesStamp(self._py_func)

    def get_disambiguator(self) -> str:
        # Different sources of the same file (two checkouts sharing the cache) use
        # different index and data files instead of overwriting each other's.
        return f"{self._lineno}-{source_hash(self._py_file)[:12]}"

    def ensure_cache_path(self):
        # Numba asks for every kernel defined (at import) and saved; the folder is made
        # each time, its write test (a temporary file) runs once per folder and process.
        if self._cache_path in _writable:
            os.makedirs(self._cache_path, exist_ok=True)
        else:
            super().ensure_cache_path()
            _writable.add(self._cache_path)

    @classmethod
    def from_function(cls, py_func, py_file):
        if not _inside_package(py_file):
            return None
        return super().from_function(py_func, py_file)


if _PackageCacheLocator not in caching.CacheImpl._locator_classes:
    caching.CacheImpl._locator_classes.insert(0, _PackageCacheLocator)


class _OptionGroup:
    """Base of an options group: unset attributes read as their defaults."""

    _defaults: dict = {}

    def __init__(self, **kwargs):
        object.__setattr__(self, "_values", {})
        for k, v in kwargs.items():
            setattr(self, k, v)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        defaults = type(self)._defaults
        if name not in defaults:
            raise AttributeError(f"{type(self).__name__} has no option {name!r}")
        value = self._values.get(name)
        if value is None:
            d = defaults[name]
            value = d() if isinstance(d, type) else d
        if self.__dict__.get("_frozen") and (
                not isinstance(value, _OptionGroup) or value.__dict__.get("_frozen")):
            # A dataset's options never change: later reads find the value in the
            # instance dict and skip this method (a running pipeline reads its options
            # per chunk and per iteration).
            self.__dict__[name] = value
        return value

    def __setattr__(self, name, value):
        if self.__dict__.get("_frozen"):
            raise ValueError(f"{type(self).__name__}: the options of a dataset cannot be "
                             f"changed (setting {name!r}); make an Options and apply it with "
                             "ds.with_options(options)")
        defaults = type(self)._defaults
        if name not in defaults:
            raise AttributeError(
                f"{type(self).__name__} has no option {name!r}; options are {sorted(defaults)}")
        default = defaults[name]
        if isinstance(default, type):
            if not isinstance(value, default):
                raise TypeError(f"{type(self).__name__}.{name} must be a {default.__name__}")
        elif value is not None:
            if isinstance(default, bool) and not isinstance(value, bool):
                raise TypeError(f"{type(self).__name__}.{name} must be a bool, got {value!r}")
            if (isinstance(default, int) and not isinstance(default, bool)
                    and (isinstance(value, bool) or not isinstance(value, int))):
                raise TypeError(f"{type(self).__name__}.{name} must be an int, got {value!r}")
        self._values[name] = value

    def _merge(self, other: "_OptionGroup") -> "_OptionGroup":
        out = type(self)()
        defaults = type(self)._defaults
        for name in defaults:
            a, b = self._values.get(name), other._values.get(name)
            if isinstance(defaults[name], type):
                a = a if a is not None else defaults[name]()
                b = b if b is not None else defaults[name]()
                out._values[name] = a._merge(b)
            elif name == "framework_type" and a is not None and b is not None:
                out._values[name] = list(a) + [t for t in b if t not in a]
            elif b is not None:
                out._values[name] = b
            elif a is not None:
                out._values[name] = a
        return out

    def _freeze(self) -> "_OptionGroup":
        """Make these options (and their groups) read-only: a dataset's options."""
        object.__setattr__(self, "_frozen", True)
        for v in self._values.values():
            if isinstance(v, _OptionGroup):
                v._freeze()
        return self

    def _set_values(self) -> dict:
        out = {}
        for k, v in self._values.items():
            if isinstance(v, _OptionGroup):
                inner = v._set_values()
                if inner:
                    out[k] = inner
            elif v is not None:
                out[k] = v
        return out

    def __eq__(self, other):
        return type(self) is type(other) and self._set_values() == other._set_values()

    def __repr__(self):
        return f"{type(self).__name__}({self._set_values()})"


class OptimizationOptions(_OptionGroup):
    """Switches for each rewrite pass of the compiler (all on by default):
    ``noop_elimination``, ``decode_lifting`` (a map that decodes records runs the
    decoder as a kernel over record columns), ``decode_vectorization``
    (``map(parse_single_example).batch(n)`` → ``batch(n).map(parse_example)``),
    ``batch_map_fusion`` (``batch(n).map(f)`` with ``f`` position-wise over each row →
    ``map(f).batch(n)``, fused into the batch's kernel; ``batch(n).map(lambda b:
    b[mask(b)])`` with a row-wise mask → a filter in the kernel cutting batches where
    each ``n`` input rows end), ``map_fusion``,
    ``gpu_map_fusion`` (consecutive maps of nd.gpu ops after
    ``prefetch_to_device`` run as one kernel), ``filter_fusion``, ``shuffle_indices``.

    >>> import nbdata as nd
    >>> o = nd.Options(); o.optimization.map_fusion = False
    >>> o.optimization.map_fusion, o.optimization.filter_fusion
    (False, True)
    """

    _defaults = {"map_fusion": True, "gpu_map_fusion": True, "filter_fusion": True,
                 "noop_elimination": True, "shuffle_indices": True, "decode_lifting": True,
                 "decode_vectorization": True, "batch_map_fusion": True,
                 # tf.data's other switches: accepted so TF code that sets them runs; nbdata's
                 # planner decides these itself (fused stages, prefetch threads).
                 "apply_default_optimizations": True, "filter_parallelization": False,
                 "inject_prefetch": True, "map_and_batch_fusion": True,
                 "map_and_filter_fusion": True, "map_parallelization": True,
                 "parallel_batch": True, "seq_interleave_prefetch": False,
                 "shuffle_and_repeat_fusion": True, "warm_start": False,
                 "autotune": True, "autotune_buffers": True, "autotune_cpu_budget": 0,
                 "autotune_ram_budget": 0, "hoist_random_uniform": False,
                 "map_vectorization": False, "reorder_data_discarding_ops": True}


class ThreadingOptions(_OptionGroup):
    """Thread settings: ``private_threadpool_size`` (0 = all cores) is the one budget of
    threads that compiled kernels and executor threads (prefetch producers, Python map
    workers, parallel interleave readers) share: a kernel gets the budget less the
    executor threads busy at that moment. ``max_intra_op_parallelism`` (0 = no cap)
    caps the threads of any single kernel call (1 runs every kernel on one thread)."""

    _defaults = {"private_threadpool_size": 0, "max_intra_op_parallelism": 0}


class AutoShardPolicy:
    """``tf.data.experimental.AutoShardPolicy``'s values (for ``DistributeOptions``)."""

    OFF = -1
    AUTO = 0
    FILE = 1
    DATA = 2
    HINT = 3


class DistributeOptions(_OptionGroup):
    """tf.distribute's sharding options (``auto_shard_policy``, ``num_devices``),
    accepted for TF code that sets them; nbdata shards with ``shard``/``distribute``."""

    _defaults = {"auto_shard_policy": AutoShardPolicy.AUTO, "num_devices": 0}


class AutotuneOptions(_OptionGroup):
    """Autotuning of ``AUTOTUNE`` parameters.

    ``enabled`` (default True): AUTOTUNE map parallelism is tuned from measured rates
    and AUTOTUNE prefetch buffers grow while the consumer waits; False fixes them (the
    thread budget, two elements). ``ram_budget`` (bytes, 0 = 256 MiB) bounds an
    autotuned prefetch buffer. ``cpu_budget`` (0 = no cap) caps the thread budget.
    """

    _defaults = {"enabled": True, "ram_budget": 0, "cpu_budget": 0}


def parallel_kernel_after_default() -> float:
    """``NBDATA_PARALLEL_KERNEL_AFTER`` (seconds, ``inf`` allowed), else 1.0: the default
    of ``Options().parallel_kernel_after`` and of nbdata's library kernels' tiers
    (``nbdata/kernels/tiers.py``)."""
    text = os.environ.get("NBDATA_PARALLEL_KERNEL_AFTER", "")
    try:
        value = float(text) if text else 1.0
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError("NBDATA_PARALLEL_KERNEL_AFTER must be a number of seconds >= 0 "
                         f"(or inf), got {text!r}")
    return value


class Options(_OptionGroup):
    """Options of a dataset, attached with ``ds.with_options(options)``.

    Attributes:
        deterministic: the default of ``map`` and ``interleave``'s ``deterministic``
            (default True): False lets a parallel Python map or interleave hand out
            elements in the order they are ready.
        fusion: compile element-wise chains into fused Numba loops (default
            True); ``False`` runs every op's plain reference implementation.
        fusion_min_rows: sources with fewer rows than this (default 4096) run on
            the reference path, since compiling a kernel would cost more than it
            saves; 0 fuses every eligible chain.
        parallel_kernel_after: seconds (default 1.0) a fused stage runs its serial
            kernel before its parallel one takes over: the serial twin (the same
            source, ``range`` for ``prange``) compiles in about a quarter of the time,
            so short pipelines never pay for the parallel kernel; past this much work
            it compiles in the background. A parallel kernel already in the disk
            cache runs from the start. 0: parallel from the start (``compile()``
            compiles it); ``math.inf``: serial only (one thread per stage). nbdata's
            parallel library kernels (parsing, CSV decoding, compaction) have the same
            tiers (``nbdata/kernels/tiers.py``). ``NBDATA_PARALLEL_KERNEL_AFTER`` sets
            the default of both for the process.
        chunk_rows: the most rows per chunk, the unit that flows between stages and
            that a fused kernel processes per call (default 0: chosen from the row
            size, up to 65536 rows or 8 MiB); small values exercise chunk borders.
        threading: :class:`ThreadingOptions`.
        autotune: :class:`AutotuneOptions`.
        optimization: :class:`OptimizationOptions`, one switch per rewrite pass.
        memory_budget: bytes (default 0: half of the machine's physical memory) that
            the buffers of a pipeline (shuffle buffers, prefetch queues, read-ahead,
            memory caches, pinned staging) may hold together (:mod:`nbdata.memory`).
        profile: a file path (default None): the pipeline's iterations record a trace
            of what its stages and threads did (:mod:`nbdata.profiler`), written there
            as Chrome trace-event JSON when an iteration ends and at exit.
        progress: a progress bar for each iteration (epoch) of the pipeline on stderr
            (default None: none): True titles it "epoch N", a string titles it so; tqdm's
            bar when tqdm is installed, else a line rewritten twice a second; its total
            is the cardinality when known (:mod:`nbdata.progress`).

    >>> import nbdata as nd
    >>> opts = nd.Options()
    >>> opts.fusion = False
    >>> ds = nd.Dataset.range(3).with_options(opts)
    >>> ds.options().fusion, [int(x) for x in ds]
    (False, [0, 1, 2])
    """

    _defaults = {
        "deterministic": True,
        "fusion": True,
        "fusion_min_rows": 4096,
        "parallel_kernel_after": parallel_kernel_after_default(),
        "chunk_rows": 0,
        "threading": ThreadingOptions,
        "autotune": AutotuneOptions,
        "optimization": OptimizationOptions,
        "profile": None,
        "progress": None,
        "memory_budget": 0,
        # tf.data's names that nbdata accepts and keeps (no effect of their own)
        "slack": False,
        "experimental_distribute": DistributeOptions,
        "experimental_external_state_policy": None,
        "experimental_symbolic_checkpoint": False,
        "experimental_warm_start": False,
        "dataset_name": None,
        "framework_type": None,   # a list of names; with_options joins the lists
    }
    # tf.data's older spellings of the same options
    _aliases = {"experimental_optimization": "optimization",
                "experimental_threading": "threading",
                "experimental_deterministic": "deterministic",
                "experimental_slack": "slack"}

    def __setattr__(self, name, value):
        if name == "progress" and not isinstance(value, (bool, str, type(None))):
            raise TypeError(f"Options.progress must be a bool or a title (str), got {value!r}")
        if name == "parallel_kernel_after" and value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0):
            raise ValueError("Options.parallel_kernel_after must be a number of seconds >= 0 "
                             f"(math.inf: serial kernels only), got {value!r}")
        super().__setattr__(type(self)._aliases.get(name, name), value)

    def __getattr__(self, name):
        name = type(self)._aliases.get(name, name)
        defaults = type(self)._defaults
        if name in defaults and isinstance(defaults[name], type) and self._values.get(name) is None:
            self._values[name] = defaults[name]()
            if self.__dict__.get("_frozen"):
                self._values[name]._freeze()
        return super().__getattr__(name)

    def merge(self, other: "Options") -> "Options":
        """A new Options with ``other``'s set values overriding this one's.

        >>> import nbdata as nd
        >>> a = nd.Options(); a.fusion = False
        >>> b = nd.Options(); b.deterministic = False
        >>> m = a.merge(b)
        >>> m.fusion, m.deterministic
        (False, False)
        """
        if not isinstance(other, Options):
            raise TypeError(f"expected nd.Options, got {type(other).__name__}")
        return self._merge(other)
