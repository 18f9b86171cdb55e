"""Decoders as column kernels: what a decoder primitive (``nd.io.parse_single_example``,
``parse_example``, ``decode_csv``, ``decode_raw``, ``decode_jpeg``) runs over a whole
column of records.

A decoder primitive's ``decoder`` rule (``nbdata/primitives/table.py``) gives the
:class:`Decoder` of a call; the ``decode_lifting`` pass finds such calls in the recorded
graph of a ``map`` function over records and splits the map into a ``decode`` node (the
decoder's kernel on each chunk of records) and a map of the rest of the graph, which
fuses like any NumPy function.
"""

from __future__ import annotations

from typing import Any

from nbdata.kernels.batching import batch_columns, stack_leaves
from nbdata.spec import batched_spec, flatten, pack_as


class Decoder:
    """A decoder call: ``decode_rows(column, rows)`` runs it on a column of records.
    Subclasses (one per decoder) are defined next to their primitives.

    Attributes:
        name: the decoder's name in plans (``parse_example``).
        batched: True when each element is a vector of records (after ``batch``).
        spec: the element spec of one decoded record (batched decoders add the batch
            dimension themselves).
    """

    name = "decoder"
    batched_name = "decoder"   # the name of the batched form (parse_example)
    batched = False

    @property
    def spec(self) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        return self.name

    def decode_rows(self, column, rows: int, batch: int | None = None) -> list:
        """Decoded columns (``flatten`` order of ``spec``) of the first ``rows`` records
        of ``column`` (a StringColumn). Raises :class:`RowError` naming the first bad
        row, with the error the decoder raises for it: the per-record decoder's, or with
        ``batch`` the batched decoder's on the batch of ``batch`` records holding it."""
        raise NotImplementedError

    def batch_columns(self, columns: list, count: int, size: int) -> list:
        """Columns of ``count`` batches of ``size`` decoded rows (what the batched decoder
        yields), from the row columns of ``count * size`` rows: rows stacked, sparse
        values batched into one sparse tensor. Raises :class:`RowError` for rows that
        cannot share a batch."""
        return batch_columns(columns, count, size,
                             lambda values, i: stack_leaves(values, i, self.batched_name), copy=False)

    @property
    def output_spec(self) -> Any:
        """What one call returns: ``spec``, batched when the decoder is."""
        return self.spec



class RowError(Exception):
    """A decoder failed on row ``row`` of a column; ``error`` is the nd.errors exception
    to raise (its message names the record)."""

    def __init__(self, row: int, error: BaseException):
        super().__init__(str(error))
        self.row = row
        self.error = error


def leaf_output_spec(spec, leaf: int, decoded_spec):
    """``spec`` with its leaf ``leaf`` replaced by ``decoded_spec``."""
    leaves = flatten(spec)
    leaves[leaf] = decoded_spec
    return pack_as(spec, leaves)


def record_shape(records: Any) -> tuple:
    """The shape of a decoder's record argument: a symbolic value's static shape, or a
    value's own."""
    spec = getattr(records, "spec", None)
    if spec is not None:
        return tuple(spec.shape) if spec.shape is not None else (None,)
    import numpy as np
    return () if isinstance(records, (bytes, str)) else np.shape(records)


def for_records(decoder: "Decoder", records: Any) -> "Decoder":
    """``decoder`` as a call on ``records`` applies it: batched (a
    :class:`BatchedDecoder`) when they are a vector of records, else per record."""
    shape = record_shape(records)
    if shape:
        return BatchedDecoder(decoder, shape[0])
    return decoder


class BatchedDecoder(Decoder):
    """A per-record decoder applied to each element's vector of records (what
    ``parse_example`` is to ``parse_single_example``): decoded rows are stacked into
    batches; sparse values batch into one sparse tensor."""

    batched = True

    def __init__(self, inner: Decoder, batch_dim: int | None):
        self.inner = inner
        self.batch_dim = batch_dim
        self.name = inner.batched_name

    @property
    def spec(self):
        return self.inner.spec

    @property
    def output_spec(self):
        return batched_spec(self.inner.spec, self.batch_dim, self.name)

    def describe(self) -> str:
        return self.inner.describe().replace(self.inner.name, self.name, 1)

    def decode_rows(self, column, rows: int, batch: int | None = None) -> list:
        return self.inner.decode_rows(column, rows, batch)

    def batch_columns(self, columns: list, count: int, size: int) -> list:
        return self.inner.batch_columns(columns, count, size)
