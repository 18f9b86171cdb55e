"""``group_by_window`` and ``group_by_reducer``: elements grouped by an int64 key.

``group_by_window``: each element joins the window of its key; a window that reaches its
size (``window_size_func(key)``) goes to ``reduce_func(key, window_dataset)``, whose
elements are the output; at the end of the input the windows left go out in ascending
key order (as tf.data's, which keeps them in an ordered map). ``group_by_reducer``: one
running state per key (``init_func(key)``, ``reduce_func(state, element)``), each
finalized (``finalize_func(state)``) at the end, in ascending key order.

Not fused: elements are gathered per key in Python (the windows and states are part of
the saved state).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata.chunks import chunk_elements
from nbdata.errors import InvalidArgumentError
from nbdata.ops.from_list import FromList
from nbdata.ops.node import INFINITE, UNKNOWN, arg_field
from nbdata.ops.stateful import ElementOp
from nbdata.trace.abstract import conform


def int64_key(value, op: str, what: str) -> int:
    """A key or window size: a scalar integer (converted to int64, as tf.data converts
    what the function returns)."""
    a = np.asarray(value)
    if a.shape != () or a.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{op}: {what} must return a scalar int64, got "
                                   f"{a.dtype} of shape {a.shape}", op)
    return int(a)


@dataclasses.dataclass(frozen=True, eq=False)
class GroupByWindow(ElementOp):
    key_fn: Any = arg_field(None)
    reduce_fn: Any = arg_field(None)
    size_fn: Any = None          # key -> window size (a UserFunction), or None
    window_size: Any = None      # a fixed size, or None
    op = "group_by_window"

    @property
    def spec(self):
        return self.reduce_fn.output_spec.element_spec

    def cardinality(self) -> int:
        n = self.input.cardinality()
        return INFINITE if n == INFINITE else (0 if n == 0 else UNKNOWN)

    def start(self, ctx):
        return {"keys": [], "windows": []}

    def _size(self, key: int) -> int:
        if self.window_size is not None:
            size = int(self.window_size)
        else:
            size = int64_key(self.size_fn.call_raw(np.int64(key)), self.op, "window_size_func")
        if size <= 0:
            raise InvalidArgumentError(f"Window size must be greater than zero, but got "
                                       f"{size}.", self.op)
        return size

    def _reduce(self, ctx, key: int, window: list) -> list:
        ds = ctx.make_dataset(FromList(tuple(window), self.input.spec))
        out = self.reduce_fn.call_raw((np.int64(key), ds))
        it = ctx.open_dataset_chunks(out)
        elements = []
        try:
            spec = out.element_spec
            while True:
                chunk = it.next(1 << 12)
                if chunk is None:
                    break
                elements.extend(chunk_elements(chunk, spec))
        finally:
            it.close()
        return [conform(e, self.spec, self.op, self.reduce_fn.name) for e in elements]

    def step(self, ctx, state, element):
        key = int64_key(self.key_fn.call_raw(element), self.op, "key_func")
        keys, windows = state["keys"], state["windows"]
        if key in keys:
            k = keys.index(key)
        else:
            keys.append(key)
            windows.append([])
            k = len(keys) - 1
        windows[k].append(element)
        if len(windows[k]) >= self._size(key):
            window = windows.pop(k)
            keys.pop(k)
            return self._reduce(ctx, key, window), state, False
        return [], state, False

    def finish(self, ctx, state):
        out = []
        for key, window in sorted(zip(state["keys"], state["windows"]), key=lambda kw: kw[0]):
            out.extend(self._reduce(ctx, key, window))
        state["keys"], state["windows"] = [], []
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class GroupByReducer(ElementOp):
    key_fn: Any = arg_field(None)
    init_fn: Any = None
    reduce_fn: Any = None
    finalize_fn: Any = None
    state_spec: Any = None
    op = "group_by_reducer"

    @property
    def spec(self):
        return self.finalize_fn.output_spec if self.finalize_fn is not None else self.state_spec

    def cardinality(self) -> int:
        n = self.input.cardinality()
        return INFINITE if n == INFINITE else UNKNOWN

    def start(self, ctx):
        return {"keys": [], "states": []}

    def step(self, ctx, state, element):
        key = int64_key(self.key_fn.call_raw(element), self.op, "key_func")
        keys, states = state["keys"], state["states"]
        if key in keys:
            k = keys.index(key)
        else:
            keys.append(key)
            states.append(conform(self.init_fn.call_raw(np.int64(key)), self.state_spec,
                                  self.op, self.init_fn.name))
            k = len(keys) - 1
        new = self.reduce_fn.call_raw((states[k], element))
        states[k] = conform(new, self.state_spec, self.op, self.reduce_fn.name)
        return [], state, False

    def finish(self, ctx, state):
        out = []
        for key, s in sorted(zip(state["keys"], state["states"]), key=lambda kv: kv[0]):
            if self.finalize_fn is not None:
                s = conform(self.finalize_fn.call_raw(s), self.spec, self.op,
                            self.finalize_fn.name)
            out.append(s)
        state["keys"], state["states"] = [], []
        return out
