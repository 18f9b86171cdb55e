"""``scan``: a map that carries a state: ``new_state, out = scan_func(state, element)``.

Not fused: each step needs the state the previous element left, a sequential loop the
parallel fused kernels do not run; ``scan_func`` runs once per element in Python (its
output spec is recorded once, as map's is).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata.chunks import copied, unshared
from nbdata.errors import InvalidArgumentError
from nbdata.ops.function import UserFunction
from nbdata.ops.node import arg_field
from nbdata.ops.stateful import ElementOp
from nbdata.spec import TensorSpec, flatten, map_structure, pack_as
from nbdata.trace.abstract import conform


def state_spec_of(spec: Any) -> Any:
    """A state's spec with every dim relaxed (the state may change shape, as tf.data's
    scan allows)."""
    return pack_as(spec, [TensorSpec(None if s.shape is None else (None,) * len(s.shape),
                                     s.dtype) for s in flatten(spec)])


@dataclasses.dataclass(frozen=True, eq=False)
class Scan(ElementOp):
    initial_state: Any = None
    fn: UserFunction = arg_field(None)
    state_spec: Any = None
    op = "scan"

    @property
    def spec(self):
        return self.fn.output_spec[1]

    def cardinality(self) -> int:
        return self.input.cardinality()

    def start(self, ctx):
        # a copy per run: a function may update its state in place, and the initial
        # state (read-only) serves every epoch
        return copied(self.initial_state)

    def step(self, ctx, state, element):
        out = self.fn.call_raw((state, element))
        if not isinstance(out, tuple) or len(out) != 2:
            raise InvalidArgumentError(
                f"scan: function {self.fn.name} must return a pair (new_state, output)", "scan")
        new_state = conform(out[0], self.state_spec, "scan", self.fn.name)
        output = conform(out[1], self.spec, "scan", self.fn.name)
        return [_apart_from(output, new_state)], new_state, False


def _apart_from(output: Any, state: Any) -> Any:
    """``output`` with its arrays that share memory with the new state copied: a function
    that updates its state in place and returns it as the output too (``s += x; return
    s, s``) would otherwise change the outputs held ahead (a batch's rows)."""
    held = [a for a in flatten(state) if isinstance(a, np.ndarray)]
    if not held:
        return output
    return map_structure(lambda v: unshared(v, held), output)
