"""``pack`` (``nd.experimental.pack``): variable-length sequences concatenated into rows
of a fixed length, with segment ids and positions.

Input elements are one 1-D numeric leaf (a token sequence), or a dict of them (features
packed together: a sequence's features go into the same row, each feature into its own
row length). Each output row holds, per feature, the values of the sequences placed in
it one after another, then padding (zeros); ``segment_ids`` numbers the sequences of the
row 1, 2, ... (0 on padding) and ``positions`` counts 0, 1, ... within each sequence (0
on padding). Both are int32.

Placement (``nbdata/kernels/packing.py``): first-fit over ``num_packing_bins`` open rows,
finished all together, in the order they opened, when a sequence fits none of them and
no more may open; with ``num_packing_bins=1`` (the default) a greedy sequential packer:
a row is finished as soon as the next sequence does not fit it. A sequence longer than
the row is truncated to the row length (its tail is dropped); a sequence whose features
are all empty is left out. The order of the rows, and of the sequences in them, depends
on the input order alone: the packing is deterministic.

Runs a chunk of input sequences at a time through two compiled kernels (placement,
then one copy per feature into fresh output rows); no Python per sequence. Input
columns are read in their packed form (values and offsets: Arrow list columns,
``PackedRows``) without a copy. State: the input's state and the open rows (at most
``num_packing_bins`` rows of each feature, with their used lengths and segment counts):
a restore resumes exactly.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata import state_check
from nbdata.chunks import Chunk
from nbdata.errors import InvalidArgumentError
from nbdata.kernels.packing import first_fit, scatter
from nbdata.ops.fusion import pack_ragged
from nbdata.ops.node import UNKNOWN, UnaryNode, arg_field
from nbdata.ops.runtime import InputChunks
from nbdata.spec import TensorSpec, flatten, string

# The fewest sequences pack asks of its input at a time: a kernel call's overhead is
# small against them, and a batch after it finds whole batches in one chunk.
MIN_PULL = 512

SEGMENT_IDS = "_segment_ids"
POSITIONS = "_positions"


def _features(spec, op: str) -> list:
    """[(name or None, TensorSpec)] of a pack input: one 1-D numeric leaf, or a dict of them."""
    if isinstance(spec, TensorSpec):
        items = [(None, spec)]
    elif isinstance(spec, dict) and spec and all(isinstance(k, str) for k in spec):
        items = sorted(spec.items())
    else:
        raise InvalidArgumentError(
            f"{op}: elements must be one 1-D sequence or a dict of them, got {spec!r:.200}", op)
    for name, s in items:
        what = "the element" if name is None else f"feature {name!r}"
        if not isinstance(s, TensorSpec) or s.dtype is string or s.shape is None \
                or len(s.shape) != 1 or np.dtype(s.dtype).kind not in "biuf":
            raise InvalidArgumentError(
                f"{op}: {what} must be a 1-D sequence of numbers, got {s!r:.120}; map it to "
                "one (e.g. lambda d: d['tokens']) before packing", op)
    return items


def pack_node(node, seq_len, num_packing_bins, name=None) -> "Pack":
    """The pack node over ``node``, its arguments checked."""
    op = "pack"
    items = _features(node.spec, op)

    def length(value, what):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InvalidArgumentError(f"{op}: {what} must be a positive integer, got {value!r}", op)
        return int(value)

    if isinstance(seq_len, dict):
        names = [n for n, _ in items]
        if set(seq_len) != set(names):
            raise InvalidArgumentError(f"{op}: seq_len names {sorted(seq_len)}, the features are "
                                       f"{sorted(n for n in names if n is not None)}", op)
        lens = tuple(length(seq_len[n], f"seq_len[{n!r}]") for n in names)
    else:
        lens = tuple(length(seq_len, "seq_len") for _ in items)
    bins = length(num_packing_bins, "num_packing_bins")
    return Pack(node, lens, bins, name=name)


@dataclasses.dataclass(frozen=True, eq=False)
class Pack(UnaryNode):
    """``seq_len``: the row length of each feature (in sorted-key order)."""

    seq_len: tuple = arg_field()
    num_packing_bins: int = arg_field(1)
    op = "pack"
    # A batch right after it takes views of its chunks (fresh arrays of whole rows)
    # rather than copying them through a fused kernel (nbdata/compiler/lowering.py).
    batch_views = True

    @property
    def features(self) -> list:
        return _features(self.input.spec, self.op)

    @property
    def spec(self):
        out = {}
        for (name, s), n in zip(self.features, self.seq_len):
            parts = (TensorSpec((n,), s.dtype), TensorSpec((n,), np.int32), TensorSpec((n,), np.int32))
            if name is None:
                return parts
            out[name], out[name + SEGMENT_IDS], out[name + POSITIONS] = parts
        return out

    def cardinality(self) -> int:
        return 0 if self.input.cardinality() == 0 else UNKNOWN

    def kernel_note(self) -> str | None:
        return (f"pack: first-fit placement over {self.num_packing_bins} open row(s) and a copy "
                "per feature, compiled, a chunk of sequences at a time")

    def open_chunks(self, ctx, state=None):
        return PackChunks(self, ctx, state)

    def column_order(self) -> list:
        """Where each output leaf (flatten order) comes from: (feature, part) with part 0
        the values, 1 the segment ids, 2 the positions."""
        feats = self.features
        if feats[0][0] is None:
            return [(0, 0), (0, 1), (0, 2)]
        keys = {}
        for f, (name, _) in enumerate(feats):
            keys[name], keys[name + SEGMENT_IDS], keys[name + POSITIONS] = (f, 0), (f, 1), (f, 2)
        return [keys[k] for k in sorted(keys)]


class PackChunks(InputChunks):
    """Packed rows, as many as each input chunk finishes (see the module docstring)."""

    def __init__(self, node: Pack, ctx, state):
        self.node, self.ctx = node, ctx
        self.feats = node.features
        self.caps = np.asarray(node.seq_len, np.int64)
        self.order = node.column_order()
        nf, bins = len(self.feats), node.num_packing_bins
        self.it = ctx.open_chunks(node.input, None if state is None else
                                  state_check.nested(state, "input"))
        self.per_row, self.seen_seqs, self.seen_rows = 1.0, 0, 0   # sequences per row
        if state is None:
            self.nopen = 0
            self.fill = np.zeros((bins, nf), np.int64)
            self.segs = np.zeros(bins, np.int64)
            self.open_rows = [self._rows(f, 0) for f in range(nf)]
            self.ended = False
            return
        self.nopen = state_check.integer(state, "nopen", 0, bins)
        self.ended = state_check.flag(state, "ended")
        fill = state_check.record(state, "fill")["fill"]
        if not isinstance(fill, np.ndarray) or fill.shape != (bins, nf) or fill.dtype.kind not in "iu" \
                or (fill < 0).any() or (fill > self.caps).any():
            raise state_check.StateFieldError("fill", fill, f"expected ({bins}, {nf}) lengths "
                                              f"within the row lengths {self.caps.tolist()}")
        self.fill = fill.astype(np.int64)
        self.segs = state_check.int_array(state_check.record(state, "segs")["segs"], "segs", 0,
                                          int(self.caps.max())).copy()
        if len(self.segs) != bins:
            raise state_check.StateFieldError("segs", self.segs, f"expected {bins} counts")
        rows = state_check.record(state, "rows")["rows"]
        if not isinstance(rows, list) or len(rows) != nf:
            raise state_check.StateFieldError("rows", rows, f"expected {nf} features' open rows")
        self.open_rows = []
        for f, parts in enumerate(rows):
            want = self._rows(f, self.nopen)
            if not isinstance(parts, (list, tuple)) or len(parts) != 3 or any(
                    not isinstance(p, np.ndarray) or p.shape != w.shape or p.dtype != w.dtype
                    for p, w in zip(parts, want)):
                raise state_check.StateFieldError(
                    "rows", parts, f"expected feature {f}'s {self.nopen} open rows of "
                    f"{int(self.caps[f])} values")
            self.open_rows.append(tuple(np.array(p) for p in parts))

    def _rows(self, f: int, n: int, fresh: bool = False) -> tuple:
        """``n`` rows of feature ``f``: zeros, or uninitialized (``fresh``: scatter fills
        and pads them)."""
        cap = int(self.caps[f])
        make = np.empty if fresh else np.zeros
        return (make((n, cap), self.feats[f][1].dtype), make((n, cap), np.int32),
                make((n, cap), np.int32))

    def _chunk(self, parts: list) -> Chunk:
        columns = [parts[f][k] for f, k in self.order]
        return Chunk(columns, len(columns[0]))

    def next(self, want: int) -> Chunk | None:
        while not self.ended:
            # Sequences enough for ``want`` rows (as many as rows took so far), so a batch
            # after it finds its rows in one chunk instead of joining several.
            chunk = self.it.next(max(MIN_PULL, int(want * self.per_row) + 1))
            if chunk is None:
                self.ended = True
                if not self.nopen:
                    return None
                parts, self.nopen = self.open_rows, 0
                self.open_rows = [self._rows(f, 0) for f in range(len(self.feats))]
                return self._chunk(parts)
            if not chunk.n:
                continue
            packed = [pack_ragged(chunk.columns[f], s) for f, (_, s) in enumerate(self.feats)]
            lengths = np.empty((chunk.n, len(packed)), np.int64)
            for f, (_, offsets, _) in enumerate(packed):
                np.subtract(offsets[1:], offsets[:-1], out=lengths[:, f])
            held = self.nopen
            rows, starts, segids, first, total, self.nopen, used = first_fit(
                lengths, self.caps, self.node.num_packing_bins, self.fill, self.segs, held)
            parts, kept = [], []
            for f, (values, offsets, _) in enumerate(packed):
                out = self._rows(f, total, fresh=True)
                for buf, old in zip(out, self.open_rows[f]):
                    buf[:held] = old
                with self.ctx.kernels():
                    scatter(values, offsets, rows, np.ascontiguousarray(starts[:, f]), segids,
                            int(self.caps[f]), *out, np.ascontiguousarray(used[:, f]), held)
                parts.append(tuple(b[:first] for b in out))
                kept.append(tuple(b[first:].copy() for b in out))
            self.open_rows = kept
            self.seen_seqs += chunk.n
            self.seen_rows += first
            if self.seen_rows:
                self.per_row = min(self.seen_seqs / self.seen_rows, 1 << 16)
            if first:
                return self._chunk(parts)
        return None

    def save(self) -> dict:
        return {"input": self.it.save(), "nopen": self.nopen, "ended": self.ended,
                "fill": self.fill.copy(), "segs": self.segs.copy(),
                "rows": [list(r) for r in self.open_rows]}


__all__ = ["Pack", "pack_node"]
