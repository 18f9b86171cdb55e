"""save(checkpoint_args=...): the save's progress is checkpointed in `directory` (the
writer iterator's state: the input's position and the shard files' sizes), so a save
that stopped resumes when called again: the shards written before the checkpoint are
kept, the input restarts at the checkpoint, and the saved dataset holds every element
once, in order. max_to_keep bounds the checkpoints; a completed save removes them."""

import os

import numpy as np
import pytest

import nbdata as nd


class Flaky:
    """A map function that records the elements it is called on and raises at
    ``fail_at`` while armed."""

    def __init__(self, fail_at=None):
        self.fail_at, self.calls = fail_at, []

    def __call__(self, x):
        v = int(x)
        self.calls.append(v)
        if v == self.fail_at:
            raise RuntimeError(f"interrupted at {v}")
        return (np.int64(v), np.arange(v % 4, dtype=np.float32),
                b"e%d" % v * (v % 3))


def dataset(fn, n=3000):
    return nd.Dataset.range(n).map(fn, output_signature=(
        nd.TensorSpec((), np.int64), nd.TensorSpec((None,), np.float32),
        nd.TensorSpec((), nd.string)))


def plain(ds):
    return [(int(a), b.tolist(), bytes(c)) for a, b, c in ds]


def last_checkpoint(args):
    from nbdata.ops.snapshot import SaveCheckpoints
    saver = SaveCheckpoints(args)
    return saver.read(saver.numbers()[-1])


def checkpoints(directory):
    return sorted(f for f in os.listdir(directory) if f.endswith(".nbsave"))


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_interrupted_save_resumes(tmp_path, compression):
    path, ckpt = str(tmp_path / "saved"), str(tmp_path / "ckpt")
    args = {"directory": ckpt, "max_to_keep": 3, "checkpoint_interval": 77}
    expected = plain(dataset(Flaky()))
    fn = Flaky(fail_at=2000)
    with pytest.raises(nd.errors.InvalidArgumentError, match="interrupted at 2000"):
        dataset(fn).save(path, compression=compression, checkpoint_args=args)
    assert len(checkpoints(ckpt)) == 3                   # max_to_keep
    assert not os.path.exists(os.path.join(path, "snapshot.metadata"))
    with pytest.raises(nd.errors.NotFoundError):
        nd.Dataset.load(path)
    (partial,) = [d for d in os.listdir(path) if d.endswith(".tmp")]   # kept to resume

    newest = last_checkpoint(args)
    assert 0 < newest["elements"] <= 2000

    fn.fail_at, fn.calls = None, []
    dataset(fn).save(path, compression=compression, checkpoint_args=args)
    # resumed: the input restarted where the newest checkpoint stood, not at 0
    assert fn.calls == list(range(newest["elements"], 3000))
    assert plain(nd.Dataset.load(path)) == expected
    assert not os.path.exists(ckpt)                      # removed when the save completed
    assert partial[1:-4] in os.listdir(path)             # the same run, renamed into place


def test_resume_twice_with_shards_and_extra_bytes(tmp_path):
    """Two interruptions; bytes a killed writer left after the checkpoint are cut."""
    path, ckpt = str(tmp_path / "saved"), str(tmp_path / "ckpt")
    args = {"directory": ckpt, "max_to_keep": 2, "checkpoint_interval": 100}
    shard = lambda a, b, c: a % 3   # noqa: E731
    expected = plain(dataset(Flaky()))
    fn = Flaky(fail_at=700)
    with pytest.raises(nd.errors.InvalidArgumentError):
        dataset(fn).save(path, shard_func=shard, checkpoint_args=args)
    (partial,) = [d for d in os.listdir(path) if d.endswith(".tmp")]
    with open(os.path.join(path, partial, "00000001.shard"), "ab") as f:
        f.write(b"\x07" * 999)          # written after the checkpoint, then killed
    fn.fail_at, fn.calls = 2500, []
    with pytest.raises(nd.errors.InvalidArgumentError):
        dataset(fn).save(path, shard_func=shard, checkpoint_args=args)
    assert 0 < min(fn.calls) <= 700
    newest = last_checkpoint(args)["elements"]
    assert newest > 700
    fn.fail_at, fn.calls = None, []
    dataset(fn).save(path, shard_func=shard, checkpoint_args=args)
    assert fn.calls == list(range(newest, 3000))
    assert plain(nd.Dataset.load(path)) == expected
    run = [d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))]
    assert sorted(os.listdir(os.path.join(path, run[0]))) == [
        "00000000.shard", "00000001.shard", "00000002.shard"]


def test_from_generator_interrupted(tmp_path):
    path, ckpt = str(tmp_path / "saved"), str(tmp_path / "ckpt")
    args = {"directory": ckpt, "max_to_keep": None, "checkpoint_interval": 50}
    armed = Flaky(True)   # an object: the generator's fingerprint counts its type only

    def gen():
        for i in range(600):
            if armed.fail_at and i == 333:
                raise RuntimeError("stop")
            yield i

    ds = nd.Dataset.from_generator(gen, output_signature=nd.TensorSpec((), np.int64))
    with pytest.raises(nd.errors.OpError):
        ds.save(path, checkpoint_args=args)
    names = checkpoints(ckpt)                   # max_to_keep None: every one kept
    assert len(names) >= 2 and names == sorted(f"ckpt-{k}.nbsave" for k in
                                               range(1, len(names) + 1))
    armed.fail_at = False
    ds.save(path, checkpoint_args=args)
    assert [int(x) for x in nd.Dataset.load(path)] == list(range(600))


def test_complete_save_removes_checkpoints_and_replaces(tmp_path):
    path, ckpt = str(tmp_path / "saved"), str(tmp_path / "ckpt")
    args = {"directory": ckpt, "max_to_keep": 2, "checkpoint_interval": 10}
    nd.Dataset.range(100).save(path, checkpoint_args=args)
    assert not os.path.exists(ckpt)
    nd.Dataset.range(5).save(path, checkpoint_args=args)     # a new save: starts afresh
    assert [int(x) for x in nd.Dataset.load(path)] == list(range(5))
    os.makedirs(ckpt)
    open(os.path.join(ckpt, "other"), "w").close()
    nd.Dataset.range(50).save(path, checkpoint_args=args)
    assert os.listdir(ckpt) == ["other"]                      # only its own files go
    assert [int(x) for x in nd.Dataset.load(path)] == list(range(50))


def test_step_counter_and_keep_every_n_hours(tmp_path):
    class Counter:
        value = 0

        def assign_add(self, delta):
            self.value += delta

    path, ckpt = str(tmp_path / "saved"), str(tmp_path / "ckpt")
    step = Counter()
    fn = Flaky(fail_at=250)
    args = {"directory": ckpt, "max_to_keep": 1, "checkpoint_interval": 20,
            "step_counter": step, "keep_checkpoint_every_n_hours": 1e-9,
            "checkpoint_name": "mine"}
    with pytest.raises(nd.errors.InvalidArgumentError):
        dataset(fn, 300).save(path, checkpoint_args=args)
    assert step.value == 250
    names = checkpoints(ckpt)
    # each older one kept too (a billionth of an hour apart), beyond max_to_keep
    assert len(names) >= 2 and all(n.startswith("mine-") for n in names)
    fn.fail_at = None
    dataset(fn, 300).save(path, checkpoint_args=args)
    assert plain(nd.Dataset.load(path)) == plain(dataset(Flaky(), 300))


def test_checkpoint_of_another_path_or_pipeline(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    args = {"directory": ckpt, "max_to_keep": 2, "checkpoint_interval": 10}
    fn = Flaky(fail_at=55)
    with pytest.raises(nd.errors.InvalidArgumentError):
        dataset(fn, 100).save(str(tmp_path / "a"), checkpoint_args=args)
    with pytest.raises(nd.errors.InvalidArgumentError, match="is of a save to"):
        dataset(Flaky(), 100).save(str(tmp_path / "b"), checkpoint_args=args)
    with pytest.raises(nd.errors.OpError, match="restore"):
        nd.Dataset.range(100).save(str(tmp_path / "a"), checkpoint_args=args)


def test_partial_run_gone_starts_over(tmp_path):
    import shutil
    path, ckpt = str(tmp_path / "saved"), str(tmp_path / "ckpt")
    args = {"directory": ckpt, "max_to_keep": 2, "checkpoint_interval": 10}
    fn = Flaky(fail_at=55)
    with pytest.raises(nd.errors.InvalidArgumentError):
        dataset(fn, 100).save(path, checkpoint_args=args)
    for d in os.listdir(path):
        shutil.rmtree(os.path.join(path, d))
    fn.fail_at, fn.calls = None, []
    with pytest.warns(RuntimeWarning, match="starts over"):
        dataset(fn, 100).save(path, checkpoint_args=args)
    assert min(fn.calls) == 0
    assert plain(nd.Dataset.load(path)) == plain(dataset(Flaky(), 100))


def test_checkpoint_args_checked_as_tf(tmp_path):
    ds, path = nd.Dataset.range(3), str(tmp_path / "s")
    d = str(tmp_path / "c")
    with pytest.raises(TypeError, match="directory"):
        ds.save(path, checkpoint_args={"max_to_keep": 2})
    with pytest.raises(TypeError, match="max_to_keep"):
        ds.save(path, checkpoint_args={"directory": d})
    with pytest.raises(TypeError, match="unexpected keys"):
        ds.save(path, checkpoint_args={"directory": d, "max_to_keep": 1, "bogus": 1})
    with pytest.raises(ValueError, match="not allowed to include 'checkpoint'"):
        ds.save(path, checkpoint_args={"directory": d, "max_to_keep": 1, "checkpoint": 1})
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="max_to_keep"):
            ds.save(path, checkpoint_args={"directory": d, "max_to_keep": bad})
    with pytest.raises(ValueError, match="checkpoint_interval"):
        ds.save(path, checkpoint_args={"directory": d, "max_to_keep": 1,
                                       "checkpoint_interval": 0})
    with pytest.raises(TypeError, match="step_counter"):
        ds.save(path, checkpoint_args={"directory": d, "max_to_keep": 1, "step_counter": 3})
    with pytest.raises(TypeError):
        ds.save(path, checkpoint_args=["directory"])
    assert not os.path.exists(path)
    ds.save(path, checkpoint_args={})        # empty: no checkpoints, as in tf.data
    assert [int(x) for x in nd.Dataset.load(path)] == [0, 1, 2]
    ds.save(path, checkpoint_args={"directory": d, "max_to_keep": 1, "init_fn": None})
    assert [int(x) for x in nd.Dataset.load(path)] == [0, 1, 2]
