"""``from_list``: a dataset of the given elements, in order (``tf.data.Dataset.from_list``).

Elements share one structure; a component's dims are static where every element agrees
(``from_list([[1], [2, 3]])`` has shape ``(None,)``), as tf.data's list dataset reports.
Also the source of the windows ``group_by_window`` hands its reduce function.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nbdata.chunks import chunk_from_elements
from nbdata.ops.node import Node
from nbdata.ops.runtime import PositionChunks


@dataclasses.dataclass(frozen=True, eq=False)
class FromList(Node):
    """Yields ``elements`` (a tuple of canonical element values) in order."""

    elements: tuple
    element_spec: Any
    op = "from_list"

    @property
    def spec(self):
        return self.element_spec

    def describe(self) -> str:
        return f"{self.label}({len(self.elements)} elements)"

    def cardinality(self) -> int:
        return len(self.elements)

    def random_access(self) -> str | None:
        return None

    def gather(self, ctx, rows):
        return chunk_from_elements([self.elements[int(r)] for r in rows], self.spec)

    def open_chunks(self, ctx, state=None):
        return ListChunks(self, 0 if state is None else int(state["pos"]))


class ListChunks(PositionChunks):
    def __init__(self, node: FromList, pos: int):
        super().__init__(len(node.elements), pos)
        self.node = node

    def rows(self, lo: int, hi: int):
        return chunk_from_elements(list(self.node.elements[lo:hi]), self.node.spec)
