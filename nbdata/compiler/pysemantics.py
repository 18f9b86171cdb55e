"""Python's semantics for user functions that nbdata compiles with Numba.

A function passed to ``map``/``filter`` that does not record into the op table is
compiled by Numba and called inside the fused kernel. Running that function in Python
on an element is the reference: the kernel must give the same element or hand the row
to the reference path (which then gives Python's value or raises Python's error). Numba
alone does not: integer division by zero gives 0, an index past the end reads memory,
``int(x) * 2**62`` wraps where Python's integers do not, ``int(nan)`` is a number,
``math.sqrt(-1.0)`` is nan where Python raises, ``np.int32`` arithmetic is done in 64
bits, ``float32 * 0.1`` in float64 where NumPy stays in float32.

This module is the compiler pipeline nbdata compiles user functions with:

- ``error_model="python"`` and ``boundscheck=True``: division by zero and an index out
  of range raise inside the kernel.
- Typed-IR guards (:class:`PythonGuards`, after Numba's type inference): integer
  ``+ - * ** << >> // % neg abs`` check for 64-bit overflow and, where an operand is a
  NumPy integer narrower than 64 bits, that the exact result fits the narrowest dtype
  NumPy could give it (NumPy wraps there; Python does not); conversions of floats to
  integers (``int(x)``, ``np.int32(x)``, ``math.floor``, ``round``) and of integers to
  narrower NumPy integers check the range; ``math`` functions and float ``**`` check for
  nan or inf made from finite arguments (Python raises, NumPy gives nan/inf);
  arithmetic on two booleans (Python: an int; NumPy: a bool) always hands over.
  A guard that fires raises inside the kernel: the chunk re-runs on the reference path,
  where Python decides (a wrapped NumPy value, a big Python int, or the error).
- Weak Python scalars (an untyped pass before type inference, checked on a trial
  typing): a Python float or int constant combined with a float32 value is made a
  float32 constant, as NumPy's promotion of Python scalars does (``np.float32(3) * 0.1``
  is float32), so the function's float32 arithmetic rounds where NumPy's does.

Values Numba computes that Python computes the same way pass through unguarded (float
arithmetic, comparisons, bit operations, array arithmetic). Known gaps: a float32 value
combined with a float64 *variable* that held a Python float is computed in float64
(NumPy: float32), within one rounding of NumPy's value.
"""

from __future__ import annotations

import math
import operator

import numba
import numpy as np
from llvmlite import ir as llir
from numba.core import ir, types
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import FunctionPass, register_pass
from numba.core.extending import intrinsic
from numba.core.ir_utils import mk_unique_var
from numba.core.typed_passes import NopythonTypeInference, type_inference_stage

# ----------------------------------------------------------------- intrinsics


def _overflow_intrinsic(opname: str):
    """``f(a, b) -> (result, overflowed)`` computing ``a <op> b`` in Numba's result
    type for the operands with LLVM's overflow-checking arithmetic."""
    binop = {"add": operator.add, "sub": operator.sub, "mul": operator.mul}[opname]

    @intrinsic
    def checked(typingctx, a, b):
        if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            return None
        rt = typingctx.resolve_function_type(binop, (a, b), {}).return_type
        if not isinstance(rt, types.Integer):
            return None
        sig = types.Tuple((rt, types.boolean))(a, b)

        def codegen(context, builder, signature, args):
            x = context.cast(builder, args[0], a, rt)
            y = context.cast(builder, args[1], b, rt)
            kind = "s" if rt.signed else "u"
            width = rt.bitwidth
            ity = llir.IntType(width)
            fnty = llir.FunctionType(llir.LiteralStructType([ity, llir.IntType(1)]), [ity, ity])
            fn = builder.module.declare_intrinsic(f"llvm.{kind}{opname}.with.overflow.i{width}",
                                                  fnty=fnty)
            pair = builder.call(fn, [x, y])
            res = builder.extract_value(pair, 0)
            flag = builder.extract_value(pair, 1)
            return context.make_tuple(builder, signature.return_type, [res, flag])

        return sig, codegen

    return checked


checked_add = _overflow_intrinsic("add")
checked_sub = _overflow_intrinsic("sub")
checked_mul = _overflow_intrinsic("mul")

_GUARD_OPTIONS = {"nogil": True, "error_model": "python", "inline": "always"}
_guards: dict = {}


@numba.njit(nogil=True)
def _handover(what):
    """Raises inside the kernel: the chunk re-runs on the reference path."""
    raise OverflowError(what)


# ------------------------------------------------------------ guard makers


def _narrow_bounds(dtypes: list):
    """The range of the narrowest dtype NumPy could give an integer result of operands
    of these NumPy integer dtypes (narrower than 64 bits), or None."""
    if not dtypes:
        return None
    dt = np.result_type(*dtypes)
    if dt.kind not in "iu" or dt.itemsize >= 8:
        return None
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def _int_guard(op: str, bounds):
    """A guard for integer ``op`` (both operands integers, an integer result)."""
    key = ("int", op, bounds)
    if key in _guards:
        return _guards[key]
    lo, hi = bounds if bounds is not None else (0, 0)
    narrow = bounds is not None

    def fits(r):
        return (not narrow) or (lo <= r <= hi)

    fits = numba.njit(**_GUARD_OPTIONS)(fits)
    if op in ("add", "sub", "mul"):
        fn = {"add": checked_add, "sub": checked_sub, "mul": checked_mul}[op]

        def guard(a, b):
            r, o = fn(a, b)
            if o or not fits(a) or not fits(b) or not fits(r):
                _handover("integer result out of range")
            return r
    elif op == "pow":
        def guard(a, b):
            if b < 0:
                _handover("negative integer power")
            if not fits(a) or not fits(b):
                _handover("integer out of range")
            r = a - a + 1
            base = a
            e = b
            while e:
                if e & 1:
                    r, o = checked_mul(r, base)
                    if o:
                        _handover("integer power overflows")
                e >>= 1
                if e:
                    base, o = checked_mul(base, base)
                    if o:
                        _handover("integer power overflows")
            if not fits(r):
                _handover("integer result out of range")
            return r
    elif op == "lshift":
        def guard(a, b):
            if b < 0 or b >= 63:
                _handover("shift count out of range")
            r = a << b
            if (r >> b) != a or (a >= 0) != (r >= 0) or not fits(a) or not fits(r):
                _handover("shift overflows")
            return r
    elif op == "rshift":
        def guard(a, b):
            if b < 0 or b >= 63:
                _handover("shift count out of range")
            return a >> b
    elif op in ("floordiv", "mod"):
        pyop = operator.floordiv if op == "floordiv" else operator.mod

        def guard(a, b):
            if b == -1 and a != 0 and a == -a:      # the most negative integer // -1
                _handover("integer division overflows")
            if not fits(a) or not fits(b):
                _handover("integer out of range")
            r = pyop(a, b)
            if not fits(r):
                _handover("integer result out of range")
            return r
    elif op == "neg":
        def guard(a):
            if a != 0 and (a == -a or not fits(-a)):
                _handover("integer negation overflows")
            return -a
    else:
        raise KeyError(op)
    g = _guards[key] = numba.njit(**_GUARD_OPTIONS)(guard)
    return g


def _always_guard(why: str):
    """A guard that always hands over: an operation whose Python and NumPy results
    differ in type and Numba cannot tell which applies."""
    key = ("always", why)
    if key not in _guards:
        def guard(a, b):
            _handover(why)
            return a + b
        _guards[key] = numba.njit(**_GUARD_OPTIONS)(guard)
    return _guards[key]


def _float_pow_guard():
    key = ("fpow",)
    if key not in _guards:
        def guard(a, b):
            r = a ** b
            if (math.isnan(r) and not (math.isnan(a) or math.isnan(b))) or \
                    (math.isinf(r) and math.isfinite(a) and math.isfinite(b)):
                _handover("power outside the real numbers")
            return r
        _guards[key] = numba.njit(**_GUARD_OPTIONS)(guard)
    return _guards[key]


def _result_guard(fn, nargs: int):
    """``fn(*args)`` that hands over when a float result is nan from non-nan arguments
    or infinite from finite ones (Python's math raises ValueError/OverflowError)."""
    key = ("math", fn, nargs)
    if key in _guards:
        return _guards[key]
    f = fn
    if nargs == 1:
        def guard(a):
            r = f(a)
            if (math.isnan(r) and not math.isnan(a)) or (math.isinf(r) and math.isfinite(a)):
                _handover("math domain or range error")
            return r
    elif nargs == 2:
        def guard(a, b):
            r = f(a, b)
            if (math.isnan(r) and not (math.isnan(a) or math.isnan(b))) or \
                    (math.isinf(r) and math.isfinite(a) and math.isfinite(b)):
                _handover("math domain or range error")
            return r
    else:
        return None
    g = _guards[key] = numba.njit(**_GUARD_OPTIONS)(guard)
    return g


def _to_int_guard(fn, lo: int, hi_exclusive: float):
    """``fn(x)`` for a float ``x`` converted to an integer: hands over unless
    ``lo <= x < hi_exclusive`` (nan fails both)."""
    key = ("toint", fn, lo, hi_exclusive)
    if key in _guards:
        return _guards[key]
    f = fn
    flo, fhi = float(lo), float(hi_exclusive)

    def guard(x):
        if not (x >= flo and x < fhi):
            _handover("float to integer conversion out of range")
        return f(x)
    g = _guards[key] = numba.njit(**_GUARD_OPTIONS)(guard)
    return g


def _int_narrowing_guard(fn, lo: int, hi: int):
    key = ("narrow", fn, lo, hi)
    if key in _guards:
        return _guards[key]
    f = fn

    def guard(x):
        if not (x >= lo and x <= hi):
            _handover("integer out of the range of a NumPy integer type")
        return f(x)
    g = _guards[key] = numba.njit(**_GUARD_OPTIONS)(guard)
    return g


_INT_OPS = {operator.add: "add", operator.iadd: "add", operator.sub: "sub",
            operator.isub: "sub", operator.mul: "mul", operator.imul: "mul",
            operator.pow: "pow", operator.ipow: "pow", operator.lshift: "lshift",
            operator.ilshift: "lshift", operator.rshift: "rshift",
            operator.irshift: "rshift", operator.floordiv: "floordiv",
            operator.ifloordiv: "floordiv", operator.mod: "mod", operator.imod: "mod",
            operator.and_: "bit", operator.iand: "bit", operator.or_: "bit",
            operator.ior: "bit", operator.xor: "bit", operator.ixor: "bit"}
_BOOL_ARITH = {operator.add, operator.iadd, operator.sub, operator.isub,
               operator.mul, operator.imul}
_MATH_FLOAT = {math.sqrt, math.log, math.log10, math.log2, math.log1p, math.exp,
               math.expm1, math.pow, math.acos, math.asin, math.acosh, math.atanh,
               math.cosh, math.sinh, math.gamma, math.lgamma, math.fmod, math.ldexp,
               math.hypot, math.erf, math.erfc, math.atan2, math.copysign, math.tan}
_MATH_TO_INT = {math.floor, math.ceil, math.trunc, round}
_I64 = (-2 ** 63, 2.0 ** 63)


def _narrow_of(t) -> list:
    """[dtype] when ``t`` is a NumPy integer type narrower than 64 bits (a strong type:
    Numba's int64 may be a Python int, which NumPy treats as weak)."""
    if isinstance(t, types.Integer) and not isinstance(t, types.Literal) and t.bitwidth < 64:
        return [np.dtype(str(t))]
    return []


# ------------------------------------------------------------------ the passes


@register_pass(mutates_CFG=False, analysis_only=False)
class WeakPythonScalars(FunctionPass):
    """Python float/int constants combined with float32 values become float32
    constants (NumPy's weak promotion), found on a trial typing of a copy of the IR."""

    _name = "nbdata_weak_python_scalars"

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state):
        func_ir = state.func_ir
        consts = {}
        changed = False
        for blk in func_ir.blocks.values():
            for ins in blk.body:
                if isinstance(ins, ir.Assign) and isinstance(ins.value, ir.Global) and \
                        ins.value.value is float:
                    # Python's float() is a double; Numba's keeps a float32 float32.
                    ins.value = ir.Global("float64", np.float64, ins.value.loc)
                    changed = True
                if isinstance(ins, ir.Assign) and isinstance(ins.value, (ir.Const, ir.Global, ir.FreeVar)):
                    v = ins.value.value
                    if isinstance(v, (float, int)) and not isinstance(v, (bool, np.generic)):
                        consts[ins.target.name] = v
        try:
            trial = func_ir.copy()
            typemap, _, _, _ = type_inference_stage(state.typingctx, state.targetctx, trial,
                                                    state.args, state.return_type)
        except Exception:  # noqa: BLE001 - the real type inference reports the error
            return changed
        for blk in func_ir.blocks.values():
            new_body = []
            for ins in blk.body:
                if isinstance(ins, ir.Assign) and isinstance(ins.value, ir.Expr) and \
                        ins.value.op in ("binop", "inplace_binop"):
                    e = ins.value
                    lt, rt = typemap.get(e.lhs.name), typemap.get(e.rhs.name)
                    for side, other in (("lhs", rt), ("rhs", lt)):
                        var = getattr(e, side)
                        if var.name in consts and other == types.float32:
                            c = ir.Var(var.scope, mk_unique_var("$weak_f32"), var.loc)
                            new_body.append(ir.Assign(ir.Const(np.float32(consts[var.name]), var.loc),
                                                      c, var.loc))
                            setattr(e, side, c)
                            changed = True
                if isinstance(ins, ir.Assign) and isinstance(ins.value, ir.Expr) and \
                        ins.value.op == "call" and not ins.value.kws:
                    e = ins.value
                    fty = typemap.get(e.func.name)
                    key = getattr(fty, "typing_key", None)
                    if key in _MATH_FLOAT:
                        # Python's math computes in double: arguments widen (a float32
                        # one may only become float32 after this pass's rewrites).
                        args = []
                        for j, a in enumerate(e.args):
                            if not (key is math.ldexp and j == 1):
                                fv = ir.Var(a.scope, mk_unique_var("$float"), a.loc)
                                wide = ir.Var(a.scope, mk_unique_var("$wide"), a.loc)
                                new_body.append(ir.Assign(ir.Global("float64", np.float64, a.loc), fv, a.loc))
                                new_body.append(ir.Assign(ir.Expr.call(fv, [a], (), a.loc), wide, a.loc))
                                a = wide
                                changed = True
                            args.append(a)
                        e.args = args
                new_body.append(ins)
            blk.body = new_body
        return changed


@register_pass(mutates_CFG=False, analysis_only=False)
class PythonGuards(FunctionPass):
    """Replaces scalar operations whose Numba result can differ from Python's by calls
    to guards that compute the same value or raise (see the module docstring).

    Numba types the result of ``np.int32`` arithmetic as int64 and of float32 with a
    float64 as float64; NumPy keeps int32 (or float32, when the float64 was a Python
    float). So the pass first follows where such values flow (``narrow``: variables
    whose NumPy dtype may be a narrow integer; ``f32``: float64 variables whose NumPy
    dtype may be float32), then guards each operation with what its operands may be."""

    _name = "nbdata_python_guards"

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state):
        typemap = state.typemap
        self.narrow: dict = {}
        self.f32: set = set()
        blocks = [state.func_ir.blocks[k] for k in sorted(state.func_ir.blocks)]
        for _ in range(3):              # to a fixed point over loops (phis)
            before = (dict(self.narrow), set(self.f32))
            for blk in blocks:
                for ins in blk.body:
                    if isinstance(ins, ir.Assign):
                        self._flow(ins, typemap)
            if (self.narrow, self.f32) == before:
                break
        changed = False
        for blk in blocks:
            new_body = []
            for ins in blk.body:
                if isinstance(ins, ir.Assign) and isinstance(ins.value, ir.Expr):
                    guard, args = self._guard_for(ins, typemap)
                    if guard is not None:
                        # A guard that does not type fails the compilation (the function
                        # then runs in Python): never an unguarded operation.
                        self._replace(state, ins, guard, args, new_body)
                        changed = True
                new_body.append(ins)
            blk.body = new_body
        return changed

    # ----------------------------------------------------------- provenance
    def _narrow_dtypes(self, var, typemap) -> list:
        t = typemap[var.name]
        if var.name in self.narrow:
            return [self.narrow[var.name]]
        return _narrow_of(t)

    def _is_f32(self, var, typemap) -> bool:
        return typemap[var.name] == types.float32 or var.name in self.f32

    def _flow(self, ins, typemap) -> None:
        name, v = ins.target.name, ins.value
        out = typemap.get(name)
        sources = []
        if isinstance(v, ir.Var):
            sources = [v]
        elif isinstance(v, ir.Expr) and v.op == "phi":
            sources = list(v.incoming_values)
        elif isinstance(v, ir.Expr) and v.op in ("binop", "inplace_binop"):
            sources = [v.lhs, v.rhs]
        elif isinstance(v, ir.Expr) and v.op == "unary":
            sources = [v.value]
        if not sources:
            return
        sources = [s for s in sources if isinstance(s, ir.Var) and s.name in typemap]
        if isinstance(out, types.Integer):
            dts = sum((self._narrow_dtypes(s, typemap) for s in sources
                       if isinstance(typemap[s.name], types.Integer)), [])
            b = _narrow_bounds(dts)
            if b is not None and out.bitwidth == 64:
                self.narrow[name] = np.result_type(*dts)
        elif out == types.float64:
            if any(self._is_f32(s, typemap) for s in sources):
                self.f32.add(name)

    # --------------------------------------------------------------- guards
    def _guard_for(self, ins, typemap):
        e = ins.value
        out = typemap[ins.target.name]
        if e.op in ("binop", "inplace_binop"):
            fn = e.fn
            a, b = typemap[e.lhs.name], typemap[e.rhs.name]
            if isinstance(a, types.Boolean) and isinstance(b, types.Boolean) and fn in _BOOL_ARITH:
                return _always_guard("arithmetic on two booleans"), [e.lhs, e.rhs]
            if isinstance(a, types.Integer) and isinstance(b, types.Integer) and \
                    isinstance(out, types.Integer) and fn in _INT_OPS:
                op = _INT_OPS[fn]
                if a.signed != b.signed and max(a.bitwidth, b.bitwidth) == 64 and \
                        not isinstance(a, types.Literal) and not isinstance(b, types.Literal):
                    return _always_guard("a signed and an unsigned 64-bit integer"), [e.lhs, e.rhs]
                bounds = _narrow_bounds(self._narrow_dtypes(e.lhs, typemap) +
                                        self._narrow_dtypes(e.rhs, typemap))
                if op == "bit":
                    if bounds is None:
                        return None, None
                    return _bit_guard(fn, bounds), [e.lhs, e.rhs]
                return _int_guard(op, bounds), [e.lhs, e.rhs]
            if out == types.float64 and fn in _FLOAT_OPS and \
                    isinstance(a, (types.Float, types.Integer)) and \
                    isinstance(b, (types.Float, types.Integer)) and \
                    (self._is_f32(e.lhs, typemap) or self._is_f32(e.rhs, typemap)):
                # float32 with a float64 or an int64 (a Python scalar: NumPy stays in
                # float32; a NumPy one: float64): both must agree.
                return _dual_guard(_FLOAT_OPS[fn]), [e.lhs, e.rhs]
            if fn in (operator.pow, operator.ipow) and isinstance(out, types.Float) and \
                    isinstance(a, (types.Float, types.Integer)) and isinstance(b, (types.Float, types.Integer)):
                return _float_pow_guard(), [e.lhs, e.rhs]
            return None, None
        if e.op == "unary" and e.fn == operator.neg:
            a = typemap[e.value.name]
            if isinstance(a, types.Integer) and isinstance(out, types.Integer):
                return _int_guard("neg", _narrow_bounds(self._narrow_dtypes(e.value, typemap))), [e.value]
            return None, None
        if e.op == "call" and not e.kws and not e.vararg:
            fty = typemap[e.func.name]
            argtys = [typemap[v.name] for v in e.args]
            key = getattr(fty, "typing_key", None)
            if isinstance(fty, types.NumberClass):
                target = fty.instance_type
                if isinstance(target, types.Integer) and len(argtys) == 1:
                    dt = np.iinfo(np.dtype(str(target)))
                    if isinstance(argtys[0], types.Float):
                        return _to_int_guard(_np_ctor(target), int(dt.min), float(dt.max) + 1.0), e.args
                    if isinstance(argtys[0], types.Integer) and target.bitwidth < 64:
                        return _int_narrowing_guard(_np_ctor(target), int(dt.min), int(dt.max)), e.args
                return None, None
            if key is int and len(argtys) == 1 and isinstance(argtys[0], types.Float):
                return _to_int_guard(int, *_I64), e.args
            if key in _MATH_TO_INT and len(argtys) == 1 and isinstance(argtys[0], types.Integer):
                return _identity_guard(), e.args      # Python: the integer itself
            if key in _MATH_TO_INT and len(argtys) == 1 and isinstance(argtys[0], types.Float) \
                    and isinstance(out, types.Integer):
                return _to_int_guard(key, *_I64), e.args
            if key is abs and len(argtys) == 1 and isinstance(argtys[0], types.Integer):
                return _abs_guard(_narrow_bounds(self._narrow_dtypes(e.args[0], typemap))), e.args
            if key is pow and len(argtys) == 2:
                if all(isinstance(t, types.Integer) for t in argtys) and isinstance(out, types.Integer):
                    nd = sum((self._narrow_dtypes(v, typemap) for v in e.args), [])
                    return _int_guard("pow", _narrow_bounds(nd)), e.args
                if isinstance(out, types.Float):
                    return _float_pow_guard(), e.args
            if key in _MATH_FLOAT and isinstance(out, types.Float) and \
                    all(isinstance(t, (types.Float, types.Integer)) for t in argtys):
                g = _result_guard(key, len(argtys))
                if g is not None:
                    return g, e.args
        return None, None

    @staticmethod
    def _replace(state, ins, guard, args, new_body):
        typemap, calltypes = state.typemap, state.calltypes
        loc, scope = ins.loc, ins.target.scope
        fnty = state.typingctx.resolve_value_type(guard)
        # Typed on the operands' non-literal types: one compilation of each guard per
        # operand type, not one per constant a user function combines (lowering casts
        # a literal to its type).
        argtys = tuple(types.unliteral(typemap[a.name]) for a in args)
        sig = state.typingctx.resolve_function_type(fnty, argtys, {})
        if sig is None:
            raise TypeError("untypeable guard")
        gvar = ir.Var(scope, mk_unique_var("$nbdata_guard"), loc)
        typemap[gvar.name] = fnty
        new_body.append(ir.Assign(ir.Global("nbdata_guard", guard, loc), gvar, loc))
        call = ir.Expr.call(gvar, list(args), (), loc)
        calltypes[call] = sig
        ins.value = call


_FLOAT_OPS = {operator.add: operator.add, operator.iadd: operator.add,
              operator.sub: operator.sub, operator.isub: operator.sub,
              operator.mul: operator.mul, operator.imul: operator.mul,
              operator.truediv: operator.truediv, operator.itruediv: operator.truediv,
              operator.floordiv: operator.floordiv, operator.ifloordiv: operator.floordiv,
              operator.mod: operator.mod, operator.imod: operator.mod,
              operator.pow: operator.pow, operator.ipow: operator.pow}


def _dual_guard(op):
    """``op`` in float64 that hands over unless float32 arithmetic gives the same."""
    key = ("dual", op)
    if key not in _guards:
        f = op

        def guard(a, b):
            r = f(np.float64(a), np.float64(b))
            s = f(np.float32(a), np.float32(b))
            if not (r == np.float64(s) or (math.isnan(r) and math.isnan(s))):
                _handover("float32 and float64 arithmetic differ")
            if (math.isnan(r) and not (math.isnan(a) or math.isnan(b))) or \
                    (math.isinf(r) and math.isfinite(a) and math.isfinite(b)):
                _handover("float result outside the finite numbers")
            return r
        _guards[key] = numba.njit(**_GUARD_OPTIONS)(guard)
    return _guards[key]


def _identity_guard():
    key = ("identity",)
    if key not in _guards:
        def guard(a):
            return a
        _guards[key] = numba.njit(**_GUARD_OPTIONS)(guard)
    return _guards[key]


def _bit_guard(fn, bounds):
    key = ("bit", fn, bounds)
    if key not in _guards:
        lo, hi = bounds
        f = {operator.iand: operator.and_, operator.ior: operator.or_,
             operator.ixor: operator.xor}.get(fn, fn)

        def guard(a, b):          # NumPy refuses a Python int outside a narrow type
            if not (lo <= a <= hi and lo <= b <= hi):
                _handover("integer out of range")
            return f(a, b)
        _guards[key] = numba.njit(**_GUARD_OPTIONS)(guard)
    return _guards[key]


def _abs_guard(bounds):
    key = ("abs", bounds)
    if key not in _guards:
        lo, hi = bounds if bounds is not None else (0, 0)
        narrow = bounds is not None

        def guard(a):
            if a < 0 and (a == -a or (narrow and -a > hi)):
                _handover("abs overflows")
            return abs(a)
        _guards[key] = numba.njit(**_GUARD_OPTIONS)(guard)
    return _guards[key]


def _np_ctor(t):
    return getattr(np, str(t))


class PythonSemanticsCompiler(CompilerBase):
    """Numba's nopython pipeline with nbdata's weak-scalar and guard passes."""

    def define_pipelines(self):
        pm = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm.add_pass_after(PythonGuards, NopythonTypeInference)
        # The weak-scalar rewrite runs on the untyped IR, just before type inference.
        pm.passes.insert([p[0] for p in pm.passes].index(NopythonTypeInference),
                         (WeakPythonScalars, "nbdata weak Python scalars"))
        pm.finalize()
        return [pm]


def compile_user_function(fn):
    """The Numba dispatcher nbdata calls ``fn`` through inside fused kernels."""
    return numba.njit(nogil=True, error_model="python", boundscheck=True,
                      pipeline_class=PythonSemanticsCompiler)(fn)
