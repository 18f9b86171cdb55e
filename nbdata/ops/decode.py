"""``decode``: a record decoder (``parse_example``, ``decode_csv``, ``decode_raw``) run as
a kernel over whole columns of records.

The ``decode_lifting`` pass makes this node out of a ``map`` whose function decodes
its record (see ``nbdata/primitives/decoder.py``); ``batch_decode`` moves a ``batch`` under a
per-record decoder. A batched decoder right after a ``batch`` of records reads the
records below the batch itself: ``k`` batches of ``B`` records are decoded by one
kernel call over ``k * B`` records, straight from the reader's column.
"""

from __future__ import annotations

import dataclasses
import time

from nbdata import profiler
from nbdata import state_check
from nbdata.chunks import MAX_CHUNK_ROWS, Chunk, StringColumn, col_values, concat_chunks
from nbdata.primitives.decoder import Decoder, RowError, leaf_output_spec
from nbdata.ops.node import Node, UnaryNode, arg_field
from nbdata.ops.runtime import ChunkIter, InputChunks, RowQueue, RowReader
from nbdata.spec import TensorSpec, string


def string_column(column) -> StringColumn:
    """A column of scalar strings as a StringColumn (object arrays are joined)."""
    if isinstance(column, StringColumn):
        return column
    return StringColumn.from_values(col_values(column))


@dataclasses.dataclass(frozen=True, eq=False)
class Decode(UnaryNode):
    decoder: Decoder = arg_field()
    # Made from decode-then-batch (decode_vectorization): a bad record fails as it would
    # before the batch (the batch being filled fails, the next starts after the record).
    record_errors: bool = False
    # The index (flatten order) of the string leaf decoded; -1: the element is the record.
    leaf: int = arg_field(-1)
    op = "decode"

    @property
    def spec(self):
        if self.leaf < 0:
            return self.decoder.output_spec
        return leaf_output_spec(self.input.spec, self.leaf, self.decoder.output_spec)

    def describe(self) -> str:
        if self.leaf >= 0:
            return f"decode({self.decoder.describe()} of component {self.leaf})"
        return f"decode({self.decoder.describe()})"

    def reads_batches(self) -> bool:
        """True when this batched decoder batches its records itself (its input is a
        plain ``batch`` of scalar strings)."""
        from nbdata.ops.batch import Batch
        node = self.input
        return (self.leaf < 0 and self.decoder.batched and type(node) is Batch
                and isinstance(node.input.spec, TensorSpec) and node.input.spec.dtype is string
                and node.input.spec.shape == ())

    def lowered_inputs(self, lower) -> Node:
        if self.reads_batches():
            batch = self.input
            return self.with_inputs(batch.with_inputs(lower(batch.input)))
        return super().lowered_inputs(lower)

    def kernel_note(self) -> str:
        if self.reads_batches():
            return (f"{self.decoder.describe()} kernel over columns of records, "
                    f"{self.input.describe()} of records decoded in the same call")
        return f"{self.decoder.describe()} kernel over each chunk's column of records"

    # Rows of decoded images a decode-ahead thread keeps ready (two batches of 64).
    AHEAD_ROWS = 128

    def decodes_images(self) -> bool:
        """Whether the decoder makes images (uint8 leaves of shape (H, W, C) with sizes
        known only from the data): the decoders whose cost is worth a thread of their own."""
        from nbdata.spec import flatten
        leaves = flatten(self.decoder.output_spec)
        return any(isinstance(s, TensorSpec) and s.dtype == "uint8" and s.shape is not None
                   and len(s.shape) == 3 and s.shape[0] is None for s in leaves)

    def open_chunks(self, ctx, state=None):
        def open_decoder(s):
            if self.reads_batches():
                return BatchDecodeChunks(self, ctx, s)
            return DecodeChunks(self, ctx, s)
        if not self.decodes_images():
            return open_decoder(state)
        # Images are decoded ahead on a thread of their own, so decoding the next chunk
        # overlaps the kernel that crops and resizes this one (instead of alternating
        # with it in one thread). Its state is the decoder's before the rows not yet
        # handed out: what was decoded ahead is decoded again after a restore.
        from nbdata.ops.runtime import BackgroundChunks
        return BackgroundChunks(ctx, open_decoder, self.spec, state, self.AHEAD_ROWS,
                                ctx.stats(self), f"{self.op}-ahead")


class DecodeChunks(ChunkIter):
    """Each input chunk's records decoded by one kernel call. A record that fails is
    dropped with its error raised (after the rows before it have gone out); reading
    goes on after it.

    State: the input's state before the current chunk and the rows of it done."""

    def __init__(self, node: Decode, ctx, state):
        self.node, self.ctx = node, ctx
        self.reader = RowReader(ctx, node.input, state, MAX_CHUNK_ROWS)

    def _decode(self, chunk: Chunk) -> list:
        began = time.perf_counter()
        try:
            return self._decode_columns(chunk)
        finally:
            profiler.slice_(self.node.decoder.describe(), "decode", began, time.perf_counter(),
                            {"rows": chunk.n})

    def _decode_columns(self, chunk: Chunk) -> list:
        decoder, leaf = self.node.decoder, self.node.leaf
        with self.ctx.tuned_kernels(self.node, chunk.n):
            if leaf >= 0:   # one string component decoded, the others passed on
                cols = chunk.columns
                decoded = decoder.decode_rows(string_column(cols[leaf]), chunk.n)
                return list(cols[:leaf]) + list(decoded) + list(cols[leaf + 1:])
            if not decoder.batched:
                return decoder.decode_rows(string_column(chunk.columns[0]), chunk.n)
            # A batched decoder on rows that each hold a vector of records.
            parts = []
            for k, value in enumerate(col_values(chunk.columns[0])):
                records = StringColumn.from_values(list(value.reshape(-1)))
                try:
                    cols = decoder.decode_rows(records, len(records), batch=len(records))
                except RowError as e:
                    raise RowError(k, e.error) from None
                parts.append(Chunk(decoder.batch_columns(cols, 1, len(records)), 1))
            return concat_chunks(parts).columns

    def next(self, want: int):
        rows = self.reader.next_rows(want)
        if rows is None:
            return None
        try:
            columns = self._decode(rows)
        except RowError as e:
            # The rows before the bad one go out; the bad one is consumed by raising.
            self.reader.unread(rows.n - max(e.row, 1))
            if e.row == 0:
                raise e.error from None
            rows = rows.slice(0, e.row)
            columns = self._decode(rows)
        return Chunk(columns, rows.n)

    def save(self) -> dict:
        return self.reader.save()

    def close(self) -> None:
        self.reader.close()


class BatchDecodeChunks(InputChunks):
    """``batch(B)`` then a batched decoder, as one: ``k`` batches' records are decoded
    by one kernel call. A batch with a bad record fails (its error raised after the
    batches before it have gone out), as the batched decoder fails on it; reading
    goes on with the next batch.

    State: the state of the batch's input and the records read but not decoded."""

    def __init__(self, node: Decode, ctx, state):
        self.node, self.ctx = node, ctx
        from nbdata.ops.batch import batch_size_of
        batch = node.input
        self.size = batch_size_of(batch, ctx)
        self.drop = batch.drop_remainder
        self.it = ctx.open_chunks(batch.input, None if state is None else state["input"])
        self.queue = RowQueue([] if state is None else state_check.row_pieces(
            state_check.record(state, "pieces")["pieces"], batch.input.spec, "pieces"))
        self.ended = False if state is None else state_check.flag(state, "ended")

    def _decode(self, rows: Chunk, count: int, size: int) -> list:
        began = time.perf_counter()
        try:
            return self._decode_columns(rows, count, size)
        finally:
            profiler.slice_(self.node.decoder.describe(), "decode", began, time.perf_counter(),
                            {"rows": rows.n})

    def _decode_columns(self, rows: Chunk, count: int, size: int) -> list:
        decoder = self.node.decoder
        with self.ctx.tuned_kernels(self.node, rows.n):
            columns = decoder.decode_rows(string_column(rows.columns[0]), rows.n, batch=size)
        return decoder.batch_columns(columns, count, size)

    def next(self, want: int):
        b, queue = self.size, self.queue
        want = max(1, want)
        while queue.n < b * want and not self.ended:
            chunk = self.it.next(b * want - queue.n)
            if chunk is None:
                self.ended = True
                break
            queue.add(chunk)
        # As many whole batches as the first queued chunk holds (views, no copy); one
        # joined batch where a batch spans chunks.
        count = queue.whole_groups(b, want)
        size = b
        if not count:
            if not queue.n or self.drop:
                queue.clear()
                return None
            count, size = 1, queue.n
        rows = queue.take(count * size)
        try:
            return Chunk(self._decode(rows, count, size), count)
        except RowError as e:
            bad = e.row // size
            if bad == 0:
                # The failing batch is dropped; the rows after it stay queued (after the
                # bad record, when the batch was made after decoding).
                rest = rows.slice(e.row + 1 if self.node.record_errors else size, rows.n)
                self._requeue(rest)
                raise e.error from None
            self._requeue(rows.slice(bad * size, rows.n))
            return Chunk(self._decode(rows.slice(0, bad * size), bad, size), bad)

    def _requeue(self, rows: Chunk) -> None:
        if rows.n:
            self.queue.pieces.insert(0, rows)
            self.queue.n += rows.n

    def save(self) -> dict:
        return {"input": self.it.save(), "pieces": list(self.queue.pieces), "ended": self.ended}
