"""``map`` after ``prefetch_to_device``: nd.gpu ops on device batches, one fused kernel per
output leaf and batch.

The map function is recorded (``nbdata/trace``) on one tensor per leaf of the batch. The
nd.gpu ops it applies to a device leaf (or, for ``nd.gpu.decode_jpeg``, to a host leaf
of encoded images) are found in the op table and become the steps of a chain
(``nbdata/primitives/gpu.py``); host leaves may only pass through. Consecutive GPU maps
are fused by the ``gpu_map_fusion`` pass into one node whose chains hold all the steps,
so they run as ONE generated kernel per output leaf (``explain()`` shows its source).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from nbdata.chunks import Chunk, RowList, col_row
from nbdata.errors import InvalidArgumentError
from nbdata.ops.node import Node, UnaryNode, arg_field
from nbdata.ops.runtime import InputChunks
from nbdata.primitives.gpu import Apply, Chain, decode_first
from nbdata.primitives.table import lookup
from nbdata.spec import TensorSpec, flatten, pack_as
from nbdata.trace.abstract import function_name
from nbdata.trace.function import record_function
from nbdata.trace.graph import Tensor


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One output leaf: input leaf ``source`` through ``steps`` (a device leaf, or a host
    leaf its first step decodes), or passed through unchanged (``steps`` None)."""

    source: int
    steps: tuple | None = None


def _refused(op: str, fn: Callable, what: str) -> TypeError:
    return TypeError(f"{op}: after prefetch_to_device, map function {function_name(fn)} must "
                     f"apply nd.gpu ops to its device components (or decode a host component "
                     f"of JPEG bytes with nd.gpu.decode_jpeg) or return its components "
                     f"unchanged; {what}")


def _steps_to(t: Tensor, inputs: dict, op: str, fn: Callable) -> tuple[int, list]:
    """(input leaf, steps) of the chain of nd.gpu ops computing ``t``."""
    steps = []
    while id(t) not in inputs:
        node = t.op
        entry = lookup(node.call[0]) if node.call is not None else None
        if entry is None or not entry.device:
            raise _refused(op, fn, f"it applies {node.type} to a batch")
        _, args, kwargs = node.call
        steps.append(entry.gpu(*args[1:], **kwargs))
        t = args[0]
    return inputs[id(t)], steps[::-1]


def trace(fn: Callable, spec: Any, device: tuple, op: str, per_value: bool = False) -> tuple:
    """(leaves, output spec) of a GPU map function over elements of ``spec`` (the batches
    of ``prefetch_to_device``, whose leaves ``device`` are on the GPU)."""
    specs = flatten(spec)
    for k in device:
        s = specs[k]
        if s.shape is None or not s.shape or any(d is None for d in s.shape[1:]):
            raise ValueError(f"{op}: nd.gpu ops need batches of a known element shape; "
                             f"component {k} has shape {s.shape}")
    if per_value:   # ds.map(fn, device="cuda"): fn on every value of every device leaf
        leaves = tuple(Leaf(k, (Apply(fn),)) if k in device else Leaf(k) for k in range(len(specs)))
    else:
        graph = record_function(fn, spec)
        inputs = {id(t): k for k, t in enumerate(graph.inputs)}
        leaves = []
        for value in graph.output_leaves:
            if not isinstance(value, Tensor):
                raise _refused(op, fn, f"it returned a {type(value).__name__}")
            source, steps = _steps_to(value, inputs, op, fn)
            first_decodes = bool(steps) and steps[0].kind == "decode"
            if (source in device) == first_decodes and steps:
                raise _refused(op, fn, "nd.gpu.decode_jpeg takes the encoded images (a host "
                               "component), and ops of device batches take device batches")
            leaves.append(Leaf(source, tuple(steps) if steps else None))
        leaves = tuple(leaves)
        spec_out = graph.outputs
    out_specs = []
    for leaf in leaves:
        s = specs[leaf.source]
        if leaf.steps is None:
            out_specs.append(s)
            continue
        chain = leaf_chain(leaf, s)
        out_specs.append(TensorSpec((s.shape[0],) + tuple(chain.out_shape), chain.out_dtype))
    return leaves, pack_as(spec if per_value else spec_out, out_specs)


def leaf_chain(leaf: Leaf, spec: TensorSpec) -> Chain:
    """The chain of a leaf's kernel steps (after a decoding first step, over what it
    decodes to), checked: a ValueError names the op that cannot follow."""
    steps = list(leaf.steps)
    shape, dtype = tuple(spec.shape[1:]), spec.dtype
    if steps and steps[0].kind == "decode":
        shape, dtype = steps[0].out_shape(shape), steps[0].out_dtype(dtype)
        steps = steps[1:]
    return Chain(steps, shape, dtype)


@dataclasses.dataclass(frozen=True, eq=False)
class GpuMap(UnaryNode):
    leaves: tuple = arg_field()
    out_spec: Any = arg_field()
    names: tuple = arg_field()      # the user functions, in call order (for plans)
    op = "map"

    @property
    def spec(self):
        return self.out_spec

    @property
    def device_leaves(self) -> tuple:
        return tuple(k for k, leaf in enumerate(self.leaves)
                     if leaf.steps is not None or leaf.source in self.input.device_leaves)

    def describe(self) -> str:
        return f"{self.label}[gpu](fn={' then '.join(self.names)})"

    def chains(self) -> list:
        """(output leaf, decoding step or None, Chain) of each leaf computed on the GPU."""
        specs = flatten(self.input.spec)
        out = []
        for k, leaf in enumerate(self.leaves):
            if leaf.steps is not None:
                decode = leaf.steps[0] if leaf.steps[0].kind == "decode" else None
                out.append((k, decode, leaf_chain(leaf, specs[leaf.source])))
        return out

    def kernel_note(self) -> str | None:
        lines = []
        for k, decode, chain in self.chains():
            if decode is not None:
                lines.append(f"component {k} from component {self.leaves[k].source}: "
                             f"{decode.describe()}")
            if chain.steps:
                launches = len(chain.segments())
                lines.append(f"GPU kernel for component {k}: {chain.describe()} ("
                             + ("one launch" if launches == 1 else
                                f"{launches} launches and the reductions between them")
                             + " per batch)")
        return "; ".join(lines) if lines else None

    def gpu_chains(self) -> list:
        return [(f"component {k}", chain) for k, _, chain in self.chains() if chain.steps]

    def open_chunks(self, ctx, state=None):
        return GpuMapChunks(self, ctx, state)


class GpuMapChunks(InputChunks):
    """The input's batches through the chains. State: the input's, the element count
    (the counter of the random ops' next element) and the rows after a failed batch."""

    def __init__(self, node: GpuMap, ctx, state):
        self.it = ctx.open_chunks(node.input, None if state is None else state["input"])
        self.ctx = ctx
        self.leaves = node.leaves
        self.chains = {k: (decode, chain) for k, decode, chain in node.chains()}
        self.rows = 0 if state is None else int(state["rows"])
        self.batches = 0   # batches seen by this iterator (for error messages)
        # Input rows after a batch that failed (its error goes out first, alone), so
        # that ignore_errors() skips that batch only.
        self.pending: Chunk | None = None if state is None else state.get("pending")

    def _apply(self, values: list) -> list:
        from nbdata.gpu import runtime
        runtime.backend().bind()   # this may be a pipeline's background thread
        out, n = [], None
        for k, leaf in enumerate(self.leaves):
            value = values[leaf.source]
            if leaf.steps is None:
                out.append(value)
                continue
            decode, chain = self.chains[k]
            if decode is not None:
                try:
                    value, steps = decode_first(decode, chain.steps, value, self.rows)
                except InvalidArgumentError as e:
                    raise InvalidArgumentError(f"{e.message} (batch {self.batches})",
                                               e.op) from None
                if steps and steps[0] is not chain.steps[0]:   # decoded the crop windows
                    chain = self.windowed_chain(k, chain, steps)
            n = value.shape[0]
            out.append(self.ctx.run_gpu_chain(chain, value, self.rows) if chain.steps else value)
        if n is not None:
            self.rows += n
        self.batches += 1
        return out

    def windowed_chain(self, k: int, chain, steps: list):
        """The chain of leaf ``k`` over batches decoded as their crop windows (made once)."""
        cached = getattr(self, "_windowed", None)
        if cached is None:
            cached = self._windowed = {}
        if k not in cached:
            cached[k] = Chain(steps, chain.shape, chain.dtype)
        return cached[k]

    def next(self, want: int):
        chunk, self.pending = self.pending, None
        if chunk is None:
            chunk = self.it.next(want)
        if chunk is None:
            return None
        rows = []
        for j in range(chunk.n):
            try:
                rows.append(self._apply([col_row(c, j) for c in chunk.columns]))
            except Exception:
                if rows:   # the rows before it go out first; row j fails again, alone
                    self.pending = chunk.slice(j, chunk.n)
                    break
                # The element is consumed by raising.
                rest = chunk.slice(j + 1, chunk.n)
                self.pending = rest if rest.n else None
                raise
        columns = [RowList(r[k] for r in rows) for k in range(len(self.leaves))]
        return Chunk(columns, len(rows))

    def save(self) -> dict:
        return {"input": self.it.save(), "rows": self.rows, "pending": self.pending}


def fuse(outer: GpuMap, inner: GpuMap) -> GpuMap:
    """One GpuMap doing ``inner`` then ``outer``: each chain of outer continues the chain
    of the inner leaf it reads."""
    leaves = []
    for leaf in outer.leaves:
        base = inner.leaves[leaf.source]
        if leaf.steps is None:
            leaves.append(base)
        elif base.steps is None:
            leaves.append(Leaf(base.source, leaf.steps))
        elif leaf.steps[0].kind == "decode":
            raise ValueError(f"nd.gpu.{leaf.steps[0].name} must come first in a chain of GPU ops")
        else:
            leaves.append(Leaf(base.source, base.steps + leaf.steps))
    return GpuMap(inner.input, tuple(leaves), outer.out_spec, inner.names + outer.names,
                  name=outer.name or inner.name)


def gpu_map(node: Node, fn: Callable, name: str | None, per_value: bool) -> GpuMap:
    """The GpuMap node of ``ds.map(fn)`` over a dataset whose batches are on the device."""
    label = f"map[{name}]" if name else "map"
    device = tuple(getattr(node, "device_leaves", ()))
    if not device:
        raise ValueError(f"{label}: device='cuda' applies to batches on the GPU; call "
                         "prefetch_to_device() first")
    leaves, spec = trace(fn, node.spec, device, label, per_value)
    return GpuMap(node, leaves, spec, (function_name(fn),), name=name)


__all__ = ["GpuMap", "Leaf", "fuse", "gpu_map"]
