"""Dataset.interleave: exact tf.data cycle/block order.

tf.data's documented algorithm (InterleaveDatasetOp): keep `cycle_length`
slots; at slot i, if it is empty, open the next input element there (if the
input is exhausted, move to the next slot); take up to `block_length`
elements from it, then move to slot i+1. When a slot's iterator ends, the slot
is emptied and the cycle moves on to the next slot; the empty slot is refilled
only when the cycle comes back to it. The expected sequences below are worked
out by hand from that rule.
"""

import os

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_same, fusing, reference


def _ints(ds):
    out = list(ds)
    assert all(type(v) is np.int64 for v in out)
    return [int(v) for v in out]


def _sized(lengths):
    """Input element n opens range(10*n, 10*n + n): n elements tagged by n."""
    return nd.Dataset.from_tensor_slices(np.array(lengths, np.int64))


def _tagged_range(n):
    return nd.Dataset.range(10 * n, 10 * n + n)


DOC_EXAMPLE = [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5]


def _doc_pipeline(**kwargs):
    return nd.Dataset.range(1, 6).interleave(
        lambda x: nd.Dataset.from_tensors(x).repeat(6), cycle_length=2, block_length=4, **kwargs
    )


def test_doc_example():
    assert _ints(_doc_pipeline()) == DOC_EXAMPLE


def test_cycle_4_block_2_repeat_3():
    # slots fill 1,2,3,4 two at a time; then each gives its last one; then 5 alone.
    ds = nd.Dataset.range(1, 6).interleave(
        lambda x: nd.Dataset.from_tensors(x).repeat(3), cycle_length=4, block_length=2
    )
    assert _ints(ds) == [1, 1, 2, 2, 3, 3, 4, 4, 1, 2, 3, 4, 5, 5, 5]


def test_cycle_3_block_2_full_rounds():
    ds = nd.Dataset.range(1, 4).interleave(
        lambda x: nd.Dataset.from_tensors(x).repeat(5), cycle_length=3, block_length=2
    )
    assert _ints(ds) == [1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3, 1, 2, 3]


def test_block_length_1_round_robin():
    ds = nd.Dataset.range(3).interleave(lambda x: nd.Dataset.range(x * 10, x * 10 + 3), cycle_length=3)
    assert _ints(ds) == [0, 10, 20, 1, 11, 21, 2, 12, 22]


def test_unequal_lengths_exhausted_slot_refilled_on_next_visit():
    # lengths [1, 3, 2], cycle 2, block 1:
    # s0 opens 1 -> 10; s1 opens 3 -> 30; s0 ends (no output), move on;
    # s1 -> 31; s0 opens 2 -> 20; s1 -> 32; s0 -> 21; s1 ends; s0 ends.
    ds = _sized([1, 3, 2]).interleave(_tagged_range, cycle_length=2, block_length=1)
    assert _ints(ds) == [10, 30, 31, 20, 32, 21]


def test_unequal_lengths_with_blocks():
    # lengths [3, 1, 4, 2], cycle 3, block 2:
    # s0 opens 3 -> 30 31; s1 opens 1 -> 10, ends; s2 opens 4 -> 40 41;
    # s0 -> 32, ends; s1 opens 2 -> 20 21; s2 -> 42 43; then everything ends.
    ds = _sized([3, 1, 4, 2]).interleave(_tagged_range, cycle_length=3, block_length=2)
    assert _ints(ds) == [30, 31, 10, 40, 41, 32, 20, 21, 42, 43]


def test_empty_inner_datasets():
    # lengths [0, 2, 0, 3], cycle 2, block 1:
    # s0 opens 0, ends; s1 opens 2 -> 20; s0 opens 0, ends; s1 -> 21;
    # s0 opens 3 -> 30; s1 ends; s0 -> 31; s1 empty, input done; s0 -> 32.
    ds = _sized([0, 2, 0, 3]).interleave(_tagged_range, cycle_length=2, block_length=1)
    assert _ints(ds) == [20, 21, 30, 31, 32]


def test_all_inner_datasets_empty():
    ds = _sized([0, 0, 0]).interleave(_tagged_range, cycle_length=2)
    assert list(ds) == []


def test_empty_input():
    ds = nd.Dataset.range(0).interleave(lambda x: nd.Dataset.range(3), cycle_length=2)
    assert list(ds) == []


def test_cycle_length_larger_than_input():
    ds = nd.Dataset.range(1, 3).interleave(
        lambda x: nd.Dataset.from_tensors(x).repeat(3), cycle_length=5, block_length=1
    )
    assert _ints(ds) == [1, 2, 1, 2, 1, 2]


def test_block_length_larger_than_inner():
    ds = _sized([2, 3, 1]).interleave(_tagged_range, cycle_length=2, block_length=10)
    assert _ints(ds) == [20, 21, 30, 31, 32, 10]


def test_cycle_length_1_equals_flat_map():
    fn = lambda n: nd.Dataset.range(n)  # noqa: E731
    inter = nd.Dataset.range(5).interleave(fn, cycle_length=1, block_length=3)
    flat = nd.Dataset.range(5).flat_map(fn)
    assert _ints(inter) == _ints(flat) == [0, 0, 1, 0, 1, 2, 0, 1, 2, 3]


def test_default_cycle_length_yields_every_element():
    ds = _sized([3, 1, 4, 1, 5, 9, 2, 6]).interleave(_tagged_range)
    expected = [v for n in [3, 1, 4, 1, 5, 9, 2, 6] for v in range(10 * n, 10 * n + n)]
    assert sorted(_ints(ds)) == sorted(expected)


def test_default_cycle_length_is_the_core_count():
    # cycle_length=None uses the number of schedulable cores, as TF does:
    # with block_length=1 and equal inner lengths, that many inputs round-robin.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    n = cores + 1
    ds = nd.Dataset.range(n).interleave(lambda x: nd.Dataset.from_tensors(x).repeat(2))
    got = _ints(ds)
    cycle = min(cores, n)
    first = list(range(cycle)) * 2
    assert got[: 2 * cycle] == first
    assert got[2 * cycle:] == [cores] * (2 * n - 2 * cycle)


def test_autotune_cycle_length_yields_every_element():
    ds = _sized([2, 5, 3]).interleave(_tagged_range, cycle_length=nd.AUTOTUNE, block_length=2)
    assert sorted(_ints(ds)) == [20, 21, 30, 31, 32, 50, 51, 52, 53, 54]


@pytest.mark.parametrize("npc", [2, 4, nd.AUTOTUNE])
def test_parallel_deterministic_keeps_order(npc):
    assert _ints(_doc_pipeline(num_parallel_calls=npc)) == DOC_EXAMPLE
    assert _ints(_doc_pipeline(num_parallel_calls=npc, deterministic=True)) == DOC_EXAMPLE


def test_parallel_nondeterministic_same_multiset():
    got = _ints(_doc_pipeline(num_parallel_calls=2, deterministic=False))
    assert sorted(got) == sorted(DOC_EXAMPLE)


def test_parallel_unequal_lengths_keeps_order():
    ds = _sized([3, 1, 4, 2]).interleave(_tagged_range, cycle_length=3, block_length=2, num_parallel_calls=3)
    assert _ints(ds) == [30, 31, 10, 40, 41, 32, 20, 21, 42, 43]


def test_tuple_input_is_unpacked():
    src = nd.Dataset.from_tensor_slices((np.array([1, 2]), np.array([100, 200])))
    ds = src.interleave(lambda n, base: nd.Dataset.range(3).map(lambda i: base + n * i), cycle_length=2)
    assert _ints(ds) == [100, 200, 101, 202, 102, 204]


def test_tuple_inner_elements():
    ds = nd.Dataset.range(2).interleave(
        lambda x: nd.Dataset.zip((nd.Dataset.from_tensors(x).repeat(2), nd.Dataset.range(2))),
        cycle_length=2,
    )
    got = list(ds)
    assert [(int(a), int(b)) for a, b in got] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert ds.element_spec == (nd.TensorSpec((), np.int64), nd.TensorSpec((), np.int64))


def test_element_spec_and_cardinality():
    ds = nd.Dataset.range(3).interleave(
        lambda x: nd.Dataset.from_tensors(np.zeros((2, 2), np.float32)).repeat(2), cycle_length=2
    )
    assert ds.element_spec == nd.TensorSpec((2, 2), np.float32)
    assert ds.cardinality() == nd.UNKNOWN
    got = list(ds)
    assert len(got) == 6 and all(g.shape == (2, 2) and g.dtype == np.float32 for g in got)


def test_infinite_inner_datasets_with_take():
    ds = nd.Dataset.range(2).interleave(lambda x: nd.Dataset.from_tensors(x).repeat(), cycle_length=2).take(5)
    assert _ints(ds) == [0, 1, 0, 1, 0]


def test_interleave_of_file_like_sources_then_batch():
    ds = _sized([2, 3]).interleave(_tagged_range, cycle_length=2).batch(2)
    got = list(ds)
    assert [list(map(int, b)) for b in got] == [[20, 30], [21, 31], [32]]


def test_reference_path_and_reiteration():
    ds = _sized([3, 1, 4, 2]).interleave(
        lambda n: _tagged_range(n).map(lambda v: (v, v * 0.5)), cycle_length=3, block_length=2
    )
    fds = fusing(ds)
    got, ref, again = list(fds), list(reference(ds)), list(fds)
    assert len(got) == len(ref) == len(again) == 10
    assert_same(got, ref)
    assert_same(got, again)
    assert [int(a) for a, _ in got] == [30, 31, 10, 40, 41, 32, 20, 21, 42, 43]


# ------------------------------------------------------------- errors

@pytest.mark.parametrize("cycle_length", [0, -3])
def test_bad_cycle_length(cycle_length):
    with pytest.raises(ValueError, match="(?i)interleave|cycle_length"):
        nd.Dataset.range(3).interleave(lambda x: nd.Dataset.range(2), cycle_length=cycle_length)


@pytest.mark.parametrize("block_length", [0, -1])
def test_bad_block_length(block_length):
    with pytest.raises(ValueError, match="(?i)interleave|block_length"):
        nd.Dataset.range(3).interleave(lambda x: nd.Dataset.range(2), cycle_length=2, block_length=block_length)


@pytest.mark.parametrize("npc", [0, -5])
def test_bad_num_parallel_calls(npc):
    with pytest.raises(ValueError, match="(?i)interleave|num_parallel_calls"):
        nd.Dataset.range(3).interleave(lambda x: nd.Dataset.range(2), cycle_length=2, num_parallel_calls=npc)


def test_function_not_returning_dataset_is_type_error():
    with pytest.raises(TypeError, match="interleave"):
        list(nd.Dataset.range(3).interleave(lambda x: x, cycle_length=2))


def test_inconsistent_inner_structure_is_an_error():
    def f(x):
        if int(x) < 2:
            return nd.Dataset.from_tensors(x)
        return nd.Dataset.from_tensors((x, x))

    with pytest.raises((TypeError, ValueError, nd.errors.OpError)):
        list(nd.Dataset.range(4).interleave(f, cycle_length=2))


def test_inconsistent_inner_dtype_is_an_error():
    def f(x):
        if int(x) < 2:
            return nd.Dataset.from_tensors(x)
        return nd.Dataset.from_tensors(np.float32(x))

    with pytest.raises((TypeError, ValueError, nd.errors.OpError)):
        list(nd.Dataset.range(4).interleave(f, cycle_length=2))


def test_not_callable_is_type_error():
    with pytest.raises(TypeError):
        nd.Dataset.range(3).interleave(3, cycle_length=2)


def test_exception_in_function_is_chained():
    boom = LookupError("cannot open")

    def f(x):
        if int(x) == 2:
            raise boom
        return nd.Dataset.from_tensors(x)

    with pytest.raises(nd.errors.OpError, match="interleave") as info:
        list(nd.Dataset.range(4).interleave(f, cycle_length=2))
    assert info.value.__cause__ is boom


def _model(lengths, cycle, block):
    """tf.data's interleave rule, element by element (the module docstring's)."""
    pending = list(lengths)
    slots = [None] * cycle
    out, i, live = [], 0, True
    while live:
        live = False
        if slots[i] is None and pending:
            n = pending.pop(0)
            slots[i] = iter(range(10 * n, 10 * n + n))
        if slots[i] is not None:
            taken = 0
            while taken < block:
                v = next(slots[i], None)
                if v is None:
                    slots[i] = None
                    break
                out.append(v)
                taken += 1
        live = bool(pending) or any(s is not None for s in slots)
        i = (i + 1) % cycle
    return out


@pytest.mark.parametrize("seed", range(12))
def test_whole_rounds_and_block_steps_give_tf_data_s_order_and_resume(seed):
    # Rows are cut out a whole round of the cycle at a time while every slot holds rows,
    # block by block otherwise: the order is tf.data's either way, and a state saved at
    # any point (slots holding rows pulled but not handed out) resumes it exactly.
    rng = np.random.default_rng(seed)
    lengths = [int(v) for v in rng.integers(0, 40, rng.integers(1, 9))]
    cycle, block = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    parallel = None if seed % 2 else 2
    batch = int(rng.integers(1, 30))
    ds = _sized(lengths).interleave(_tagged_range, cycle_length=cycle, block_length=block,
                                    num_parallel_calls=parallel).batch(batch)
    want = _model(lengths, cycle, block)
    got = [int(v) for b in ds for v in b]
    assert got == want
    it = iter(ds)
    stop = int(rng.integers(0, -(-len(want) // batch) + 1))
    head = [int(v) for _, b in zip(range(stop), it) for v in b]
    state = it.save()
    again = iter(ds)
    again.restore(state)
    assert head + [int(v) for b in again for v in b] == want


def _fail_on_nan(x):
    if np.isnan(x):
        raise nd.errors.InvalidArgumentError(None, None, "nan")
    return x


def _drain(it):
    """Every get_next of ``it``: a value, or "error" where it raised."""
    out = []
    while True:
        try:
            out.append(float(next(it)))
        except StopIteration:
            return out
        except nd.errors.InvalidArgumentError:
            out.append("error")


@pytest.mark.parametrize("cycle,block,parallel", [
    (2, 1, None), (2, 1, 1), (2, 1, 2), (1, 3, None), (2, 3, 2), (7, 2, None), (7, 2, 5)])
def test_input_element_error_takes_its_place_and_iteration_goes_on(cycle, block, parallel):
    # tf.data: an input element that fails is reported (once) when the cycle reaches it;
    # the next get_next goes on with the next input element (nothing is lost).
    values = [1.0, np.nan, 2.0, np.nan, 3.0]
    ds = nd.Dataset.from_tensor_slices(values).map(_fail_on_nan).interleave(
        nd.Dataset.from_tensors, cycle_length=cycle, block_length=block,
        num_parallel_calls=parallel)
    assert _drain(iter(ds)) == [1.0, "error", 2.0, "error", 3.0]


def test_flat_map_input_element_error_takes_its_place():
    values = [1.0, np.nan, 2.0, np.nan, 3.0]
    ds = nd.Dataset.from_tensor_slices(values).map(_fail_on_nan).flat_map(
        nd.Dataset.from_tensors)
    assert _drain(iter(ds)) == [1.0, "error", 2.0, "error", 3.0]
