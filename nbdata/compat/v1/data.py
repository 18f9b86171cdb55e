"""``tf.data`` of the ``nbdata.compat.v1`` namespace: nbdata's datasets with graph-mode
iterators by default, as in TF1 (``get_next()`` gives graph tensors that
``Session.run`` evaluates). Transformations of these datasets stay in this namespace;
everything else is nbdata's own Dataset API."""

from __future__ import annotations

import types

import nbdata as nd
from nbdata.io import datasets as _files
from nbdata.ops.node import AUTOTUNE
from nbdata.trace.graph import Tensor, constant_value
from nbdata.train.iterators import GraphIterator
from nbdata.train.saver import make_saveable_from_iterator


class Dataset(nd.Dataset):
    """``tf.data.Dataset`` of TF1: nbdata's Dataset whose iterators are graph objects.

    >>> import nbdata.compat.v1 as tf
    >>> it = tf.data.Dataset.range(3).map(lambda x: x * 2).make_one_shot_iterator()
    >>> nxt = it.get_next()
    >>> with tf.Session() as sess:
    ...     print([int(sess.run(nxt)) for _ in range(3)])
    [0, 2, 4]
    """

    _graph_mode = True

    def _fn(self, fn, op, output_spec=None, name=None, record=False, check=None):
        return _traced_once(nd.Dataset._fn(self, fn, op, output_spec, name, record, check), op)

    @staticmethod
    def from_tensors(*args, **kwargs) -> "Dataset":
        return _v1(nd.Dataset.from_tensors(*_folded(args), **kwargs))

    @staticmethod
    def from_tensor_slices(*args, **kwargs) -> "Dataset":
        return _v1(nd.Dataset.from_tensor_slices(*_folded(args), **kwargs))

    @staticmethod
    def range(*args, **kwargs) -> "Dataset":
        return _v1(nd.Dataset.range(*args, **kwargs))

    @staticmethod
    def from_generator(*args, **kwargs) -> "Dataset":
        return _v1(nd.Dataset.from_generator(*args, **kwargs))

    @staticmethod
    def list_files(*args, **kwargs) -> "Dataset":
        return _v1(nd.Dataset.list_files(*args, **kwargs))

    @staticmethod
    def zip(*args, **kwargs) -> "Dataset":
        return _v1(nd.Dataset.zip(*args, **kwargs))


Dataset._family = Dataset


def _traced_once(fn, op: str):
    """A ``map``/``filter`` function as TF1 runs it: traced once on tensors (so it may
    call ``set_shape``, ``get_shape`` and the other ``tf.Tensor`` methods, and a random
    op in it draws per element), then its graph evaluated per element; a function that
    cannot be recorded runs as it is."""
    graph = fn._recording
    if op in ("map", "filter") and graph is not None and not isinstance(graph, str):
        fn.fn = graph.python_function(fn.name)
        fn.graph_only = True
    return fn


def _folded(value):
    """Graph tensors computed from constants alone (``tf.constant(paths)``) as their
    values, as TF1 takes them into a dataset; placeholders and the rest as they are."""
    if isinstance(value, Tensor):
        folded = constant_value(value)
        return value if folded is None else folded
    if type(value) in (tuple, list):
        return type(value)(_folded(v) for v in value)
    if type(value) is dict:
        return {k: _folded(v) for k, v in value.items()}
    return value


def _v1(ds: nd.Dataset) -> Dataset:
    return Dataset(ds._node, ds._options, ds._state)


class TFRecordDataset(_files.TFRecordDataset):
    __doc__ = _files.TFRecordDataset.__doc__
    _graph_mode = True
    _family = Dataset
    _fn = Dataset._fn


class TextLineDataset(_files.TextLineDataset):
    __doc__ = _files.TextLineDataset.__doc__
    _graph_mode = True
    _family = Dataset
    _fn = Dataset._fn


class FixedLengthRecordDataset(_files.FixedLengthRecordDataset):
    __doc__ = _files.FixedLengthRecordDataset.__doc__
    _graph_mode = True
    _family = Dataset
    _fn = Dataset._fn


Iterator = GraphIterator

# tf.data.experimental and (TF 1.x) tf.contrib.data: the names input code uses.
class _Experimental(types.SimpleNamespace):
    """A namespace whose other names are ``nd.experimental``'s (resolved on use: the CSV
    and Example readers import their kernels then)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(nd.experimental, name)


experimental = _Experimental(**{
    **{name: getattr(nd.experimental, name) for name in nd.experimental.__all__},
    "AUTOTUNE": AUTOTUNE, "make_saveable_from_iterator": make_saveable_from_iterator,
    "Options": nd.Options, "INFINITE_CARDINALITY": nd.INFINITE,
    "UNKNOWN_CARDINALITY": nd.UNKNOWN,
    # tf.data's TFRecordWriter(path).write(dataset) (the record writer is tf.io's)
    "TFRecordWriter": nd.experimental.TFRecordWriter})
contrib_data = _Experimental(
    make_saveable_from_iterator=make_saveable_from_iterator, AUTOTUNE=AUTOTUNE,
    TFRecordDataset=TFRecordDataset, TextLineDataset=TextLineDataset,
    FixedLengthRecordDataset=FixedLengthRecordDataset)

__all__ = ["AUTOTUNE", "Dataset", "FixedLengthRecordDataset", "Iterator", "TFRecordDataset",
           "TextLineDataset", "experimental", "make_saveable_from_iterator"]
