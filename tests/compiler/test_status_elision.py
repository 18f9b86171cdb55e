"""A fused kernel whose rows all end kept (maps of values that always fit their columns,
no filter, no counter) writes no per-row status: a row that raises ends the kernel call
and the chunk re-runs on the reference path, as before. Kernels where a row can end
pending (a value whose shape may not fit) or dropped keep their statuses."""

import numpy as np
import pytest

import nbdata as nd

from equivalence import fusing, reference


def _kernel_source(pipe) -> str:
    (stage,) = pipe.fused_stages()
    return stage.source_text


def test_a_map_of_fitting_values_writes_no_status_and_gives_the_reference_rows():
    x = np.random.default_rng(0).random((1000, 8), dtype=np.float32)
    ds = nd.Dataset.from_tensor_slices(x).map(lambda r: r * np.float32(2) - np.float32(1)) \
        .batch(64)
    source = _kernel_source(fusing(ds).compile())
    assert "status" not in source.split("):", 1)[1] and "return -1, done, K" in source
    got, want = list(fusing(ds, parallel_kernel_after=0).compile()), list(reference(ds))
    assert len(got) == len(want) == 16
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_a_row_that_raises_in_a_kernel_without_statuses_raises_as_python_does():
    x = np.arange(100, dtype=np.int64)
    table = np.arange(57, dtype=np.int64) * 10
    ds = nd.Dataset.from_tensor_slices(x).map(lambda v: table[v] + 1).batch(8)
    pipe = fusing(ds, parallel_kernel_after=0).compile()
    assert "status[i]" not in _kernel_source(pipe)
    outcomes = []
    for p in (pipe, reference(ds).compile()):
        got = []
        with pytest.raises(nd.errors.InvalidArgumentError) as e:
            for b in p:
                got.append(b.tolist())
        outcomes.append((got, repr(e.value.__cause__), str(e.value)))
    assert outcomes[0] == outcomes[1]
    assert len(outcomes[0][0]) == 7 and "IndexError" in outcomes[0][1]   # row 57's batch raised


def test_a_value_that_may_not_fit_keeps_the_pending_status():
    x = np.arange(40, dtype=np.int64).reshape(20, 2)

    def f(r):
        if r[0] == 10:
            return np.zeros(3, np.int64)
        return r * 2

    ds = nd.Dataset.from_tensor_slices(x).map(f)
    pipe = fusing(ds).compile()
    source = _kernel_source(pipe)
    assert "status[i] = 2" in source and "continue" in source
    got = []
    with pytest.raises(nd.errors.InvalidArgumentError, match=r"expected shape \(2,\), got shape \(3,\)"):
        for v in pipe:
            got.append(v.tolist())
    assert got == [[2 * a, 2 * a + 2] for a in range(0, 10, 2)]


def test_filters_and_counters_keep_their_statuses():
    x = np.arange(100, dtype=np.int64)
    for ds in (nd.Dataset.from_tensor_slices(x).filter(lambda v: v % 3 != 0).batch(8),
               nd.Dataset.from_tensor_slices(x).map(lambda v: v + 1).take(30).batch(8)):
        pipe = fusing(ds).compile()
        assert "status[i]" in _kernel_source(pipe)
        assert [b.tolist() for b in pipe] == [b.tolist() for b in reference(ds)]
