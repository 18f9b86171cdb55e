"""interleave's default cycle length as tf.data defines it from ``num_parallel_calls``
and the number of cores (here: the thread budget): all cores without parallel calls,
a third of them (rounded up) with AUTOTUNE calls, else min(num_parallel_calls, cores)."""
import pytest

import nbdata as nd


def _options(cores):
    o = nd.Options()
    o.threading.private_threadpool_size = cores
    return o


def _first_round(cycle_length, calls, cores):
    """The input elements the first round of the interleave visits (each inner dataset
    repeats its element twice, block_length 1)."""
    ds = nd.Dataset.range(8).interleave(lambda x: nd.Dataset.from_tensors(x).repeat(2),
                                        cycle_length=cycle_length, num_parallel_calls=calls)
    out = [int(v) for v in ds.with_options(_options(cores))]
    assert sorted(out) == sorted(list(range(8)) * 2)
    k = 1
    while out[k] != out[0]:   # the first element comes back after one round
        k += 1
    return out[:k]


@pytest.mark.parametrize("cycle_length", [None, nd.AUTOTUNE])
@pytest.mark.parametrize("calls, cores, cycle", [(None, 4, 4), (None, 2, 2), (1, 4, 1), (3, 4, 3),
                                                 (6, 4, 4), (nd.AUTOTUNE, 4, 2), (nd.AUTOTUNE, 7, 3)])
def test_default_cycle_length(cycle_length, calls, cores, cycle):
    assert _first_round(cycle_length, calls, cores) == list(range(cycle))


def test_an_explicit_cycle_length_is_kept():
    assert _first_round(3, 1, 4) == [0, 1, 2]
    assert _first_round(5, None, 2) == [0, 1, 2, 3, 4]
