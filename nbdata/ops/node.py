"""The plan-node base class shared by every transformation, and the constants of the API."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, ClassVar

INFINITE = -1
UNKNOWN = -2
AUTOTUNE = -1
"""``nd.AUTOTUNE``: accepted wherever tf.data accepts it (parallelism, buffer sizes)."""

_resource_keys = itertools.count(1)


def new_resource_key() -> int:
    """A process-unique key naming the run-time resource of a stateful node (a shuffle's
    epoch counter, a memory cache); the resource itself lives in the RunState."""
    return next(_resource_keys)


class NotFusable(Exception):
    """A source, op or terminal cannot join a fused stage (the message says why)."""

    refusal = True   # a refusal, not an internal error (nbdata.trace.function)


class PartlyFusable(NotFusable):
    """A node whose first ``steps`` fuse but not the rest (a chained map whose third
    function Numba cannot compile): ``head`` is the node made of the fused part (its
    input is replaced by the planner), ``rest`` the node of the remainder."""

    def __init__(self, reason: str, steps: list, head: "Node", rest: "Node"):
        super().__init__(reason)
        self.steps, self.head, self.rest = steps, head, rest


@dataclasses.dataclass(frozen=True, eq=False)
class Node:
    """One immutable node of the logical plan.

    Subclasses are frozen dataclasses; ``op`` is the transformation's name (used
    in error messages and plan listings), ``spec`` the element spec of the
    node's output, ``name`` the user's optional name for the op (tf.data's
    ``name=`` argument: shown in plan listings and error messages).

    Run-time hook: ``open_chunks(ctx, state)`` returns the node's chunk iterator
    (``nbdata/ops/runtime.py``), resumed from ``state``; element iteration is a view
    over the root's chunks.

    Fusion hooks (the compiler asks these, it never names ops); each raises
    :class:`NotFusable` with the reason when the node cannot take that role:

    - ``fusion_source(planner)``: the node hands out rows in chunks; returns its
      :class:`nbdata.ops.fusion.ChunkSource`.
    - ``fusion_steps(planner, structure)``: an element-wise op; returns its
      :class:`nbdata.ops.fusion.Step` objects for an input of ``structure``.
    - ``fusion_terminal(planner, structure)``: a terminal that reslices a fused
      chain's output columns (batch); returns its :class:`nbdata.ops.fusion.Terminal`.

    ``fusion_role`` tells the planner which hook to try: ``"source"``, ``"step"``
    (it walks down through steps looking for a source), ``"terminal"`` or None;
    the hooks decide whether the node really fuses.
    """

    op: ClassVar[str] = "node"
    fusion_role: ClassVar[str | None] = None
    seeded: ClassVar[bool] = False       # a random op with ``seed`` and ``resource_key`` fields
    name: str | None = dataclasses.field(default=None, kw_only=True, compare=False)

    @property
    def inputs(self) -> tuple["Node", ...]:
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self)
                     if f.metadata.get("input"))

    def with_inputs(self, *inputs: "Node") -> "Node":
        names = [f.name for f in dataclasses.fields(self) if f.metadata.get("input")]
        return dataclasses.replace(self, **dict(zip(names, inputs)))

    @property
    def spec(self) -> Any:
        raise NotImplementedError

    @property
    def label(self) -> str:
        """The op as error messages name it: ``map`` or ``map[normalize]`` when named."""
        return f"{self.op}[{self.name}]" if self.name else self.op

    def cardinality(self) -> int:
        return UNKNOWN

    def is_noop(self) -> bool:
        """True when the node passes its input through unchanged (``take(-1)``,
        ``skip(0)``, ``repeat(1)``): noop elimination drops it."""
        return False

    def describe(self) -> str:
        """One line for plan listings: the op and its scalar arguments."""
        args = []
        for f in dataclasses.fields(self):
            if f.metadata.get("input") or not f.metadata.get("show", False):
                continue
            args.append(f"{f.name}={getattr(self, f.name)!r}")
        return f"{self.label}({', '.join(args)})"

    def title(self) -> str:
        """The stage's name in statistics."""
        return self.describe()

    def lowered_inputs(self, lower) -> "Node":
        """This node over its inputs as ``lower`` plans them (a node that reads below
        an input itself, like a decoder batching its own records, plans around it)."""
        return self.with_inputs(*[lower(c) for c in self.inputs])

    def kernel_note(self) -> str | None:
        """For ``explain()``: what kernel this node runs over whole columns, if any."""
        return None

    def gpu_chains(self) -> list:
        """For ``explain()``: ``(label, chain)`` of each GPU kernel chain this node runs
        (``nbdata/primitives/gpu.py``), whose generated source the plan shows."""
        return []

    def explain_lines(self) -> list:
        """For ``explain()``: lines of a section of its own about this node (where it
        runs parts of the plan elsewhere), or none."""
        return []

    def per_element(self) -> str | None:
        """Why this node, when it runs outside a fused stage, handles one element at a
        time in Python (None: it works on whole chunks)."""
        return None

    def reads_ahead_freely(self) -> bool:
        """Whether reading rows before the consumer asks for them has no effect it could
        see: no user Python per element, no files written. A pipeline of such nodes
        starts later iterations at a whole pull's demand (``executor.Pace``)."""
        return self.per_element() is None

    def open_chunks(self, ctx, state: dict | None = None) -> Any:
        """The chunk iterator (``nbdata/ops/runtime.py``), resumed from ``state``."""
        raise NotImplementedError(f"{self.op} has no chunk iterator")

    # ------------------------------------------------------------ fusion hooks
    def fusion_source(self, planner) -> Any:
        raise NotFusable(f"{self.op} does not hand out rows in chunks")

    # ------------------------------------------------------- random access
    def random_access(self) -> str | None:
        """None when row ``i`` can be computed on its own (``gather``), else why not."""
        return f"`{self.op}` does not support random access of tf.data datasets"

    def gather(self, ctx, rows) -> Any:
        """The rows at positions ``rows`` (an int64 array) as a Chunk."""
        raise NotImplementedError(self.random_access())

    def cheap_gather(self) -> bool:
        """True when ``gather`` only indexes arrays (no per-row Python): a shuffle of this
        node's rows can shuffle row numbers and gather them."""
        return False

    def repeated_source(self, planner) -> Any:
        """The chunk source of an endless repeat of this node (from_tensors: a constant)."""
        raise NotFusable(f"an endless repeat of {self.op} is not a chunk source")

    def fusion_steps(self, planner, structure: Any) -> list:
        raise NotFusable(f"{self.op} is not an element-wise op")

    def fusion_terminal(self, planner, structure: Any) -> Any:
        raise NotFusable(f"{self.op} is not a batching terminal")


def input_field():
    """A dataclass field holding an input node."""
    return dataclasses.field(metadata={"input": True})


@dataclasses.dataclass(frozen=True, eq=False)
class UnaryNode(Node):
    """A node over one ``input`` node: unless it says otherwise, its elements have the
    input's spec and it has as many as the input."""

    input: Node = input_field()

    @property
    def spec(self) -> Any:
        return self.input.spec

    def cardinality(self) -> int:
        return self.input.cardinality()


def arg_field(default=dataclasses.MISSING):
    """A dataclass field shown in plan listings."""
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata={"show": True})
    return dataclasses.field(default=default, metadata={"show": True})
