"""The ``nd.gpu`` batch ops: each is an op-table primitive (an ``nd.image`` op, an
``nd.io`` decoder) applied to every element of a batch in GPU memory.

Each takes a batch — a :class:`DeviceArray` of ``(n, ...)`` elements, or for the ops
that make images one size a :class:`RaggedBatch` — and returns a new one (one kernel
launch, through the GPU backend ``nbdata/compiler/backend_gpu.py``); inside a
``Dataset.map`` after ``prefetch_to_device`` it is recorded instead, and the ops of
consecutive maps become one fused kernel (``nbdata/ops/gpu_map.py``).

Random ops take ``seed`` as an int or ``(seed, counter)``: element ``j`` of the batch
draws with counter ``counter + j`` (in a pipeline: ``counter`` plus the element's index
since the start of the iteration), exactly as ``nd.image``'s op given
``seed=(seed, counter + j)`` does on the CPU.
"""

from __future__ import annotations

from typing import Callable

from nbdata.primitives.gpu import Apply, Chain, run_steps
from nbdata.primitives.table import define, entries
from nbdata.spec import TensorSpec


def _batch_spec(step, x) -> TensorSpec:
    """The spec of a step applied to a batch tensor (a decoding step takes any batch;
    the others the elements of a device batch)."""
    spec = x.spec
    shape, dtype = tuple(spec.shape[1:]), spec.dtype
    if step.kind == "decode":
        return TensorSpec((spec.shape[0],) + step.out_shape(shape), step.out_dtype(dtype))
    chain = Chain([step], shape, dtype)
    return TensorSpec((spec.shape[0],) + tuple(chain.out_shape), chain.out_dtype)


def _device_op(name: str, rule: Callable, doc: str):
    def run(x, *args, **kwargs):
        return run_steps([rule(*args, **kwargs)], x)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    return define(run, name=f"gpu.{run.__name__}", gpu=rule, device=True,
                  abstract=lambda x, *args, **kwargs: _batch_spec(rule(*args, **kwargs), x))


_ops: dict = {}


def device_ops() -> dict:
    """``{name: nd.gpu op}``: the batch form of every ``nd.image`` and ``nd.io`` entry
    with a GPU rule, and ``apply`` (made on first use; ``nd.gpu`` asks for them through
    the registry, ``nbdata/plugins.py``)."""
    if not _ops:
        for prim in entries():
            namespace = next((t for t in ("image", "io") if t in prim.tags), None)
            if prim.gpu is not None and namespace and not prim.device:
                _ops[prim.name] = _device_op(prim.name, prim.gpu, f"""``nd.{namespace}.{prim.name}``
    of every element of a device batch, one fused kernel (random ops: element ``j``
    draws at counter ``counter + j``); the arguments after the batch are the op's.""")
        _ops["apply"] = _device_op("apply", Apply, "``fn`` applied to every value, compiled as a "
                                   "numba-cuda device function.")
    return _ops


__all__ = ["device_ops"]
