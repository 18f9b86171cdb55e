"""More of tf.data's ``Dataset`` methods: mixing (``sample_from_datasets``,
``choose_from_datasets``), stateful ops (``scan``, ``take_while``, ``unique``,
``group_by_window``, ``bucket_by_sequence_length``, ``rebatch``, ``rejection_resample``),
endless sources (``counter``, ``random``), ``from_list``, ``save``/``load``/``snapshot``,
``get_single_element``, ``sparse_batch``, ``ragged_batch``, ``fingerprint``.

:class:`MoreTransformations` is a base class of ``nd.Dataset`` (this module sits at the
API layer and never imports ``nbdata.dataset``: it builds datasets with ``self._derive``
and ``cls``). Each op's semantics are tf.data's; the nodes live in ``nbdata/ops/``.
"""

from __future__ import annotations

import numbers
import os
import time
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from nbdata import random as nd_random
from nbdata.chunks import copied, read_only
from nbdata.errors import DataLossError, InvalidArgumentError, NotFoundError
from nbdata.ops.from_list import FromList
from nbdata.ops.function import UserFunction, check_dataset_spec, check_predicate_spec
from nbdata.ops.grouping import GroupByReducer, GroupByWindow
from nbdata.ops.mix import DirectedInterleave, WeightedPicks
from nbdata.ops.node import INFINITE, UNKNOWN
from nbdata.ops.rebatch import BuildBatch, Rebatch
from nbdata.ops.scan import Scan, state_spec_of
from nbdata.ops.shuffle import EpochCounter
from nbdata.ops.take_while import TakeWhile
from nbdata.ops.unique import Unique, UniqueScalars
from nbdata.spec import (DatasetSpec, SparseTensor, SparseTensorSpec, TensorSpec, flatten,
                         flatten_up_to,
                         is_dataset, map_nest, pack_as, spec_of_value, string, to_leaf)


def _count(value: Any, op: str, name: str, minimum: int | None = None) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.ndarray)):
        raise TypeError(f"{op}: {name} must be an integer, got {type(value).__name__} {value!r:.40}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(f"{op}: {name} must be >= {minimum}, got {value}", op)
    return value


def _merged_spec(elements: list, op: str):
    """The spec of ``elements``: dims static where all agree; TypeError/ValueError when
    their structures or dtypes differ."""
    from nbdata.trace.abstract import spec_of_results
    from nbdata.spec import same_structure
    first = elements[0]
    for e in elements[1:]:
        if not same_structure(e, first):
            raise ValueError(f"{op}: all elements must have the same structure; got "
                             f"{first!r:.60} and {e!r:.60}")
        for a, b in zip(flatten(first), flatten(e)):
            if spec_of_value(a).dtype != spec_of_value(b).dtype:
                raise TypeError(f"{op}: elements have different dtypes: "
                                f"{spec_of_value(a).dtype} and {spec_of_value(b).dtype}")
    spec = spec_of_results(elements)
    if len(elements) == 1:
        spec = pack_as(first, [spec_of_value(v) for v in flatten(first)])
    return spec


class MoreTransformations:
    """tf.data methods added to ``nd.Dataset`` (see the module docstring)."""

    __slots__ = ()

    # ------------------------------------------------------------ sources
    @classmethod
    def from_list(cls, elements: Any, name: str | None = None):
        """A dataset of the elements of the list ``elements``, in order; they share one
        structure and dtypes, and a dim is static where every element agrees.

        >>> import nbdata as nd
        >>> [(int(a), s) for a, s in nd.Dataset.from_list([(1, "a"), (2, "b")])]
        [(1, b'a'), (2, b'b')]
        >>> nd.Dataset.from_list([[1], [2, 3]]).element_spec
        TensorSpec(shape=(None,), dtype=int64, name=None)
        """
        if not isinstance(elements, list):
            raise ValueError(f"from_list: `elements` must be a list of elements, got "
                             f"{type(elements).__name__}")
        if len(elements) == 0:
            raise ValueError("from_list: `elements` must not be empty (there is no element "
                             "to take the element spec from)")
        canon = [map_nest(lambda v: to_leaf(v, "from_list"), _tuple_lists(e)) for e in elements]
        for e in canon:
            for v in flatten(e):
                if is_dataset(v):
                    raise TypeError("from_list: elements cannot hold datasets")
        spec = _merged_spec(canon, "from_list")
        return cls(FromList(tuple(canon), spec, name=name))

    @classmethod
    def counter(cls, start: Any = 0, step: Any = 1, dtype: Any = np.int64,
                name: str | None = None):
        """The endless sequence ``start, start + step, ...`` of ``dtype``
        (``tf.data.experimental.Counter``).

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.counter(3, 2).take(3)]
        [3, 5, 7]
        """
        dt = np.dtype(dtype)
        start_v = np.asarray(start).astype(dt)[()]
        step_v = np.asarray(step).astype(dt)[()]
        base = cls.from_tensors(np.int64(0)).repeat()

        def value(i, _):
            return (start_v + step_v * i.astype(dt)).astype(dt)

        return base.enumerate().map(value, name=name)

    @classmethod
    def random(cls, seed: Any = None, rerandomize_each_iteration: Any = None,
               name: str | None = None):
        """An endless stream of pseudorandom int64 values in [0, 2**63), counter-based:
        value ``i`` depends only on (seed, op, epoch, i). A new sequence each iteration
        only with ``rerandomize_each_iteration`` (default False, as tf.data's).

        >>> import nbdata as nd
        >>> a = [int(x) for x in nd.Dataset.random(seed=4).take(3)]
        >>> a == [int(x) for x in nd.Dataset.random(seed=4).take(3)]
        True
        """
        node = WeightedPicks((1.0,), nd_random.op_seed(seed), bool(rerandomize_each_iteration),
                             raw=True, name=name)
        ds = cls(node)
        ds._state.register(node.resource_key, EpochCounter(bool(rerandomize_each_iteration)))
        return ds

    @classmethod
    def load(cls, path: Any, element_spec: Any = None, compression: Any = None,
             reader_func: Callable | None = None, wait: bool = False,
             name: str | None = None):
        """The dataset written by ``save(path)`` (its element spec and length come from
        the files; ``element_spec``, when given, must match). Every record's checksum is
        checked as it is read. The shards are read round robin (the saved order for the
        default sharding); ``reader_func(datasets)`` gets a dataset of the shards'
        datasets instead and returns the dataset to read. ``wait=True`` (tf.data's: wait
        for a save in progress) waits until ``path`` holds a complete save (its metadata,
        written last), however long that takes; without it a save in progress is not
        there yet (NotFoundError). The shards are read with the compression they were
        written with (the files record it); ``compression``, when given (not None), must
        be that one: another is a DataLossError, as in tf.data, whose reader needs the
        writer's compression (``"AUTO"``, ``""`` and ``"NONE"`` name no compression).

        >>> import tempfile, os, nbdata as nd
        >>> d = os.path.join(tempfile.mkdtemp(), "saved")
        >>> nd.Dataset.range(3).map(lambda x: x * 2).save(d)
        >>> [int(x) for x in nd.Dataset.load(d)]
        [0, 2, 4]
        """
        from nbdata.ops.snapshot import SavedShards, load_metadata
        path = os.fspath(path)
        if isinstance(path, bytes):
            path = path.decode()
        from nbdata.kernels.column_file import compression_name
        wanted = None if compression is None else compression_name(compression, "load")
        if not isinstance(wait, bool):
            raise TypeError(f"load: wait must be a bool, got {type(wait).__name__}")
        if wait:
            from nbdata.ops.snapshot import read_snapshot_metadata
            pause = 0.01
            while read_snapshot_metadata(path) is None:   # the save writes it last
                time.sleep(pause)
                pause = min(1.0, pause * 2)
        spec, meta = load_metadata(path)
        written = meta.get("compression") or ""
        if wanted is not None and wanted != written:
            raise DataLossError(f"load: {path} was saved with compression="
                                f"{written or None!r}, not {compression!r} (leave compression "
                                f"out, or None, to read it with the one it was saved with)",
                                "load")
        if element_spec is not None:
            from nbdata.spec import specs_compatible
            if not specs_compatible(element_spec, spec):
                raise InvalidArgumentError(f"load: the saved elements are {spec}, not "
                                           f"{element_spec}", "load")
        if reader_func is None:
            return cls(SavedShards(path, spec, int(sum(meta["counts"])), name=name))
        shards = [cls(SavedShards(path, spec, int(c), s))
                  for s, c in zip(meta["shards"], meta["counts"])]
        datasets = cls.from_tensor_slices(shards) if shards else cls.from_tensor_slices(
            [cls(SavedShards(path, spec, 0, -1))])
        out = reader_func(datasets)
        if not is_dataset(out):
            raise TypeError(f"load: reader_func must return a Dataset, got {type(out).__name__}")
        return out

    @staticmethod
    def choose_from_datasets(datasets: Any, choice_dataset: Any,
                             stop_on_empty_dataset: bool = True):
        """Element ``i`` comes from ``datasets[choice_dataset[i]]`` (the next element of
        that dataset). With ``stop_on_empty_dataset`` (the default) the output ends at
        the first choice of a dataset that has ended; else such choices are skipped.

        >>> import nbdata as nd
        >>> ds = nd.Dataset.choose_from_datasets(
        ...     [nd.Dataset.range(10, 13), nd.Dataset.range(20, 23)],
        ...     nd.Dataset.from_list([0, 1, 1, 0]))
        >>> [int(x) for x in ds]
        [10, 20, 21, 11]
        """
        datasets = _dataset_list(datasets, "choose_from_datasets")
        if not is_dataset(choice_dataset):
            raise TypeError(f"choose_from_datasets: `choice_dataset` should be a "
                            f"`tf.data.Dataset` (an nd.Dataset), got "
                            f"{type(choice_dataset).__name__}")
        spec = choice_dataset.element_spec
        if not isinstance(spec, TensorSpec) or spec.dtype != np.int64 or spec.shape not in ((), None):
            raise TypeError(f"choose_from_datasets: choice_dataset must hold scalar int64 "
                            f"(`tf.int64`) values, it holds {spec}")
        return _mix(datasets, choice_dataset, bool(stop_on_empty_dataset))

    @staticmethod
    def sample_from_datasets(datasets: Any, weights: Any = None, seed: Any = None,
                             stop_on_empty_dataset: bool = False,
                             rerandomize_each_iteration: Any = None):
        """Each element comes from ``datasets[k]`` with probability ``weights[k]``
        (default: equal). Picks are counter-based: pick ``i`` depends only on (seed, op,
        epoch, i), so the mixture is the same at any thread count and after a restore,
        and the saved state holds each dataset's own position (each row of each source
        goes out once). A dataset that ends is skipped from then on (its weight is
        shared out by the others) unless ``stop_on_empty_dataset``, when the output ends
        at its next pick. ``weights`` may also be a dataset of weight vectors (one per
        output element).

        >>> import nbdata as nd
        >>> ds = nd.Dataset.sample_from_datasets(
        ...     [nd.Dataset.range(3), nd.Dataset.range(100, 103)], [0.5, 0.5], seed=1)
        >>> sorted(int(x) for x in ds)
        [0, 1, 2, 100, 101, 102]
        """
        datasets = _dataset_list(datasets, "sample_from_datasets")
        rerandomize = bool(rerandomize_each_iteration)
        if is_dataset(weights):
            base = seed
            picks = weights.random_map(
                lambda w, rng: _pick(w, rng.uniform(0.0, 1.0)), seed=base)
            return _mix(datasets, picks, bool(stop_on_empty_dataset))
        if weights is None:
            w = [1.0 / len(datasets)] * len(datasets)
        else:
            raw = np.asarray(weights)
            if raw.dtype.kind != "f":
                raise TypeError(f"sample_from_datasets: `weights` must be convertible to a "
                                f"tensor of `tf.float32` or `tf.float64` elements, got "
                                f"{raw.dtype}")
            w = [float(x) for x in raw.reshape(-1)]
            if len(w) != len(datasets):
                raise ValueError(f"sample_from_datasets: `datasets` and `weights` should have "
                                 f"the same length, got {len(datasets)} and {len(w)}")
            if any(x < 0 for x in w) or not np.isfinite(w).all():
                raise InvalidArgumentError(f"sample_from_datasets: weights must be finite and "
                                           f"non-negative, got {w}", "sample_from_datasets")
            # all zero: nothing is ever picked (an empty output, as tf.data's)
        node = WeightedPicks(tuple(w), nd_random.op_seed(seed), rerandomize)
        first = datasets[0]
        picks = first._family(node, first._options, first._state)
        picks._state.register(node.resource_key, EpochCounter(rerandomize))
        return _mix(datasets, picks, bool(stop_on_empty_dataset))

    # ---------------------------------------------------- transformations
    def take_while(self, predicate: Callable, name: str | None = None):
        """The elements up to (not including) the first for which ``predicate`` is False.

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(10).take_while(lambda x: x < 4)]
        [0, 1, 2, 3]
        """
        fn = self._fn(predicate, "take_while", name=name, record=True)
        check_predicate_spec(fn.output_spec, "take_while", fn.name)
        return self._derive(TakeWhile(self._node, fn, name=name))

    def scan(self, initial_state: Any, scan_func: Callable, name: str | None = None):
        """A map carrying a state: ``new_state, out = scan_func(state, element)``, the
        state starting at ``initial_state`` (its structure and dtypes stay; its shapes
        may change).

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.range(5).scan(0, lambda s, x: (s + x, s + x))]
        [0, 1, 3, 6, 10]
        """
        if not callable(scan_func):
            raise TypeError(f"scan: scan_func must be callable, got {type(scan_func).__name__}")
        # read-only (a view), and each run (and the trace) starts from a copy: a function
        # may update its state in place without changing the user's array or later epochs
        state = map_nest(lambda v: read_only(to_leaf(v, "scan: initial_state")),
                         _tuple_lists(initial_state))
        state_spec = pack_as(state, [spec_of_value(v) for v in flatten(state)])
        from nbdata.spec import merge_shapes, same_structure
        first = self._first_element
        label = f"scan[{name}]" if name else "scan"
        # tf.data's fixed point: a state whose shape changes is traced again with the
        # dims (or rank) that changed unknown, until its spec stays the same.
        for _ in range(4):
            fn = UserFunction(scan_func, label, (state_spec, self.element_spec),
                              type(self)._make_dataset, record=True,
                              first_element=lambda k, st=state: [(copied(st), e)
                                                                 for e in first(1)])
            out = fn.output_spec
            if not isinstance(out, tuple) or len(out) != 2:
                raise TypeError("scan: `scan_func` should return a pair consisting of new "
                                f"state and the output value, it returns {out}")
            if not same_structure(out[0], state_spec):
                raise TypeError(f"scan: the new state {out[0]} does not have the structure "
                                f"of the initial state {state_spec}")
            for a, b in zip(flatten(out[0]), flatten(state_spec)):
                if a.dtype != b.dtype:
                    raise TypeError("scan: The element types for the new state must match "
                                    f"the initial state. Expected {b.dtype}, got {a.dtype}")
            relaxed = pack_as(state_spec, [TensorSpec(merge_shapes(b.shape, a.shape), b.dtype)
                                           for a, b in zip(flatten(out[0]), flatten(state_spec))])
            if relaxed == state_spec:
                break
            state_spec = relaxed
        return self._derive(Scan(self._node, state, fn, state_spec, name=name))

    def unique(self, name: str | None = None):
        """Each distinct element once, at its first occurrence (elements of int32, int64
        or string, one component).

        >>> import nbdata as nd
        >>> [int(x) for x in nd.Dataset.from_list([1, 3, 1, 2, 3]).unique()]
        [1, 3, 2]
        """
        spec = self.element_spec
        if not isinstance(spec, TensorSpec) or not (
                spec.dtype is string or spec.dtype in (np.dtype(np.int32), np.dtype(np.int64))):
            raise TypeError(f"unique: only elements of one int32, int64 or string component "
                            f"are supported, got {spec}")
        if spec.dtype is not string and spec.shape == ():
            return self._derive(UniqueScalars(self._node, name=name))
        return self._derive(Unique(self._node, name=name))

    def group_by_window(self, key_func: Callable, reduce_func: Callable,
                        window_size: Any = None, window_size_func: Callable | None = None,
                        name: str | None = None, _batch_dim: Any = "probe"):
        """Group elements by ``key_func(element)`` (a scalar int64) into windows of
        ``window_size`` (or ``window_size_func(key)``); each full window (and at the end
        each partial one, in ascending key order) becomes ``reduce_func(key,
        window_dataset)``, whose elements are the output.

        >>> import nbdata as nd
        >>> ds = nd.Dataset.range(10).group_by_window(
        ...     lambda x: x % 2, lambda k, w: w.batch(3), window_size=3)
        >>> [b.tolist() for b in ds]
        [[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]]
        """
        if (window_size is None) == (window_size_func is None):
            raise ValueError("group_by_window: give exactly one of window_size and "
                             "window_size_func")
        if window_size is not None:   # a size below 1 is an error when the input is read
            window_size = _count(window_size, "group_by_window", "window_size")
        op = "group_by_window"
        key_fn = self._fn(key_func, op, name=name, record=True)
        _check_int64_scalar(key_fn.output_spec, op, "key_func")
        reduce_fn = UserFunction(reduce_func, op, (TensorSpec((), np.int64),
                                                   DatasetSpec(self.element_spec)),
                                 type(self)._make_dataset,
                                 DatasetSpec(_window_output_spec(self, reduce_func, op,
                                                                 _batch_dim)),
                                 check=check_dataset_spec, returns_datasets=True)
        size_fn = None
        if window_size_func is not None:
            size_fn = UserFunction(window_size_func, op, TensorSpec((), np.int64),
                                   type(self)._make_dataset, TensorSpec((), np.int64))
        return self._derive(GroupByWindow(self._node, key_fn, reduce_fn, size_fn, window_size,
                                          name=name))

    def group_by_reducer(self, key_func: Callable, reducer: Any, name: str | None = None):
        """Reduce the elements of each key (``key_func(element)``, a scalar int64) with
        ``reducer`` (``nd.experimental.Reducer(init_func, reduce_func, finalize_func)``);
        one output per key, in ascending key order, at the end of the input.

        >>> import nbdata as nd
        >>> from nbdata.experimental import Reducer
        >>> r = Reducer(lambda k: 0, lambda s, x: s + x, lambda s: s)
        >>> [int(x) for x in nd.Dataset.range(6).group_by_reducer(lambda x: x % 2, r)]
        [6, 9]
        """
        op = "group_by_reducer"
        key_fn = self._fn(key_func, op, name=name, record=True)
        _check_int64_scalar(key_fn.output_spec, op, "key_func")
        make = type(self)._make_dataset
        init_fn = UserFunction(reducer.init_func, op, TensorSpec((), np.int64), make, record=True)
        state_spec = init_fn.output_spec
        reduce_fn = UserFunction(reducer.reduce_func, op, (state_spec, self.element_spec), make,
                                 record=True)
        from nbdata.spec import same_structure
        if not same_structure(reduce_fn.output_spec, state_spec) or any(
                a.dtype != b.dtype for a, b in zip(flatten(reduce_fn.output_spec),
                                                   flatten(state_spec))):
            raise TypeError(f"group_by_reducer: reduce_func returns {reduce_fn.output_spec}, "
                            f"the state is {state_spec}")
        relaxed = state_spec_of(state_spec)
        finalize_fn = None
        if reducer.finalize_func is not None:
            finalize_fn = UserFunction(reducer.finalize_func, op, relaxed, make, record=True)
        return self._derive(GroupByReducer(self._node, key_fn, init_fn, reduce_fn, finalize_fn,
                                           relaxed, name=name))

    def bucket_by_sequence_length(self, element_length_func: Callable, bucket_boundaries: Any,
                                  bucket_batch_sizes: Any, padded_shapes: Any = None,
                                  padding_values: Any = None, pad_to_bucket_boundary: bool = False,
                                  no_padding: bool = False, drop_remainder: bool = False,
                                  name: str | None = None):
        """Batch elements of similar length together: bucket ``b`` holds lengths in
        ``[boundaries[b-1], boundaries[b])`` and batches ``bucket_batch_sizes[b]`` of them
        (padded, unless ``no_padding``); tf.data's ``group_by_window`` recipe. Numeric
        elements (known shapes, or 1-D sequences such as Arrow list columns) are padded
        and batched a chunk at a time, the length function compiled where it compiles
        (``nbdata/ops/bucket.py``); others go through ``group_by_window``.

        >>> import numpy as np, nbdata as nd
        >>> ds = nd.Dataset.from_list([[1], [2, 2], [3], [4, 4]]).bucket_by_sequence_length(
        ...     lambda x: np.int64(len(x)), [2], [2, 2])
        >>> [b.tolist() for b in ds]
        [[[1], [3]], [[2, 2], [4, 4]]]
        """
        boundaries = [int(b) for b in bucket_boundaries]
        sizes = [int(b) for b in bucket_batch_sizes]
        if len(sizes) != len(boundaries) + 1:
            raise ValueError(f"bucket_by_sequence_length: len(bucket_batch_sizes) must equal "
                             f"len(bucket_boundaries) + 1, got {len(sizes)} and {len(boundaries)}")
        if any(b >= c for b, c in zip(boundaries, boundaries[1:])):
            raise ValueError("bucket_by_sequence_length: bucket_boundaries must be a sorted "
                             "list of distinct lengths")
        lows = np.array([np.iinfo(np.int32).min] + boundaries, np.int64)
        highs = np.array(boundaries + [np.iinfo(np.int32).max], np.int64)
        sizes_arr = np.array(sizes, np.int64)

        def key(*element):
            length = element_length_func(*element)
            return np.int64(np.argmax((lows <= length) & (length < highs)))

        def window_size(bucket):
            return sizes_arr[bucket]

        def reduce(bucket, window):
            if no_padding:
                return window.batch(int(sizes_arr[int(bucket)]), drop_remainder=drop_remainder)
            shapes = padded_shapes
            if pad_to_bucket_boundary:
                b = int(bucket)
                if b == len(boundaries):
                    raise InvalidArgumentError(
                        "bucket_by_sequence_length: with pad_to_bucket_boundary=True elements "
                        "must be shorter than max(bucket_boundaries); an element is longer, "
                        "add a boundary",
                        "bucket_by_sequence_length")
                none_to = int(highs[b]) - 1
                spec = window.element_spec
                leaves = flatten(spec)
                given = [s.shape for s in leaves] if shapes is None else (
                    [shapes] if len(leaves) == 1 and not isinstance(spec, (tuple, dict))
                    else flatten_up_to(spec, shapes, "bucket_by_sequence_length"))
                shapes = pack_as(spec, [tuple(none_to if d is None or d == -1 else int(d)
                                              for d in g) for g in given])
            return window.padded_batch(int(sizes_arr[int(bucket)]), shapes, padding_values,
                                       drop_remainder=drop_remainder)

        batch_dim = sizes[0] if drop_remainder and len(set(sizes)) == 1 else None
        recipe = self.group_by_window(key, reduce, window_size_func=window_size, name=name,
                                      _batch_dim=batch_dim)
        from nbdata.ops.bucket import BucketBySequenceLength, eligible
        if no_padding or not eligible(self.element_spec):
            return recipe
        # Numeric elements (token sequences): the same batches a chunk at a time.
        shapes, values = [], None
        for b, size in enumerate(sizes):
            if pad_to_bucket_boundary and b == len(boundaries):
                shapes.append(None)
                continue
            spec = self.element_spec
            given = padded_shapes
            if pad_to_bucket_boundary:
                leaves = flatten(spec)
                raw = [s.shape for s in leaves] if given is None else (
                    [given] if len(leaves) == 1 and not isinstance(spec, (tuple, dict))
                    else flatten_up_to(spec, given, "bucket_by_sequence_length"))
                given = pack_as(spec, [tuple(int(highs[b]) - 1 if d is None or d == -1 else int(d)
                                             for d in g) for g in raw])
            node = self.padded_batch(size, given, padding_values)._node
            shapes.append(node.padded_shapes)
            values = node.padding_values
        if values is None:
            values = self.padded_batch(1, padded_shapes, padding_values)._node.padding_values
        return self._derive(BucketBySequenceLength(
            self._node, element_length_func, tuple(boundaries), tuple(sizes), tuple(shapes),
            tuple(values), bool(drop_remainder), recipe.element_spec, name=name))

    def rebatch(self, batch_size: Any, drop_remainder: bool = False, name: str | None = None):
        """The rows of this dataset's batches in batches of ``batch_size`` (a list:
        sizes taken in turn).

        >>> import nbdata as nd
        >>> [b.tolist() for b in nd.Dataset.range(7).batch(4).rebatch([2, 1])]
        [[0, 1], [2], [3, 4], [5], [6]]
        """
        sizes = np.asarray(batch_size).reshape(-1)
        if sizes.dtype.kind not in "iu" or len(sizes) == 0:
            raise ValueError(f"rebatch: batch_size must be an integer or a list of integers, "
                             f"got {batch_size!r}")
        if (sizes < 0).any() or not (sizes > 0).any():
            raise InvalidArgumentError(f"rebatch: batch sizes must be >= 0 and one of them "
                                       f"positive, got {sizes.tolist()}", "rebatch")
        # The batch dim is static when every batch is full: drop_remainder, or input
        # batches of a static size that the one batch size divides.
        leading = [s.shape[0] if isinstance(s, TensorSpec) and s.shape else None
                   for s in flatten(self.element_spec)]
        size = int(sizes[0])
        uniform = bool((sizes == size).all()) and size > 0
        divides = uniform and all(d is not None and d % size == 0 for d in leading)
        unbatched = self.unbatch()
        if uniform:
            return unbatched.batch(size, drop_remainder=bool(drop_remainder) or divides, name=name)
        return self._derive(Rebatch(unbatched._node, tuple(int(s) for s in sizes),
                                    bool(drop_remainder), None, name=name))

    def rejection_resample(self, class_func: Callable, target_dist: Any, initial_dist: Any = None,
                           seed: Any = None, name: str | None = None):
        """Resample so that the classes (``class_func(element)``, int32/int64 scalars)
        follow ``target_dist``: each element of class ``c`` is kept with probability
        ``target[c] / initial[c]`` scaled so the most over-represented class is kept at
        ratio 1 (``initial_dist`` None: estimated from the classes seen so far). Elements
        are ``(class, element)`` pairs, as tf.data's. The keep draws are counter-based.

        >>> import numpy as np, nbdata as nd
        >>> ds = nd.Dataset.range(8).rejection_resample(lambda x: x % 2, [0.5, 0.5],
        ...                                              initial_dist=[0.5, 0.5], seed=1)
        >>> len(list(ds))
        8
        """
        target = np.asarray(target_dist, np.float64)
        initial = None if initial_dist is None else np.asarray(initial_dist, np.float64)
        op = "rejection_resample"
        if target.ndim != 1 or (initial is not None and initial.shape != target.shape):
            raise ValueError(f"{op}: target_dist and initial_dist must be vectors of one length")
        counts = np.zeros(len(target), np.float64)

        def with_class(*element):
            c = np.asarray(class_func(*element))
            return np.int64(c), (element[0] if len(element) == 1 else element)

        def accept(c, element, rng):
            k = int(c)
            if initial is not None:
                dist = initial
            else:
                counts[k] += 1
                dist = counts / counts.sum()
            ratio = np.where(dist > 0, target / np.where(dist > 0, dist, 1.0), 0.0)
            ratio = ratio / ratio.max() if ratio.max() > 0 else ratio
            return np.bool_(rng.uniform(0.0, 1.0) < ratio[k])

        pairs = self.map(with_class, name=name)
        flagged = pairs.random_map(lambda c, e, rng: (c, e, accept(c, e, rng)), seed=seed)
        return flagged.filter(lambda c, e, keep: keep).map(lambda c, e, keep: (c, e))

    # --------------------------------------------------- batching to sparse
    def sparse_batch(self, batch_size: Any, row_shape: Any, name: str | None = None):
        """Batches of ``batch_size`` elements as ``nd.SparseTensor``s of dense shape
        ``[n, *row_shape]`` (each element's values at its own indices; an element of
        another rank is an InvalidArgumentError, one larger than ``row_shape`` a
        DataLossError, as in tf.data).

        >>> import numpy as np, nbdata as nd
        >>> ds = nd.Dataset.from_list([[1], [2, 3]]).sparse_batch(2, [3])
        >>> st = next(iter(ds))
        >>> st.indices.tolist(), st.values.tolist(), st.dense_shape.tolist()
        ([[0, 0], [1, 0], [1, 1]], [1, 2, 3], [2, 3])
        """
        size = _count(batch_size, "sparse_batch", "batch_size", minimum=1)
        spec = self.element_spec
        if not isinstance(spec, TensorSpec):
            raise TypeError(f"sparse_batch: elements must be one tensor, got {spec}")
        dims = list(row_shape) if isinstance(row_shape, (list, tuple)) else \
            np.asarray(row_shape).reshape(-1).tolist()
        for d in dims:
            if d is not None and int(d) < -1:
                raise ValueError(f"sparse_batch: row_shape {dims}: Dimension {int(d)} must "
                                 f"be >= 0")
        shape = tuple(-1 if d is None or int(d) < 0 else int(d) for d in dims)
        dtype = spec.dtype
        rank = len(shape)

        def build(batch):
            indices, values = [], []
            dims = list(shape)
            for b, row in enumerate(batch):
                a = np.asarray(row) if dtype is not string else np.asarray(row, dtype=object)
                # as tf.data, when the batch is built: a rank other than row_shape's is an
                # InvalidArgumentError, an element larger than row_shape a DataLossError
                if a.ndim != rank:
                    raise InvalidArgumentError(
                        f"sparse_batch: Input element of shape {list(a.shape)} is "
                        f"incompatible with the row shape {list(shape)}", "sparse_batch")
                for d, (have, want) in enumerate(zip(a.shape, shape)):
                    if want >= 0 and have > want:
                        raise DataLossError(
                            f"sparse_batch: an element of shape {list(a.shape)} is larger "
                            f"than the row shape {list(shape)}", "sparse_batch")
                for d in range(rank):
                    if shape[d] < 0:
                        dims[d] = max(dims[d], a.shape[d])
                idx = np.argwhere(np.ones(a.shape, bool)) if a.size else np.zeros((0, rank), np.int64)
                indices.append(np.concatenate([np.full((len(idx), 1), b, np.int64),
                                               idx.astype(np.int64)], axis=1))
                values.append(a.reshape(-1))
            dense = np.array([len(batch)] + [max(d, 0) for d in dims], np.int64)
            vals = np.concatenate(values) if values else np.zeros(0, dtype)
            return SparseTensor(np.concatenate(indices) if indices else
                                np.zeros((0, rank + 1), np.int64), vals, dense)

        out_spec = SparseTensorSpec((None,) + tuple(None if d < 0 else d for d in shape), dtype)
        return self._derive(BuildBatch(self._node, size, False, build, out_spec, name=name))

    def ragged_batch(self, batch_size: Any, drop_remainder: bool = False,
                     row_splits_dtype: Any = np.int64, name: str | None = None):
        """Batches of ``batch_size`` elements whose shapes may differ: a component with
        unknown dims batches into an ``nd.RaggedTensor`` whose dims up to its last unknown
        one are ragged (tf.data's rule); components of a fully known shape batch densely.

        >>> import nbdata as nd
        >>> b = next(iter(nd.Dataset.from_list([[1], [2, 3]]).ragged_batch(2)))
        >>> b.to_list(), b.row_splits.tolist()
        ([[1], [2, 3]], [0, 1, 3])
        """
        from nbdata.ragged import RaggedTensorSpec, ragged_batch_of
        from nbdata.ops.rebatch import RaggedBatch, stack_elements
        size = _count(batch_size, "ragged_batch", "batch_size", minimum=1)
        spec = self.element_spec
        leaves = flatten(spec)
        ranks = [max((i for i, d in enumerate(s.shape) if d is None), default=-1)
                 if isinstance(s, TensorSpec) and s.shape else -1 for s in leaves]
        if all(r < 0 for r in ranks):
            return self.batch(size, drop_remainder=drop_remainder, name=name)
        dim = size if drop_remainder else None
        out = []
        for s, r in zip(leaves, ranks):
            if r < 0:
                out.append(TensorSpec(None if s.shape is None else (dim,) + s.shape, s.dtype))
            else:
                out.append(RaggedTensorSpec((dim,) + s.shape, s.dtype, r + 1, row_splits_dtype))
        out_spec = pack_as(spec, out)

        def build(elements):
            rows = [flatten(e) for e in elements]
            batch = []
            for k, (s, r) in enumerate(zip(leaves, ranks)):
                values = [row[k] for row in rows]
                if r < 0:
                    batch.append(flatten(stack_elements(values, s))[0])
                else:
                    batch.append(ragged_batch_of(values, r, np.dtype(row_splits_dtype)))
            return pack_as(spec, batch)

        return self._derive(RaggedBatch(self._node, size, bool(drop_remainder), build, out_spec,
                                        name=name))

    # ---------------------------------------------------------- terminals
    def get_single_element(self, name: str | None = None):
        """The one element of this dataset; InvalidArgumentError when it has none or more.

        >>> import nbdata as nd
        >>> int(nd.Dataset.range(1).get_single_element())
        0
        """
        it = iter(self)
        try:
            try:
                first = next(it)
            except StopIteration:
                raise InvalidArgumentError("get_single_element: Dataset was empty.",
                                           "get_single_element") from None
            try:
                next(it)
            except StopIteration:
                return first
            raise InvalidArgumentError("get_single_element: Dataset had more than one element.",
                                       "get_single_element")
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    def save(self, path: Any, compression: Any = None, shard_func: Callable | None = None,
             checkpoint_args: Any = None) -> None:
        """Write every element to the directory ``path`` (``load(path)`` reads it back):
        tf.data's layout, a run directory of ``%08d.shard`` files (one, or
        ``shard_func(element)`` choosing each row's) and ``snapshot.metadata`` (the element
        spec and the rows of each shard) written last, in nbdata's checksummed column
        format. An interrupted save leaves nothing ``load`` reads; a new save replaces the
        old one.

        ``compression``: ``"GZIP"`` (zlib streams; isal's when installed) or
        ``"SNAPPY"`` (through pyarrow or python-snappy: UnimplementedError naming them
        when neither is installed) compresses the shards' buffers; None, ``""``,
        ``"NONE"`` and ``"AUTO"`` write them uncompressed. The files and the metadata
        record it: ``load(path)`` needs no argument.

        ``checkpoint_args`` (tf.train.CheckpointManager's arguments; ``directory`` and
        ``max_to_keep`` are required, as there, another key is a TypeError) checkpoints
        the save's progress in ``directory`` every ``checkpoint_interval`` elements
        (default 1024; tf.data's default, every element, would sync the shards after
        each), at the end of the chunk of rows in progress then, keeping the newest
        ``max_to_keep`` (None: all) and, with ``keep_checkpoint_every_n_hours``, one
        more per that many hours. A save called again with a checkpoint there resumes
        it: the shards written before the checkpoint are kept (cut back to it: bytes
        written after it go) and the input restarts from the checkpoint's position, so
        only the rows after it are read and written. The saved dataset holds every
        element once, in order. When the save completes its checkpoints are
        removed (tf.data keeps them), so a later save starts afresh.
        ``checkpoint_name`` (default ``"ckpt"``) prefixes the files; a ``step_counter``
        (a variable with ``assign_add``) is advanced by one per element, as in
        tf.data, and is not needed for ``checkpoint_interval`` (nbdata counts the
        elements itself); ``init_fn`` is accepted and, as in tf.data's save, not called.

        >>> import tempfile, os, nbdata as nd
        >>> d = tempfile.mkdtemp()
        >>> nd.Dataset.range(5).save(os.path.join(d, "s"), compression="GZIP",
        ...                          checkpoint_args={"directory": os.path.join(d, "c"),
        ...                                           "max_to_keep": 2})
        >>> [int(x) for x in nd.Dataset.load(os.path.join(d, "s"))]
        [0, 1, 2, 3, 4]
        """
        from nbdata.kernels.column_file import codec, compression_name
        from nbdata.ops.snapshot import (SaveCheckpoints, Snapshot, _remove_saved,
                                         spec_to_json)
        # an empty checkpoint_args is none, as in tf.data (``if checkpoint_args:``)
        checkpoints = SaveCheckpoints(checkpoint_args) if checkpoint_args else None
        path = os.fspath(path)
        if isinstance(path, bytes):
            path = path.decode()
        compression = compression_name(compression, "save")
        codec(compression, "save")   # SNAPPY without a codec installed: say so now
        if any(isinstance(s, (DatasetSpec, SparseTensorSpec)) for s in flatten(self.element_spec)):
            raise TypeError("save: elements holding datasets or sparse tensors cannot be saved")
        spec_to_json(self.element_spec)     # a spec save cannot describe: TypeError now
        fn = None if shard_func is None else _shard_caller(shard_func)
        writer = self._derive(Snapshot(self._node, path, 1, fn, compression=compression,
                                       resumable=checkpoints is not None))
        if checkpoints is not None:
            checkpoints.run(writer, path)
            return
        _remove_saved(path)
        for _ in writer:
            pass

    def snapshot(self, path: Any, compression: Any = "AUTO", reader_func: Callable | None = None,
                 shard_func: Callable | None = None, name: str | None = None):
        """Persist this dataset under the directory ``path``: the first complete
        iteration writes ``<path>/<fingerprint>/`` in tf.data's layout (a run directory
        of ``%08d.shard`` files, one per core by default, ``shard_func(index, element)``
        choosing a row's shard otherwise, and ``snapshot.metadata`` written last, in
        nbdata's checksummed column format); later iterations, also in other processes,
        read the shards (round robin, which gives back the input's order for the default
        sharding) instead of computing the input. A changed pipeline has another
        fingerprint, so it writes a snapshot of its own; an iteration that stops early
        leaves none. ``reader_func(datasets)`` reads a complete snapshot: it gets a
        dataset of the shards' datasets and returns the dataset to read (default: round
        robin over the shards); it is checked when the snapshot is made (it must turn a
        dataset of datasets into a dataset, TypeError otherwise). ``compression``:
        ``"GZIP"`` or ``"SNAPPY"`` compresses the shards' buffers (as ``save``'s); the
        default ``"AUTO"``, like None, ``""`` and ``"NONE"``, writes them uncompressed
        (tf.data's AUTO picks snappy; nbdata's does not: snappy is an optional package
        here, and uncompressed shards are read in place). A snapshot is read with the
        compression it was written with, whatever this argument says.

        >>> import tempfile, nbdata as nd
        >>> d = tempfile.mkdtemp()
        >>> ds = nd.Dataset.range(3).snapshot(d)
        >>> [int(x) for x in ds] == [int(x) for x in ds] == [0, 1, 2]
        True
        """
        import multiprocessing
        from nbdata.ops.snapshot import Snapshot
        path = os.fspath(path)
        if isinstance(path, bytes):
            path = path.decode()
        from nbdata.kernels.column_file import codec, compression_name
        compression = compression_name(compression, "snapshot")
        codec(compression, "snapshot")   # SNAPPY without a codec installed: say so now
        if reader_func is not None:
            out = reader_func(self.window(1))     # a dataset of datasets, as the shards'
            if not is_dataset(out):
                raise TypeError(f"snapshot: reader_func must return a Dataset, got "
                                f"{type(out).__name__}")
        directory = os.path.join(path, f"{int(self.fingerprint()):016x}")
        fn = None if shard_func is None else _shard_caller(shard_func)
        # Dataset itself (not a reader's subclass such as TFRecordDataset): load's class
        base = next(c for c in type(self).__mro__ if MoreTransformations in c.__bases__)
        reader = None if reader_func is None else \
            (lambda d: base.load(d, reader_func=reader_func)._node)
        return self._derive(Snapshot(self._node, directory, multiprocessing.cpu_count(), fn,
                                     reader, compression, name=name))

    def fingerprint(self) -> np.uint64:
        """A 64-bit fingerprint of this dataset's plan (its ops, arguments, element specs
        and functions): equal for equal pipelines, also across processes.

        >>> import nbdata as nd
        >>> bool(nd.Dataset.range(3).fingerprint() == nd.Dataset.range(3).fingerprint())
        True
        """
        import hashlib
        from nbdata.compiler.plan_identity import plan_fingerprint, plan_ops
        h = hashlib.sha1(plan_fingerprint(self._node).encode())
        for node in plan_ops(self._node):   # what the identity leaves out on purpose
            if isinstance(node, WeightedPicks):
                h.update(repr(node.weights).encode())
        return np.uint64(int(h.hexdigest()[:16], 16))


# ----------------------------------------------------------------- helpers

def _tuple_lists(value: Any) -> Any:
    """Lists are tensors (tf.data's rule) but a top-level tuple is structure."""
    return value


def _shard_caller(shard_func: Callable) -> Callable:
    """``shard_func(*element)`` (tf.data's signature: the element, tuples unpacked) as a
    ``(index, element)`` function."""
    def call(index, element):
        out = shard_func(*element) if isinstance(element, tuple) else shard_func(element)
        arr = np.asarray(out)
        if arr.ndim != 0 or arr.dtype.kind not in "iu":
            raise TypeError(f"shard_func must return a scalar integer (the shard index), "
                            f"got {out!r:.60}")
        return int(arr)
    return call




def _window_output_spec(ds, reduce_func: Callable, op: str, batch_dim: Any = "probe") -> Any:
    """The element spec of ``reduce_func``'s datasets: it is called on empty windows
    (no element is read or made up) with keys 0 and 1, a dim static where both agree;
    ``batch_dim`` (unless "probe") replaces every leaf's leading dim (the batch size a
    key decides)."""
    from nbdata.spec import merge_specs
    empty = type(ds)(FromList((), ds.element_spec))
    specs, errors = [], []
    for key in (0, 1):
        try:
            out = reduce_func(np.int64(key), empty)
        except Exception as e:  # noqa: BLE001 - a key the function does not take
            errors.append(e)
            continue
        if not is_dataset(out):
            raise TypeError(f"{op}: reduce_func must return a Dataset, got {type(out).__name__}")
        specs.append(out.element_spec)
    if not specs:
        raise InvalidArgumentError(f"{op}: calling reduce_func on a window raised "
                                   f"{type(errors[0]).__name__}: {errors[0]}", op) from errors[0]
    spec = specs[0]
    for other in specs[1:]:
        try:
            spec = merge_specs(spec, other)
        except (TypeError, ValueError):
            pass
    if batch_dim != "probe":
        spec = pack_as(spec, [TensorSpec((batch_dim,) + tuple(s.shape[1:]), s.dtype)
                              if isinstance(s, TensorSpec) and s.shape else s
                              for s in flatten(spec)])
    return spec


def _check_int64_scalar(spec: Any, op: str, what: str) -> None:
    """A key function returns one integer scalar (converted to int64)."""
    if not isinstance(spec, TensorSpec) or spec.dtype is string or \
            np.dtype(spec.dtype).kind not in "iu" or spec.shape not in ((), None):
        raise ValueError(f"{op}: `{what}` must return a single tf.int64 scalar tensor, it "
                         f"returns {spec}")


def _dataset_list(datasets: Any, op: str) -> list:
    if is_dataset(datasets) or not isinstance(datasets, (list, tuple)):
        raise TypeError(f"{op}: datasets must be a list of Datasets, got {type(datasets).__name__}")
    datasets = list(datasets)
    if not datasets:
        raise ValueError(f"{op}: Invalid `datasets`. `datasets` should not be empty.")
    for d in datasets:
        if not is_dataset(d):
            raise TypeError(f"{op}: datasets must be a list of Datasets, got a "
                            f"{type(d).__name__}")
    spec = datasets[0].element_spec
    from nbdata.spec import merge_specs
    for d in datasets[1:]:
        try:
            spec = merge_specs(spec, d.element_spec)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{op}: all datasets in `datasets` must have compatible element "
                            f"specs: {e}") from None
    return datasets


def _mix(datasets: list, selector: Any, stop: bool):
    first = datasets[0]
    options, state = selector._options, selector._state
    from nbdata.compiler.executor import RunState
    for d in datasets:
        options = options.merge(d._options)
    state = RunState.merged(selector._state, *(d._state for d in datasets))
    node = DirectedInterleave(selector._node, tuple(d._node for d in datasets), stop)
    return first._family(node, options, state)


def _pick(weights, u) -> np.int64:
    w = np.asarray(weights, np.float64).reshape(-1)
    cdf = np.cumsum(w) / w.sum()
    return np.int64(min(int(np.searchsorted(cdf, u, side="right")), len(w) - 1))


__all__ = ["MoreTransformations", "INFINITE", "UNKNOWN", "Mapping", "NotFoundError"]
