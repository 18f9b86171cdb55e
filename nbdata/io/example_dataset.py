"""``parse_example_dataset`` and ``make_batched_features_dataset``
(``tf.data.experimental``): batches of serialized ``tf.train.Example`` records parsed
by ``nd.io.parse_example`` (a column decoder: decode lifting runs it over whole record
columns)."""

from __future__ import annotations

from typing import Any, Callable

from nbdata.dataset import Dataset
from nbdata.io.datasets import TFRecordDataset
from nbdata.ops.node import AUTOTUNE
from nbdata.primitives.example import parse_example


def parse_example_dataset(features: dict, num_parallel_calls: Any = 1,
                          deterministic: Any = None) -> Callable:
    """A transformation for ``ds.apply``: each element (a vector of serialized Examples)
    becomes ``parse_example(element, features)``.

    >>> import nbdata as nd
    >>> recs = [nd.io.encode_example({"a": [1, 2]}), nd.io.encode_example({"a": [3, 4]})]
    >>> ds = nd.Dataset.from_list(recs).batch(2).apply(
    ...     nd.experimental.parse_example_dataset({"a": nd.io.FixedLenFeature([2], "int64")}))
    >>> next(iter(ds))["a"].tolist()
    [[1, 2], [3, 4]]
    """
    if not isinstance(features, dict) or not features:
        raise ValueError("parse_example_dataset: features must be a non-empty dict of "
                         "feature configurations")

    def apply(ds):
        calls = None if num_parallel_calls in (None, 1) else num_parallel_calls
        return ds.map(lambda records: parse_example(records, features),
                      num_parallel_calls=calls, deterministic=deterministic)
    return apply


def make_batched_features_dataset(file_pattern: Any, batch_size: int, features: dict,
                                  reader: Any = None, label_key: Any = None,
                                  reader_args: Any = None, num_epochs: Any = None,
                                  shuffle: bool = True, shuffle_buffer_size: int = 10000,
                                  shuffle_seed: Any = None, prefetch_buffer_size: Any = None,
                                  reader_num_threads: Any = None, parser_num_threads: Any = None,
                                  sloppy_ordering: bool = False,
                                  drop_final_batch: bool = False) -> Dataset:
    """Batches of parsed Examples from files (tf.data's ``make_batched_features_dataset``):
    the files matching ``file_pattern`` (shuffled with ``shuffle``) read by ``reader``
    (default ``TFRecordDataset``), ``reader_num_threads`` at a time, shuffled, repeated
    ``num_epochs`` times (None: forever, and then full batches only), batched, parsed
    with ``features``; with ``label_key`` elements are ``(features, label)``.

    >>> import os, tempfile, nbdata as nd
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
    >>> with nd.io.TFRecordWriter(path) as w:
    ...     for i in range(3): w.write(nd.io.encode_example({"x": [i], "y": [i * 10]}))
    >>> ds = nd.experimental.make_batched_features_dataset(
    ...     path, 2, {"x": nd.io.FixedLenFeature([], "int64"),
    ...               "y": nd.io.FixedLenFeature([], "int64")}, label_key="y",
    ...     num_epochs=1, shuffle=False)
    >>> [(f["x"].tolist(), y.tolist()) for f, y in ds]
    [([0, 1], [0, 10]), ([2], [20])]
    """
    if label_key is not None and label_key not in features:
        raise ValueError(f"make_batched_features_dataset: the label_key {label_key!r} is not "
                         "one of the features")
    reader = TFRecordDataset if reader is None else reader
    args = list(reader_args or [])
    threads = 1 if reader_num_threads is None else reader_num_threads
    files = Dataset.list_files(file_pattern, shuffle=shuffle, seed=shuffle_seed)
    if threads == 1:
        ds = files.flat_map(lambda f: reader(f, *args))
    else:
        ds = files.interleave(lambda f: reader(f, *args),
                              cycle_length=None if threads == AUTOTUNE else threads,
                              num_parallel_calls=threads,
                              deterministic=False if sloppy_ordering else None)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, shuffle_seed)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size, drop_remainder=bool(drop_final_batch) or num_epochs is None)
    ds = ds.apply(parse_example_dataset(features, parser_num_threads or 1))
    if label_key is not None:
        ds = ds.map(lambda parsed: ({k: v for k, v in parsed.items() if k != label_key},
                                    parsed[label_key]))
    if prefetch_buffer_size is None:
        prefetch_buffer_size = AUTOTUNE
    return ds.prefetch(prefetch_buffer_size) if prefetch_buffer_size != 0 else ds
