"""When one input of ``zip`` ends, tf.data asks each later input once more, so inputs
of the same length reach their end as well: file caches of zipped datasets complete."""
import os

import nbdata as nd


def test_zipped_file_caches_of_equal_length_complete(tmp_path):
    def cached(i):
        return nd.Dataset.range(20).shuffle(20).cache(str(tmp_path / f"c{i}"))

    ds = nd.Dataset.zip(tuple(cached(i) for i in range(3)))
    first = [tuple(int(v) for v in e) for e in ds]
    assert all(os.path.exists(tmp_path / f"c{i}.nbcache") for i in range(3))
    assert [tuple(int(v) for v in e) for e in ds] == first


def test_a_longer_later_input_is_read_one_row_further_only(tmp_path):
    seen = []

    def gen():
        for i in range(6):
            seen.append(i)
            yield i

    longer = nd.Dataset.from_generator(gen, output_signature=nd.TensorSpec((), "int64"))
    ds = nd.Dataset.zip((nd.Dataset.range(2), longer.cache(str(tmp_path / "c"))))
    assert [tuple(int(v) for v in e) for e in ds] == [(0, 0), (1, 1)]
    assert not os.path.exists(tmp_path / "c.nbcache")   # the longer input did not end
    assert max(seen) < 5
