"""Code generation: the Python source of one fused stage's chunk kernel (CPU backend).

For a chunk of K rows the kernel runs one ``prange`` loop per *phase* (a run of
row steps: map, filter), then a short sequential pass for each counter step
(take, skip, enumerate: they depend on how many rows survived before them), and
finally an order-preserving compaction (prefix sum + parallel gather) of the kept
rows into freshly allocated output columns.

The generator names no op: source leaves emit their own row reads, row steps emit
their body through :class:`RowEmitter`, counter steps through
:class:`CounterEmitter`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from nbdata.compiler.emit import ExprRenderer, Source
from nbdata.primitives.expr import Expr, nodes, positional, substitute
from nbdata.spec import TensorSpec, flatten, is_namedtuple


@dataclasses.dataclass
class Leaf:
    """A value inside the row loop.

    Exactly one form: ``var`` (a materialized scalar or array), ``ref`` (an array
    row readable without copying: ``ref`` is the row view expression and ``flat``
    the prefix of its flattened column, completed by ``, q]``), or ``expr`` (a lifted
    elementwise expression over the base leaves in ``env``, not yet computed).
    """

    spec: TensorSpec
    var: str | None = None
    ref: str | None = None
    flat: str | None = None
    expr: Expr | None = None
    env: list | None = None
    flat_ready: bool = False   # ``<var>f``, the flattened contiguous view, exists
    # a scalar ``var`` read as it is from a source column: that read (``src0[r]``)
    read_from: str | None = None

    @property
    def is_array(self) -> bool:
        return len(self.spec.shape) > 0

    @property
    def size(self) -> int:
        return int(np.prod(self.spec.shape))


def _tuple_expr(items: list[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


class RowEmitter:
    """Emits the body of one row loop (row ``i``, source row ``r``), tracking each leaf
    in its cheapest form. Row steps call :meth:`map` and :meth:`filter`."""

    def __init__(self, ks: Source, depth: int):
        self.ks = ks
        self.depth = depth
        self.more_in_phase = False   # another row step follows in this loop
        self.pending = False   # a row can end pending (a value that does not fit)

    def emit(self, text: str, extra: int = 0) -> None:
        self.ks.emit(self.depth + extra, text)

    # ------------------------------------------------------ source reads
    def row_view(self, spec: TensorSpec, column: str, flat: str) -> Leaf:
        """Row ``r`` of an array column, read in place: ``column[r]`` as a whole,
        ``flat[r, q]`` position by position (``flat`` is the column's (rows, size) view)."""
        return Leaf(spec, ref=f"{column}[r]", flat=f"{flat}[r")

    def ragged_view(self, spec: TensorSpec, data: str, offsets: str, shapes: str) -> Leaf:
        """Row ``r`` of a ragged column (a packed buffer, offsets, per-row shapes) as an
        array view of its own shape."""
        var = self.ks.fresh("v")
        dims = _tuple_expr([f"{shapes}[r, {d}]" for d in range(len(spec.shape))])
        self.emit(f"{var} = {data}[{offsets}[r]:{offsets}[r + 1]].reshape({dims})")
        return Leaf(spec, var=var)

    def unread(self, spec: TensorSpec) -> Leaf:
        """A leaf the kernel never reads (a string its first function drops)."""
        return Leaf(spec)

    def read(self, spec: TensorSpec, text: str) -> Leaf:
        """A leaf computed by the expression ``text`` (a scalar cell, a range value, a
        constant); ``dtype(text)`` names the spec's dtype for casting: ``{dtype}``."""
        var = self.ks.fresh("v")
        self.emit(f"{var} = {text.format(dtype=self.ks.dtype_name(spec.dtype))}")
        leaf = Leaf(spec, var=var, read_from=None if spec.shape else text)
        self.flat_view(leaf)
        return leaf

    # ------------------------------------------------------------ leaves
    @staticmethod
    def at(leaf: Leaf) -> str:
        """Source for position ``q`` of a base array leaf, or the value of a scalar one."""
        if not leaf.is_array:
            return leaf.var
        if leaf.flat is not None:
            return f"{leaf.flat}, q]"
        return f"{leaf.var}f[q]"

    def _renderer(self, env: list[Leaf], depth: int) -> ExprRenderer:
        renderer = ExprRenderer(lambda line: self.emit(line, depth), self.ks.fresh,
                                self.ks.dtype_name, lambda k: self.at(env[k]),
                                element_text=self._element_text(env))
        return renderer

    def _element_text(self, env: list[Leaf]):
        """Input ``k``'s value at flat position ``j`` (``row[0]`` lifted)."""
        return lambda k, j: self._flat_at(env[k], str(j)) if env[k].is_array else self.at(env[k])

    def _bind_helpers(self, renderer: ExprRenderer) -> None:
        from nbdata import random as nd_random
        from nbdata.kernels import arith
        named = {"nd_key": nd_random.key, "nd_randint": nd_random.randint,
                 "nd_uniform": nd_random.uniform}
        for name in renderer.helpers:
            self.ks.globals[name] = named[name] if name in named else getattr(arith, name)

    def scalar(self, leaf: Leaf) -> Leaf:
        """Compute a scalar expression leaf into a variable (one statement per node)."""
        if leaf.expr is None or leaf.is_array:
            return leaf
        renderer = self._renderer(leaf.env, 0)
        text = renderer.value(leaf.expr)
        self._bind_helpers(renderer)
        var = self.ks.fresh("v")
        self.emit(f"{var} = {text}")
        return Leaf(leaf.spec, var=var)

    def value(self, leaf: Leaf) -> str:
        """An expression holding the whole leaf value (materializing expressions)."""
        if leaf.var is not None:
            return leaf.var
        if leaf.ref is not None:
            return leaf.ref
        var = self.ks.fresh("m")
        shape = _tuple_expr([str(d) for d in leaf.spec.shape])
        self.emit(f"{var} = np.empty({shape}, {self.ks.dtype_name(leaf.spec.dtype)})")
        self.emit(f"{var}f = {var}.reshape({leaf.size})")
        self._store_positions([(f"{var}f[q]", leaf)])
        leaf.var, leaf.expr, leaf.env, leaf.flat_ready = var, None, None, True
        return var

    def flat_view(self, leaf: Leaf) -> None:
        """Make a materialized array leaf indexable by flat position."""
        if leaf.var is not None and leaf.is_array and leaf.flat is None and not leaf.flat_ready:
            self.emit(f"{leaf.var}f = np.ascontiguousarray({leaf.var}).reshape({leaf.size})")
            leaf.flat_ready = True

    def _store_positions(self, targets: list[tuple[str, Leaf]]) -> None:
        """Write array leaves position by position; expressions over the same base
        leaves share one loop and one renderer (common nodes computed once)."""
        groups: dict[tuple, list] = {}
        for dest, leaf in targets:
            if leaf.expr is None:
                self.flat_view(leaf)
            image = leaf.expr is not None and positional([leaf.expr])
            key = (leaf.spec.shape if image else leaf.size,
                   id(leaf.env) if leaf.expr is not None else None, image)
            groups.setdefault(key, []).append((dest, leaf))
        for (size, _, image), items in groups.items():
            if image:
                self._store_image(items)
                continue
            self.emit(f"for q in range({self._row_width(items, size)}):")
            renderer = None
            for dest, leaf in items:
                if leaf.expr is not None:
                    renderer = renderer or self._renderer(leaf.env, 1)
                    text = renderer.value(leaf.expr, leaf.spec.dtype)
                else:
                    text = self.at(leaf)
                self.emit(f"{dest} = {text}", 1)
            if renderer is not None:
                self._bind_helpers(renderer)

    @staticmethod
    def _row_width(items: list, size: int) -> str:
        """The bound of a loop over ``size`` positions: the width of a source column the
        loop reads row by row when there is one (``<column>.shape[1]``, a value known
        only at run time), else the constant. A constant bound lets LLVM unroll the
        loop, which made gathers of rows at shuffled row numbers 1.8x slower."""
        for _, leaf in items:
            for base in [leaf] + list(leaf.env or ()):
                flat = getattr(base, "flat", None)
                if flat and flat.endswith("[r") and base.size == size:
                    return f"{flat[:-2]}.shape[1]"
        return str(size)

    @staticmethod
    def _flat_at(leaf: Leaf, index: str) -> str:
        return f"{leaf.flat}, {index}]" if leaf.flat is not None else f"{leaf.var}f[{index}]"

    def _store_image(self, items: list) -> None:
        """Store (h, w, C) expressions that read image windows (crops, flips) and
        per-channel constants, each output pixel straight from its source pixel: per
        output row, one contiguous loop over w*C values when not flipped (it
        vectorizes, with the constants tiled along the row) and a pixel loop when
        flipped."""
        h, w, c = items[0][1].spec.shape
        env = items[0][1].env
        dag = nodes([leaf.expr for _, leaf in items])
        windows = [e for e in dag if e.kind == "window"]
        channels = [e for e in dag if e.kind == "channel"]
        rows = self._renderer(env, 0)
        scalars = {}
        for k, win in enumerate(windows):
            base_leaf = env[int(win.args[0].name)]
            if base_leaf.expr is None and base_leaf.var is not None:
                self.flat_view(base_leaf)
            top, left, flip = (rows.value(a) for a in win.args[1:])
            scalars[id(win)] = (base_leaf, top, left, flip, win.value)
        self._bind_helpers(rows)
        names = {}
        for ch in channels:
            values = np.array(ch.value, np.float32)
            names[id(ch)] = (self.ks.global_name("chan", values),
                             self.ks.global_name("chan", np.tile(values, w)))
        flip_nodes = {id(win.args[3]) for win in windows}
        shared = len(flip_nodes) == 1
        branches = []   # (condition, loops, window index text, channel text)
        if not windows or shared:
            flip = windows[0].args[3] if windows else None
            never = flip is None or (flip.kind == "const" and not flip.value)
            always = flip is not None and flip.kind == "const" and bool(flip.value)
            if not always:
                branches.append(("straight", lambda k: f"b{k} + j", lambda ch: f"{names[id(ch)][1]}[j]"))
            if not never:
                branches.append(("flipped", lambda k: f"b{k} + ({w - 1} - x) * {c} + cc",
                                 lambda ch: f"{names[id(ch)][0]}[cc]"))
        else:
            branches.append(("any", None, lambda ch: f"{names[id(ch)][0]}[cc]"))
        self.emit(f"for y in range({h}):")
        for k, win in enumerate(windows):
            base_leaf, top, left, flip, (src_h, src_w, _) = scalars[id(win)]
            self.emit(f"b{k} = (({top} + y) * {src_w} + {left}) * {c}", 1)
        for n, (kind, window_text, channel_text) in enumerate(branches):
            depth = 1
            if len(branches) == 2:
                flip_text = scalars[id(windows[0])][3]
                self.emit(f"if not {flip_text}:" if n == 0 else "else:", 1)
                depth = 2
            if kind == "straight":
                self.emit(f"for j in range({w * c}):", depth)
                self.emit(f"q = y * {w * c} + j", depth + 1)
                inner = depth + 1
            else:
                self.emit(f"for x in range({w}):", depth)
                self.emit(f"for cc in range({c}):", depth + 1)
                self.emit(f"q = (y * {w} + x) * {c} + cc", depth + 2)
                inner = depth + 2

            def position(e, renderer, kind=kind, window_text=window_text, channel_text=channel_text):
                if e.kind == "channel":
                    return channel_text(e)
                k = windows.index(e)
                base_leaf, top, left, flip, (src_h, src_w, _) = scalars[id(e)]
                if kind == "any":
                    x = f"({w - 1} - x if {flip} else x)"
                    return self._flat_at(base_leaf, f"(({top} + y) * {src_w} + {left} + {x}) * {c} + cc")
                return self._flat_at(base_leaf, window_text(k))

            renderer = ExprRenderer(lambda line, d=inner: self.emit(line, d), self.ks.fresh,
                                    self.ks.dtype_name, lambda k: self.at(env[k]), position,
                                    self._element_text(env))
            for dest, leaf in items:
                text = renderer.value(leaf.expr, leaf.spec.dtype)
                self.emit(f"{dest} = {text}", inner)
            self._bind_helpers(renderer)

    def store(self, cols: list[str], leaves: list[Leaf]) -> None:
        """Write leaves into row ``i`` of columns (arrays through their flat views, by
        position loops that Numba vectorizes)."""
        positions = []
        for col, leaf in zip(cols, leaves):
            if leaf.is_array:
                positions.append((f"{col}f[i, q]", leaf))
            else:
                self.emit(f"{col}[i] = {self.value(self.scalar(leaf))}")
        self._store_positions(positions)

    # -------------------------------------------------------------- steps
    def _compose(self, lifted: Any, leaves: list[Leaf], specs: list[TensorSpec]) -> list[Leaf]:
        """Leaves for a lifted function's outputs over the current leaves: expression
        inputs are substituted (the DAG grows, nothing is computed yet)."""
        env: list[Leaf] = []
        index: dict[int, int] = {}

        def base(leaf: Leaf) -> Expr:
            if id(leaf) not in index:
                index[id(leaf)] = len(env)
                env.append(leaf)
            return Expr("input", leaf.spec.dtype, leaf.is_array, name=str(index[id(leaf)]),
                        shape=tuple(leaf.spec.shape))

        inputs = []
        memo: dict = {}
        # windows read their image in place, and so does one element of an image
        # window: compute the image first
        for k in _read_bases(lifted, "window"):
            if leaves[k].expr is not None:
                self.value(leaves[k])
        for k in _read_bases(lifted, "element"):
            if leaves[k].expr is not None and positional([leaves[k].expr]):
                self.value(leaves[k])
        for leaf in leaves:
            if leaf.expr is None:
                inputs.append(base(leaf))
            else:
                inner = [base(b) for b in leaf.env]
                inputs.append(substitute(leaf.expr, inner, memo))
        memo = {}
        return [Leaf(spec, expr=substitute(e, inputs, memo), env=env)
                for e, spec in zip(flatten(lifted), specs)]

    def _call(self, plan, leaves: list[Leaf], structure: Any) -> str:
        names = iter([self.value(leaf) for leaf in leaves])

        def build(s):
            if isinstance(s, Mapping):
                return "{" + ", ".join(f"{k!r}: {build(s[k])}" for k in sorted(s)) + "}"
            if is_namedtuple(s):
                cls = self.ks.global_name("nt", type(s))
                return f"{cls}({', '.join(build(v) for v in s)})"
            if isinstance(s, tuple):
                return _tuple_expr([build(v) for v in s])
            return next(names)

        if isinstance(structure, tuple):  # tuples and namedtuples are unpacked into arguments
            args = [build(v) for v in structure]
        else:
            args = [build(structure)]
        fname = self.ks.global_name("fn", plan.dispatcher)
        return f"{fname}({', '.join(args)})"

    def map(self, step, leaves: list[Leaf], structure: Any) -> list[Leaf]:
        """The body of a map step; returns the leaves of its output."""
        plan = step.plan
        out_specs = flatten(step.out_spec)
        if plan.lifted is not None:
            return [self.scalar(leaf) for leaf in self._compose(plan.lifted, leaves, out_specs)]
        result = self.ks.fresh("t")
        self.emit(f"{result} = {self._call(plan, leaves, structure)}")
        out: list[Leaf] = []

        def walk(expr: str, spec: Any) -> None:
            if isinstance(spec, Mapping):
                for k in sorted(spec):
                    walk(f"{expr}[{k!r}]", spec[k])
                return
            if isinstance(spec, tuple):
                for idx, sub in enumerate(spec):
                    walk(f"{expr}[{idx}]", sub)
                return
            var = self.ks.fresh("v")
            self.emit(f"{var} = {expr}")
            leaf = Leaf(spec, var=var)
            if leaf.is_array:  # a row whose value does not fit the column stays pending:
                dims = " or ".join(f"{var}.shape[{d}] != {n}" for d, n in enumerate(spec.shape))
                self.emit(f"if {dims}:")   # the chunk is re-run on the reference path
                self.emit("continue", 1)
                self.pending = True
            out.append(leaf)

        walk(result, step.out_spec)
        if self.more_in_phase:
            # Later steps see NumPy's dtypes, not Numba's promotions (float32 * 2.0 → float32).
            for leaf in out:
                self.emit(f"{leaf.var} = cast_to({leaf.var}, {self.ks.dtype_name(leaf.spec.dtype)})")
                self.flat_view(leaf)
        return out

    def filter(self, step, leaves: list[Leaf], structure: Any) -> None:
        """The body of a filter step: rows whose predicate is false are dropped."""
        plan = step.plan
        if plan.lifted is not None:
            (cond,) = self._compose(plan.lifted, leaves, [TensorSpec((), np.bool_)])
            test = self.scalar(cond).var
        else:
            test = self._call(plan, leaves, structure)
        self.emit(f"if not {test}:")
        self.emit("status[i] = 0", 1)
        self.emit("continue", 1)


def _read_bases(lifted: Any, kind: str) -> list[int]:
    """The inputs that a lifted function's nodes of ``kind`` read: image windows
    ("window") or single elements ("element", ``row[0]``)."""
    return sorted({int(e.args[0].name) for e in nodes(flatten(lifted))
                   if e.kind == kind and e.args[0].kind == "input"})


class CounterEmitter:
    """What a counter step's ``emit_counter`` writes through: ``line`` adds to the body
    run for each kept row ``i`` in order (the counter is ``c``, the statement ``drop``
    removes the row); ``after`` adds to the code after the pass (``done = True`` ends
    the stage); ``index`` names the column of a step's index leaf."""

    c = "c"
    drop = "status[i] = 0"

    def __init__(self, ks: Source, index: str | None, run: list[str] | None = None):
        self.ks = ks
        self.index = index
        self.run = run or []   # the step's run values (state slots after its counter)
        self.body: list[tuple[int, str]] = []
        self.tail: list[tuple[int, str]] = []

    def global_name(self, prefix: str, value: Any) -> str:
        """The name under which the kernel reads ``value`` (a helper function)."""
        return self.ks.global_name(prefix, value)

    def line(self, text: str, depth: int = 0) -> None:
        self.body.append((depth, text))

    def after(self, text: str, depth: int = 0) -> None:
        self.tail.append((depth, text))


def _column_decl(ks: Source, var: str, spec: TensorSpec, params: list) -> None:
    """A column buffer passed in by the caller (NumPy allocates it: large buffers get
    huge pages there), plus its flattened view for elementwise stores."""
    params.append((var, spec))
    if spec.shape:
        ks.emit(1, f"{var}f = {var}.reshape({var}.shape[0], {int(np.prod(spec.shape))})")


def _load_inputs(ks: Source, row: RowEmitter, inputs: list[tuple],
                 indexed: bool = False) -> list[Leaf]:
    """Leaves for the current row: source leaves read themselves (at row ``lo + i``, or
    ``rowidx[i]`` for an indexed source), buffers are row views."""
    leaves: list[Leaf] = []
    if any(kind == "source" for kind, *_ in inputs):
        row.emit("r = rowidx[i]" if indexed else "r = lo + i")
    for kind, *rest in inputs:
        if kind == "buffer":
            col, spec = rest
            if spec.shape:
                leaves.append(Leaf(spec, ref=f"{col}[i]", flat=f"{col}f[i"))
            else:
                var = ks.fresh("v")
                row.emit(f"{var} = {col}[i]")
                leaves.append(Leaf(spec, var=var))
            continue
        source_leaf, args = rest
        leaves.append(source_leaf.emit_load(row, args))
    return leaves


@dataclasses.dataclass
class KernelText:
    """The generated kernel: its source, the globals it names, and the row specs of its
    output columns (fresh per chunk) and scratch columns (reused across chunks)."""

    name: str
    text: str
    globals: dict
    out_specs: list
    scratch_specs: list
    counters: list    # initial value of each counter step's state slot
    compacts: bool    # the outputs are written for every row; the caller gathers kept rows
    # where the element's columns are: indices into scratch + outputs + passthrough
    results: list
    # (kernel source argument, row spec): result columns the caller gathers from the
    # source argument at the kept rows' positions (lo + i, or rowidx[i] for an indexed
    # source): kept rows of a source column, unchanged
    passthrough: list = dataclasses.field(default_factory=list)


def generate(name: str, source_leaves: list, source_spec: Any, steps: list,
             indexed: bool = False) -> KernelText:
    """Source of ``name(lo, K, *source_args, status, kept, *scratch, *outputs, state)``
    returning ``(bad_row, done, n_kept)``; when a step drops rows, ``kept[:n_kept]``
    (int64, at least K rows) receives the positions of the kept rows, in order. An
    ``indexed`` kernel also takes ``rowidx`` (after the source arguments) and reads
    source row ``rowidx[i]``.

    Each source leaf takes ``leaf.arg_count`` arguments. ``status`` (uint8, at least K
    rows) receives each row's fate: 1 kept, 0 dropped, 2 pending (its function raised
    inside the kernel, which Numba does not reliably propagate out of ``prange``, or
    its value did not fit its column). ``bad_row`` is the first pending row (-1 if
    none): the caller re-runs the chunk on the reference path. When no step drops
    rows, the last phase writes the outputs (K fresh rows each); otherwise the caller
    gathers the kept rows of the result columns (``nbdata.kernels.compact``), which
    may be scratch columns when no step follows the last counter step. Scratch
    columns are reused across calls. ``done`` says a counter step ended the stage
    (take reached its count).
    """
    ks = Source()
    params = ["lo", "K"]
    inputs: list[tuple] = []
    for k, leaf in enumerate(source_leaves):
        args = ([f"src{k}"] + [f"src{k}_{j}" for j in range(1, leaf.arg_count)]
                if leaf.arg_count else [])
        params += args
        inputs.append(("source", leaf, args))
    params += ["rowidx", "status", "kept"] if indexed else ["status", "kept"]
    scratch: list = []
    outputs: list = []
    passthrough: list = []   # (source argument, row spec): results gathered from the source
    ks.emit(1, "done = False")

    drops = any(step.drops for step in steps)
    elided = False   # no row writes a status (see below)
    phases: list[list] = [[]]
    counter_after: list = []
    for step in steps:
        if step.kind == "row":
            phases[-1].append(step)
        else:
            counter_after.append(step)
            phases.append([])
    counter_after.append(None)

    structure = source_spec
    counters: list[int] = []
    if not phases[0] and len(phases) > 1:  # a counter step comes first: every row starts kept
        ks.emit(1, "for i in range(K):")
        ks.emit(2, "status[i] = 1")
    results: list | None = None
    for p, phase in enumerate(phases):
        last_phase = p == len(phases) - 1
        if last_phase and not phase and drops and all(kind == "buffer" for kind, *_ in inputs):
            # nothing left to compute: the caller gathers the kept rows of the buffers
            names = [v for v, _ in scratch]
            results = [names.index(col) for _, col, _ in inputs]
        elif phase or last_phase:
            end_specs = flatten(phase[-1].out_spec if phase else structure)
            # Array source leaves read in place, by their row view: a result that is one
            # of them unchanged (a filter's kept rows) is gathered by the caller straight
            # from the source column, not copied into an output column first.
            in_place = {} if not (last_phase and drops) else {
                f"{args[0]}[r]": params.index(args[0]) - 2
                for kind, *rest in inputs if kind == "source"
                for args in [rest[1]] if args}
            decl_at = len(ks.lines)
            ks.emit(1, "for i in prange(K):")
            row = RowEmitter(ks, 2)
            if p > 0:
                row.emit("if status[i] != 1:")
                row.emit("continue", 1)
            row.emit("status[i] = 2")
            leaves = _load_inputs(ks, row, inputs, indexed)
            for k, step in enumerate(phase):
                row.more_in_phase = k + 1 < len(phase)
                leaves = step.emit_row(row, leaves, structure)
                structure = step.out_spec
            stored, out_cols, places = [], [], []
            for leaf, spec in zip(leaves, end_specs):
                # (an array row read in place, or a scalar read as it is, unchanged)
                source_read = (leaf.ref if leaf.is_array and leaf.expr is None
                               and leaf.var is None else leaf.read_from)
                if source_read in in_place and spec.dtype == leaf.spec.dtype:
                    places.append(("source", len(passthrough)))
                    passthrough.append((in_place[source_read], spec))
                else:
                    places.append(("column", len(out_cols)))
                    out_cols.append((ks.fresh("col"), spec))
                    stored.append(leaf)
            body, ks.lines = ks.lines[decl_at:], ks.lines[:decl_at]
            for col, spec in out_cols:
                _column_decl(ks, col, spec, outputs if last_phase else scratch)
            ks.lines += body
            row.store([col for col, _ in out_cols], stored)
            row.emit("status[i] = 1")
            if len(phases) == 1 and not drops and not row.pending:
                # Every row ends kept (a row that raises ends the call): no statuses to
                # write or read (two stores a row, 4% of a map's kernel time)
                elided = True
                ks.lines = ks.lines[:decl_at] + [
                    line for line in ks.lines[decl_at:]
                    if line.strip() not in ("status[i] = 2", "status[i] = 1")]
            inputs = [("buffer", col, spec) for col, spec in out_cols]
            if last_phase and passthrough:   # after the scratch and output columns
                base = len(scratch) + len(outputs)
                results = [len(scratch) + i if kind == "column" else base + i
                           for kind, i in places]
        step = counter_after[p]
        if step is not None:
            slot = len(counters)
            counters.append(step.initial)
            counters += [0] * step.run_slots   # set when the stage opens
            index = None
            if step.index_spec is not None:
                index = ks.fresh("col")
                _column_decl(ks, index, step.index_spec, scratch)
            em = CounterEmitter(ks, index, [f"state[{slot + 1 + j}]" for j in range(step.run_slots)])
            step.emit_counter(em)
            ks.emit(1, f"c = state[{slot}]")
            ks.emit(1, "for i in range(K):")
            ks.emit(2, "if status[i] == 1:")
            for depth, text in em.body:
                ks.emit(3 + depth, text)
            ks.emit(1, f"state[{slot}] = c")
            for depth, text in em.tail:
                ks.emit(1 + depth, text)
            if index is not None:
                inputs = [("buffer", index, step.index_spec)] + inputs
            structure = step.out_spec
    if elided:
        ks.emit(1, "return -1, done, K")
    elif not drops:
        # Every row ends 1 (kept) or 2 (pending): a sum of the statuses, which LLVM
        # vectorizes, says at a tenth of the cost of the scan below whether all of
        # them were kept (no step drops, so the caller reads no positions).
        ks.emit(1, "total = 0")
        ks.emit(1, "for i in range(K):")
        ks.emit(2, "total += status[i]")
        ks.emit(1, "if total == K:")
        ks.emit(2, "return -1, done, K")
    else:
        # The kept rows' positions without a branch per row (a filter keeps rows in no
        # predictable pattern): each position is written, and the count moves past it
        # when the row is kept (status 1); a pending row (status 2) sets bit 1 of
        # ``pending``, and only then does the loop below find the first one.
        ks.emit(1, "n = 0")
        ks.emit(1, "pending = 0")
        ks.emit(1, "for i in range(K):")
        ks.emit(2, "st = status[i]")
        ks.emit(2, "kept[n] = i")
        ks.emit(2, "n += st & 1")
        ks.emit(2, "pending |= st")
        ks.emit(1, "if pending & 2 == 0:")
        ks.emit(2, "return -1, done, n")
    if not elided:
        ks.emit(1, "n = 0")
        ks.emit(1, "for i in range(K):")
        ks.emit(2, "if status[i] == 1:")
        ks.emit(3, "kept[n] = i")
        ks.emit(3, "n += 1")
        ks.emit(2, "elif status[i] == 2:")
        ks.emit(3, "return i, done, n")
        ks.emit(1, "return -1, done, n")
    params += [v for v, _ in scratch] + [v for v, _ in outputs] + ["state"]
    ks.lines.insert(0, f"def {name}({', '.join(params)}):")
    if results is None:
        results = list(range(len(scratch), len(scratch) + len(outputs)))
    return KernelText(name, ks.text(), ks.globals, [s for _, s in outputs],
                      [s for _, s in scratch], counters, drops, results, passthrough)


__all__ = ["CounterEmitter", "KernelText", "Leaf", "RowEmitter", "generate"]
