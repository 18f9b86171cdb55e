"""``parse_single_example`` as a plan decoder: the protobuf kernels over a column of records
(see ``nbdata/decoding.py``)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from nbdata.chunks import RowList
from nbdata.decoding import Decoder, RowError
from nbdata.errors import InvalidArgumentError
from nbdata.io import example as ex
from nbdata.sparse import SparseTensor, SparseTensorSpec
from nbdata.spec import TensorSpec, as_dtype


class ExampleDecoder(Decoder):
    """``parse_single_example(record, features)`` on each record of a column."""

    name = "parse_single_example"
    batched_name = "parse_example"

    def __init__(self, features: Mapping):
        self.features = dict(features)
        self.plan = ex._Plan(features)

    @property
    def spec(self):
        out = {}
        for key, feature, shape in zip(self.plan.keys, self.plan.specs, self.plan.shapes):
            if isinstance(feature, ex.VarLenFeature):
                out[key] = SparseTensorSpec((None,), as_dtype(feature.dtype))
            else:
                out[key] = TensorSpec(tuple(shape), as_dtype(feature.dtype))
        return out

    def describe(self) -> str:
        return f"{self.name}({', '.join(self.plan.keys)})"

    def call(self, value):
        return ex.parse_single_example(value, self.features)

    def decode_rows(self, column, rows: int, batch: int | None = None) -> list:
        src = ex._Source(column.data, column.offsets[:rows + 1])
        try:
            result = ex._run(src, self.plan, False, None)
        except InvalidArgumentError as e:
            row = getattr(e, "record_index", 0)
            raise RowError(row, self._error(column, row, batch, e)) from None
        columns = []
        for key in self.plan.keys:
            value = result[key]
            if isinstance(value, SparseTensor):
                columns.append(split_sparse(value, rows))
            else:
                columns.append(value)
        return columns

    def _error(self, column, row: int, batch: int | None, batched_error):
        """The error TensorFlow reports for ``row``: parse_single_example's for one
        record, parse_example's (its index within the batch) for a batch."""
        if batch is None:
            try:
                ex.parse_single_example(column.row(row), self.features)
            except InvalidArgumentError as e:
                return e
            return batched_error
        first = row // batch * batch
        records = [column.row(j) for j in range(first, min(first + batch, len(column)))]
        try:
            ex.parse_example(records, self.features)
        except InvalidArgumentError as e:
            return e
        return batched_error


def split_sparse(value: SparseTensor, rows: int) -> RowList:
    """The per-row 1-D sparse tensors of a ``[rows, n]`` sparse tensor (row-major)."""
    counts = np.bincount(value.indices[:, 0], minlength=rows) if len(value.values) else \
        np.zeros(rows, np.int64)
    ends = np.cumsum(counts)
    out = RowList()
    start = 0
    for r in range(rows):
        end = int(ends[r])
        n = end - start
        out.append(SparseTensor(np.arange(n, dtype=np.int64).reshape(-1, 1), value.values[start:end],
                                np.array([n], np.int64)))
        start = end
    return out
