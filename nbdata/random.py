"""Counter-based random numbers: values depend only on (seed, stream, counter)."""

import operator
import threading

import numba
import numpy as np
from numba.core import types
from numba.core.errors import TypingError
from numba.experimental import jitclass
from numba.extending import intrinsic, overload

from nbdata.errors import FormattedValueError

# The generator is Philox-2x64-10 (Salmon et al., "Parallel Random Numbers: As
# Easy as 1, 2, 3", SC'11): ten rounds of a 64x64->128-bit multiply and XOR
# over a two-word counter, with a Weyl sequence bumping the key between rounds.
# It passes BigCrush and is what Random123 calls philox2x64_10; key() is
# exactly that function, so the published known-answer vectors pin it down.
_PHILOX_M = np.uint64(0xD2B74407B1CE6E93)
_PHILOX_W = np.uint64(0x9E3779B97F4A7C15)
_PHILOX_ROUNDS = 10

# bits() puts this constant in the second counter word, so that drawing bits
# with a raw seed as the key does not reproduce key(seed, stream, epoch).
_BITS_DOMAIN = np.uint64(0xBB67AE8584CAA73B)

_SHIFT11 = np.uint64(11)
_TWO_POW_MINUS_53 = 1.0 / 9007199254740992.0
_MASK64 = (1 << 64) - 1


@intrinsic
def _mul128(typingctx, a, b):
    """(high, low) 64-bit words of the 128-bit product of two uint64s: one ``mul`` of
    LLVM's i128 (a single instruction on x86-64 and AArch64), instead of four 32-bit
    products and their carries."""
    sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        from llvmlite import ir
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        high = builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))
        low = builder.trunc(product, ir.IntType(64))
        return context.make_tuple(builder, signature.return_type, (high, low))
    return sig, codegen


@numba.njit(nogil=True, cache=True)
def _mulhilo(a, b):
    """Return the high and low 64-bit words of the 128-bit product a * b."""
    return _mul128(np.uint64(a), np.uint64(b))


@numba.njit(nogil=True, cache=True)
def _philox2x64(counter0, counter1, key):
    """Return both output words of Philox-2x64-10 for one counter and key."""
    c0 = np.uint64(counter0)
    c1 = np.uint64(counter1)
    k = np.uint64(key)
    for _ in range(_PHILOX_ROUNDS):
        high, low = _mulhilo(_PHILOX_M, c0)
        c0 = high ^ k ^ c1
        c1 = low
        k += _PHILOX_W
    return c0, c1


@numba.njit(nogil=True, cache=True)
def _key(seed, stream, epoch):
    return _philox2x64(stream, epoch, seed)[0]


@numba.njit(nogil=True, cache=True)
def _bits(key, counter):
    return _philox2x64(counter, _BITS_DOMAIN, key)[0]


@numba.njit(nogil=True, cache=True)
def _uniform(key, counter):
    return np.float64(_bits(key, counter) >> _SHIFT11) * _TWO_POW_MINUS_53


@numba.njit(nogil=True, cache=True)
def _randint(key, counter, low, high):
    low64 = np.int64(low)
    high64 = np.int64(high)
    if high64 <= low64:
        raise FormattedValueError(
            "nbdata.random.randint: high ({}) must be greater than low ({})", high64, low64)
    span = np.uint64(high64) - np.uint64(low64)
    offset = _mulhilo(_bits(key, counter), span)[0]
    return np.int64(np.uint64(low64) + offset)


# The public functions are plain Python with an `overload` for nopython
# callers, rather than dispatchers, because from Python a dispatcher returns
# Python ints and floats (NumPy would then type a uint64 by its value and let
# a float be "weak"), and cannot take a Python int of 2**63 or more. Both
# paths run the same compiled _key/_bits/_uniform/_randint.
def _as_uint64(value):
    """Wrap a Python or NumPy integer into uint64 as an int64 cast does."""
    return np.uint64(operator.index(value) & _MASK64)


def _require_integers(function, **argument_types):
    """Reject non-integer arguments when a nopython caller is typed."""
    for name, argument_type in argument_types.items():
        if not isinstance(argument_type, types.Integer):
            raise TypingError(
                f"nbdata.random.{function}: {name} must be an integer, "
                f"got {argument_type}"
            )


def key(seed: int, stream: int, epoch: int) -> np.uint64:
    """Combines a user seed, a stream (op) id and an epoch into one key.

    The key is Philox-2x64-10 of the counter ``(stream, epoch)`` under the key
    ``seed`` (first output word), so distinct inputs give unrelated keys.
    Integers are taken modulo 2**64: ``-1`` and ``2**64 - 1`` are the same.

    Args:
        seed: The user's seed.
        stream: Identifies the consumer of the randomness (an op, a feature).
        epoch: The epoch number, so each epoch can draw fresh values.

    Returns:
        The key, to pass to :func:`bits`, :func:`uniform` or :func:`randint`.

    Example:
        >>> from nbdata import random
        >>> random.key(42, 0, 0)
        np.uint64(17722514536119504384)
        >>> random.key(-1, 0, 0) == random.key(2**64 - 1, 0, 0)
        np.True_
    """
    return np.uint64(
        _key(_as_uint64(seed), _as_uint64(stream), _as_uint64(epoch))
    )


def bits(key: int, counter: int) -> np.uint64:
    """Returns 64 random bits for element ``counter`` under ``key``.

    Any counter can be drawn directly, in any order, from any thread: the
    value is a pure function of ``(key, counter)``.

    Args:
        key: A key from :func:`key`.
        counter: The element index (taken modulo 2**64).

    Returns:
        A uniformly distributed ``np.uint64``.

    Example:
        >>> from nbdata import random
        >>> k = random.key(42, 0, 0)
        >>> random.bits(k, 0)
        np.uint64(1903614025731852149)
        >>> random.bits(k, 0) == random.bits(k, 0)
        np.True_
    """
    return np.uint64(_bits(_as_uint64(key), _as_uint64(counter)))


def uniform(key: int, counter: int) -> np.float64:
    """Returns a float uniformly distributed in [0, 1).

    The top 53 bits of :func:`bits` scaled by 2**-53, so every value is a
    multiple of 2**-53 and 1.0 is never returned.

    Args:
        key: A key from :func:`key`.
        counter: The element index (taken modulo 2**64).

    Returns:
        An ``np.float64`` in [0, 1).

    Example:
        >>> from nbdata import random
        >>> k = random.key(42, 0, 0)
        >>> random.uniform(k, 0)
        np.float64(0.10319512311361745)
        >>> all(0.0 <= random.uniform(k, i) < 1.0 for i in range(1000))
        True
    """
    return np.float64(_uniform(_as_uint64(key), _as_uint64(counter)))


def randint(key: int, counter: int, low: int, high: int) -> np.int64:
    """Returns an integer uniformly distributed in [low, high).

    Uses the multiply-shift reduction ``low + (bits * (high - low)) >> 64``,
    which has no rejection loop; its bias is at most ``(high - low) / 2**64``
    per value (below 2**-32 for any range narrower than 2**32).

    Args:
        key: A key from :func:`key`.
        counter: The element index (taken modulo 2**64).
        low: The smallest value (int64).
        high: One past the largest value (int64), greater than ``low``.

    Returns:
        An ``np.int64`` in [low, high).

    Raises:
        ValueError: If ``high <= low``.

    Example:
        >>> from nbdata import random
        >>> k = random.key(42, 0, 0)
        >>> random.randint(k, 0, 0, 10)
        np.int64(1)
        >>> sorted({int(random.randint(k, i, -2, 3)) for i in range(1000)})
        [-2, -1, 0, 1, 2]
    """
    return np.int64(_randint(
        _as_uint64(key), _as_uint64(counter),
        np.int64(operator.index(low)), np.int64(operator.index(high)),
    ))


@overload(key, jit_options={"nogil": True})
def _key_nopython(seed, stream, epoch):
    _require_integers("key", seed=seed, stream=stream, epoch=epoch)
    return lambda seed, stream, epoch: _key(seed, stream, epoch)


@overload(bits, jit_options={"nogil": True})
def _bits_nopython(key, counter):
    _require_integers("bits", key=key, counter=counter)
    return lambda key, counter: _bits(key, counter)


@overload(uniform, jit_options={"nogil": True})
def _uniform_nopython(key, counter):
    _require_integers("uniform", key=key, counter=counter)
    return lambda key, counter: _uniform(key, counter)


@overload(randint, jit_options={"nogil": True})
def _randint_nopython(key, counter, low, high):
    _require_integers("randint", key=key, counter=counter, low=low, high=high)
    return lambda key, counter, low, high: _randint(key, counter, low, high)


@numba.njit(nogil=True, cache=True)
def _bits_block(key, start, count):
    out = np.empty(count, np.uint64)
    for i in range(count):
        out[i] = _bits(key, start + np.uint64(i))
    return out


def bits_block(key: int, start: int, count: int) -> np.ndarray:
    """``bits(key, start + i)`` for ``i < count``, as one uint64 array.

    Example:
        >>> from nbdata import random
        >>> k = random.key(1, 2, 3)
        >>> int(random.bits_block(k, 10, 4)[2]) == int(random.bits(k, 12))
        True
    """
    return _bits_block(_as_uint64(key), _as_uint64(start), np.int64(count))


# ------------------------------------------------------------------ seeds

_SEED_LOCK = threading.Lock()
_global_seed: int | None = None
_op_counter = 0
_DERIVE_STREAM = 0x5EED


def set_seed(seed: int | None) -> None:
    """Set the global seed, like ``tf.random.set_seed``: every random op created after it
    whose seed is left None (``shuffle``, ``random_map``, ``global_shuffle``) gets an op
    seed derived from this one and a counter of such ops, so a program that builds the
    same pipelines gets the same randomness on every run. ``None`` clears it: such ops
    then draw from the pipeline seed (one per pipeline, shown by ``explain()`` and kept
    in saved iterator state).

    >>> import nbdata as nd
    >>> nd.random.set_seed(7)
    >>> a = [int(x) for x in nd.Dataset.range(8).shuffle(8)]
    >>> nd.random.set_seed(7)
    >>> a == [int(x) for x in nd.Dataset.range(8).shuffle(8)]
    True
    >>> nd.random.set_seed(None)
    """
    global _global_seed, _op_counter
    with _SEED_LOCK:
        _global_seed = None if seed is None else operator.index(seed)
        _op_counter = 0


def derive_seed(seed: int, index: int) -> int:
    """A seed for the ``index``-th consumer of ``seed`` (a non-negative int64)."""
    return int(key(seed, _DERIVE_STREAM, index)) & ((1 << 63) - 1)


def op_seed(seed: int | None) -> int | None:
    """The seed of a new random op: its own, else one derived from the global seed,
    else None (the pipeline seed decides at run time)."""
    global _op_counter
    if seed is not None:
        return operator.index(seed)
    with _SEED_LOCK:
        if _global_seed is None:
            return None
        _op_counter += 1
        return derive_seed(_global_seed, _op_counter)


# --------------------------------------------------------------- generator

@jitclass([("key", numba.uint64), ("index", numba.uint64), ("draws", numba.uint64)])
class Generator:
    """Counter-based random numbers for one element: every value depends only on the
    key (seed, op, epoch), the element's index and how many values were drawn before
    it, never on threads. Usable from Python and inside Numba-compiled functions.

    ``ds.random_map(f, seed)`` hands one to ``f`` per element.

    >>> from nbdata import random
    >>> g = random.Generator(random.key(1, 2, 0), 5)
    >>> h = random.Generator(random.key(1, 2, 0), 5)
    >>> g.uniform(0.0, 1.0) == h.uniform(0.0, 1.0), 0 <= g.integers(0, 10) < 10
    (True, True)
    """

    def __init__(self, key, index):
        self.key = key
        self.index = index
        self.draws = 0

    def bits(self):
        """64 random bits."""
        word = _philox2x64(self.index, self.draws, self.key)[0]
        self.draws += 1
        return word

    def uniform(self, low=0.0, high=1.0):
        """A float64 in [low, high)."""
        u = np.float64(self.bits() >> _SHIFT11) * _TWO_POW_MINUS_53
        return low + (high - low) * u

    def normal(self, loc=0.0, scale=1.0):
        """A float64 from a normal distribution (Box-Muller)."""
        u1 = 1.0 - np.float64(self.bits() >> _SHIFT11) * _TWO_POW_MINUS_53
        u2 = np.float64(self.bits() >> _SHIFT11) * _TWO_POW_MINUS_53
        return loc + scale * np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)

    def integers(self, low, high):
        """An int64 in [low, high)."""
        span = np.uint64(np.int64(high) - np.int64(low))
        return np.int64(low) + np.int64(_mulhilo(self.bits(), span)[0])

    def bernoulli(self, p):
        """True with probability ``p``."""
        return np.float64(self.bits() >> _SHIFT11) * _TWO_POW_MINUS_53 < p


# ------------------------------------------------------------ permutation

@numba.njit(nogil=True, cache=True)
def _feistel(value, half_bits, key):
    """A bijection of [0, 4**half_bits): four Feistel rounds keyed by Philox."""
    mask = (np.uint64(1) << np.uint64(half_bits)) - np.uint64(1)
    left = value >> np.uint64(half_bits)
    right = value & mask
    for r in range(4):
        f = _philox2x64(right, np.uint64(r), key)[0] & mask
        left, right = right, left ^ f
    return (left << np.uint64(half_bits)) | right


@numba.njit(nogil=True, cache=True)
def _permute_into(out, lo, hi, start, n, key):
    """``out[lo:hi]``: positions ``start + lo .. start + hi`` of the permutation."""
    half = 1
    while (np.uint64(1) << np.uint64(2 * half)) < np.uint64(n):
        half += 1
    for i in range(lo, hi):
        v = np.uint64(start + i)
        v = _feistel(v, half, key)
        while v >= np.uint64(n):   # cycle walking: stays a bijection of [0, n)
            v = _feistel(v, half, key)
        out[i] = np.int64(v)


def _permute(start, count, n, key, run_parts=None):
    """The positions; ``run_parts(fn, ranges)`` (a caller's thread pool) computes
    ``fn(lo, hi)`` for each range, from 16Ki positions in parts (each position is
    independent of the others, and the kernel releases the GIL). A position costs
    about 200 ns (four Philox rounds per Feistel pass, three passes on average where
    the Feistel domain is three times ``n``): a part of 8Ki positions is 1.6 ms, and
    a global shuffle's chunks of 100Ki rows ran their permutation on one thread."""
    out = np.empty(count, np.int64)
    if run_parts is None or count < 2 * _PERMUTE_PART:
        _permute_into(out, 0, count, start, n, key)
        return out
    step = max(_PERMUTE_PART, -(-count // 8))
    run_parts(lambda lo, hi: _permute_into(out, lo, hi, start, n, key),
              [(lo, min(count, lo + step)) for lo in range(0, count, step)])
    return out


_PERMUTE_PART = 1 << 13


def permutation(key: int, start: int, count: int, n: int, run_parts=None) -> np.ndarray:
    """Positions ``start .. start+count`` of a keyed random permutation of ``range(n)``,
    each computed on its own in O(1) memory (``global_shuffle``).

    >>> from nbdata import random
    >>> sorted(random.permutation(random.key(3, 0, 0), 0, 10, 10).tolist())
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """
    if count <= 0:
        return np.empty(0, np.int64)
    return _permute(np.int64(start), np.int64(count), np.int64(n), _as_uint64(key), run_parts)
