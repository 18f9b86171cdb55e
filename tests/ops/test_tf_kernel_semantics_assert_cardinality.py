"""``assert_cardinality`` as TensorFlow's kernel tests define it: the asserted count is
the cardinality, and a wrong count is a FailedPreconditionError while iterating."""

import pytest

import nbdata as nd


def drain(ds):
    got = []
    with pytest.raises(nd.errors.FailedPreconditionError) as info:
        for x in ds:
            got.append(int(x))
    return got, str(info.value)


def test_correct_cardinality_replaces_unknown():
    ds = nd.Dataset.range(10).filter(lambda x: True)
    assert ds.cardinality() == nd.UNKNOWN
    asserted = ds.apply(nd.experimental.assert_cardinality(10))
    assert asserted.cardinality() == 10 and len(asserted) == 10
    assert [int(x) for x in asserted] == list(range(10))


@pytest.mark.parametrize("n,count,produced,message", [
    (10, 20, 10, "Input dataset was expected to contain 20 elements but contained only 10 elements."),
    (1, 20, 1, "Input dataset was expected to contain 20 elements but contained only 1 element."),
    (10, nd.INFINITE, 10, "Input dataset was expected to contain an infinite number of elements "
                          "but contained only 10 elements."),
    (1, nd.INFINITE, 1, "Input dataset was expected to contain an infinite number of elements "
                        "but contained only 1 element."),
    (10, 5, 5, "Input dataset was expected to contain 5 elements but contained at least 6 elements."),
    (10, 1, 1, "Input dataset was expected to contain 1 element but contained at least 2 elements."),
    (6000, 5000, 5000, "expected to contain 5000 elements but contained at least 5001 elements."),
])
def test_incorrect_cardinality_raises_after_the_elements_before_it(n, count, produced, message):
    got, error = drain(nd.Dataset.range(n).assert_cardinality(count))
    assert got == list(range(produced))
    assert message in error


def test_asserted_cardinality_resumes_from_a_saved_state():
    pipe = nd.Dataset.range(200).assert_cardinality(200).compile()
    it = iter(pipe)
    assert [int(next(it)) for _ in range(77)] == list(range(77))
    state = it.save()
    again = iter(pipe)
    again.restore(state)
    assert [int(x) for x in again] == list(range(77, 200))


def test_asserted_cardinality_allows_global_shuffle_and_batches():
    ds = nd.Dataset.range(9).map(lambda x: x + 1).assert_cardinality(9)
    out = [int(x) for x in nd.experimental.global_shuffle(ds, seed=4)]
    assert sorted(out) == list(range(1, 10))
    assert [b.tolist() for b in ds.batch(4)] == [[1, 2, 3, 4], [5, 6, 7, 8], [9]]
    assert ds.batch(4).cardinality() == 3


def test_assert_cardinality_argument_checks():
    with pytest.raises(nd.errors.InvalidArgumentError):
        nd.Dataset.range(3).assert_cardinality(-5)
    with pytest.raises(TypeError):
        nd.Dataset.range(3).assert_cardinality(2.5)
