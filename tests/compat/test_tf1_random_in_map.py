"""TF1's random ops inside ``Dataset.map`` functions (``import nbdata.compat.v1 as tf``):
counter-based per element (the map's seed under TF1's seed rules, the op's place, the
epoch and the element's index), so the map fuses, and its values are the same fused or
not, at any ``num_parallel_calls`` and after an iterator restore (nbdata/ops/keyed_map.py).

Few distinct kernels (compile time): one function whose ops lift, one whose ops run as a
compiled call, one flip."""

import numpy as np
import pytest

import nbdata as nd
import nbdata.compat.v1 as tf

IMAGES = np.random.default_rng(0).integers(0, 256, (96, 8, 7, 3), dtype=np.uint8)


def lifted(im):
    # crop, flip, brightness and a scalar uniform: each lifts into the kernel
    im = tf.image.random_flip_left_right(tf.random_crop(im, [6, 5, 3]))
    im = tf.image.random_brightness(tf.cast(im, tf.float32) / 255.0, 0.2)
    return im * tf.random_uniform([], 0.5, 1.5), tf.random_uniform([], 0, 10, tf.int32)


def called(im):
    # ops with compiled forms only: the function runs as one compiled call
    im = tf.image.random_flip_up_down(im, seed=1)
    im = tf.image.random_saturation(tf.image.random_contrast(im, 0.5, 1.5), 0.5, 1.5)
    im = tf.image.random_hue(tf.cast(im, tf.float32) / 255.0, 0.2)
    return im + tf.random_normal([3]), tf.truncated_normal([], seed=2)


def flip(im):
    return tf.image.random_flip_left_right(im)


def build(fn, fusion=True, calls=None, repeat=1, seed=11):
    """The pipeline as a program builds it (``tf.set_random_seed(seed)`` first)."""
    tf.set_random_seed(seed)
    try:
        options = nd.Options()
        options.fusion = fusion
        options.fusion_min_rows = 0
        ds = nd.Dataset.from_tensor_slices(IMAGES).map(fn, num_parallel_calls=calls)
        return (ds.repeat(repeat) if repeat > 1 else ds).batch(16).with_options(options)
    finally:
        tf.set_random_seed(None)


def same(a, b) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(np.array_equal(p, q) for p, q in zip(x, y)) for x, y in zip(a, b))


@pytest.mark.parametrize("fn,how", [(lifted, "elementwise, inlined"), (called, "Numba-compiled call")])
def test_random_ops_fuse_and_give_the_reference_values(fn, how):
    pipe = build(fn).compile()
    text = pipe.explain()
    assert pipe.fused_stages() and "in Python" not in text and "per element:" not in text, text
    assert f"map({fn.__name__}) [{how}; random ops drawn per element]" in text, text
    got = list(pipe)
    assert pipe.stats().fallback_rows == 0
    assert same(got, list(build(fn, fusion=False)))
    assert same(got, list(build(fn, fusion=False, calls=4)))
    if fn is lifted:   # a seeded program repeats (one more compile: only the quick one)
        assert same(got, list(build(fn).compile()))


@pytest.mark.parametrize("fusion", [True, False])
def test_a_restored_iterator_draws_what_the_run_would_have(fusion):
    ds = build(lifted, fusion, repeat=2)
    it = iter(ds.compile())
    head = [next(it) for _ in range(5)]   # into the first epoch
    state = it.save()
    tail = list(it)
    again = iter(build(lifted, fusion, repeat=2).compile())
    again.restore(state)
    assert same(list(again), tail)
    # epochs draw anew, and so does every element
    first, second = head + tail[:1], tail[1:7]
    u1 = np.concatenate([b[1] for b in first])
    u2 = np.concatenate([b[1] for b in second])
    assert not np.array_equal(u1, u2)
    assert len(np.unique(u1)) == 10 and set(u1.tolist()) == set(range(10))


def test_unseeded_random_ops_draw_per_pipeline_and_restore_with_its_seed():
    ds = nd.Dataset.from_tensor_slices(IMAGES).map(flip).batch(16)
    options = nd.Options()
    options.fusion_min_rows = 0
    ds = ds.with_options(options)
    first, second = ds.compile(), ds.compile()
    assert "fused_stage[" in first.explain() and "pipeline seed" in first.explain()
    it = iter(first)
    next(it)
    state = it.save()
    rest = list(it)
    other = iter(second)
    other.restore(state)   # the pipeline seed comes with the state
    assert same(list(other), rest)
    # without op or graph seeds, two pipelines draw differently (as TF1 does per run)
    a = np.concatenate(list(first))
    b = np.concatenate(list(nd.Dataset.from_tensor_slices(IMAGES).map(flip).batch(16)
                            .with_options(options).compile()))
    assert not np.array_equal(a, b)


def test_flips_half_the_elements_differently_per_epoch():
    images = np.broadcast_to(np.arange(7, dtype=np.uint8)[None, None, :, None],
                             (4200, 2, 7, 1))
    ds = nd.Dataset.from_tensor_slices(images).map(flip).repeat(2).batch(4200)
    first, second = (b[:, 0, 0, 0] == 6 for b in ds)
    assert 0.45 < first.mean() < 0.55 and 0.45 < second.mean() < 0.55
    assert (first != second).mean() > 0.4


def test_op_seeds_decide_the_map_seed_as_tf1_does():
    def draws(fn, seed=None):
        tf.set_random_seed(seed)
        try:
            ds = nd.Dataset.range(8).map(fn)
        finally:
            tf.set_random_seed(None)
        return [float(v) for v in ds]

    op_seeded = lambda x: tf.random_uniform([], seed=5)   # noqa: E731
    unseeded = lambda x: tf.random_uniform([])            # noqa: E731
    assert draws(op_seeded) == draws(op_seeded)
    assert draws(unseeded, 3) == draws(unseeded, 3)
    assert draws(op_seeded, 3) != draws(op_seeded)
    assert draws(unseeded) != draws(unseeded)


def test_random_ops_without_compiled_forms_are_counter_based_too():
    boxes = tf.constant([[[0.1, 0.1, 0.9, 0.9]]])

    def fn(im):
        begin, size, _ = tf.image.sample_distorted_bounding_box(tf.shape(im), boxes)
        return begin, tf.random_shuffle(tf.reshape(im, [-1]))

    def run(calls):
        tf.set_random_seed(4)
        try:
            return list(nd.Dataset.from_tensor_slices(IMAGES[:40]).map(fn, num_parallel_calls=calls))
        finally:
            tf.set_random_seed(None)

    one, four = run(1), run(4)
    assert same(one, four)
    assert len({b.tobytes() for b, _ in one}) > 1
    assert all(sorted(s.tolist()) == sorted(x.reshape(-1).tolist()) for (_, s), x in zip(one, IMAGES))


def test_graph_mode_iterators_of_a_tf1_dataset_fuse_the_map():
    ds = tf.data.Dataset.from_tensor_slices(IMAGES).map(lifted).batch(16)
    options = nd.Options()
    options.fusion_min_rows = 0
    ds = ds.with_options(options)
    assert "random ops drawn per element" in ds.compile().explain()
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        images, ints = sess.run(nxt)
    assert images.shape == (16, 6, 5, 3) and images.dtype == np.float32
    assert ints.dtype == np.int32 and ((0 <= ints) & (ints < 10)).all()


def test_a_map_decoding_records_lifts_the_decoder_and_fuses_the_rest():
    records = np.array([nd.image.encode_jpeg(np.ascontiguousarray(im[:, :7 - k % 2]))
                        for k, im in enumerate(IMAGES[:48])], dtype=object)

    def parse(record):
        im = tf.random_crop(tf.image.decode_jpeg(record, channels=3), [6, 5, 3])
        return tf.image.random_flip_left_right(im)

    def run(fusion):
        tf.set_random_seed(3)
        try:
            options = nd.Options()
            options.fusion, options.fusion_min_rows = fusion, 0
            return nd.Dataset.from_tensor_slices(records).map(parse).batch(16).with_options(options)
        finally:
            tf.set_random_seed(None)

    pipe = run(True).compile()
    text = pipe.explain()
    assert "the chunks of decode(decode_jpeg" in text and "random ops drawn per element]" in text
    assert "in Python" not in text, text
    assert same([[b] for b in pipe], [[b] for b in run(False)])


def test_rows_a_fused_stage_runs_on_its_reference_path_draw_the_same():
    # a stream of unknown length: its first fusion_min_rows rows take the reference path
    def run(fusion):
        options = nd.Options()
        options.fusion, options.fusion_min_rows = fusion, 100
        ds = nd.Dataset.from_generator(lambda: iter(range(300)),
                                       output_signature=nd.TensorSpec((), np.int64))
        return ds.map(lambda x: x + tf.random_uniform([], 0, 100, tf.int64, seed=4)) \
            .batch(32).with_options(options)

    pipe = run(True).compile()
    got = np.concatenate(list(pipe))
    assert pipe.stats().kernel_rows > 0
    np.testing.assert_array_equal(got, np.concatenate(list(run(False))))
