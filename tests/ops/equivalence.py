"""Helpers shared by the per-op tests: the reference and forced-fusion paths of a
dataset, and exact comparison of their elements.

The test files import these as ``from equivalence import ...`` (pyproject's pytest
``pythonpath`` puts this folder on ``sys.path`` for every test folder).
"""

import numpy as np

import nbdata as nd


class Boom(Exception):
    """An error raised on purpose inside a pipeline."""


def reference(ds):
    """``ds`` on the plain reference path: every op's reference implementation, no fusion."""
    opts = nd.Options()
    opts.fusion = False
    return ds.with_options(opts)


def fusing(ds, **options):
    """``ds`` with fusion forced on tiny data (``fusion_min_rows = 0``): every eligible
    chain runs as a compiled fused kernel; ``options`` sets more Options fields (a
    ``chunk_rows`` that ends kernel calls inside batches). For tests of errors and
    partial runs; tests of values use :func:`fused`, which also checks that fusion
    really happened."""
    opts = nd.Options()
    opts.fusion_min_rows = 0
    for name, value in options.items():
        setattr(opts, name, value)
    return ds.with_options(opts)


def either_path(ds, fused: bool, **options):
    """``fusing(ds, **options)`` or, unless ``fused``, ``reference(ds)``."""
    return fusing(ds, **options) if fused else reference(ds)


def resumed(pipe, taken: int):
    """Iterate ``pipe``, save after ``taken`` elements and restore a fresh iterator
    there: (the rest the first gives, the rest the restored one gives, the state)."""
    it = iter(pipe)
    for _ in range(taken):
        next(it)
    state = it.save()
    want = list(it)
    again = iter(pipe)
    again.restore(state)
    return want, list(again), state


def fused(ds) -> list:
    """All elements of ``fusing(ds)``, after asserting that its plan has a fused stage
    and, once iterated, that no row fell back to the reference path."""
    pipe = fusing(ds).compile()
    stages = pipe.fused_stages()
    assert stages, "no fused stage was built:\n" + pipe.explain()
    out = list(pipe)
    stats = pipe.stats()
    assert stats.fallback_rows == 0, f"rows fell back to the reference path: {stats}"
    return out


def values(ds):
    """All elements of ``ds``, as ``as_numpy_iterator`` gives them."""
    return list(ds.as_numpy_iterator())


def assert_same(x, y, _where="element"):
    """Exact equality: nesting, Python types, dtypes, shapes, values.

    Lists compare item by item (a list of elements, as ``list(ds)`` gives); dicts,
    tuples and namedtuples recurse; arrays and NumPy scalars must have the same dtype
    and shape and equal values (NaN equals NaN); anything else must compare equal.
    """
    assert type(x) is type(y), f"{_where}: {type(x)} != {type(y)}"
    if isinstance(x, dict):
        assert x.keys() == y.keys(), f"{_where}: keys {list(x)} != {list(y)}"
        for k in x:
            assert_same(x[k], y[k], f"{_where}[{k!r}]")
    elif isinstance(x, (list, tuple)):
        assert len(x) == len(y), f"{_where}: length {len(x)} != {len(y)}"
        for i, (a, b) in enumerate(zip(x, y)):
            assert_same(a, b, f"{_where}[{i}]")
    elif isinstance(x, (np.ndarray, np.generic)):
        assert x.dtype == y.dtype, f"{_where}: dtype {x.dtype} != {y.dtype}"
        assert x.shape == y.shape, f"{_where}: shape {x.shape} != {y.shape}"
        np.testing.assert_array_equal(x, y, err_msg=_where)
    else:
        assert x == y, f"{_where}: {x!r} != {y!r}"


def assert_reference_matches(ds):
    """The elements of ``fused(ds)`` (which checks that a fused stage ran, with no
    fallback), after checking that they are exactly those of ``reference(ds)``."""
    got, ref = fused(ds), list(reference(ds))
    assert_same(got, ref, "fused vs reference, element list")
    return got


def assert_paths_agree(ds):
    """For pipelines with nothing to fuse: the elements of ``fusing(ds)`` (the default
    executor) after checking that they are exactly those of ``reference(ds)``."""
    got, ref = list(fusing(ds)), list(reference(ds))
    assert_same(got, ref, "default vs reference, element list")
    return got
