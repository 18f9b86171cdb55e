"""The one op table: each primitive defined once.

A primitive is an operation nbdata knows more about than "a Python function": its
eager NumPy implementation, its output spec rule, its Numba implementation (what a
compiled function calling it runs), and optionally its scalar lift rule (how elementwise
lifting inlines it into a fused kernel), its GPU step (how a GPU chain applies it to
each element of a batch) and its column decoder (how a map that decodes records runs it
over whole columns of records).

:func:`define` makes a primitive's public function from its implementation: called with
symbolic values it records itself (``nbdata/trace``), called on the sample records that
trace a map function it answers with sample values of its spec, and otherwise it runs.
NumPy's own ufuncs and array functions join with :func:`register`: they have their
eager and Numba implementations already, and bring their lift rules. The consumers of
recorded graphs find an entry by the callable the graph recorded (:func:`lookup`), so
the compiler never names a primitive.

Rules see the call's own arguments. ``abstract(*args, **kwargs)`` gets symbolic values
(read their ``.spec``) or sample values and returns the output spec structure (a list
for a function that returns a list); ``lift(*args, **kwargs)`` gets
:class:`nbdata.primitives.expr.Expr` objects where the call had symbolic values and
returns expressions; ``gpu(*args, **kwargs)`` gets the arguments after the batch and
returns a GPU step (``nbdata/primitives/gpu.py``); ``decoder(*args, **kwargs)`` returns
the :class:`nbdata.primitives.decoder.Decoder` running the call over a column of the
records passed as its first argument.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

from numba.extending import overload

from nbdata.trace.abstract import sample_value, sample_variant
from nbdata.trace.graph import is_symbolic, record


@dataclasses.dataclass(eq=False)
class Primitive:
    """One entry of the op table (see the module docstring for the rules)."""

    name: str
    impl: Callable | None = None
    abstract: Callable | None = None
    lift: Callable | None = None
    gpu: Callable | None = None
    decoder: Callable | None = None
    public: Callable | None = None
    device: bool = False   # an nd.gpu form: applies ``gpu`` to every element of a batch

    def samples(self, args: tuple, kwargs: dict, variant: int) -> Any:
        """Sample values of the call's output spec (strings are sample records)."""
        spec = self.abstract(*args, **kwargs)
        if isinstance(spec, list):
            return [sample_value(s, variant) for s in spec]
        return sample_value(spec, variant)


_table: dict = {}


def lookup(fn: Callable) -> Primitive | None:
    """The entry of a recorded callable (a primitive's public function, a NumPy ufunc or
    function, the recorder's ``getitem``/``astype``), or None."""
    try:
        return _table.get(fn)
    except TypeError:   # an unhashable callable is no entry
        return None


def register(fn: Callable, name: str | None = None, **rules) -> Primitive:
    """Make an existing callable (a NumPy ufunc or function) an entry with ``rules``."""
    prim = Primitive(name or getattr(fn, "__name__", repr(fn)), fn, public=fn, **rules)
    _table[fn] = prim
    return prim


def define(impl: Callable | None = None, *, name: str | None = None,
           abstract: Callable | None = None, lift: Callable | None = None,
           gpu: Callable | None = None, decoder: Callable | None = None,
           numba: Callable | None = None, numba_options: dict | None = None,
           device: bool = False):
    """Decorator making a primitive of its eager implementation; returns the public
    function (same name, signature and docstring). ``numba`` is the typing function of
    its Numba implementation (an ``overload``: given Numba types, it returns the
    implementation to compile). ``device``: the function is the batch form of a
    primitive on device batches (``nd.gpu``), running its ``gpu`` step."""
    def make(impl: Callable):
        prim = Primitive(name or impl.__name__, impl, abstract=abstract, lift=lift, gpu=gpu,
                         decoder=decoder, device=device)

        @functools.wraps(impl)
        def public(*args, **kwargs):
            if is_symbolic(*args, **kwargs):
                return record(public, args, kwargs, prim.name, kwargs.get("name"))
            if prim.abstract is not None and args:
                variant = sample_variant(args[0])
                if variant is not None:
                    return prim.samples(args, kwargs, variant)
            return impl(*args, **kwargs)

        public.primitive = prim
        prim.public = public
        _table[public] = prim
        if numba is not None:
            overload(public, jit_options={"nogil": True}, **(numba_options or {}))(numba)
        return public

    return make if impl is None else make(impl)


__all__ = ["Primitive", "define", "lookup", "register"]
