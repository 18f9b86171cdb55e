"""``range``: arithmetic progressions like Python's ``range``."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata import state_check
from nbdata.chunks import Chunk
from nbdata.errors import InvalidArgumentError
from nbdata.ops.fusion import ChunkSource, SourceLeaf, SourceReader, numba_dtype
from nbdata.ops.node import UNKNOWN, Node, NotFusable, arg_field
from nbdata.ops.runtime import PositionChunks
from nbdata.trace.placeholder import Placeholder
from nbdata.spec import TensorSpec


def range_length(start: int, stop: int, step: int) -> int:
    return len(range(start, stop, step))


@dataclasses.dataclass(frozen=True, eq=False)
class Range(Node):
    """Yields ``start, start + step, ...`` up to (not including) ``stop``."""

    start: Any = arg_field()
    stop: Any = arg_field()
    step: Any = arg_field()
    dtype: Any = arg_field()
    op = "range"
    fusion_role = "source"

    @property
    def spec(self):
        return TensorSpec((), self.dtype)

    def cardinality(self) -> int:
        if not all(isinstance(v, (int, np.integer)) for v in (self.start, self.stop, self.step)):
            return UNKNOWN
        return range_length(int(self.start), int(self.stop), int(self.step))

    def bounds(self, ctx) -> tuple[int, int, int]:
        start, stop, step = (int(ctx.value(v)) for v in (self.start, self.stop, self.step))
        if step == 0:
            raise InvalidArgumentError("range: step must not be 0", self.op)
        return start, stop, step

    def open_chunks(self, ctx, state=None):
        start, stop, step = self.bounds(ctx)
        return RangeChunks(start, step, range_length(start, stop, step), self.dtype, state)

    def random_access(self) -> str | None:
        return None if self.cardinality() >= 0 else "range with placeholder bounds"

    def cheap_gather(self) -> bool:
        return self.random_access() is None

    def gather(self, ctx, rows: np.ndarray) -> Chunk:
        """The values at positions ``rows`` (random access, for shuffles over indices)."""
        start, _, step = self.bounds(ctx)
        return Chunk([(start + rows * step).astype(self.dtype, copy=False)], len(rows))

    def fusion_source(self, planner) -> ChunkSource:
        if any(isinstance(v, Placeholder) for v in (self.start, self.stop, self.step)):
            raise NotFusable("range bounds are placeholders")
        leaf = RangeLeaf(self.spec, numba_dtype(self.dtype, "range"))

        def open_reader(ctx) -> SourceReader:
            reader = SourceReader.kept(self)
            if reader is not None:
                return reader
            start, stop, step = self.bounds(ctx)
            scalar = self.dtype.type
            reader = SourceReader(range_length(start, stop, step),
                                  [np.array([start, step], np.int64)],
                                  lambda lo, k: [np.array([start + lo * step, step], np.int64)],
                                  lambda r: [scalar(start + r * step)])
            # The bounds are constants (placeholders do not fuse): every iteration reads
            # the same rows, so one reader serves them all, and an ended run is started
            # over (FusedChunks.reopen).
            return reader.keep(self)

        return ChunkSource(self, [leaf], self.cardinality(), open_reader)


class RangeLeaf(SourceLeaf):
    """``start + r * step`` computed in the kernel (the argument holds start and step)."""

    def emit_load(self, row, args):
        return row.read(self.spec, f"{{dtype}}({args[0]}[0] + r * {args[0]}[1])")


class RangeChunks(PositionChunks):
    """Consecutive values. State: the next position."""

    def __init__(self, start: int, step: int, n: int, dtype, state):
        super().__init__(n, 0 if state is None else state_check.integer(state, "pos", 0, max(0, n)))
        self.start, self.step, self.dtype = start, step, dtype

    def rows(self, lo: int, hi: int) -> Chunk:
        first = self.start + lo * self.step
        values = np.arange(first, first + (hi - lo) * self.step, self.step, dtype=np.int64)
        return Chunk([values.astype(self.dtype, copy=False)], hi - lo)
