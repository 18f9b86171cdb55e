"""``select``: an element rebuilt from some of its input's components, unchanged (made by
the decode-lifting pass from the rest of a map that only repacks what a decoder gave,
``lambda e: (decode_jpeg(e["image"]), e["label"])``): chunks pass on as columns, with no
per-element Python."""

from __future__ import annotations

import dataclasses
from typing import Any

from nbdata.chunks import Chunk
from nbdata.ops.node import Node, arg_field, input_field
from nbdata.ops.runtime import ChunkIter
from nbdata.spec import flatten, pack_as, same_structure


@dataclasses.dataclass(frozen=True, eq=False)
class Select(Node):
    input: Node = input_field()
    columns: tuple = arg_field()     # flatten-order input leaf of each output leaf
    out_spec: Any = arg_field()
    op = "select"

    @property
    def spec(self):
        return self.out_spec

    def cardinality(self) -> int:
        return self.input.cardinality()

    def describe(self) -> str:
        return f"select(components {list(self.columns)})"

    def open_chunks(self, ctx, state=None):
        return SelectChunks(self, ctx, state)


class SelectChunks(ChunkIter):
    """The input's chunks with their columns picked. State: the input's state."""

    def __init__(self, node: Select, ctx, state):
        self.columns = node.columns
        self.it = ctx.open_chunks(node.input, None if state is None else state["input"])

    def next(self, want: int):
        chunk = self.it.next(want)
        if chunk is None:
            return None
        return Chunk([chunk.columns[i] for i in self.columns], chunk.n)

    def save(self) -> dict:
        return {"input": self.it.save()}

    def close(self) -> None:
        self.it.close()


def selection(fn, spec, out_spec, call) -> tuple | None:
    """The input leaves ``fn`` returns, in output order, when it only repacks its element
    (every output leaf is an input leaf, untouched, and the output structure is
    ``out_spec``'s); else None. Found by calling ``fn`` on marker objects."""

    class Marker:
        __slots__ = ("index",)

        def __init__(self, index):
            self.index = index

    leaves = flatten(spec)
    try:
        out = call(fn, pack_as(spec, [Marker(i) for i in range(len(leaves))]))
    except Exception:  # noqa: BLE001 - it computes with its input: not a repack
        return None
    if isinstance(out, list):
        out = tuple(out)
    got = flatten(out)
    want = flatten(out_spec)
    if (len(got) != len(want) or not all(isinstance(v, Marker) for v in got)
            or not same_structure(out, out_spec)
            or any(leaves[v.index] != w for v, w in zip(got, want))):
        return None
    return tuple(v.index for v in got)
