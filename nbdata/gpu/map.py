"""``map`` after ``prefetch_to_device``: nd.gpu ops on device batches, one fused kernel per
output leaf and batch.

The map function is traced once with a :class:`nbdata.gpu.functions.GpuValue` for each
device leaf (and a marker for each host leaf): the nd.gpu ops it calls become steps of
a chain, host leaves may only pass through. Consecutive GPU maps are fused by the
``gpu_map_fusion`` pass into one node whose chains hold all the steps, so they run as
ONE generated kernel per output leaf (``explain()`` shows its source).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from nbdata.chunks import Chunk, RowList, col_row
from nbdata.errors import InvalidArgumentError
from nbdata.gpu.functions import JpegDecode
from nbdata.trace.abstract import call_unpacked, function_name
from nbdata.ops.node import Node, arg_field, input_field
from nbdata.ops.runtime import ChunkIter
from nbdata.spec import TensorSpec, flatten, pack_as


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One output leaf: input leaf ``source`` through ``steps`` (a device leaf), or passed
    through unchanged (``steps`` None). ``decode``: a decode_raw view first."""

    source: int
    steps: tuple | None = None
    decode: tuple | None = None


class _Host:
    """Stands for a host leaf while a GPU map function is traced."""

    def __init__(self, index: int):
        self.index = index

    def _refuse(self, *args, **kwargs):
        raise TypeError("after prefetch_to_device, a map function passes host components "
                        "(strings, ...) through unchanged")

    __add__ = __radd__ = __mul__ = __rmul__ = __getitem__ = __array__ = __bool__ = _refuse


def trace(fn: Callable, spec: Any, device: tuple, op: str, per_value: bool = False) -> tuple:
    """(leaves, output spec) of a GPU map function over elements of ``spec``."""
    from nbdata.gpu import ops
    from nbdata.gpu.functions import GpuValue
    specs = flatten(spec)
    inputs = []
    for k, s in enumerate(specs):
        if k in device:
            if s.shape is None or any(d is None for d in s.shape[1:]) or not s.shape:
                raise ValueError(f"{op}: nd.gpu ops need batches of a known element shape; "
                                 f"component {k} has shape {s.shape}")
            inputs.append(GpuValue(k, ops.Chain([], s.shape[1:], s.dtype)))
        else:
            inputs.append(_Host(k))
    if per_value:
        out = pack_as(spec, [v.then(ops.Apply(fn)) if isinstance(v, GpuValue) else v
                             for v in inputs])
    else:
        out = call_unpacked(fn, pack_as(spec, inputs))
        if isinstance(out, list):
            out = tuple(out)
    leaves, out_specs = [], []
    for v in flatten(out):
        if isinstance(v, GpuValue) and (v.chain.steps or v.decode is not None):
            chain = v.chain
            batch = specs[v.leaf].shape[0]
            leaves.append(Leaf(v.leaf, tuple(chain.steps), v.decode))
            out_specs.append(TensorSpec((batch,) + tuple(chain.out_shape), chain.out_dtype))
        elif isinstance(v, (_Host, GpuValue)):   # passed through unchanged
            index = v.index if isinstance(v, _Host) else v.leaf
            leaves.append(Leaf(index))
            out_specs.append(specs[index])
        else:
            raise TypeError(f"{op}: after prefetch_to_device, map function {function_name(fn)} "
                            f"must return nd.gpu ops of its device components or its components "
                            f"unchanged; it returned a {type(v).__name__}")
    return tuple(leaves), pack_as(out, out_specs)


@dataclasses.dataclass(frozen=True, eq=False)
class GpuMap(Node):
    input: Node = input_field()
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

    def cardinality(self) -> int:
        return self.input.cardinality()

    def describe(self) -> str:
        return f"{self.label}[gpu](fn={' then '.join(self.names)})"

    def chains(self) -> list:
        """(output leaf, Chain) of each leaf the map computes on the GPU."""
        from nbdata.gpu import ops
        specs = flatten(self.input.spec)
        out = []
        for k, leaf in enumerate(self.leaves):
            if leaf.steps is None:
                continue
            s = specs[leaf.source]
            if isinstance(leaf.decode, JpegDecode):   # images of their own sizes
                shape, dtype = (None, None, leaf.decode.channels), np.uint8
            elif leaf.decode:
                shape, dtype = leaf.decode[1], leaf.decode[0]
            else:
                shape, dtype = s.shape[1:], s.dtype
            out.append((k, ops.Chain(list(leaf.steps), shape, dtype)))
        return out

    def kernel_note(self) -> str | None:
        lines = []
        for k, chain in self.chains():
            source, _ = chain.source()
            decode = self.leaves[k].decode
            if isinstance(decode, JpegDecode):
                lines.append(f"component {k}: nvImageCodec decodes the batch's JPEGs (component "
                             f"{self.leaves[k].source}, channels={decode.channels}) into one "
                             "device buffer, images at their own sizes")
                if not chain.steps:
                    continue
            lines.append(f"GPU kernel for component {k}: {chain.describe()} (one launch per batch)")
            lines.extend("    " + line for line in source.rstrip().splitlines())
        return "\n".join(lines) if lines else None

    def open_chunks(self, ctx, state=None):
        return GpuMapChunks(self, ctx, state)


class _Applier:
    """Runs the chains on one batch at a time, counting elements for the random ops."""

    def __init__(self, node: GpuMap, rows: int = 0):
        self.leaves = node.leaves
        self.chains = dict(node.chains())
        self.rows = rows
        self.batches = 0   # batches seen by this iterator (for error messages)

    def apply(self, values: list) -> list:
        from nbdata.gpu import ops, runtime
        runtime.backend().bind()
        out = []
        n = None
        for k, leaf in enumerate(self.leaves):
            value = values[leaf.source]
            if leaf.steps is None:
                out.append(value)
                continue
            if isinstance(leaf.decode, JpegDecode):
                from nbdata.gpu.jpeg import _values, decode_values
                try:
                    value = decode_values(_values(value), leaf.decode.channels)
                except InvalidArgumentError as e:
                    raise InvalidArgumentError(f"{e.message} (batch {self.batches})",
                                               e.op) from None
            elif leaf.decode is not None:
                value = value.view(leaf.decode[0], (value.shape[0],) + tuple(leaf.decode[1]))
            n = value.shape[0]
            out.append(ops.run_chain(self.chains[k], value, self.rows) if self.chains[k].steps
                       else value)
        if n is not None:
            self.rows += n
        self.batches += 1
        return out


class GpuMapChunks(ChunkIter):
    """The input's batches through the chains. State: the input's and the element count
    (the counter of the random ops' next element)."""

    def __init__(self, node: GpuMap, ctx, state):
        self.it = ctx.open_chunks(node.input, None if state is None else state["input"])
        self.applier = _Applier(node, 0 if state is None else int(state["rows"]))
        # Input rows after a batch that failed (its error goes out first, alone), so
        # that ignore_errors() skips that batch only.
        self.pending: Chunk | None = None if state is None else state.get("pending")

    def next(self, want: int):
        chunk, self.pending = self.pending, None
        if chunk is None:
            chunk = self.it.next(want)
        if chunk is None:
            return None
        rows = []
        for j in range(chunk.n):
            try:
                rows.append(self.applier.apply([col_row(c, j) for c in chunk.columns]))
            except Exception:
                if rows:   # the rows before it go out first; row j fails again, alone
                    self.pending = chunk.slice(j, chunk.n)
                    break
                # The element is consumed by raising.
                rest = chunk.slice(j + 1, chunk.n)
                self.pending = rest if rest.n else None
                raise
        columns = [RowList(r[k] for r in rows) for k in range(len(self.applier.leaves))]
        return Chunk(columns, len(rows))

    def save(self) -> dict:
        return {"input": self.it.save(), "rows": self.applier.rows, "pending": self.pending}

    def close(self) -> None:
        self.it.close()


def fuse(outer: GpuMap, inner: GpuMap) -> GpuMap:
    """One GpuMap doing ``inner`` then ``outer``: each chain of outer continues the chain
    of the inner leaf it reads."""
    leaves = []
    for leaf in outer.leaves:
        base = inner.leaves[leaf.source]
        if leaf.steps is None:
            leaves.append(base)
        elif base.steps is None:
            leaves.append(Leaf(base.source, leaf.steps, leaf.decode))
        elif leaf.decode is not None:
            raise ValueError(f"nd.gpu.{'decode_jpeg' if isinstance(leaf.decode, JpegDecode) else 'decode_raw'}"
                             " must come first in a chain of GPU ops")
        else:
            leaves.append(Leaf(base.source, base.steps + leaf.steps, base.decode))
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
