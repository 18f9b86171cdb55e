"""``sample_from_datasets`` / ``choose_from_datasets``: rows of several datasets, the
input of each row picked by a selector dataset of int64 indices (tf.data's directed
interleave).

``choose_from_datasets``'s selector is the user's ``choice_dataset``;
``sample_from_datasets``'s is :class:`WeightedPicks`, which draws pick ``i`` of epoch ``e``
from the counter-based stream keyed on (seed, op, e) at counter ``i``: the mixture is the
same at any thread count, and after a restore (the state holds the pick count). An input
that ends is skipped from then on (its picks are dropped), unless
``stop_on_empty_dataset``, when the first pick of an ended input ends the output; the
output also ends when every input has ended, or the selector has.

The state holds each input's own position, so the rows of each input go out exactly
once across a save and restore.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata import random as nd_random
from nbdata.chunks import MAX_CHUNK_ROWS, Chunk, chunk_elements, chunk_from_elements, concat_chunks
from nbdata.errors import InvalidArgumentError
from nbdata.ops.node import INFINITE, UNKNOWN, Node, arg_field, input_field, new_resource_key
from nbdata.ops.runtime import ChunkIter, PositionChunks, RowReader
from nbdata.spec import TensorSpec, merge_specs

PICK_STREAM = 0x4D495850   # "MIXP"


@dataclasses.dataclass(frozen=True, eq=False)
class WeightedPicks(Node):
    """An endless stream of int64 input indices drawn with probabilities ``weights``."""

    # Not part of the plan's identity: a saved mixture restores into the same sources
    # mixed with other weights, each source going on where it stood (the picks after the
    # restore follow the new weights).
    weights: tuple = dataclasses.field(metadata={"show": True, "identity": False})
    seed: Any = arg_field(None)
    rerandomize: bool = False
    raw: bool = False            # the draws themselves (int64 in [0, 2**63)): Dataset.random
    resource_key: int = dataclasses.field(default_factory=new_resource_key, compare=False)
    op = "sample_picks"
    seeded = True

    @property
    def spec(self):
        return TensorSpec((), np.int64)

    def cardinality(self) -> int:
        return INFINITE

    def open_chunks(self, ctx, state=None):
        epoch = ctx.epoch(self, self.rerandomize) if state is None else int(state["epoch"])
        key = int(nd_random.key(ctx.op_seed(self), PICK_STREAM, epoch))
        pos = 0 if state is None else int(state["pos"])
        old, switch = None, 0
        if state is not None and not self.raw and state.get("weights") is not None:
            saved = tuple(float(w) for w in state["weights"])
            if state.get("switch") is not None and pos < int(state["switch"]):
                old, switch = tuple(float(w) for w in state["old"]), int(state["switch"])
            elif saved != tuple(float(w) for w in self.weights):
                # Restored into other weights: the picks a consumer replays after a
                # restore (at most one chunk's) keep the weights they were drawn with, so
                # each row handed out before the save is the one skipped again.
                old, switch = saved, pos + MAX_CHUNK_ROWS
        return PickChunks(None if self.raw else self.weights, key, epoch, pos, old, switch)


def picks_of(weights, key: int, lo: int, n: int) -> np.ndarray:
    """Picks ``lo .. lo + n`` of the stream keyed ``key`` for ``weights``."""
    w = np.asarray(weights, np.float64)
    cdf = np.cumsum(w) / max(w.sum(), np.finfo(np.float64).tiny)
    u = (nd_random.bits_block(key, lo, n) >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)
    picks = np.searchsorted(cdf, u, side="right").astype(np.int64)
    return np.minimum(picks, len(w) - 1)


class PickChunks(PositionChunks):
    """Picks ``pos ..``; those before ``switch`` are drawn with the ``old`` weights."""

    def __init__(self, weights, key: int, epoch: int, pos: int, old=None, switch: int = 0):
        super().__init__(1 << 62, pos)
        self.weights, self.key, self.epoch = weights, key, epoch
        self.old, self.switch = old, switch

    def rows(self, lo: int, hi: int):
        if self.weights is None:
            bits = nd_random.bits_block(self.key, lo, hi - lo) >> np.uint64(1)
            return Chunk([bits.astype(np.int64)], hi - lo)
        picks = picks_of(self.weights, self.key, lo, hi - lo)
        if self.old is not None and lo < self.switch:
            k = min(hi, self.switch) - lo
            picks[:k] = picks_of(self.old, self.key, lo, k)
        return Chunk([picks], hi - lo)

    def save(self) -> dict:
        out = {"pos": self.pos, "epoch": self.epoch,
               "weights": None if self.weights is None else list(self.weights)}
        if self.old is not None and self.pos < self.switch:
            out["old"], out["switch"] = list(self.old), self.switch
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class DirectedInterleave(Node):
    selector: Node = input_field()
    children: tuple = ()
    stop_on_empty_dataset: bool = arg_field(False)
    op = "directed_interleave"

    @property
    def inputs(self):
        return (self.selector,) + tuple(self.children)

    def with_inputs(self, *inputs):
        return dataclasses.replace(self, selector=inputs[0], children=tuple(inputs[1:]))

    @property
    def spec(self):
        spec = self.children[0].spec
        for c in self.children[1:]:
            spec = merge_specs(spec, c.spec)
        return spec

    def cardinality(self) -> int:
        sel = self.selector.cardinality()
        cards = [c.cardinality() for c in self.children]
        if sel == 0:
            return 0
        if self.stop_on_empty_dataset:
            if sel == INFINITE and all(c == INFINITE for c in cards):
                return INFINITE
            return UNKNOWN
        if sel == INFINITE and any(c == INFINITE for c in cards):
            return INFINITE if isinstance(self.selector, WeightedPicks) else UNKNOWN
        return UNKNOWN

    def per_element(self) -> str | None:
        return None

    def open_chunks(self, ctx, state=None):
        return DirectedInterleaveChunks(self, ctx, state)


class DirectedInterleaveChunks(ChunkIter):
    """State: the selector's state, each input's reader state and which inputs ended."""

    def __init__(self, node: DirectedInterleave, ctx, state):
        self.node, self.ctx = node, ctx
        self.spec = node.spec
        k = len(node.children)
        self.sel = ctx.open_chunks(node.selector, None if state is None else state["selector"])
        self.readers = [RowReader(ctx, c, None if state is None else state["inputs"][i],
                                  ctx.max_rows(c.spec)) for i, c in enumerate(node.children)]
        self.ended = [False] * k if state is None else [bool(v) for v in state["ended"]]
        self.done = False if state is None else bool(state["done"])
        # Inputs a constant mixture never picks (weight 0) count as ended: the output
        # ends when the others have (as it would wait forever for their picks).
        sel = node.selector
        self.never = [isinstance(sel, WeightedPicks) and not sel.raw and float(w) == 0.0
                      for w in (sel.weights if isinstance(sel, WeightedPicks) else [1.0] * k)]

    def _rows(self, i: int, count: int) -> list:
        """Up to ``count`` next rows of input ``i`` (fewer when it ends) as chunks."""
        parts, got = [], 0
        reader = self.readers[i]
        while got < count:
            chunk = reader.next_rows(count - got)
            if chunk is None:
                self.ended[i] = True
                break
            if chunk.n:
                parts.append(chunk)
                got += chunk.n
        return parts

    def next(self, want: int):
        while not self.done:
            if all(e or n for e, n in zip(self.ended, self.never)):
                self.done = True
                break
            chunk = self.sel.next(want)
            if chunk is None:
                self.done = True
                break
            if chunk.n == 0:
                continue
            picks = np.asarray(chunk.columns[0])
            if picks.dtype.kind not in "iu" or picks.ndim != 1:
                raise InvalidArgumentError(
                    f"{self.node.op}: the selector must hold int64 scalars, got {picks.dtype} "
                    f"of shape {picks.shape[1:]}", self.node.op)
            picks = picks.astype(np.int64)
            bad = (picks < 0) | (picks >= len(self.readers))
            if bad.any():
                value = int(picks[np.flatnonzero(bad)[0]])
                raise InvalidArgumentError(
                    f"Selector index out of range: {value} >= {len(self.readers)} (the "
                    f"number of datasets)", self.node.op)
            # One pull of ``want`` picks a call (an empty chunk when each went to an ended
            # input): a consumer replaying rows after a restore draws the same picks.
            return self._assemble(picks)
        return None

    def _assemble(self, picks: np.ndarray):
        k = len(self.readers)
        order = []          # per output row: (input, row within its parts)
        gathered = {}
        counts = np.bincount(picks, minlength=k)
        for i in range(k):
            if counts[i] and not self.ended[i]:
                gathered[i] = self._rows(i, int(counts[i]))
            else:
                gathered[i] = []
        have = {i: sum(p.n for p in gathered[i]) for i in range(k)}
        used = [0] * k
        for p in picks.tolist():
            if used[p] < have[p]:
                order.append((p, used[p]))
                used[p] += 1
            elif self.node.stop_on_empty_dataset:
                self.done = True
                break
        if not order:
            return chunk_from_elements([], self.spec)
        base, offset = {}, 0
        pieces = []
        for i in range(k):
            base[i] = offset
            for piece in gathered[i]:
                pieces.append(piece)
                offset += piece.n
        rows = np.array([base[i] + j for i, j in order], np.int64)
        try:
            return concat_chunks(pieces).take(rows)
        except Exception:  # noqa: BLE001 - columns of different kinds or shapes
            elements = []
            for i in range(k):
                for piece in gathered[i]:
                    elements.extend(chunk_elements(piece, self.node.children[i].spec))
            return chunk_from_elements([elements[r] for r in rows.tolist()], self.spec)

    def save(self) -> dict:
        return {"selector": self.sel.save(), "inputs": [r.save() for r in self.readers],
                "ended": list(self.ended), "done": self.done}

    def close(self) -> None:
        self.sel.close()
        for r in self.readers:
            r.close()
