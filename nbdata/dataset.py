"""``nd.Dataset``: the immutable, lazy dataset API; methods validate and build plan nodes."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from nbdata.chunks import chunk_elements, copied, read_only
from nbdata.compiler.executor import RunState
from nbdata.compiler.pipeline import Pipeline
from nbdata.errors import FailedPreconditionError, InvalidArgumentError, OpError, OutOfRangeError
from nbdata.iterator import Iterator, graph_mode, spec_from_types
from nbdata.plugins import provided
from nbdata.ops.assert_cardinality import AssertCardinality
from nbdata.ops.batch import Batch
from nbdata.ops.cache import Cache, MemoryStore
from nbdata.ops.concatenate import Concatenate
from nbdata.ops.enumerate import Enumerate
from nbdata.ops.filter import Filter
from nbdata.ops.flat_map import FlatMap
from nbdata.ops.from_generator import FromGenerator
from nbdata.ops.from_tensor_slices import FromTensorSlices, check_sliceable
from nbdata.ops.from_tensors import FromTensors
from nbdata.ops.function import UserFunction, check_dataset_spec, check_predicate_spec
from nbdata.ops.ignore_errors import IgnoreErrors
from nbdata.ops.interleave import Interleave
from nbdata.ops.lazy_array import LazyArray
from nbdata.ops.list_files import match_files
from nbdata.ops.map import Map
from nbdata.ops.node import AUTOTUNE, INFINITE, UNKNOWN, Node
from nbdata.ops.padded_batch import PaddedBatch, default_padding
from nbdata.ops.prefetch import Prefetch
from nbdata.ops.random_access import At
from nbdata.ops.keyed_map import keyed_map
from nbdata.ops.random_map import RandomMap, probe_generator
from nbdata.ops.range import Range
from nbdata.ops.repeat import Repeat
from nbdata.ops.shard import Shard
from nbdata import random as nd_random
from nbdata.ops.shuffle import EpochCounter, GlobalShuffle, Shuffle
from nbdata.ops.skip import Skip
from nbdata.ops.take import Take
from nbdata.ops.unbatch import Unbatch
from nbdata.ops.window import Window
from nbdata.ops.zip import Zip
from nbdata.transformations import MoreTransformations
from nbdata.options import Options
from nbdata.trace.abstract import canonical_output, conform
from nbdata.trace.graph import Tensor, TraceError
from nbdata.trace.placeholder import Placeholder
from nbdata.spec import (legacy_classes, legacy_shapes, legacy_types, DatasetBase, batched_spec, DatasetSpec, SparseTensor, SparseTensorSpec, TensorSpec, as_dtype, flatten, flatten_up_to,
                         is_custom_nest, is_dataset, is_dataset_array, map_nest, map_structure,
                         nest_components, pack_as, string, to_leaf)


# ------------------------------------------------------------- validation

def _batch_size_arg(value: Any, op: str) -> Any:
    """A batch size (or placeholder); InvalidArgumentError in TF's words when not positive."""
    size = _int_arg(value, op, "batch_size")
    if isinstance(size, int) and size < 1:
        raise InvalidArgumentError(
            f"{op}: Batch size must be greater than zero. (batch_size must be >= 1, got {size})", op)
    return size


def _int_arg(value: Any, op: str, name: str, minimum: int | None = None,
             allow: tuple = (), placeholder: bool = True) -> Any:
    """An integer argument (or placeholder), checked against ``minimum``."""
    if placeholder and isinstance(value, Placeholder):
        if value.spec.dtype is string or value.spec.dtype.kind not in "iu":
            raise TypeError(f"{op}: {name} placeholder must have an integer dtype")
        return value
    if isinstance(value, Tensor):   # a function returning datasets, recorded symbolically
        raise TraceError(f"{op}: {name} must be a concrete integer, not the symbolic {value}")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
            value = int(value)
        else:
            raise TypeError(f"{op}: {name} must be an integer, got {type(value).__name__} {value!r:.40}")
    value = int(value)
    if value in allow:
        return value
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(f"{op}: {name} must be >= {minimum}, got {value}", op)
    return value


class _UnbuiltIterator:
    """The iterator of a dataset whose pipeline could not be built: a function whose
    output spec comes from its first input elements failed on every one of them. As in
    tf.data, making the iterator succeeds and the function's error comes at the first
    ``next``; a later ``next`` builds the pipeline again (raising again while the
    function fails) and goes on from it."""

    def __init__(self, dataset: "Dataset", error: OpError, opener: Callable = iter):
        self._dataset, self._error, self._it = dataset, error, None
        self._open = opener   # how the pipeline, once built, is iterated

    def __iter__(self) -> "_UnbuiltIterator":
        return self

    def __next__(self) -> Any:
        if self._it is None:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            self._it = self._open(self._dataset)
        return next(self._it)

    def get_next(self) -> Any:
        try:
            return next(self)
        except StopIteration:
            raise OutOfRangeError("End of sequence") from None


def _has_none(structure: Any) -> bool:
    """Whether a structure has a None component (TF's NoneTensor), which ``flatten`` skips."""
    if structure is None:
        return True
    if isinstance(structure, Mapping):
        return any(_has_none(v) for v in structure.values())
    if isinstance(structure, tuple):
        return any(_has_none(v) for v in structure)
    if is_custom_nest(structure):
        return any(_has_none(v) for v in nest_components(structure))
    return False


def _bool_arg(value: Any, op: str, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be a bool, got {type(value).__name__} {value!r:.40}")
    return bool(value)


def _optional_bool_arg(value: Any, op: str, name: str) -> bool | None:
    """None (the default: Options() decides) or a bool."""
    return None if value is None else _bool_arg(value, op, name)


def _parallel_calls(value: Any, op: str) -> Any:
    if value is None:
        return None
    return _int_arg(value, op, "num_parallel_calls", minimum=1, allow=(AUTOTUNE,), placeholder=False)


def _source_structure(value: Any, op: str, lazy: bool = False) -> Any:
    """Canonicalise source data: tuples/dicts are structure; lists, scalars, strings are
    tensors; with ``lazy``, arrays read as they go (memory maps, HDF5, Zarr) stay so.
    Arrays are read-only views of the user's (zero-copy): the elements that are views of
    them (a row of ``from_tensor_slices``, the element of ``from_tensors``) are read-only
    too, so an in-place edit of an element raises instead of changing the user's array
    and what every later epoch yields (an edit of a fresh array, a batch, is allowed)."""
    def leaf(v):
        if isinstance(v, Placeholder):
            return v
        if is_dataset(v):
            if op == "from_tensors":   # a dataset as a component (DatasetSpec), as in TF
                return v
            raise TypeError(f"{op}: got a Dataset where tensors were expected")
        found = LazyArray.of(v) if lazy else None
        return found if found is not None else read_only(to_leaf(v, op))
    return map_nest(leaf, value)



def _check_padded_shape_value(p: Any) -> None:
    """As tf.data, a padded shape given as numbers must be a vector of integers."""
    if not isinstance(p, (list, tuple, np.ndarray)) and not hasattr(p, "__array__"):
        return
    try:
        arr = np.asarray(p)
    except Exception:   # symbolic or ragged: checked as a shape below
        return
    if arr.dtype.kind not in "iuf":
        return
    if arr.ndim > 1:
        raise ValueError(f"padded_batch: Padded shape {p!r:.80} must be a `tf.int64` vector "
                         f"tensor, but its shape was {tuple(arr.shape)}.")
    if arr.dtype.kind == "f" and arr.size:   # ([] is a scalar's shape, not floats)
        raise TypeError(f"padded_batch: Padded shape {p!r:.80} must be a `tf.int64` vector "
                        f"tensor, but its element type was {arr.dtype.name}.")


class Dataset(MoreTransformations, DatasetBase):
    """A lazy, immutable sequence of elements, built from sources and transformations.

    Nothing runs until iteration: methods build a plan, ``compile()`` optimizes it
    into stages (fusing element-wise chains into parallel Numba loops), and
    iterating yields NumPy values.

    >>> import nbdata as nd
    >>> ds = nd.Dataset.range(10).filter(lambda x: x % 2 == 0).map(lambda x: x * 10).batch(2)
    >>> [b.tolist() for b in ds]
    [[0, 20], [40, 60], [80]]
    """

    def __init__(self, node: Node, options: Options | None = None, state: RunState | None = None):
        self._node = node
        self._options = options if options is not None else Options()
        # Resources of stateful ops (shuffle epochs, memory caches), shared with the
        # datasets derived from this one.
        self._state = state if state is not None else RunState()
        self._pipeline: Pipeline | None = None

    def _derive(self, node: Node) -> "Dataset":
        return self._family(node, self._options, self._state)

    @staticmethod
    def _make_dataset(value: Any) -> "Dataset":
        """A dataset for synthetic values (tracing) or for a node made at run time (window)."""
        if isinstance(value, Node):
            return Dataset(value)
        return Dataset(FromTensors(value))

    def _fn(self, fn: Callable, op: str, output_spec: Any = None,
            name: str | None = None, record: bool = False,
            check: Callable | None = None) -> UserFunction:
        """``fn`` bound to ``op`` (named ``op[name]`` in errors when the op has a name);
        ``check(spec, op, name)`` validates its output spec once it is known."""
        if name is not None and not isinstance(name, str):
            raise TypeError(f"{op}: name must be a string, got {type(name).__name__}")
        label = f"{op}[{name}]" if name else op
        return UserFunction(fn, label, self.element_spec, Dataset._make_dataset, output_spec,
                            record=record, first_element=self._first_element,
                            predicate=op == "filter", check=check,
                            returns_datasets=check is check_dataset_spec)

    def _first_element(self, count: int) -> list:
        """Up to ``count`` first elements (fewer when the dataset has fewer, or when
        reading one after the first fails): what a function that cannot be traced
        symbolically takes its output spec from. Read by a run of its own (unfused:
        nothing is compiled for it; shuffles and random ops draw as in an iteration of
        their own, the dataset's epochs untouched)."""
        options = self._options.merge(Options())
        options.fusion = False
        it = iter(Dataset(self._node, options, RunState()))
        out: list = []
        try:
            for _ in range(count):
                out.append(next(it))
        except StopIteration:
            pass
        except OpError:
            if not out:
                raise
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
        return out

    # ------------------------------------------------------------ sources
    @staticmethod
    def from_tensors(tensors: Any, name: str | None = None) -> "Dataset":
        """A dataset with the single element ``tensors``.

        >>> import nbdata as nd
        >>> [x.tolist() for x in nd.Dataset.from_tensors([1, 2, 3])]
        [[1, 2, 3]]
        """
        value = _source_structure(tensors, "from_tensors")
        if not flatten(value):   # TF: an element needs at least one component
            raise InvalidArgumentError(
                f"from_tensors: the element {tensors!r:.60} has no component (None is one "
                "only beside others)", "from_tensors")
        return Dataset(FromTensors(value, name=name))

    @staticmethod
    def from_tensor_slices(tensors: Any, name: str | None = None) -> "Dataset":
        """One element per row of the leading dimension; elements are views of the arrays.

        Tuples, dicts and namedtuples are structure (sliced leaf by leaf); every
        leaf must have the same leading size.

        Arrays of numbers that live outside memory are read as they go, never whole: an
        ``np.memmap`` (also what ``np.load(path, mmap_mode="r")`` returns), an
        ``h5py.Dataset`` and a ``zarr.Array``. Iteration reads a block of rows at a time
        (a whole number of the array's storage chunks, about 8 MiB of rows or
        ``Options().chunk_rows``), and the pages of a memory map already read are given
        back to the system, so memory holds about one block of the array; a map, filter
        and batch chain over them still runs as one fused kernel, over each block.
        ``shuffle`` over such an array reads it in order, a block at a time, and mixes
        rows in its buffer: reads stay sequential and cheap, but rows move no further
        than ``buffer_size`` from where they were (data stored sorted stays nearly so
        unless the buffer is large); ``nd.experimental.global_shuffle`` gives a uniform
        permutation but reads the rows at random (each read of HDF5 or Zarr decodes the
        storage chunks the rows fall in). Other arrays (in memory) are sliced in place.

        >>> import numpy as np, nbdata as nd
        >>> ds = nd.Dataset.from_tensor_slices((np.arange(3), np.array([b"a", b"b", b"c"])))
        >>> [(int(x), s) for x, s in ds]
        [(0, b'a'), (1, b'b'), (2, b'c')]
        """
        value = _source_structure(tensors, "from_tensor_slices", lazy=True)
        if not flatten(value):   # only None components: nothing gives the number of rows
            raise ValueError(f"from_tensor_slices: Invalid `element`. `element` should not be "
                             f"empty (no component to slice in {tensors!r:.60})")
        if any(is_dataset_array(v) or isinstance(v, SparseTensor) for v in flatten(value)):
            # Slices of a list of datasets (TF's batched DatasetSpec) or of a sparse
            # tensor (the entries of each row of its dim 0), as unbatch cuts them, made
            # once; row i is looked up by position (so a saved state holds a position).
            sliced = Dataset.from_tensors(value).unbatch()
            rows = list(sliced)
            return Dataset.range(len(rows)).map(lambda i: rows[int(i)], name=name,
                                                output_signature=sliced.element_spec)
        check_sliceable(value, "from_tensor_slices")
        return Dataset(FromTensorSlices(value, name=name))

    @staticmethod
    def from_arrow(data: Any, columns: Any = None, null_values: Any = None,
                   num_parallel_reads: Any = None, name: str | None = None) -> "Dataset":
        """One element per row of Arrow data, as a dict ``{column name: value}`` (the
        optional ``[arrow]`` extra: pyarrow).

        ``data`` is a ``pyarrow.Table`` or ``RecordBatch`` (rows read where they are:
        random access, shuffles over row numbers, a fused kernel reading a one-batch
        table in place), a ``pyarrow.RecordBatchReader`` (read once, in order) or a
        ``pyarrow.dataset.Dataset`` (read a Parquet row group, or a file, at a time;
        see ``nd.io.ParquetDataset``). Numbers are zero-copy views of Arrow's buffers,
        strings and binaries string columns over its data and offsets, fixed-size
        lists leaves of a fixed shape. A null raises InvalidArgumentError naming the
        column and the row when iteration reaches it, unless ``null_values`` maps the
        column to a fill value.

        Args:
            data: the Arrow data.
            columns: the columns to read (default: all), names in a list.
            null_values: ``{column: fill}``: the value a null of that column becomes.
            num_parallel_reads: read this many units (record batches, row groups) at
                once on threads, ahead of use (order unchanged); ``nd.AUTOTUNE``: one
                per core; None reads them one after the other.
            name: an optional name for the op.

        >>> import pyarrow as pa, nbdata as nd
        >>> table = pa.table({"x": [1.5, 2.5], "word": ["a", "bc"]})
        >>> [(float(e["x"]), e["word"]) for e in nd.Dataset.from_arrow(table)]
        [(1.5, b'a'), (2.5, b'bc')]
        """
        from nbdata.ops.arrow_source import arrow_rows, source_node
        rows = arrow_rows(data, "from_arrow")
        return Dataset(source_node(rows, columns, null_values, num_parallel_reads, "from_arrow", name))

    @staticmethod
    def range(*args: Any, output_type: Any = np.int64, dtype: Any = None,
              name: str | None = None) -> "Dataset":
        """``range(stop)``, ``range(start, stop)`` or ``range(start, stop, step)``.

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(5, 0, -2)]
        [5, 3, 1]
        """
        if not 1 <= len(args) <= 3:
            raise TypeError(f"range: expected 1 to 3 positional arguments, got {len(args)}")
        vals = [_int_arg(a, "range", ("start", "stop", "step")[i] if len(args) > 1 else "stop")
                for i, a in enumerate(args)]
        start, stop, step = (0, vals[0], 1) if len(vals) == 1 else (vals[0], vals[1], 1) \
            if len(vals) == 2 else tuple(vals)
        if isinstance(step, int) and step == 0:
            raise InvalidArgumentError("range: step must not be 0", "range")
        dt = as_dtype(dtype if dtype is not None else output_type)
        if dt is string or dt.kind not in "iuf":
            raise TypeError(f"range: output_type must be an integer or float dtype, got {dt}")
        return Dataset(Range(start, stop, step, dt, name=name))

    @staticmethod
    def from_generator(generator: Callable, output_types: Any = None, output_shapes: Any = None,
                       args: Any = None, output_signature: Any = None,
                       name: str | None = None) -> "Dataset":
        """Elements yielded by ``generator(*args)``, called anew on every iteration.

        Give either ``output_signature`` (nested :class:`nd.TensorSpec`) or
        ``output_types`` (and optionally ``output_shapes``; without them shapes are
        unknown). Each yielded value is converted to the declared dtype and checked
        against the declared shape.

        >>> import numpy as np, nbdata as nd
        >>> def gen():
        ...     for i in range(3):
        ...         yield i, [1.0] * i
        >>> ds = nd.Dataset.from_generator(gen, output_signature=(
        ...     nd.TensorSpec((), np.int64), nd.TensorSpec((None,), np.float32)))
        >>> [(int(i), v.tolist()) for i, v in ds]
        [(0, []), (1, [1.0]), (2, [1.0, 1.0])]
        """
        if not callable(generator):
            raise TypeError("from_generator: generator must be callable")
        if output_signature is not None:
            if output_types is not None or output_shapes is not None:
                raise TypeError("from_generator: give output_signature or output_types/"
                                "output_shapes, not both")
            signature = _tupleize(output_signature)
            for s in flatten(signature):
                if not isinstance(s, TensorSpec):
                    raise TypeError(f"from_generator: output_signature leaves must be "
                                    f"nd.TensorSpec, got {s!r}")
            spec = signature
        else:
            if output_types is None:
                raise TypeError("from_generator: output_types or output_signature is required")
            spec = spec_from_types(_tupleize(output_types),
                                   None if output_shapes is None else _tupleize_shapes(output_shapes))
        # arrays copied, as tf.data converts the arguments to tensors here: the user may
        # change their array before the dataset is iterated
        call_args = tuple(a.copy() if isinstance(a, np.ndarray) else a
                          for a in args) if args is not None else ()
        return Dataset(FromGenerator(generator, call_args, spec, name=name))

    @staticmethod
    def list_files(file_pattern: Any, shuffle: bool | None = None, seed: int | None = None,
                   name: str | None = None) -> "Dataset":
        """The paths (bytes) matching glob pattern(s), shuffled unless ``shuffle=False``.

        Patterns are matched when this is called; with ``shuffle=False`` the paths
        of all patterns come sorted together.

        >>> import nbdata as nd, os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> for n in ("b.txt", "a.txt"): open(os.path.join(d, n), "w").close()
        >>> [os.path.basename(p) for p in nd.Dataset.list_files(d + "/*.txt", shuffle=False)]
        [b'a.txt', b'b.txt']
        """
        files = match_files(file_pattern)
        ds = Dataset(FromTensorSlices(files, name=name))
        if shuffle is None or shuffle:
            ds = ds.shuffle(len(files), seed=seed)
        return ds

    @staticmethod
    def zip(*args: Any, datasets: Any = None, name: str | None = None) -> "Dataset":
        """Elements of several datasets side by side, until the shortest ends.

        >>> import nbdata as nd
        >>> a, b = nd.Dataset.range(3), nd.Dataset.range(10, 20)
        >>> [(int(x), int(y)) for x, y in nd.Dataset.zip(a, b)]
        [(0, 10), (1, 11), (2, 12)]
        """
        if datasets is not None:
            if args:
                raise TypeError("zip: Both `*args` and `datasets` cannot be set. (give the "
                                "datasets positionally or as datasets=, not both)")
            structure = datasets
        elif len(args) == 1:
            structure = args[0]
        elif args:
            structure = tuple(args)
        else:
            raise TypeError("zip: Must pass at least one dataset to `zip`. (expected at least "
                            "one dataset)")
        if isinstance(structure, list):
            structure = tuple(structure)
        leaves = flatten(structure)
        for leaf in leaves:
            if not isinstance(leaf, Dataset):
                raise TypeError(f"zip: expected a (nested structure of) Dataset, got "
                                f"{type(leaf).__name__} {leaf!r:.40}")
        if not leaves:
            raise TypeError("zip: Must pass at least one dataset to `zip`. (expected at least "
                            "one dataset)")
        index_structure = pack_as(structure, list(range(len(leaves))))
        options = leaves[0]._options
        for d in leaves[1:]:
            options = options.merge(d._options)
        return Dataset(Zip(index_structure, tuple(d._node for d in leaves), name=name), options,
                       RunState.merged(*(d._state for d in leaves)))

    # ------------------------------------------------------ transformations
    def map(self, map_func: Callable, num_parallel_calls: Any = None, deterministic: Any = None,
            name: str | None = None, output_signature: Any = None,
            device: str | None = None, synchronous: bool | None = None,
            use_unbounded_threadpool: bool = False) -> "Dataset":
        """Apply ``map_func`` to each element (tuples and namedtuples unpacked as
        arguments, dicts passed as one; a namedtuple goes whole to a function that
        takes one argument only, as in tf.data).

        ``synchronous=True`` (only without ``num_parallel_calls``, else ValueError)
        keeps a function that runs in Python called one element at a time, in order:
        it is never fused into a later parallel map. ``use_unbounded_threadpool=True``
        is for functions that wait (I/O): their ``num_parallel_calls`` threads do not
        count in the pipeline's thread budget, so compiled kernels keep their threads,
        and AUTOTUNE may go beyond the budget (up to 64 threads).

        The output spec is traced when ``map`` is called, by calling ``map_func`` on
        synthetic inputs built from the input spec (zeros, ones, twos; unknown dims
        sized 8, 9 and 3): structure and dtypes are what the function returns under
        NumPy's rules, and a dim is static only if every probe agrees on it (so
        ``x * 2`` on shape (3,) keeps (3,), ``np.full(n, n)`` gives (None,)). When the
        pipeline is compiled, Numba's type inference of the function on the
        element's Numba types checks dtypes and ranks and the fused kernel casts to
        these dtypes. ``output_signature`` (an nbdata extension) skips tracing for
        functions that cannot run on synthetic inputs.

        A function that fuses runs inside the stage's parallel kernel, whatever
        ``num_parallel_calls`` says. A function that runs in Python is called on
        ``num_parallel_calls`` threads (AUTOTUNE: tuned from measured rates within the
        thread budget), results in input order unless ``deterministic`` is False
        (default: ``Options().deterministic``), when they come as the calls finish.
        After ``prefetch_to_device``, a map of nd.gpu ops runs ``num_parallel_calls``
        batches at once (AUTOTUNE: tuned, up to 4), each on its own thread, streams and
        JPEG decoder, in input order; the values do not depend on it.

        Values: position-wise arithmetic is lifted into the fused kernel with
        NumPy's exact rules, so fused and reference results are bit-identical.
        A function Numba compiles as a whole computes as Numba does: results are
        cast to NumPy's dtype, but float transcendentals (``np.tanh``, ``np.exp``,
        ...) may differ from NumPy's own implementations by a few ULP, and a
        float32 expression with a Python float may be evaluated in float64 before
        the cast. ``Options().fusion = False`` gives NumPy's values exactly.

        >>> import numpy as np, nbdata as nd
        >>> ds = nd.Dataset.from_tensor_slices((np.ones((4, 3), np.float32), np.arange(4)))
        >>> ds = ds.map(lambda x, y: (x * 2.0, y + 1))
        >>> ds.element_spec
        (TensorSpec(shape=(3,), dtype=float32, name=None), TensorSpec(shape=(), dtype=int64, name=None))
        """
        synchronous = synchronous is not None and _bool_arg(synchronous, "map", "synchronous")
        unbounded = use_unbounded_threadpool is not None and _bool_arg(   # TF's tests pass None too
            use_unbounded_threadpool, "map", "use_unbounded_threadpool")
        threads = _parallel_calls(num_parallel_calls, "map")
        if synchronous and threads is not None:
            raise ValueError(f"map: synchronous=True runs the calls one at a time; it cannot be "
                             f"combined with num_parallel_calls={num_parallel_calls!r}")
        if device is not None or getattr(self._node, "device_leaves", None):
            # After prefetch_to_device: nd.gpu ops on the device batches (nbdata/ops/gpu_map.py).
            from nbdata.ops.gpu_map import gpu_map
            from nbdata.gpu.runtime import device_index
            if device is not None:
                device_index(device)   # a GPU name, else ValueError
            if unbounded:
                raise ValueError("map: use_unbounded_threadpool is for functions called in Python; "
                                 "a map on the device runs kernels")
            _optional_bool_arg(deterministic, "map", "deterministic")   # batches stay in order
            return self._derive(gpu_map(self._node, map_func, name, device is not None, threads))
        fn = self._fn(map_func, "map", _tupleize(output_signature) if output_signature else None,
                      name, record=True)
        deterministic = _optional_bool_arg(deterministic, "map", "deterministic")
        if not synchronous and not unbounded:
            # Random ops drawing per element (TF1's): counter-based, keyed per element.
            keyed = keyed_map(self._node, fn, map_func, threads, deterministic, name)
            if keyed is not None:
                return self._derive(keyed)
        return self._derive(Map(self._node, fn, threads, deterministic, synchronous=synchronous,
                                unbounded_threads=unbounded, name=name))

    def random_map(self, map_func: Callable, seed: int | None = None,
                   name: str | None = None) -> "Dataset":
        """Like ``map``, but ``map_func(*element, rng)`` also gets an
        :class:`nd.random.Generator` whose values depend only on (seed, this op, epoch,
        element index): the same at any thread count, fused or not, and after an
        iterator restore. ``rng.uniform(low, high)``, ``normal(loc, scale)``,
        ``integers(low, high)`` and ``bernoulli(p)`` work in Python and inside
        Numba-compiled functions. Each iteration (epoch) draws new values. ``seed``
        None: derived from ``nd.random.set_seed``'s global seed, else from the pipeline
        seed.

        >>> import nbdata as nd
        >>> ds = nd.Dataset.range(4).random_map(lambda x, rng: x + rng.integers(0, 100), seed=3)
        >>> a = [int(v) for v in ds.as_numpy_iterator()]
        >>> b = [int(v) for v in nd.Dataset.range(4).random_map(
        ...     lambda x, rng: x + rng.integers(0, 100), seed=3)]
        >>> a == b
        True
        """
        if not callable(map_func):
            raise TypeError(f"random_map: expected a callable, got {type(map_func).__name__}")
        probe = probe_generator()

        def traced(*args):
            return map_func(*args, probe)

        traced.__qualname__ = getattr(map_func, "__qualname__", "random_map")
        fn = self._fn(traced, "random_map", name=name, record=True)
        node = RandomMap(self._node, map_func, fn, nd_random.op_seed(seed), name=name)
        self._state.register(node.resource_key, EpochCounter(True))
        return self._derive(node)

    def map_with_legacy_function(self, map_func: Callable, num_parallel_calls: Any = None,
                                 deterministic: Any = None) -> "Dataset":
        """TF1's ``map_with_legacy_function``: ``map`` (nbdata has one kind of function).

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(3).map_with_legacy_function(lambda x: x + 1)]
        [1, 2, 3]
        """
        return self.map(map_func, num_parallel_calls, deterministic)

    def filter_with_legacy_function(self, predicate: Callable) -> "Dataset":
        """TF1's ``filter_with_legacy_function``: ``filter``.

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(4).filter_with_legacy_function(lambda x: x > 1)]
        [2, 3]
        """
        return self.filter(predicate)

    def filter(self, predicate: Callable, name: str | None = None) -> "Dataset":
        """Keep the elements for which ``predicate`` returns a scalar True.

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(6).filter(lambda x: x % 3 == 0)]
        [0, 3]
        """
        fn = self._fn(predicate, "filter", name=name, record=True)
        check_predicate_spec(fn.output_spec, "filter", fn.name)
        return self._derive(Filter(self._node, fn, name=name))

    def flat_map(self, map_func: Callable, name: str | None = None) -> "Dataset":
        """Map each element to a dataset and chain those datasets in order.

        >>> import nbdata as nd
        >>> ds = nd.Dataset.range(1, 4).flat_map(lambda x: nd.Dataset.range(x))
        >>> [int(x) for x in ds]
        [0, 0, 1, 0, 1, 2]
        """
        fn = self._fn(map_func, "flat_map", name=name, record=True, check=check_dataset_spec)
        return self._derive(FlatMap(self._node, fn, name=name))

    def interleave(self, map_func: Callable, cycle_length: Any = None, block_length: Any = None,
                   num_parallel_calls: Any = None, deterministic: Any = None,
                   name: str | None = None) -> "Dataset":
        """Interleave the datasets ``map_func`` makes from ``cycle_length`` input
        elements at a time, ``block_length`` consecutive elements from each, in
        tf.data's exact order. ``cycle_length=None`` (or AUTOTUNE) follows tf.data's
        rule over the thread budget (the number of cores by default): all of it without
        ``num_parallel_calls``, a third (rounded up) with ``num_parallel_calls=AUTOTUNE``,
        else ``min(num_parallel_calls, budget)``.

        ``num_parallel_calls`` > 1 (or AUTOTUNE) reads each open dataset on its own
        background thread and opens the datasets of the next input elements ahead;
        the order stays tf.data's. ``deterministic=False`` (default:
        ``Options().deterministic``) lets a dataset whose rows are not ready yet give
        its turn to the next one.

        >>> import nbdata as nd
        >>> ds = nd.Dataset.range(1, 4).interleave(
        ...     lambda x: nd.Dataset.from_tensors(x).repeat(3), cycle_length=2, block_length=2)
        >>> [int(x) for x in ds]
        [1, 1, 2, 2, 1, 2, 3, 3, 3]
        """
        if cycle_length is not None:
            cycle_length = _int_arg(cycle_length, "interleave", "cycle_length", minimum=1,
                                    allow=(AUTOTUNE,), placeholder=False)
        block_length = 1 if block_length is None else _int_arg(
            block_length, "interleave", "block_length", minimum=1, placeholder=False)
        threads = _parallel_calls(num_parallel_calls, "interleave")
        fn = self._fn(map_func, "interleave", name=name, record=True, check=check_dataset_spec)
        return self._derive(Interleave(self._node, fn, cycle_length, block_length, threads,
                                       _optional_bool_arg(deterministic, "interleave",
                                                          "deterministic"), name=name))

    def batch(self, batch_size: Any, drop_remainder: bool = False, num_parallel_calls: Any = None,
              deterministic: Any = None, name: str | None = None) -> "Dataset":
        """Stack ``batch_size`` consecutive elements; the last batch may be smaller
        unless ``drop_remainder``. Strings batch into object arrays of bytes.

        Rows are copied into batches by parallel kernels with threads from the run's
        budget; ``num_parallel_calls`` caps them (AUTOTUNE: the budget).
        ``deterministic`` is accepted for tf.data compatibility: batches always come
        in order, which ``deterministic=False`` allows but does not require.

        >>> import nbdata as nd
        >>> [b.tolist() for b in nd.Dataset.range(5).batch(2, drop_remainder=True)]
        [[0, 1], [2, 3]]
        """
        size = _batch_size_arg(batch_size, "batch")
        _bool_arg(drop_remainder, "batch", "drop_remainder")
        batched_spec(self.element_spec, None, "batch")
        calls = _parallel_calls(num_parallel_calls, "batch")
        _optional_bool_arg(deterministic, "batch", "deterministic")
        return self._derive(Batch(self._node, size, bool(drop_remainder), calls, name=name))

    def padded_batch(self, batch_size: Any, padded_shapes: Any = None, padding_values: Any = None,
                     drop_remainder: bool = False, name: str | None = None) -> "Dataset":
        """Batch elements of different shapes, padding each component to ``padded_shapes``
        (a None/-1 dim pads to the largest in the batch; default: every unknown dim).

        >>> import numpy as np, nbdata as nd
        >>> ds = nd.Dataset.range(1, 4).map(lambda n: np.arange(n))
        >>> [b.tolist() for b in ds.padded_batch(3, padding_values=np.int64(-1))]
        [[[0, -1, -1], [0, 1, -1], [0, 1, 2]]]
        """
        size = _batch_size_arg(batch_size, "padded_batch")
        _bool_arg(drop_remainder, "padded_batch", "drop_remainder")
        try:
            shapes, values = self._padding(padded_shapes, padding_values)
        except (TypeError, ValueError) as e:
            msg = str(e) if str(e).startswith("padded_batch") else f"padded_batch: {e}"
            raise type(e)(msg) from None
        return self._derive(PaddedBatch(self._node, size, tuple(shapes), tuple(values),
                                        bool(drop_remainder), name=name))

    def _padding(self, padded_shapes: Any, padding_values: Any) -> tuple[list, list]:
        """Flat padded shapes and padding values, one per component, checked against the spec."""
        spec = self.element_spec
        specs = flatten(spec)
        for s in specs:
            if isinstance(s, DatasetSpec):
                raise TypeError("padded_batch: `padded_batch` is not supported for datasets "
                                "of datasets (cannot batch elements that are datasets)")
            if not isinstance(s, TensorSpec):   # sparse components have no shape to pad to
                raise TypeError(f"padded_batch: `padded_batch` is only supported for datasets "
                                f"that produce tensor elements but type spec of elements in the "
                                f"input dataset is not a subclass of TensorSpec: `{s}`.")
        if _has_none(spec):
            raise TypeError(f"padded_batch: a None component has no values to pad; "
                            f"`padded_batch` needs tensors, got the element {spec}")
        if padded_shapes is None:
            shapes = []
            for s in specs:
                if s.shape is None:
                    raise ValueError("padded_batch: `padded_shapes` must be given for components "
                                     f"of unknown rank ({s})")
                shapes.append(s.shape)
        else:
            shapes = []
            for s, p in zip(specs, flatten_up_to(spec, padded_shapes, "padded_batch: padded_shapes")):
                _check_padded_shape_value(p)
                shape = TensorSpec(p, np.int64).shape if p is not None else s.shape
                if shape is None:
                    raise ValueError(f"padded_batch: padded shape for {s} must have a known rank")
                if s.shape is not None:
                    if len(s.shape) != len(shape):
                        raise ValueError(
                            f"padded_batch: The padded shape {tuple(shape)} is not compatible "
                            f"with the shape {tuple(s.shape)} of the corresponding input "
                            f"component (rank {len(shape)}, the component's {len(s.shape)})")
                    for d, (have, want) in enumerate(zip(s.shape, shape)):
                        if have is not None and want is not None and want < have:
                            raise ValueError(
                                f"padded_batch: The padded shape {tuple(shape)} is not compatible "
                                f"with the shape {tuple(s.shape)} of the corresponding input "
                                f"component. (padded shape {list(shape)} is smaller than the "
                                f"component shape {list(s.shape)} in dimension {d})")
                shapes.append(shape)
        if padding_values is None:
            values = [default_padding(s) for s in specs]
        else:
            if not isinstance(padding_values, (tuple, Mapping)):
                raw = [padding_values] * len(specs)
            else:
                # a None stands for the default padding of all it covers (as in tf.data)
                raw = flatten_up_to(spec, padding_values, "padded_batch: padding_values",
                                    none_fills=True)
            values = []
            for s, v in zip(specs, raw):
                if v is None:
                    values.append(default_padding(s))
                    continue
                leaf = to_leaf(v, "padded_batch: padding value")
                if s.dtype is string:
                    if not isinstance(leaf, bytes):
                        raise TypeError(f"padded_batch: padding value {v!r} for a string component "
                                        "must be bytes or str")
                    values.append(leaf)
                else:
                    if isinstance(leaf, bytes):
                        raise TypeError(
                            f"padded_batch: Invalid `padding_values`. `padding_values` values "
                            f"type string does not match type {s.dtype} of the corresponding "
                            f"input component ({v!r})")
                    if np.ndim(leaf) != 0:
                        raise ValueError(f"padded_batch: padding value {v!r} must be a scalar")
                    if not np.can_cast(leaf.dtype, s.dtype, "same_kind"):
                        raise TypeError(f"padded_batch: padding value {v!r} ({leaf.dtype}) does not "
                                        f"fit the component dtype {s.dtype}")
                    values.append(np.asarray(leaf).astype(s.dtype)[()])
        return shapes, values

    def unbatch(self, name: str | None = None) -> "Dataset":
        """Split elements along their leading dimension (the inverse of ``batch``).

        >>> import numpy as np, nbdata as nd
        >>> [int(x) for x in nd.Dataset.from_tensors(np.arange(3)).unbatch()]
        [0, 1, 2]
        """
        node = Unbatch(self._node, name=name)
        node.spec  # validates ranks now
        return self._derive(node)

    def shuffle(self, buffer_size: Any, seed: int | None = None,
                reshuffle_each_iteration: bool | None = None, name: str | None = None) -> "Dataset":
        """Randomly shuffle with a buffer of ``buffer_size`` elements (tf.data's algorithm).

        Randomness is counter-based: with a ``seed`` the order depends only on
        (seed, epoch), never on threads. ``reshuffle_each_iteration`` (default True)
        gives each iteration a new order. ``buffer_size=nd.UNKNOWN`` (TF's sentinel, as
        ``ds.shuffle(ds.cardinality())`` may pass it) buffers the whole dataset.

        >>> import nbdata as nd
        >>> ds = nd.Dataset.range(5).shuffle(5, seed=1)
        >>> sorted(int(x) for x in ds)
        [0, 1, 2, 3, 4]
        """
        size = _int_arg(buffer_size, "shuffle", "buffer_size", minimum=1, allow=(UNKNOWN,))
        if isinstance(size, int) and size == UNKNOWN:
            # TF: the unknown-cardinality sentinel asks for a buffer of the whole input.
            n = self.cardinality()
            if n == INFINITE:
                raise InvalidArgumentError(
                    "shuffle: buffer_size UNKNOWN (a buffer of the whole dataset) over a "
                    "dataset of infinite length would never yield: pass a buffer size",
                    "shuffle")
            size = max(1, n) if n >= 0 else UNKNOWN   # unknown: counted when iterated
        if seed is not None:
            seed = _int_arg(seed, "shuffle", "seed", placeholder=False)
        reshuffle = True if reshuffle_each_iteration is None else bool(reshuffle_each_iteration)
        base = nd_random.op_seed(seed)
        node = Shuffle(self._node, size, base, reshuffle, name=name)
        self._state.register(node.resource_key, EpochCounter(reshuffle))
        return self._derive(node)

    def repeat(self, count: Any = None, name: str | None = None) -> "Dataset":
        """Repeat the dataset ``count`` times; None, -1 or any negative count repeats forever.

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(2).repeat(3)]
        [0, 1, 0, 1, 0, 1]
        """
        count = -1 if count is None else _int_arg(count, "repeat", "count")
        return self._derive(Repeat(self._node, count, name=name))

    def take(self, count: Any, name: str | None = None) -> "Dataset":
        """At most the first ``count`` elements (-1, or any negative count: all).

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(10).take(3)]
        [0, 1, 2]
        """
        return self._derive(Take(self._node, _int_arg(count, "take", "count"), name=name))

    def skip(self, count: Any, name: str | None = None) -> "Dataset":
        """All but the first ``count`` elements (-1, or any negative count: skip everything).

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(5).skip(3)]
        [3, 4]
        """
        return self._derive(Skip(self._node, _int_arg(count, "skip", "count"), name=name))

    def shard(self, num_shards: int, index: int, name: str | None = None) -> "Dataset":
        """Every ``num_shards``-th element starting at ``index`` (for one worker of many).

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(10).shard(3, 1)]
        [1, 4, 7]
        """
        n = _int_arg(num_shards, "shard", "num_shards", minimum=1, placeholder=False)
        i = _int_arg(index, "shard", "index", minimum=0, placeholder=False)
        if i >= n:
            raise InvalidArgumentError(f"shard: index must be < num_shards ({n}), got {i}", "shard")
        return self._derive(Shard(self._node, n, i, name=name))

    def concatenate(self, dataset: "Dataset", name: str | None = None) -> "Dataset":
        """This dataset's elements followed by ``dataset``'s (same structure and dtypes).

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(2).concatenate(nd.Dataset.range(5, 7))]
        [0, 1, 5, 6]
        """
        if not isinstance(dataset, Dataset):
            raise TypeError(f"concatenate: expected a Dataset, got {type(dataset).__name__}")
        node = Concatenate(self._node, dataset._node, name=name)
        try:
            node.spec
        except TypeError as e:
            raise TypeError(f"concatenate: Incompatible dataset elements: {e} "
                            f"({self.element_spec} vs {dataset.element_spec})") from None
        return self._family(node, self._options.merge(dataset._options),
                            RunState.merged(self._state, dataset._state))

    def window(self, size: int, shift: int | None = None, stride: int = 1,
               drop_remainder: bool = False, name: str | None = None) -> "Dataset":
        """Group elements into windows; each window is a dataset (for tuple elements,
        a tuple of datasets). Window ``k`` starts at input ``k * shift`` and takes
        ``size`` elements ``stride`` apart.

        >>> import nbdata as nd
        >>> ds = nd.Dataset.range(7).window(3, shift=2, drop_remainder=True)
        >>> [[int(x) for x in w] for w in ds]
        [[0, 1, 2], [2, 3, 4], [4, 5, 6]]
        """
        size = _int_arg(size, "window", "size", minimum=1, placeholder=False)
        shift = size if shift is None else _int_arg(shift, "window", "shift", minimum=1, placeholder=False)
        stride = _int_arg(stride, "window", "stride", minimum=1, placeholder=False)
        return self._derive(Window(self._node, size, shift, stride, bool(drop_remainder), name=name))

    def enumerate(self, start: int = 0, name: str | None = None) -> "Dataset":
        """Pair each element with its int64 index: ``(index, element)``.

        >>> import nbdata as nd
        >>> [(int(i), int(x)) for i, x in nd.Dataset.range(5, 7).enumerate(start=1)]
        [(1, 5), (2, 6)]
        """
        start = _int_arg(start, "enumerate", "start", placeholder=False)
        if not -(1 << 63) <= start < (1 << 63):
            raise InvalidArgumentError(f"enumerate: start must fit in an int64, got {start}",
                                       "enumerate")
        node = self._node
        # As in TF (a zip with range(start, 2**63 - 1)), indices stop below the int64
        # maximum: a start close to it ends the dataset there instead of overflowing.
        left = (1 << 63) - 1 - start
        if left < (1 << 62):
            node = Take(node, left)
        return self._derive(Enumerate(node, start, name=name))

    def prefetch(self, buffer_size: Any, name: str | None = None) -> "Dataset":
        """Produce up to ``buffer_size`` elements ahead on a background thread (at least
        one chunk of rows); 0 disables prefetching. With ``nd.AUTOTUNE`` the buffer
        starts small and doubles while the consumer finds it empty, within
        ``Options().autotune.ram_budget`` (``pipe.stats()`` shows the size chosen and
        how long the consumer waited). ``iter``, ``save`` and ``restore`` work across
        it: rows read ahead are read again after a restore.

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(3).prefetch(nd.AUTOTUNE)]
        [0, 1, 2]
        """
        if buffer_size is None:   # tf.data's default: AUTOTUNE
            buffer_size = AUTOTUNE
        size = _int_arg(buffer_size, "prefetch", "buffer_size", minimum=0, allow=(AUTOTUNE,))
        return self._derive(Prefetch(self._node, size, name=name))

    def prefetch_to_device(self, device: str = "cuda:0", buffer_size: Any = 2,
                           name: str | None = None) -> "Dataset":
        """Copy each element's numeric arrays (batches) to GPU memory ``buffer_size``
        batches ahead, on a background thread and a CUDA stream of their own: elements
        then hold ``nd.gpu.DeviceArray`` leaves (strings stay on the host), and ``map``
        functions apply ``nd.gpu`` ops to them, fused into one kernel per batch
        (``nbdata/gpu/``). Needs a GPU (or the CUDA simulator); save/restore works
        across it.

        >>> import numpy as np, nbdata as nd
        >>> ds = nd.Dataset.from_tensor_slices(np.zeros((8, 4, 4, 3), np.uint8)).batch(4)
        >>> ds = ds.prefetch_to_device("cuda:0").map(lambda x: nd.gpu.normalize(x, 127.5, 64.0))
        >>> [(type(b).__name__, b.shape, b.dtype.name) for b in ds]
        [('DeviceArray', (4, 4, 4, 3), 'float32'), ('DeviceArray', (4, 4, 4, 3), 'float32')]
        """
        from nbdata.gpu.runtime import device_index
        from nbdata.ops.prefetch_to_device import PrefetchToDevice
        index = device_index(device)
        size = _int_arg(buffer_size, "prefetch_to_device", "buffer_size", minimum=1,
                        allow=(AUTOTUNE,))
        return self._derive(PrefetchToDevice(self._node, index, 2 if size == AUTOTUNE else size,
                                             name=name))

    def distribute(self, processing_mode: str, num_workers: int | None = None,
                   address: str | None = None, job_name: str | None = None,
                   consumer_index: int | None = None, num_consumers: int | None = None,
                   name: str | None = None) -> "Dataset":
        """Run this dataset in Ray worker actors (``tf.data.experimental.service.distribute``
        on Ray; needs ``pip install 'nbdata[distributed]'``). Each worker compiles the
        pipeline (fused kernels included); iterating the result streams the chunks the
        workers finish through Ray's object store (NumPy arrays arrive zero-copy, so
        read-only).

        Args:
            processing_mode: ``"parallel_epochs"``: every worker runs the whole dataset
                with a seed of its own (each element comes ``num_workers`` times);
                ``"distributed_epoch"``: the job hands the source's splits (row ranges
                of range/from_tensor_slices, file names) to workers as they ask, so
                each element comes once per epoch, even when a worker dies.
            num_workers: worker actors (None: one per CPU of the cluster).
            address: the Ray cluster to connect to when this process is not connected
                yet (None: a local instance started on demand).
            job_name: consumers giving the same name share one job (each element goes
                to one of them).
            consumer_index, num_consumers: coordinated reads of a shared job: round
                ``r`` comes from worker ``r % num_workers``, one element per consumer
                (a finite ``distributed_epoch`` too: its last elements are dealt out
                one per consumer).

        ``save()``/``restore()`` of an iterator capture a position of the global stream
        (not for a first-come first-served shared job): a ``distributed_epoch``
        restores on any ``num_workers`` (and, read in coordinated rounds, any
        ``num_consumers``), each remaining element once. Example::

            ds = nd.Dataset.range(1000).map(f).batch(32)
            for batch in ds.distribute("distributed_epoch", num_workers=4):
                ...
        """
        make_node = provided("distribute_node")   # nbdata.distribute sits above this API
        return self._derive(make_node(self._node, self._options, processing_mode, num_workers,
                                      address, job_name, consumer_index, num_consumers, name))

    def ignore_errors(self, log_warning: bool = False, name: str | None = None) -> "Dataset":
        """Drops the elements whose production raised an error (a corrupt record, a
        map function that raised) and keeps every other one, in order. A file reader
        that hits corruption gives that file up and goes on with the next file, as
        tf.data's readers do. With ``log_warning`` each dropped error is logged (logger
        ``nbdata``).

        >>> import numpy as np, nbdata as nd
        >>> def check(x):
        ...     if x == 0:
        ...         raise nd.errors.InvalidArgumentError("zero")
        ...     return 1 / x
        >>> ds = nd.Dataset.from_tensor_slices(np.array([1.0, 0.0, 2.0])).map(check)
        >>> [float(x) for x in ds.ignore_errors()]
        [1.0, 0.5]
        """
        return self._derive(IgnoreErrors(self._node, _bool_arg(log_warning, "ignore_errors",
                                                               "log_warning"), name=name))

    def cache(self, filename: str = "", name: str | None = None) -> "Dataset":
        """Cache elements in memory (``filename=""``) or in a file, written during the
        first complete iteration and read by later ones (also by other processes
        for a file). A partial iteration leaves no cache.

        >>> import nbdata as nd
        >>> calls = []
        >>> ds = nd.Dataset.range(3).map(lambda x: calls.append(1) or x).cache()
        >>> del calls[:]
        >>> [int(x) for x in ds] == [int(x) for x in ds], len(calls)
        (True, 3)
        """
        if not isinstance(filename, (str, bytes)):
            raise TypeError(f"cache: filename must be a string, got {type(filename).__name__}")
        if isinstance(filename, bytes):
            filename = filename.decode()
        node = Cache(self._node, filename, name=name)
        self._state.register(node.resource_key, MemoryStore())
        return self._derive(node)

    def assert_cardinality(self, expected_cardinality: int, name: str | None = None) -> "Dataset":
        """This dataset, declared to have ``expected_cardinality`` elements (an int or
        ``nd.INFINITE``): ``cardinality()`` returns it, and iterating raises
        FailedPreconditionError when the input turns out longer (at the extra element)
        or shorter (at its end).

        >>> import nbdata as nd
        >>> ds = nd.Dataset.range(10).filter(lambda x: True).assert_cardinality(10)
        >>> ds.cardinality(), len(list(ds))
        (10, 10)
        """
        count = _int_arg(expected_cardinality, "assert_cardinality", "expected_cardinality",
                         placeholder=False)
        if count < 0 and count != INFINITE:
            raise InvalidArgumentError(
                f"assert_cardinality: expected_cardinality must be >= 0 or INFINITE, got {count}",
                "assert_cardinality")
        return self._derive(AssertCardinality(self._node, int(count), name=name))

    def apply(self, transformation_func: Callable[["Dataset"], "Dataset"]) -> "Dataset":
        """``transformation_func(self)``, which must return a Dataset.

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(5).apply(lambda ds: ds.skip(3))]
        [3, 4]
        """
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError(f"apply: the transformation must return a Dataset, got "
                            f"{type(out).__name__}")
        return out

    def with_options(self, options: Options, name: str | None = None) -> "Dataset":
        """This dataset with ``options`` merged into its options (set values win).

        >>> import nbdata as nd
        >>> o = nd.Options(); o.deterministic = False
        >>> nd.Dataset.range(1).with_options(o).options().deterministic
        False
        """
        if not isinstance(options, Options):
            raise TypeError(f"with_options: expected nd.Options, got {type(options).__name__}")
        # a dataset's options are read-only, as tf.data's (set them with with_options)
        return self._family(self._node, self._options.merge(options)._freeze(), self._state)

    def options(self) -> Options:
        """The options of this dataset.

        >>> import nbdata as nd
        >>> nd.Dataset.range(1).options().fusion
        True
        """
        return self._options

    def reduce(self, initial_state: Any, reduce_func: Callable, name: str | None = None) -> Any:
        """Fold the elements into one value: ``state = reduce_func(state, element)``.
        ``name`` labels the op in errors (``reduce[name]``).

        >>> import nbdata as nd
        >>> int(nd.Dataset.range(5).reduce(0, lambda state, x: state + x))
        10
        """
        if name is not None and not isinstance(name, str):
            raise TypeError(f"reduce: name must be a string, got {type(name).__name__}")
        op = f"reduce[{name}]" if name else "reduce"
        if not callable(reduce_func):
            raise TypeError(f"{op}: reduce_func must be callable, got {type(reduce_func).__name__}")
        # a copy: a reducer may update its state in place, not the user's array
        state = copied(_source_structure(initial_state, "reduce"))
        # Each new state keeps the initial state's structure and dtypes; shapes may change.
        state_spec = map_structure(_state_leaf_spec, state)
        for element in self:
            try:
                out = reduce_func(state, element)
            except Exception as e:
                raise InvalidArgumentError(f"{op}: function raised {type(e).__name__}: {e}",
                                           "reduce") from e
            out = canonical_output(out, op, getattr(reduce_func, "__qualname__", "reduce_func"))
            state = conform(out, state_spec, op, "reduce_func")
        return state

    # --------------------------------------------------------- properties
    @property
    def element_spec(self) -> Any:
        """The nested :class:`nd.TensorSpec` of one element (never reads data).

        >>> import numpy as np, nbdata as nd
        >>> nd.Dataset.from_tensor_slices({"a": np.zeros((4, 2))}).element_spec
        {'a': TensorSpec(shape=(2,), dtype=float64, name=None)}
        """
        return self._node.spec

    @property
    def output_types(self) -> Any:
        """TF1-style dtypes of the element (``element_spec``'s dtypes).

        >>> import numpy as np, nbdata as nd
        >>> nd.Dataset.from_tensors((np.int32(1), b"a")).output_types
        (dtype('int32'), string)
        """
        return legacy_types(self.element_spec)

    @property
    def output_shapes(self) -> Any:
        """TF1-style shapes of the element: a :class:`TensorShape` per leaf (it compares
        equal to the tuple of its dims).

        >>> import nbdata as nd
        >>> nd.Dataset.range(10).batch(4).output_shapes
        TensorShape([None])
        """
        return legacy_shapes(self.element_spec)

    @property
    def output_classes(self) -> Any:
        """TF1-style classes: ``np.ndarray`` for dense leaves, ``nd.SparseTensor`` for sparse
        ones (``VarLenFeature``), a window leaf's ``DatasetSpec`` (as
        ``tf.compat.v1.data.get_output_classes``).

        >>> import nbdata as nd
        >>> nd.Dataset.range(3).output_classes
        <class 'numpy.ndarray'>
        """
        return legacy_classes(self.element_spec)

    def cardinality(self) -> int:
        """The number of elements, or ``nd.INFINITE`` / ``nd.UNKNOWN``.

        >>> import nbdata as nd
        >>> nd.Dataset.range(10).batch(3).cardinality()
        4
        >>> nd.Dataset.range(10).repeat().cardinality() == nd.INFINITE
        True
        """
        return self._node.cardinality()

    def __len__(self) -> int:
        n = self.cardinality()
        if n == INFINITE:
            raise TypeError("the dataset is infinite")
        if n == UNKNOWN:
            raise TypeError("the dataset length is unknown")
        return n

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<nd.Dataset element_spec={self.element_spec}>"

    # ---------------------------------------------------------- iteration
    def compile(self) -> Pipeline:
        """The optimized physical plan: a :class:`Pipeline` to iterate many times.

        >>> import nbdata as nd
        >>> pipe = nd.Dataset.range(4).map(lambda x: x + 1).compile()
        >>> [int(x) for x in pipe], [int(x) for x in pipe]
        ([1, 2, 3, 4], [1, 2, 3, 4])
        """
        if self._pipeline is None:
            self._pipeline = Pipeline(self._node, self._options, self._state, Dataset._make_dataset)
            self._pipeline._dataset = self   # pipe.take(...) and the like apply to it
        return self._pipeline

    def __iter__(self) -> Iterator:
        try:
            pipeline = self.compile()
        except OpError as e:
            if not getattr(e, "raised_by_elements", False):
                raise
            return _UnbuiltIterator(self, e)   # tf.data: the function's error comes at next()
        return iter(pipeline)

    def as_numpy_iterator(self) -> Iterator:
        """Iterate NumPy values (elements already are NumPy; kept for tf.data parity).

        >>> import nbdata as nd
        >>> list(nd.Dataset.range(3).as_numpy_iterator())
        [np.int64(0), np.int64(1), np.int64(2)]
        """
        try:
            spec = self.element_spec
        except OpError as e:
            if not getattr(e, "raised_by_elements", False):
                raise
            return _UnbuiltIterator(self, e, Dataset.as_numpy_iterator)
        for s in flatten(spec):
            if isinstance(s, DatasetSpec):
                raise TypeError("as_numpy_iterator: Dataset.as_numpy_iterator() is not supported "
                                "for datasets that produce datasets (elements containing "
                                "datasets have no NumPy form)")
        return _NumpyIterator(iter(self))

    def make_one_shot_iterator(self) -> Iterator:
        """An iterator started at once (no placeholders allowed).

        >>> import nbdata as nd
        >>> it = nd.Dataset.range(3).make_one_shot_iterator()
        >>> int(it.get_next())
        0
        """
        if graph_mode(self):
            return provided("graph_iterator").one_shot(self)
        return iter(self)

    def make_initializable_iterator(self, shared_name: str | None = None) -> Iterator:
        """An iterator that starts (and restarts) with ``it.initialize(feed_dict=...)``.

        >>> import numpy as np, nbdata as nd
        >>> x = nd.placeholder(np.int64, shape=[None])
        >>> it = nd.Dataset.from_tensor_slices(x).make_initializable_iterator()
        >>> it.initialize(feed_dict={x: [4, 5]})
        >>> int(it.get_next())
        4
        >>> it.initialize(feed_dict={x: [7]})
        >>> int(it.get_next())
        7
        """
        if graph_mode(self):
            return provided("graph_iterator").initializable(self, shared_name)
        it = Iterator(self.element_spec)
        it._initializer = it.make_initializer(self)
        return it


# What transformations of a dataset make: nd.Dataset for nd's datasets (the file
# datasets too), the compat.v1 Dataset for that namespace's (graph-mode iterators).
Dataset._family = Dataset


def _state_leaf_spec(v):
    """A reduce state leaf's spec: its dtype (a sparse leaf stays sparse), any shape."""
    if isinstance(v, SparseTensor):
        return SparseTensorSpec((None,) * len(v.dense_shape), _leaf_dtype(v.values))
    return TensorSpec(None, _leaf_dtype(v))


def _leaf_dtype(v):
    if isinstance(v, bytes) or (isinstance(v, np.ndarray) and v.dtype == object):
        return string
    return v.dtype


def _tupleize(structure: Any) -> Any:
    """Lists in a spec/types structure are tuples (as tf.data's nest treats them)."""
    return map_nest(lambda leaf: leaf, structure, lists=True)


def _tupleize_shapes(shapes: Any) -> Any:
    if isinstance(shapes, Mapping):
        return {k: _tupleize_shapes(v) for k, v in shapes.items()}
    return shapes


def at(dataset: Dataset, index: int) -> Any:
    """Element ``index`` of ``dataset``, computed on its own through random access
    (``tf.data.experimental.at``): OutOfRangeError for an index outside
    ``[0, cardinality)``, FailedPreconditionError for a dataset of infinite length or
    without random access (a ``cache`` of such a dataset iterates up to ``index``).

    >>> import nbdata as nd
    >>> int(nd.experimental.at(nd.Dataset.range(3).repeat(2), 4))
    1
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"at: expected a Dataset, got {type(dataset).__name__}")
    index = int(index)
    node = dataset._node
    n = dataset.cardinality()
    reason = node.random_access()
    if reason is not None and node.op == "cache" and n != INFINITE:
        # TF caches the input through the requested element.
        for i, element in enumerate(dataset._derive(node.input)):
            if i == index:
                return element
        raise OutOfRangeError(f"at: index {index} is out of range", "at")
    if n == INFINITE and node.op == "cache" and index >= 0:
        return next(iter(dataset._derive(node.input).skip(index)))
    if n >= 0 and not 0 <= index < n:   # TF checks the index first (repeat(0) included)
        raise OutOfRangeError(f"at: index {index} is out of range [0, {n})", "at")
    if n == INFINITE:
        reason = "its length is infinite"
    elif reason is None and n < 0:
        reason = "its length is unknown"
    if reason is not None:
        raise FailedPreconditionError(
            f"at: the dataset does not support random access ({reason})", "at")
    pipe = dataset._derive(At(node, index)).compile()
    # A random access is no iteration: random ops read their first iteration's draws
    # and the dataset's iteration count stays (epochs given, none taken).
    it = pipe.open_chunks(epochs={})
    try:
        chunk = it.next(1)
    finally:
        it.close()
    return chunk_elements(chunk, pipe.element_spec)[0]


class _NumpyIterator:
    """as_numpy_iterator's iterator: the dataset iterator's elements with arrays as
    read-only views, as tf.data's are (an element may share memory with a chunk or with
    the value a dataset was made from); the rest (save, restore, ...) is the iterator's."""

    def __init__(self, it):
        self._it = it

    def __iter__(self):
        return self

    def __next__(self):
        return map_structure(read_only, next(self._it))

    def __getattr__(self, name):
        return getattr(self._it, name)


def _global_shuffle_refusal(node: Node) -> str | None:
    """What below ``node`` refuses a global shuffle though it gives random access."""
    refusal = getattr(node, "global_shuffle_refusal", None)
    reason = refusal() if refusal is not None else None
    for child in node.inputs:
        reason = reason or _global_shuffle_refusal(child)
    return reason


def global_shuffle(dataset: Dataset, seed: int | None = None,
                   reshuffle_each_iteration: bool = True, name: str | None = None) -> Dataset:
    """A full-epoch random permutation of ``dataset`` in O(1) memory (TF 2.15's
    ``tf.data.experimental.global_shuffle``): every element of an epoch once, in an order
    drawn from a keyed bijection of the positions, for datasets whose element ``i`` can
    be computed on its own (sources, maps, batches, zips, take/skip/shard of those).
    FailedPreconditionError (as TF) names the op that does not allow it.

    >>> import nbdata as nd
    >>> ds = nd.experimental.global_shuffle(nd.Dataset.range(6), seed=1)
    >>> sorted(int(x) for x in ds)
    [0, 1, 2, 3, 4, 5]
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"global_shuffle: expected a Dataset, got {type(dataset).__name__}")
    reason = dataset._node.random_access()
    if reason is None:
        reason = _global_shuffle_refusal(dataset._node)
    n = dataset.cardinality()
    if reason is None and n in (INFINITE, 0):
        raise InvalidArgumentError(
            f"global_shuffle: `global_shuffle` requires the input dataset to have a non-empty "
            f"finite cardinality (it is {'infinite' if n == INFINITE else 'empty'})",
            "global_shuffle")
    if reason is None and n < 0:
        reason = "its length is unknown"
    if reason is not None:
        raise FailedPreconditionError(
            f"global_shuffle: `global_shuffle` requires all upstream transformations be "
            f"compatible with random access ({reason}); use shuffle(buffer_size) instead",
            "global_shuffle")
    node = GlobalShuffle(dataset._node, nd_random.op_seed(seed), bool(reshuffle_each_iteration),
                         name=name)
    dataset._state.register(node.resource_key, EpochCounter(bool(reshuffle_each_iteration)))
    return dataset._derive(node)
