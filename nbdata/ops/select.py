"""``select``: an element rebuilt from some of its input's components, unchanged (made by
the decode-lifting pass from the rest of a map that only repacks what a decoder gave,
``lambda e: (decode_jpeg(e["image"]), e["label"])``): chunks pass on as columns, with no
per-element Python."""

from __future__ import annotations

import dataclasses
from typing import Any

from nbdata.chunks import Chunk
from nbdata.ops.node import UnaryNode, arg_field
from nbdata.ops.runtime import InputChunks
from nbdata.spec import flatten, same_structure
from nbdata.trace.graph import Tensor


@dataclasses.dataclass(frozen=True, eq=False)
class Select(UnaryNode):
    columns: tuple = arg_field()     # flatten-order input leaf of each output leaf
    out_spec: Any = arg_field()
    op = "select"

    @property
    def spec(self):
        return self.out_spec

    def describe(self) -> str:
        return f"select(components {list(self.columns)})"

    def open_chunks(self, ctx, state=None):
        return SelectChunks(self, ctx, state)


class SelectChunks(InputChunks):
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


def selection(graph, out_spec) -> tuple | None:
    """The input leaves a recorded function returns, in output order, when it only repacks
    its element (every output leaf is an input leaf, untouched, and the output structure
    is ``out_spec``'s); else None."""
    index = {id(t): k for k, t in enumerate(graph.inputs)}
    got = graph.output_leaves
    want = flatten(out_spec)
    if (len(got) != len(want) or not all(isinstance(v, Tensor) and id(v) in index for v in got)
            or not same_structure(graph.outputs, out_spec)):
        return None
    columns = tuple(index[id(v)] for v in got)
    specs = flatten(graph.structure)
    if any(specs[c] != w for c, w in zip(columns, want)):
        return None
    return columns
