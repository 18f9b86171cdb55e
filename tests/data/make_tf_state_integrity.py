"""Records what TensorFlow does with damaged or mismatched saved data, for
tests/runtime/test_state_integrity.py and tests/runtime/test_cache_integrity.py.

Run with TensorFlow installed (nbdata is not needed):

    python tests/data/make_tf_state_integrity.py > tests/data/tf_state_integrity.json

The tests compare against the live TensorFlow instead when it is importable
(``record()`` is what they call).
"""

from __future__ import annotations

import glob
import json
import os
import random
import tempfile


def _outcome(run, folder: str) -> dict:
    """What ``run()`` did: the elements it yielded before failing, and the error."""
    got: list = []
    try:
        for x in run():
            got.append(x)
    except Exception as e:  # noqa: BLE001 - the class is what is recorded
        text = str(e).replace("\n", " ").replace(folder, "<tmp>")
        if text.startswith("{{"):        # "{{function_node ...}} message [Op:...]"
            text = text[text.find("}}") + 2:]
        return {"error": type(e).__name__, "message": text.split(" [Op:")[0].strip(),
                "elements_before_error": len(got)}
    return {"error": None, "elements": len(got)}


def record() -> dict:
    import tensorflow as tf

    out: dict = {"about": f"recorded with TensorFlow {tf.__version__} by "
                          "tests/data/make_tf_state_integrity.py"}
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "cache")
    list(tf.data.Dataset.range(1000).cache(path))
    data = glob.glob(path + ".data-*")[0]
    raw = open(data, "rb").read()
    flipped = bytearray(raw)
    flipped[8 * 700 + 3] ^= 1            # a bit of element 700 (int64 rows, one after another)
    with open(data, "wb") as f:
        f.write(flipped)
    out["cache_flipped_bit"] = dict(_outcome(
        lambda: (int(x) for x in tf.data.Dataset.range(1000).cache(path)), folder), element=700)
    with open(data, "wb") as f:
        f.write(raw)
    out["cache_read_as_float64"] = _outcome(lambda: tf.data.Dataset.range(1000).map(
        lambda x: tf.cast(x, tf.float64)).cache(path), folder)
    out["cache_read_as_pairs_of_int64"] = _outcome(lambda: tf.data.Dataset.range(1000).map(
        lambda x: tf.stack([x, x])).cache(path), folder)

    def restore(saved, other):
        def run():
            it = iter(saved)
            for _ in range(3):
                next(it)
            prefix = tf.train.Checkpoint(it=it).write(os.path.join(folder, "ckpt"))
            again = iter(other)
            tf.train.Checkpoint(it=again).read(prefix)
            return (x.numpy().tolist() for x in again)
        return run

    r = tf.data.Dataset.range
    out["restore_into_other_ops"] = _outcome(
        restore(r(20).map(lambda x: x + 1), r(20).batch(2)), folder)
    out["restore_into_an_extra_op"] = _outcome(restore(r(20), r(20).skip(2)), folder)
    out["restore_into_other_map_constant"] = _outcome(
        restore(r(20).map(lambda x: x + 1), r(20).map(lambda x: x + 1000)), folder)
    out["restore_into_other_shuffle_buffer"] = _outcome(
        restore(r(1000).shuffle(100, seed=1), r(1000).shuffle(50, seed=1)), folder)

    ds = r(1000).shuffle(100, seed=1)
    it = iter(ds)
    for _ in range(10):
        next(it)
    prefix = tf.train.Checkpoint(it=it).write(os.path.join(folder, "flips"))
    expected = [int(x) for x in it]
    data = glob.glob(prefix + ".data-*")[0]
    raw = open(data, "rb").read()
    rng = random.Random(0)
    counts: dict = {}
    for _ in range(40):
        damaged = bytearray(raw)
        damaged[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        with open(data, "wb") as f:
            f.write(damaged)
        try:
            again = iter(ds)
            tf.train.Checkpoint(it=again).read(prefix)
            kind = "same elements" if [int(x) for x in again] == expected else "wrong elements"
        except Exception as e:  # noqa: BLE001 - the class is what is recorded
            kind = type(e).__name__
        counts[kind] = counts.get(kind, 0) + 1
    with open(data, "wb") as f:
        f.write(raw)
    out["iterator_checkpoint_40_bit_flips"] = counts
    return out


if __name__ == "__main__":
    print(json.dumps(record(), indent=1, sort_keys=True))
