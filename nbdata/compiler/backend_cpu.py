"""The CPU backend: Numba typing of user functions for the planner, and compilation of
stage plans into parallel Numba kernels (generated source, in-process and on-disk
kernel caches, eager compilation so that ``compile()`` pays for it)."""

from __future__ import annotations

import time
import types as types_module
from collections.abc import Mapping
from typing import Any

import numba
import numba.core.compiler
import numba.core.compiler_lock
import numba.core.compiler_machinery
import numba.core.registry
import numba.core.typed_passes
import numpy as np
from numba import types

from nbdata import progress
from nbdata.chunks import Chunk
from nbdata.compiler.codegen import generate
from nbdata.compiler.emit import jitted, materialize
from nbdata.compiler.executor import ExecContext
from nbdata.compiler.fused_stage import FusedStage, stream_args
from nbdata.compiler.kernel_cache import kernel_path, stage_hash
from nbdata.compiler.lowering import Chain, PlannedStage
from nbdata.compiler.pysemantics import compile_user_function
from nbdata.compiler.twin import numba_twin
from nbdata.kernels.cast import cast_to
from nbdata.ops.node import Node, NotFusable
from nbdata.options import Options
from nbdata.spec import is_namedtuple, substructures

JIT_OPTIONS = {"parallel": True, "nogil": True, "error_model": "numpy"}


# ------------------------------------------------------------------- typing

def _dispatcher(fn):
    """One Numba dispatcher per user function (kept on the function), so its
    compilations are reused by every pipeline that calls it."""
    if isinstance(fn, numba.core.dispatcher.Dispatcher):   # the user's own numba.njit
        return fn
    dispatcher = getattr(fn, "_nbdata_dispatcher", None)
    if dispatcher is None:
        if not isinstance(fn, types_module.FunctionType):
            # a callable object, a builtin, a functools.partial: Numba compiles functions
            raise NotFusable(f"{type(fn).__name__} objects are not compiled by Numba")
        # Python's semantics: a row Numba would compute differently raises inside
        # the kernel and re-runs on the reference path (nbdata.compiler.pysemantics).
        dispatcher = compile_user_function(fn)
        try:
            fn._nbdata_dispatcher = dispatcher
        except (AttributeError, TypeError):
            pass
    return dispatcher


def numba_reason(e: Exception) -> str:
    """The informative first line of a Numba error (skipping its pipeline banner)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(("Failed in", "During:", "File ", "^"))]
    return (useful or lines or [type(e).__name__])[0]


def call_text(structure: Any, names: list[str], global_name) -> list[str]:
    """Argument expressions for calling a user function on an element of ``structure``
    whose leaves are ``names``: a top-level tuple (or namedtuple) is unpacked into
    arguments, nested tuples stay tuples, namedtuples are rebuilt with their class
    (``global_name(prefix, value)`` names it), dicts become string-keyed literals."""
    it = iter(names)

    def build(s):
        if isinstance(s, Mapping):
            return "{" + ", ".join(f"{k!r}: {build(s[k])}" for k in sorted(s)) + "}"
        if is_namedtuple(s):
            return f"{global_name('nt', type(s))}({', '.join(build(v) for v in s)})"
        if isinstance(s, tuple):
            items = [build(v) for v in s]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return next(it)

    if isinstance(structure, tuple):
        return [build(v) for v in structure]
    return [build(structure)]


def _plain_arg_types(structure: Any, leaf_types: tuple) -> tuple:
    it = iter(leaf_types)

    def build(s):
        if isinstance(s, tuple):
            return types.Tuple([build(v) for v in s])
        return next(it)

    if isinstance(structure, tuple):
        return tuple(build(v) for v in structure)
    return (build(structure),)


@numba.core.compiler_machinery.register_pass(mutates_CFG=False, analysis_only=True)
class _ReturnTypeOnly(numba.core.compiler_machinery.FunctionPass):
    """Ends a pipeline after type inference with the inferred return type as its result."""

    _name = "nbdata_return_type_only"

    def __init__(self):   # abstract in Numba's pass base class
        numba.core.compiler_machinery.FunctionPass.__init__(self)

    def run_pass(self, state):
        state.cr = state.return_type
        return False


class _TypesOnly(numba.core.compiler.CompilerBase):
    """Numba's front end and type inference, no lowering: what a typing probe needs."""

    def define_pipelines(self):
        pm = numba.core.compiler.DefaultPassBuilder.define_untyped_pipeline(self.state)
        pm.add_pass(numba.core.typed_passes.NopythonTypeInference, "nopython frontend")
        pm.add_pass(_ReturnTypeOnly, "return type only")
        pm.finalize()
        return [pm]


_PROBE_FLAGS = numba.core.compiler.Flags()
_PROBE_FLAGS.nrt = True     # what the functions it types are compiled with


def _probe_return_type(dispatcher, structure: Any, argtys: tuple):
    """What ``dispatcher`` returns when called on an element of ``structure`` whose
    leaves have types ``argtys``, built as the kernel builds it (dicts, namedtuples).
    Only the probe's types are inferred: the call compiles ``dispatcher`` (which the
    kernel then reuses), but the probe itself is never lowered (building and boxing a
    dict compiled for seconds, for a type)."""
    glb: dict = {"fn": dispatcher}

    def global_name(prefix, value):
        name = f"{prefix}{len(glb)}"
        glb[name] = value
        return name

    names = [f"v{k}" for k in range(len(argtys))]
    text = (f"def probe({', '.join(names)}):\n"
            f"    return fn({', '.join(call_text(structure, names, global_name))})\n")
    probe = materialize("probe", text, glb, "probe")
    target = numba.core.registry.cpu_target
    with numba.core.compiler_lock.global_compiler_lock:
        target.target_context.refresh()
        target.typing_context.refresh()
        return numba.core.compiler.compile_extra(
            target.typing_context, target.target_context, probe, tuple(argtys), None,
            _PROBE_FLAGS, {}, pipeline_class=_TypesOnly)


def _result_leaf_types(ty, spec: Any, fname: str) -> list:
    """Numba leaf types of a function's return type, checked against its traced spec."""
    out = []

    def walk(t, s):
        if isinstance(s, Mapping):
            if not isinstance(t, types.LiteralStrKeyDict) or sorted(t.fields) != sorted(s):
                raise NotFusable(f"Numba infers {fname} returns {t}, but it returns a dict "
                                 f"with keys {sorted(s)} under NumPy")
            for k in sorted(s):
                walk(t.types[list(t.fields).index(k)], s[k])
            return
        if isinstance(s, tuple):
            if not isinstance(t, types.BaseTuple) or len(t) != len(s):
                raise NotFusable(f"Numba infers {fname} returns {t}, but it returns a "
                                 f"{len(s)}-tuple under NumPy")
            for a, b in zip(t, s):
                walk(a, b)
            return
        ndim = t.ndim if isinstance(t, types.Array) else 0
        if not isinstance(t, (types.Array, types.Number, types.Boolean)) or ndim != len(s.shape):
            raise NotFusable(f"Numba infers {fname} returns {t}, the traced spec is {s}")
        out.append(t)

    walk(ty, spec)
    return out


class CpuTyper:
    """Types user functions with Numba for the planner."""

    @staticmethod
    def type_function(fn, chain: Chain, kind: str):
        """Numba compiles the function's own body; where it cannot (a body Numba does
        not read, ``map(nd.image.rgb_to_grayscale)`` whose keyword-taking wrapper is one)
        or there is none (``graph_only``), the twin of its recorded graph."""
        error = None
        if not getattr(fn, "graph_only", False):
            try:
                return CpuTyper._typed(fn, _dispatcher(fn.fn), chain, kind)
            except NotFusable as e:
                error = e
                if getattr(fn, "recording_error", None) is not None:
                    raise
        try:
            target, _ = numba_twin(fn.recorded(), fn.name)
            return CpuTyper._typed(fn, _dispatcher(target), chain, kind)
        except NotFusable as e:
            if error is not None:
                raise error from None
            raise NotFusable(f"{fn.name} has no compiled form: {e}") from None

    @staticmethod
    def _typed(fn, dispatcher, chain: Chain, kind: str):
        needs_probe = any(isinstance(s, Mapping) or is_namedtuple(s)
                          for s in substructures(chain.structure))
        try:
            if needs_probe:
                result = _probe_return_type(dispatcher, chain.structure, tuple(chain.types))
            else:
                argtys = _plain_arg_types(chain.structure, chain.types)
                dispatcher.compile(argtys)
                result = dispatcher.overloads[argtys].signature.return_type
        except Exception as e:  # noqa: BLE001 - Numba's many error types all mean "not compilable"
            raise NotFusable(f"Numba cannot compile {fn.name}: {numba_reason(e)}") from None
        if kind == "filter":
            if not isinstance(result, types.Boolean):
                raise NotFusable(f"Numba infers predicate {fn.name} returns {result}, not a bool")
        else:
            _result_leaf_types(result, fn.output_spec, fn.name)
        return dispatcher, result


# -------------------------------------------------------------- compilation

def kernel_title(plan) -> str:
    """A fused stage as compile feedback names it (its ops and their functions)."""
    text = plan.describe()
    return text if len(text) <= 240 else text[:237] + "..."


def compile_stages(physical: Node, options: Options) -> Node:
    """Replace every :class:`PlannedStage` of a physical plan by a compiled FusedStage."""
    if physical.inputs:
        inputs = tuple(compile_stages(c, options) for c in physical.inputs)
        if any(a is not b for a, b in zip(inputs, physical.inputs)):
            physical = physical.with_inputs(*inputs)
    if isinstance(physical, PlannedStage):
        return build_stage(physical.plan, options)
    return physical


def _functions(glb: dict) -> list:
    return [v for k, v in sorted(glb.items()) if k.startswith(("fn", "nt"))]


def _stage_dispatcher(name: str, text: str, glb: dict, parallel: bool):
    """The Numba dispatcher of a stage kernel's source: cached on disk too when every
    function it calls can be fingerprinted (a second process then loads the machine code
    instead of compiling it)."""
    key = stage_hash(text, _functions(glb))
    fn = materialize(name, text, glb, "fused-stage", kernel_path(key) if key is not None else None)
    options = dict(JIT_OPTIONS, parallel=parallel, cache=hasattr(fn, "_nbdata_module"))
    return jitted(fn, "stage", lambda f: numba.njit(**options)(f))


def build_stage(plan, options: Options) -> FusedStage:
    progress.step(f"compiling the kernel of {kernel_title(plan)}")
    started = time.perf_counter()
    code = generate("fused_stage", plan.source.leaves, plan.source.spec, list(plan.steps),
                    plan.source.indexed)
    glb = dict(code.globals)
    glb.update({"np": np, "prange": numba.prange, "cast_to": cast_to})
    kernel = _stage_dispatcher(code.name, code.text, glb, parallel=True)
    # The serial twin (see FusedStage): its own source text, so its own cache entry.
    serial = (None if options.parallel_kernel_after == 0 else
              _stage_dispatcher(code.name, code.text.replace("prange(", "range("), glb,
                                parallel=False))
    stage = FusedStage(plan, kernel, code.text, tuple(code.out_specs), tuple(code.scratch_specs),
                       tuple(code.counters), code.compacts, tuple(code.results), plan.lazy_rows,
                       {"source": time.perf_counter() - started, "numba": 0.0}, serial,
                       options.parallel_kernel_after, passthrough=tuple(code.passthrough))
    if not plan.lazy_rows:
        # ``compile()``, not the first batch, pays for compiling the kernel.
        if plan.source.stream is not None:
            # One row of each leaf (a row of unknown dims, as ragged leaves have, of size 1;
            # none for a string leaf the kernel does not read).
            args = stream_args(Chunk([np.zeros((1,) + tuple(d or 1 for d in leaf.spec.shape),
                                               leaf.spec.dtype) if leaf.arg_count else None
                                      for leaf in plan.source.leaves], 1), plan.source.leaves)
        else:
            reader = plan.source.open(ExecContext(options))
            args = reader.args if reader.args is not None else reader.chunk(0, min(1, reader.rows or 1))
            if plan.source.indexed:
                args = args + [np.zeros(1, np.int64)]
        stage.signature(args)
    return stage
