"""More of ``tf.data.experimental`` for ``nd.experimental`` (re-exported there): mixing,
stateful transformations, the TF 1.x-era fused names (``map_and_batch``,
``parallel_interleave``, ``shuffle_and_repeat``), ``index_shuffle``, ``Optional``, lookup
tables from datasets, tf.data's ``TFRecordWriter``, and the options and constants kept
under that namespace. Transformations return functions for ``ds.apply``; each is the
Dataset method of the same name (``nbdata/transformations.py``)."""

from __future__ import annotations

import dataclasses
import functools
import numbers
from typing import Any, Callable

import numpy as np

from nbdata.dataset import Dataset, global_shuffle
from nbdata.errors import InvalidArgumentError, OutOfRangeError
from nbdata.ops.node import AUTOTUNE, INFINITE, UNKNOWN
from nbdata.options import (AutoShardPolicy, AutotuneOptions, DistributeOptions,  # noqa: F401
                            OptimizationOptions, ThreadingOptions)
from nbdata.spec import TensorSpec, flatten, map_nest, pack_as, spec_of_value, string, to_leaf

class ExternalStatePolicy:
    """``tf.data.experimental.ExternalStatePolicy`` (for
    ``Options.experimental_external_state_policy``; nbdata saves iterator state without
    serializing functions, so the policy changes nothing)."""

    WARN = 0
    IGNORE = 1
    FAIL = 2


INFINITE_CARDINALITY = INFINITE
UNKNOWN_CARDINALITY = UNKNOWN


def cardinality(dataset) -> int:
    """``dataset.cardinality()`` (``tf.data.experimental.cardinality``)."""
    return dataset.cardinality()


def __getattr__(name):
    # The CSV readers live with the file datasets (imported on first use).
    if name in ("CsvDataset", "make_csv_dataset"):
        from nbdata.io import csv_dataset
        return getattr(csv_dataset, name)
    if name in ("make_batched_features_dataset", "parse_example_dataset"):
        from nbdata.io import example_dataset
        return getattr(example_dataset, name)
    raise AttributeError(f"module 'nbdata.experimental' has no attribute {name!r}")


def get_structure(dataset_or_iterator) -> Any:
    """The element spec of a dataset or an iterator.

    >>> import nbdata as nd
    >>> nd.experimental.get_structure(nd.Dataset.range(2))
    TensorSpec(shape=(), dtype=int64, name=None)
    """
    spec = getattr(dataset_or_iterator, "element_spec", None)
    if spec is None:
        raise TypeError(f"get_structure: expected a Dataset or an Iterator, got "
                        f"{type(dataset_or_iterator).__name__}")
    return spec


# ------------------------------------------------------------- sources

def from_list(elements, name=None) -> Dataset:
    """``nd.Dataset.from_list`` (``tf.data.experimental.from_list``)."""
    return Dataset.from_list(elements, name=name)


def Counter(start=0, step=1, dtype=np.int64, name=None) -> Dataset:  # noqa: N802 - tf.data's name
    """``nd.Dataset.counter`` (``tf.data.experimental.Counter``)."""
    return Dataset.counter(start, step, dtype, name=name)


def RandomDataset(seed=None, rerandomize_each_iteration=None, name=None) -> Dataset:  # noqa: N802
    """``nd.Dataset.random`` (``tf.data.experimental.RandomDataset``)."""
    return Dataset.random(seed, rerandomize_each_iteration, name=name)


def sample_from_datasets(datasets, weights=None, seed=None, stop_on_empty_dataset=False,
                         rerandomize_each_iteration=None) -> Dataset:
    """``nd.Dataset.sample_from_datasets``."""
    return Dataset.sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset,
                                        rerandomize_each_iteration)


def choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset=True) -> Dataset:
    """``nd.Dataset.choose_from_datasets``."""
    return Dataset.choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset)


def save(dataset, path, compression=None, shard_func=None, checkpoint_args=None) -> None:
    """``dataset.save(path)``."""
    dataset.save(path, compression, shard_func, checkpoint_args)


def load(path, element_spec=None, compression=None, reader_func=None, wait=False) -> Dataset:
    """``nd.Dataset.load(path)``."""
    return Dataset.load(path, element_spec, compression, reader_func, wait)


def get_single_element(dataset):
    """``dataset.get_single_element()``."""
    return dataset.get_single_element()


def index_shuffle(file_infos, reader_factory: Callable, seed=None,
                  reshuffle_each_iteration=False, num_parallel_calls=AUTOTUNE) -> Dataset:
    """A global shuffle of the rows of files (``tf.data.experimental.index_shuffle``):
    ``file_infos`` lists ``{"path", "num_elements", "skip"?, "take"?}`` (skip -1: all,
    take -1: the rest), ``reader_factory(paths)`` returns a random-access dataset of all
    their rows, file after file; every kept row comes once per epoch, in an order drawn
    from a keyed bijection of positions (counter-based: the same after a restore).
    ``num_parallel_calls``: how many random-access reads run at once (AUTOTUNE, the
    default: the pipeline's thread budget; None: 1); each chunk of positions is split
    into that many parts gathered on nbdata's shared thread pool and joined in order,
    so the elements and their order do not depend on it. Anything but AUTOTUNE or an
    integer >= 1 is an InvalidArgumentError (TypeError for a non-integer).

    >>> import nbdata as nd
    >>> infos = [{"path": "a", "num_elements": 4}, {"path": "b", "num_elements": 4, "skip": 2}]
    >>> ds = nd.experimental.index_shuffle(infos, lambda p: nd.Dataset.range(8), seed=1)
    >>> sorted(int(x) for x in ds)
    [0, 1, 2, 3, 6, 7]
    """
    from nbdata.dataset import _parallel_calls
    from nbdata.ops.index_gather import IndexGather
    calls = _parallel_calls(num_parallel_calls, "index_shuffle")
    paths, starts, counts, offset = [], [], [], 0
    for info in file_infos:
        n = int(info["num_elements"])
        skip = int(info.get("skip", 0))
        take = int(info.get("take", -1))
        skip = n if skip < 0 else min(skip, n)
        count = n - skip if take < 0 else min(take, n - skip)
        paths.append(info["path"])
        starts.append(offset + skip)
        counts.append(count)
        offset += n
    total = int(sum(counts))
    ends = np.cumsum(counts).astype(np.int64)
    base = np.array(starts, np.int64) - np.concatenate([[0], ends[:-1]]).astype(np.int64)

    def adjust(i):
        k = int(np.searchsorted(ends, int(i), side="right"))
        return np.int64(int(i) + int(base[k]))

    reader = reader_factory(np.array([p.encode() if isinstance(p, str) else p for p in paths],
                                     dtype=object))
    # no rows: nothing to permute (global_shuffle refuses an empty dataset)
    positions = global_shuffle(Dataset.range(total), seed, bool(reshuffle_each_iteration)) \
        if total else Dataset.range(0)
    positions = positions.map(adjust, output_signature=TensorSpec((), np.int64))
    return positions._derive(IndexGather(positions._node, reader._node,
                                         1 if calls is None else calls))


# ----------------------------------------------------- transformations

def map_and_batch(map_func, batch_size, num_parallel_batches=None, drop_remainder=False,
                  num_parallel_calls=None):
    """``map(map_func).batch(batch_size, drop_remainder)`` for ``ds.apply`` (fused as
    such); ``num_parallel_batches`` and ``num_parallel_calls`` exclude each other.

    >>> import nbdata as nd
    >>> ds = nd.Dataset.range(5).apply(nd.experimental.map_and_batch(lambda x: x * 2, 2))
    >>> [b.tolist() for b in ds]
    [[0, 2], [4, 6], [8]]
    """
    if num_parallel_batches is not None and num_parallel_calls is not None:
        raise ValueError("map_and_batch: give at most one of num_parallel_batches and "
                         "num_parallel_calls")
    calls = num_parallel_calls
    if num_parallel_batches is not None:
        calls = AUTOTUNE if int(num_parallel_batches) == AUTOTUNE else int(num_parallel_batches)

    def apply(ds):
        out = ds.map(map_func, num_parallel_calls=calls).batch(batch_size,
                                                               drop_remainder=drop_remainder)
        # an element's error fails its whole batch, as tf.data's fused map_and_batch
        return out._derive(dataclasses.replace(out._node, whole_batch_errors=True))
    return apply


def parallel_interleave(map_func, cycle_length, block_length=1, sloppy=False,
                        buffer_output_elements=None, prefetch_input_elements=None):
    """``interleave(map_func, cycle_length, block_length, num_parallel_calls=cycle_length)``
    for ``ds.apply``; ``sloppy=True`` is ``deterministic=False``.
    ``buffer_output_elements``: each interleaved dataset is read ahead by that many
    elements (a ``prefetch`` after ``map_func``'s dataset); ``prefetch_input_elements``:
    that many input elements are read ahead (a ``prefetch`` before the interleave).
    Neither changes the elements or their order."""
    def hint(value, what, least):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
            raise InvalidArgumentError(f"parallel_interleave: `{what}` must be an integer >= "
                                       f"{least} or None, got {value!r}", "parallel_interleave")
        return int(value) or None   # 0 input elements ahead: none
    buffered = hint(buffer_output_elements, "buffer_output_elements", 1)
    ahead = hint(prefetch_input_elements, "prefetch_input_elements", 0)
    inner = map_func
    if buffered is not None:
        def inner(*args, **kwargs):   # called as map_func is (its signature: __wrapped__)
            return map_func(*args, **kwargs).prefetch(buffered)
        functools.update_wrapper(inner, map_func)

    def apply(ds):
        ds = ds if ahead is None else ds.prefetch(ahead)
        return ds.interleave(inner, cycle_length, block_length, num_parallel_calls=cycle_length,
                             deterministic=False if sloppy else None)
    return apply


def shuffle_and_repeat(buffer_size, count=None, seed=None):
    """``shuffle(buffer_size, seed).repeat(count)`` (each epoch reshuffled)."""
    return lambda ds: ds.shuffle(buffer_size, seed, reshuffle_each_iteration=True).repeat(count)


def enumerate_dataset(start=0):
    """``ds.enumerate(start)`` for ``ds.apply``."""
    return lambda ds: ds.enumerate(start)


def take_while(predicate):
    return lambda ds: ds.take_while(predicate)


def scan(initial_state, scan_func):
    return lambda ds: ds.scan(initial_state, scan_func)


def unique():
    return lambda ds: ds.unique()


def group_by_window(key_func, reduce_func, window_size=None, window_size_func=None):
    return lambda ds: ds.group_by_window(key_func, reduce_func, window_size, window_size_func)


class Reducer:
    """``tf.data.experimental.Reducer``: ``init_func(key) -> state``,
    ``reduce_func(state, element) -> state``, ``finalize_func(state) -> output``."""

    def __init__(self, init_func, reduce_func, finalize_func):
        self.init_func, self.reduce_func, self.finalize_func = init_func, reduce_func, finalize_func


def group_by_reducer(key_func, reducer):
    return lambda ds: ds.group_by_reducer(key_func, reducer)


def bucket_by_sequence_length(element_length_func, bucket_boundaries, bucket_batch_sizes,
                              padded_shapes=None, padding_values=None,
                              pad_to_bucket_boundary=False, no_padding=False,
                              drop_remainder=False):
    return lambda ds: ds.bucket_by_sequence_length(
        element_length_func, bucket_boundaries, bucket_batch_sizes, padded_shapes,
        padding_values, pad_to_bucket_boundary, no_padding, drop_remainder)


def dense_to_sparse_batch(batch_size, row_shape):
    return lambda ds: ds.sparse_batch(batch_size, row_shape)


def dense_to_ragged_batch(batch_size, drop_remainder=False, row_splits_dtype=np.int64):
    return lambda ds: ds.ragged_batch(batch_size, drop_remainder, row_splits_dtype)


def rejection_resample(class_func, target_dist, initial_dist=None, seed=None):
    return lambda ds: ds.rejection_resample(class_func, target_dist, initial_dist, seed)


def snapshot(path, compression="AUTO", reader_func=None, shard_func=None):
    return lambda ds: ds.snapshot(path, compression, reader_func, shard_func)


def rebatch(batch_size, drop_remainder=False):
    return lambda ds: ds.rebatch(batch_size, drop_remainder)


def pad_to_cardinality(cardinality, mask_key="valid"):
    """Pads a dataset of dicts to ``cardinality`` elements: each element gains
    ``mask_key`` (True), then elements of zeros (empty strings) with ``mask_key`` False
    follow. The dataset's length must be known and at most ``cardinality``.

    >>> import numpy as np, nbdata as nd
    >>> ds = nd.Dataset.from_tensor_slices({"a": np.arange(2)})
    >>> [(int(e["a"]), bool(e["valid"])) for e in ds.apply(nd.experimental.pad_to_cardinality(3))]
    [(0, True), (1, True), (0, False)]
    """
    def apply(ds):
        from nbdata.spec import flatten, map_structure
        spec = ds.element_spec
        if not isinstance(spec, dict):
            raise ValueError("pad_to_cardinality: `pad_to_cardinality` requires its input "
                             f"dataset to be a dictionary, got elements {spec}")
        if mask_key in spec:
            raise ValueError(f"pad_to_cardinality: the elements already have the key "
                             f"{mask_key!r}")
        n = ds.cardinality()
        if n < 0:
            raise ValueError("pad_to_cardinality: The dataset passed into `pad_to_cardinality` "
                             f"must have a known cardinalty, but has cardinality {n} "
                             f"({'infinite' if n == INFINITE else 'unknown'})")
        if n > cardinality:
            raise ValueError("pad_to_cardinality: The dataset passed into `pad_to_cardinality` "
                             "must have a cardinalty less than the target cardinality "
                             f"({cardinality}), but has cardinality {n}")
        for s in flatten(spec):
            if s.shape is None or None in s.shape:
                raise ValueError(f"pad_to_cardinality: a component has no fully known "
                                 f"shape ({s})")
        real = ds.map(lambda e: {**e, mask_key: np.bool_(True)})
        if n == cardinality:
            return real
        pad = map_structure(lambda s: b"" if s.dtype is string else
                            np.zeros(s.shape, s.dtype)[()], spec)
        pad[mask_key] = np.bool_(False)
        return real.concatenate(Dataset.from_tensors(pad).repeat(cardinality - n))
    return apply


# ------------------------------------------------------------- Optional

from nbdata.optional import Optional, OptionalSpec  # noqa: E402 - re-exported here


def get_next_as_optional(iterator) -> Optional:
    """The iterator's next element as an :class:`Optional` (empty at the end).

    >>> import nbdata as nd
    >>> it = iter(nd.Dataset.range(1))
    >>> [bool(get_next_as_optional(it).has_value()) for _ in range(2)]
    [True, False]
    """
    spec = getattr(iterator, "element_spec", None)
    try:
        value = iterator.get_next() if hasattr(iterator, "get_next") else next(iterator)
    except (OutOfRangeError, StopIteration):
        return Optional.empty(spec)
    return Optional(value, True, spec)


# ---------------------------------------------------------------- tables

def _table_key(k):
    if isinstance(k, str):
        return k.encode()
    if isinstance(k, bytes):
        return k
    return np.asarray(k).item()


class StaticHashTable:
    """A read-only key -> value table (``tf.lookup.StaticHashTable``'s ``lookup`` and
    ``size``): what ``table_from_dataset`` returns."""

    def __init__(self, mapping: dict, default_value, key_dtype, value_dtype):
        self._map, self.default_value = mapping, default_value
        self.key_dtype, self.value_dtype = key_dtype, value_dtype

    def lookup(self, keys):
        strings = self.key_dtype is string
        a = np.asarray(keys, dtype=object) if strings else np.asarray(keys)
        flat = [self._map.get(_table_key(k), self.default_value) for k in a.reshape(-1)]
        out = np.empty(len(flat), dtype=object) if self.value_dtype is string else None
        if out is not None:
            out[:] = flat
            return out.reshape(a.shape) if a.shape else out[0]
        result = np.asarray(flat, dtype=self.value_dtype).reshape(a.shape)
        return result[()] if result.ndim == 0 else result

    def size(self):
        return np.int64(len(self._map))


def table_from_dataset(dataset=None, num_oov_buckets=0, vocab_size=None, default_value=None,
                       hasher_spec=None, key_dtype=None, name=None) -> StaticHashTable:
    """A table from a dataset of (key, value) pairs; a repeated key is an
    InvalidArgumentError (as TF's table initializer).

    >>> import nbdata as nd
    >>> t = table_from_dataset(nd.Dataset.from_list([("a", 1), ("b", 2)]), default_value=-1)
    >>> t.lookup(["b", "x"]).tolist(), int(t.size())
    ([2, -1], 2)
    """
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) != 2:
        raise ValueError(f"table_from_dataset: elements must be (key, value) pairs, got {spec}")
    mapping = {}
    for i, (k, v) in enumerate(dataset):
        if vocab_size is not None and i >= vocab_size:
            break
        key = _table_key(k)
        if key in mapping:
            raise InvalidArgumentError(f"table_from_dataset: the key {key!r} appears twice",
                                       "table_from_dataset")
        mapping[key] = v if isinstance(v, bytes) else np.asarray(v).item()
    if vocab_size is not None and len(mapping) < vocab_size:
        raise InvalidArgumentError(f"table_from_dataset: vocab_size is {vocab_size} but the "
                                   f"dataset has {len(mapping)} elements", "table_from_dataset")
    return StaticHashTable(mapping, default_value, spec[0].dtype, spec[1].dtype)


def index_table_from_dataset(dataset=None, num_oov_buckets=0, vocab_size=None,
                             default_value=-1, hasher_spec=None, key_dtype=None,
                             name=None) -> StaticHashTable:
    """A table from each key of ``dataset`` to its position (int64).

    >>> import nbdata as nd
    >>> t = index_table_from_dataset(nd.Dataset.from_list(["x", "y"]))
    >>> t.lookup(["y", "z"]).tolist()
    [1, -1]
    """
    return table_from_dataset(dataset.enumerate().map(lambda i, k: (k, i)), num_oov_buckets,
                              vocab_size, default_value, hasher_spec, key_dtype, name)


class TFRecordWriter:
    """``tf.data.experimental.TFRecordWriter``: ``TFRecordWriter(path).write(dataset)``
    writes each scalar string element of ``dataset`` as a TFRecord record.

    >>> import os, tempfile, nbdata as nd
    >>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
    >>> TFRecordWriter(path).write(nd.Dataset.from_list([b"a", b"bc"]))
    >>> list(nd.TFRecordDataset(path))
    [b'a', b'bc']
    """

    def __init__(self, filename, compression_type=None):
        if isinstance(filename, np.ndarray) and filename.shape == ():
            filename = filename.item()   # a scalar string tensor, as tf.data accepts
        if isinstance(filename, bytes):
            filename = filename.decode("utf-8", "surrogateescape")
        self.filename, self.compression_type = filename, compression_type

    def write(self, dataset) -> None:
        from nbdata.io.writer import TFRecordWriter as RecordWriter
        if not isinstance(dataset, Dataset):
            raise TypeError(f"TFRecordWriter.write: expects a dataset of scalar strings, got "
                            f"{type(dataset).__name__} {dataset!r:.80}")
        spec = dataset.element_spec
        if not isinstance(spec, TensorSpec) or spec.dtype is not string or spec.shape not in ((), None):
            raise TypeError(f"TFRecordWriter.write: the dataset must hold scalar strings, "
                            f"it holds {spec}")
        with RecordWriter(self.filename, self.compression_type or None) as w:
            for record in dataset:
                w.write(record)


__all__ = ["AutoShardPolicy", "AutotuneOptions", "Counter", "DistributeOptions",
           "ExternalStatePolicy",
           "INFINITE_CARDINALITY", "OptimizationOptions", "Optional", "OptionalSpec",
           "RandomDataset", "Reducer",
           "StaticHashTable", "TFRecordWriter", "ThreadingOptions", "UNKNOWN_CARDINALITY",
           "bucket_by_sequence_length", "cardinality", "choose_from_datasets",
           "dense_to_ragged_batch", "dense_to_sparse_batch", "enumerate_dataset", "from_list",
           "get_next_as_optional", "get_single_element", "get_structure", "group_by_reducer",
           "group_by_window", "index_shuffle", "index_table_from_dataset", "load",
           "map_and_batch", "pad_to_cardinality", "parallel_interleave", "rebatch",
           "rejection_resample", "sample_from_datasets", "save", "scan", "shuffle_and_repeat",
           "snapshot", "table_from_dataset", "take_while", "unique"]
