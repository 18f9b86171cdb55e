"""``CsvRecords``: the CSV records of one file's lines (``CsvDataset``'s record split).

Its input is a file's lines split at ``\\n`` with their ``\\r`` bytes kept
(``FileRecords`` of kind "csv"). As tf.data's CsvDataset reads a file, a record ends at
``\\n``, ``\\r`` or ``\\r\\n`` outside a double-quoted field; inside one, line breaks
are part of the field (a line inside an open quoted field goes on on the next line).
With ``header`` the file's first record is dropped (a file without one is an
InvalidArgumentError, "Can't read header of file"). Whole chunks pass through untouched
when no line leaves a quote open and none holds a ``\\r`` (the quotes are counted over
the chunk's bytes at once); a chunk whose only ``\\r`` bytes end lines (CRLF files)
drops them at once; only other chunks are split line by line.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata.chunks import Chunk, StringColumn
from nbdata.errors import InvalidArgumentError
from nbdata.ops.node import UNKNOWN, UnaryNode, arg_field
from nbdata.ops.runtime import ChunkIter

QUOTE = ord('"')
CR = 13


def _values(column) -> list:
    return column.values() if isinstance(column, StringColumn) else [bytes(v) for v in column]


def _split_line(line: bytes, delim: int, in_quote: bool) -> tuple:
    """(pieces, in_quote): ``line`` cut at each ``\\r`` outside a quoted field (one
    ending the line is the ``\\r\\n`` terminator: no piece after it), and whether a
    quoted field is still open at its end (the last piece then goes on on the next
    line). As tf.data's CsvDataset parses: a quote opens a field only at the field's
    start; inside, a doubled quote is a quote and a single one closes it (a quote inside
    an unquoted field is the decoder's error, not an opening)."""
    pieces = []
    at_start = not in_quote
    begin = 0
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if in_quote:
            if c == QUOTE:
                if i + 1 < n and line[i + 1] == QUOTE:
                    i += 2
                    continue
                in_quote = False
        elif c == delim:
            at_start = True
            i += 1
            continue
        elif c == CR:
            pieces.append(line[begin:i])
            begin = i + 1
            at_start = True
            i += 1
            if i == n:
                return pieces, False
            continue
        elif c == QUOTE and at_start:
            in_quote = True
        at_start = False
        i += 1
    pieces.append(line[begin:])
    return pieces, in_quote


def _odd_quotes(column) -> np.ndarray:
    """Per line: whether it holds an odd number of double quotes."""
    if isinstance(column, StringColumn):
        off = column.offsets
        marks = np.concatenate([[0], np.cumsum(column.data == QUOTE)])
        return ((marks[off[1:]] - marks[off[:-1]]) & 1).astype(bool)
    return np.array([v.count(b'"') & 1 for v in _values(column)], bool)


@dataclasses.dataclass(frozen=True, eq=False)
class CsvRecords(UnaryNode):
    header: bool = arg_field(False)
    use_quote_delim: bool = arg_field(True)
    path: str = ""
    fields: int = 0        # fields a record must have (0: not checked here)
    delim: int = ord(",")  # the field delimiter's byte (a quote opens a field only after it)
    op = "csv_records"

    def cardinality(self) -> int:
        return UNKNOWN

    def open_chunks(self, ctx, state=None):
        return CsvRecordChunks(self, ctx, state)


class CsvRecordChunks(ChunkIter):
    """State: the lines' state, whether the header is still to drop, the record begun
    on lines already read (None when none is open), whether the lines ended."""

    def __init__(self, node: CsvRecords, ctx, state):
        self.node = node
        self.it = ctx.open_chunks(node.input, None if state is None else state["input"])
        self.skip = node.header if state is None else bool(state["skip"])
        self.pending = None if state is None else state["pending"]
        self.ended = False if state is None else bool(state["ended"])

    def _records(self, chunk):
        """The records the lines of ``chunk`` complete (a chunk)."""
        column = chunk.columns[0]
        quote = self.node.use_quote_delim
        if not isinstance(column, StringColumn):
            column = StringColumn.from_values(_values(column))
        returns = column.data == CR
        odd = _odd_quotes(column) if quote else np.zeros(len(column), bool)
        if self.pending is None and not odd.any():
            if not returns.any():
                return chunk
            # CRLF lines: every \r ends its line (the \r\n is one record end).
            off = column.offsets
            ends = off[1:][off[1:] > off[:-1]]
            if int(returns.sum()) == int(returns[ends - 1].sum()):
                dropped = np.concatenate([[0], np.cumsum(returns)])
                return Chunk([StringColumn(column.data[~returns],
                                           (off - dropped[off]).astype(np.int64))], chunk.n)
        out = []
        delim = self.node.delim
        for line, flip in zip(column.values(), odd.tolist()):
            if self.pending is None and not flip and CR not in line:
                out.append(line)
                continue
            if not quote:
                pieces = line.split(b"\r")
                if line.endswith(b"\r"):
                    pieces.pop()
                out.extend(pieces)
                continue
            pieces, open_field = _split_line(line, delim, self.pending is not None)
            if self.pending is not None:
                pieces[0] = self.pending + b"\n" + pieces[0]
            self.pending = pieces.pop() if open_field else None
            out.extend(pieces)
        return Chunk([StringColumn.from_values(out)], len(out))

    def next(self, want: int):
        while not self.ended:
            chunk = self.it.next(want)
            if chunk is None:
                self.ended = True
                if self.pending is not None:
                    # A quote left open at the end of the file: the record as it is (the
                    # decoder reports the unterminated field).
                    last, self.pending = self.pending, None
                    if self.skip:
                        self.skip = False
                        return None
                    return Chunk([StringColumn.from_values([last])], 1)
                if self.skip:
                    raise InvalidArgumentError(f"Can't read header of file {self.node.path}",
                                               "CsvDataset")
                return None
            records = self._records(chunk)
            if self.skip and records.n:
                self.skip = False
                records = records.slice(1, records.n)
            if records.n:
                return self._empty_records(records)
        return None

    def _empty_records(self, records):
        """An empty line is a record of one empty field (tf.data's CsvDataset): the
        default of a one-column record, else the field count error."""
        column = records.columns[0]
        values = None
        if isinstance(column, StringColumn):
            if not (np.diff(column.offsets) == 0).any():
                return records
        else:
            values = _values(column)
            if all(values):
                return records
        if self.node.fields > 1:
            raise InvalidArgumentError(f"Expect {self.node.fields} fields but have 1 in record",
                                       "CsvDataset")
        values = _values(column) if values is None else values
        empty = b'""' if self.node.use_quote_delim else b""
        return Chunk([StringColumn.from_values([v or empty for v in values])], records.n)

    def save(self) -> dict:
        return {"input": self.it.save(), "skip": self.skip, "pending": self.pending,
                "ended": self.ended}

    def close(self) -> None:
        self.it.close()
