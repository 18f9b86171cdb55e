"""The executor gives the same output for random pipelines with fused kernels as every
op's reference implementation (``Options().fusion = False``), at one and two threads
and small chunk sizes, shuffles included, and the same elements after an element that
raises (iteration goes on, as in tf.data).

``NBDATA_HYPOTHESIS_EXAMPLES=1000 python -m pytest tests/runtime/test_paths.py`` runs
more examples than CI does.
"""

import os

import numpy as np
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import nbdata as nd

EXAMPLES = max(10, int(os.environ.get("NBDATA_HYPOTHESIS_EXAMPLES", "200")) // 3)


def _python_map(x, y):
    return np.int64(int(str(int(x))[::-1])), y


def _mark(x, y):
    return nd.Dataset.from_tensors((x, y)).repeat(2)


_TABLE = np.arange(20, dtype=np.int64)

OPS = {
    "map": lambda ds, a: ds.map(lambda x, y: (x * 2 + 1, y * 0.5)),
    # raises IndexError (an InvalidArgumentError naming the map) where x % 23 >= 20
    "map_raises": lambda ds, a: ds.map(lambda x, y: (_TABLE[x % 23] + x, y)),
    "map_python": lambda ds, a: ds.map(_python_map, num_parallel_calls=a % 3 + 1),
    "filter": lambda ds, a: ds.filter(lambda x, y: x % 3 != 0),
    "shuffle": lambda ds, a: ds.shuffle(a % 17 + 1, seed=a),
    "batch_unbatch": lambda ds, a: ds.batch(a % 5 + 1).unbatch(),
    "take": lambda ds, a: ds.take(a * 3),
    "skip": lambda ds, a: ds.skip(a),
    "shard": lambda ds, a: ds.shard(a % 3 + 1, a % (a % 3 + 1)),
    "enumerate": lambda ds, a: ds.enumerate(a).map(lambda i, e: (e[0] + i, e[1])),
    "repeat": lambda ds, a: ds.repeat(2),
    "prefetch": lambda ds, a: ds.prefetch(a % 3 + 1),
    "cache": lambda ds, a: ds.cache(),
    "concatenate": lambda ds, a: ds.concatenate(nd.Dataset.from_tensor_slices(
        (np.arange(a, dtype=np.int64), np.ones((a, 2))))),
    "interleave": lambda ds, a: ds.interleave(_mark, cycle_length=a % 3 + 1,
                                              num_parallel_calls=None if a % 2 else 2),
    "random_map": lambda ds, a: ds.random_map(lambda x, y, rng: (x + rng.integers(0, 5), y),
                                              seed=a),
    "zip_range": lambda ds, a: nd.Dataset.zip((ds, nd.Dataset.range(1000))).map(
        lambda e, r: (e[0] + r, e[1])),
}


def build(n: int, ops: list, terminal):
    x = np.arange(n, dtype=np.int64) * 7 % 23
    y = np.stack([np.arange(n) * 0.25, np.ones(n)], axis=1)
    ds = nd.Dataset.from_tensor_slices((x, y))
    for name, a in ops:
        ds = OPS[name](ds, a)
    if terminal:
        ds = ds.batch(terminal)
    return ds


def plain(e):
    if isinstance(e, tuple):
        return tuple(plain(v) for v in e)
    a = np.asarray(e)
    return (type(e).__name__, str(a.dtype), a.shape, a.tolist())


def outcome(ds, **options):
    o = nd.Options()
    for k, v in options.items():
        if k == "threads":
            o.threading.private_threadpool_size = v
            # Two threads run the parallel kernel from the start, one the serial twin
            # it starts with by default: both tiers are checked against the reference.
            o.parallel_kernel_after = 0 if v > 1 else float("inf")
        else:
            setattr(o, k, v)
    got, errors = [], 0
    it = iter(ds.with_options(o))
    while errors < 50:   # the elements after an error come too
        try:
            got.append(plain(next(it)))
        except StopIteration:
            break
        except nd.errors.OpError as e:
            got.append(type(e).__name__)
            errors += 1
    return got


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(n=st.integers(0, 300),
       ops=st.lists(st.tuples(st.sampled_from(sorted(OPS)), st.integers(0, 40)), max_size=4),
       terminal=st.sampled_from([None, 1, 7]),
       chunk_rows=st.sampled_from([0, 1, 7]),
       threads=st.sampled_from([1, 2]),
       compile_kernels=st.booleans())
def test_fused_and_reference_paths_agree(n, ops, terminal, chunk_rows, threads,
                                         compile_kernels):
    try:
        build(n, ops, terminal).element_spec  # noqa: B018
    except nd.errors.InvalidArgumentError as e:
        # _mark cannot take symbolic values: its spec comes from the first elements of its
        # input, and an empty input has none, or reading them raised (documented)
        assert "the input has none; pass output_signature" in str(e) or \
            "reading the first failed" in str(e)
        reject()
    reference = outcome(build(n, ops, terminal), fusion=False)
    chunks = outcome(build(n, ops, terminal), chunk_rows=chunk_rows, threads=threads,
                     fusion_min_rows=0 if compile_kernels else 4096)
    assert chunks == reference
