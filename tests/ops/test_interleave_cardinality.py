"""interleave's cardinality as tf.data's: infinite for a parallel interleave of an
infinite input, unknown otherwise."""
import nbdata as nd


def test_parallel_interleave_of_an_infinite_input_is_infinite():
    one = lambda _: nd.Dataset.from_tensors(0)  # noqa: E731
    inf = nd.Dataset.range(5).repeat()
    assert inf.interleave(one, cycle_length=1, num_parallel_calls=1).cardinality() == nd.INFINITE
    assert inf.interleave(one, cycle_length=1).cardinality() == nd.UNKNOWN
    assert nd.Dataset.range(5).interleave(one, cycle_length=1,
                                          num_parallel_calls=1).cardinality() == nd.UNKNOWN
