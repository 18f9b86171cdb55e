"""snapshot/save argument checks as tf.data's: a shard_func that returns no scalar
integer and a reader_func that returns no dataset are TypeErrors; save's
checkpoint_args take CheckpointManager's keys only."""
import pytest

import nbdata as nd


def test_shard_func_must_return_a_scalar_integer(tmp_path):
    ds = nd.Dataset.range(10).snapshot(str(tmp_path), shard_func=lambda _: "invalid_fn")
    with pytest.raises(TypeError, match="shard_func must return a scalar integer"):
        list(ds)


def test_reader_func_must_return_a_dataset(tmp_path):
    with pytest.raises(TypeError):
        nd.Dataset.range(10).snapshot(str(tmp_path), reader_func=lambda x: x + 1)
    with pytest.raises(TypeError, match="reader_func must return a Dataset"):
        nd.Dataset.range(10).snapshot(str(tmp_path), reader_func=lambda x: 3)
    # a reader_func that returns a dataset is accepted; the snapshot reads as before
    ds = nd.Dataset.range(5).snapshot(
        str(tmp_path), reader_func=lambda dss: dss.interleave(lambda d: d, cycle_length=2))
    assert [int(x) for x in ds] == [0, 1, 2, 3, 4]


def test_save_checkpoint_args_keys(tmp_path):
    with pytest.raises(TypeError, match="incorrect_arg"):
        nd.Dataset.range(3).save(str(tmp_path / "s"), checkpoint_args={
            "directory": str(tmp_path / "c"), "incorrect_arg": 1})
    nd.Dataset.range(3).save(str(tmp_path / "s"), checkpoint_args={
        "directory": str(tmp_path / "c"), "max_to_keep": 5})
    assert [int(x) for x in nd.Dataset.load(str(tmp_path / "s"))] == [0, 1, 2]
